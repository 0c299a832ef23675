package ckptbench.metering;

import java.io.ByteArrayInputStream;
import java.net.URI;

import com.amazonaws.DefaultRequest;
import com.amazonaws.Response;
import com.amazonaws.handlers.HandlerAfterAttemptContext;
import com.amazonaws.handlers.HandlerBeforeAttemptContext;
import com.amazonaws.http.HttpMethodName;
import com.amazonaws.http.HttpResponse;
import com.amazonaws.services.s3.model.GetObjectMetadataRequest;
import com.amazonaws.services.s3.model.ListObjectsV2Request;
import com.amazonaws.services.s3.model.ObjectMetadata;
import com.amazonaws.services.s3.model.PutObjectRequest;

/**
 * What {@link S3RequestMeter} costs per HTTP attempt, without a store or Spark: its
 * {@code beforeAttempt} + {@code afterAttempt} on prepared requests as the SDK hands them over (a
 * checkpoint file's PUT, a HEAD, a LIST in turn), counting on and counting off, in nanoseconds.
 * {@code java -cp ckpt-impls.jar:aws-java-sdk-bundle.jar ckptbench.metering.MeterCost [attempts]}
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
    Object[][] contexts = {contexts(put()), contexts(head()), contexts(list())};
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

  static double round(S3RequestMeter meter, Object[][] contexts, int attempts, boolean counting) {
    S3RequestLog.setEnabled(counting);
    long t0 = System.nanoTime();
    for (int i = 0; i < attempts; i++) {
      Object[] c = contexts[i % contexts.length];
      meter.beforeAttempt((HandlerBeforeAttemptContext) c[0]);
      meter.afterAttempt((HandlerAfterAttemptContext) c[1]);
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

  static Object[] contexts(DefaultRequest<?> request) {
    HttpResponse http = new HttpResponse(request, null);
    http.setStatusCode(200);
    http.addHeader("Content-Length", "0");
    http.addHeader("ETag", "\"d41d8cd98f00b204e9800998ecf8427e\"");
    return new Object[] {
        HandlerBeforeAttemptContext.builder().withRequest(request).build(),
        HandlerAfterAttemptContext.builder().withRequest(request).withResponse(new Response<>(null, http)).build()};
  }

  static DefaultRequest<?> put() {
    String key = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/offsets/12";
    DefaultRequest<PutObjectRequest> request = new DefaultRequest<>(
        new PutObjectRequest("ckptbench", key, new ByteArrayInputStream(new byte[0]), new ObjectMetadata()),
        "Amazon S3");
    request.setHttpMethod(HttpMethodName.PUT);
    request.setEndpoint(URI.create("http://127.0.0.1:9000"));
    request.setResourcePath("ckptbench/" + key);
    request.addHeader("Content-Length", "512");
    request.addHeader("x-amz-decoded-content-length", "420");
    request.addHeader("Content-Type", "application/octet-stream");
    request.addHeader("If-None-Match", "*");
    request.addHeader("x-amz-date", "20270115T080000Z");
    request.addHeader("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    request.addHeader("Authorization", "AWS4-HMAC-SHA256 Credential=x/20270115/us-east-1/s3/aws4_request");
    request.addHeader("User-Agent", "Hadoop 3.5.0, aws-sdk-java/1.11.901");
    return request;
  }

  static DefaultRequest<?> head() {
    String key = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/state/0/1/13.delta";
    DefaultRequest<GetObjectMetadataRequest> request = new DefaultRequest<>(
        new GetObjectMetadataRequest("ckptbench", key), "Amazon S3");
    request.setHttpMethod(HttpMethodName.HEAD);
    request.setEndpoint(URI.create("http://127.0.0.1:9000"));
    request.setResourcePath("ckptbench/" + key);
    request.addHeader("x-amz-date", "20270115T080000Z");
    request.addHeader("Authorization", "AWS4-HMAC-SHA256 Credential=x/20270115/us-east-1/s3/aws4_request");
    return request;
  }

  static DefaultRequest<?> list() {
    String prefix = "bench/conditional-stateful-1000-0a1b2c3d/checkpoint/commits/";
    DefaultRequest<ListObjectsV2Request> request = new DefaultRequest<>(
        new ListObjectsV2Request().withBucketName("ckptbench").withPrefix(prefix), "Amazon S3");
    request.setHttpMethod(HttpMethodName.GET);
    request.setEndpoint(URI.create("http://127.0.0.1:9000"));
    request.setResourcePath("ckptbench/");
    request.addParameter("list-type", "2");
    request.addParameter("prefix", prefix);
    request.addParameter("delimiter", "/");
    request.addParameter("max-keys", "5000");
    request.addHeader("x-amz-date", "20270115T080000Z");
    return request;
  }
}
