package ckptbench.metering;

import software.amazon.awssdk.core.SdkRequest;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.InterceptorContext;
import software.amazon.awssdk.http.SdkHttpMethod;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.SdkHttpResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectRequest;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * What {@link S3RequestMeter} costs per HTTP attempt, without a store or Spark: its
 * {@code beforeTransmission} + {@code afterTransmission} on prepared requests as the SDK hands them over (a
 * checkpoint file's PUT, a HEAD, a LIST in turn), counting on and counting off, in nanoseconds.
 * {@code java -cp ckpt-impls.jar:bundle.jar ckptbench.metering.MeterCost [attempts]}
 * prints {@code {"on_ns": ..., "off_ns": ...}}: the median of five timed rounds each, after a
 * round that lets the JIT compile the path. Records stay in the log until the round ends, as
 * they stay until Python drains them.
 */
public final class MeterCost {

  private MeterCost() {
  }

  public static void main(String[] args) {
    int attempts = args.length > 0 ? Integer.parseInt(args[0]) : 300_000;
    S3RequestLog.enable(attempts + 1, "driver");
    S3RequestMeter meter = new S3RequestMeter();
    InterceptorContext[] contexts = {context(put()), context(head()), context(list())};
    round(meter, contexts, attempts, true); // JIT
    round(meter, contexts, attempts, false);
    double[] on = new double[5];
    double[] off = new double[5];
    for (int i = 0; i < on.length; i++) {
      on[i] = round(meter, contexts, attempts, true);
      off[i] = round(meter, contexts, attempts, false);
    }
    System.out.printf("{\"on_ns\": %.1f, \"off_ns\": %.1f, \"attempts\": %d}%n", median(on), median(off), attempts);
  }

  static double round(S3RequestMeter meter, InterceptorContext[] contexts, int attempts, boolean counting) {
    S3RequestLog.setEnabled(counting);
    ExecutionAttributes attributes = new ExecutionAttributes();
    long t0 = System.nanoTime();
    for (int i = 0; i < attempts; i++) {
      InterceptorContext c = contexts[i % contexts.length];
      meter.beforeTransmission(c, attributes);
      meter.afterTransmission(c, attributes);
    }
    double ns = (double) (System.nanoTime() - t0) / attempts;
    S3RequestLog.drain();
    return ns;
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    java.util.Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  static InterceptorContext context(Object[] call) {
    SdkHttpResponse response = SdkHttpResponse.builder().statusCode(200)
        .putHeader("Content-Length", "0").putHeader("ETag", "\"d41d8cd98f00b204e9800998ecf8427e\"").build();
    return InterceptorContext.builder().request((SdkRequest) call[0]).httpRequest((SdkHttpRequest) call[1])
        .httpResponse(response).build();
  }

  static SdkHttpRequest.Builder http(SdkHttpMethod method, String path) {
    return SdkHttpRequest.builder().method(method).protocol("http").host("127.0.0.1").port(9000).encodedPath(path)
        .putHeader("x-amz-date", "20270115T080000Z")
        .putHeader("Authorization", "AWS4-HMAC-SHA256 Credential=x/20270115/us-east-1/s3/aws4_request");
  }

  static Object[] put() {
    String key = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/offsets/12";
    return new Object[] {
        PutObjectRequest.builder().bucket("ckptbench").key(key).ifNoneMatch("*").build(),
        http(SdkHttpMethod.PUT, "/ckptbench/" + key)
            .putHeader("Content-Length", "512")
            .putHeader("x-amz-decoded-content-length", "420")
            .putHeader("Content-Type", "application/octet-stream")
            .putHeader("If-None-Match", "*")
            .putHeader("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
            .putHeader("User-Agent", "Hadoop 3.5.0, aws-sdk-java/2.35.4").build()};
  }

  static Object[] head() {
    String key = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/state/0/1/13.delta";
    return new Object[] {
        HeadObjectRequest.builder().bucket("ckptbench").key(key).build(),
        http(SdkHttpMethod.HEAD, "/ckptbench/" + key).build()};
  }

  static Object[] list() {
    String prefix = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/commits/";
    return new Object[] {
        ListObjectsV2Request.builder().bucket("ckptbench").prefix(prefix).delimiter("/").maxKeys(5000).build(),
        http(SdkHttpMethod.GET, "/ckptbench/")
            .putRawQueryParameter("list-type", "2")
            .putRawQueryParameter("prefix", prefix)
            .putRawQueryParameter("delimiter", "/")
            .putRawQueryParameter("max-keys", "5000").build()};
  }
}
