package ckptbench.metering;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import software.amazon.awssdk.core.SdkRequest;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttribute;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.SdkHttpResponse;
import software.amazon.awssdk.services.s3.model.DeleteObjectsRequest;

/**
 * Records every HTTP attempt of every AWS SDK v2 client in this JVM into {@link S3RequestLog}:
 * retries are attempts of their own, as they are requests of their own to the store.
 *
 * <p>Registered for every client the SDK builds, sync and async, through the classpath resource
 * {@code software/amazon/awssdk/global/handlers/execution.interceptors} in this jar (the SDK's
 * {@code ClasspathInterceptorChainFactory} reads every copy of it). S3A 3.4+ and the strategies'
 * own S3 calls (through S3A's client) use such clients. Global interceptors run before the ones a
 * client is built with (S3A's auditor), and the SDK runs every interceptor of a hook, whatever
 * the thread's interrupt state.
 *
 * <p>Per attempt: {@code beforeTransmission} (once per attempt, the request signed) notes the
 * time and the request as it is sent. {@code afterTransmission} (once per attempt that got a
 * response head, error responses included) records it with the response's status. An attempt
 * that got no response (an I/O error; it may or may not have reached the store) has no hook of its
 * own: it is recorded with status 0 when the SDK next calls this interceptor for the same call,
 * the next attempt's {@code beforeTransmission} or the call's {@code onExecutionFailure}. The
 * operation and subject follow the metering proxy's rules ({@link S3Ops}; the key: for a LIST its
 * {@code prefix}, for a bulk DELETE its first key). Bytes sent:
 * {@code x-amz-decoded-content-length} (an aws-chunked upload's payload) or else
 * {@code Content-Length}, 0 without either; bytes received: the response's declared
 * {@code Content-Length} (0 for a HEAD or a 204, -1 when not known). The duration is the
 * client's: from the signed request's hand-over to the HTTP client to the response head (for an
 * attempt with no response, to the hook that recorded it, which for a retried one includes the
 * SDK's back-off pause).
 *
 * <p>Cheap by design: no logging, no locks; a failure to understand a request loses that record
 * (counted as dropped), never the request.
 */
public final class S3RequestMeter implements ExecutionInterceptor {

  private static final ExecutionAttribute<Long> STARTED = new ExecutionAttribute<>("ckptbench.metering.started");
  private static final ExecutionAttribute<SdkHttpRequest> SENT = new ExecutionAttribute<>("ckptbench.metering.sent");

  @Override
  public void beforeTransmission(Context.BeforeTransmission context, ExecutionAttributes attributes) {
    unanswered(context.request(), attributes); // the previous attempt of this call got no response
    if (S3RequestLog.isEnabled()) {
      S3RequestLog.began(); // before the start is read: in flight by the time it began
      attributes.putAttribute(SENT, context.httpRequest());
      attributes.putAttribute(STARTED, System.nanoTime());
    }
  }

  @Override
  public void afterTransmission(Context.AfterTransmission context, ExecutionAttributes attributes) {
    end(context.request(), attributes, context.httpResponse());
  }

  @Override
  public void onExecutionFailure(Context.FailedExecution context, ExecutionAttributes attributes) {
    unanswered(context.request(), attributes);
  }

  private static void unanswered(SdkRequest request, ExecutionAttributes attributes) {
    if (attributes.getAttribute(STARTED) != null) {
      end(request, attributes, null);
    }
  }

  /** Records the attempt in flight for this call, if one is, with {@code response} (null: none). */
  private static void end(SdkRequest request, ExecutionAttributes attributes, SdkHttpResponse response) {
    Long started = attributes.getAttribute(STARTED);
    if (started == null) {
      return; // recording was off when this attempt began
    }
    long nanos = System.nanoTime() - started;
    long endMicros = S3RequestLog.nowMicros(); // one clock read for the record and the in-flight count
    SdkHttpRequest sent = attributes.getAttribute(SENT);
    attributes.putAttribute(STARTED, null); // the next attempt's beforeTransmission sets its own
    attributes.putAttribute(SENT, null);
    try {
      if (S3RequestLog.isEnabled()) {
        S3RequestLog.add(record(request, sent, response, nanos, endMicros));
      }
    } catch (RuntimeException e) {
      S3RequestLog.lost();
    } finally {
      S3RequestLog.ended(endMicros);
    }
  }

  static S3RequestLog.Record record(SdkRequest original, SdkHttpRequest request, SdkHttpResponse response,
      long nanos, long endMicros) {
    long durationMicros = nanos / 1000;
    long startMicros = endMicros - durationMicros;
    String method = request.method().name();

    String path = S3Ops.percentDecode(request.encodedPath());
    if (path.startsWith("/")) {
      path = path.substring(1);
    }
    String bucket;
    String key;
    String named = original == null ? null : original.getValueForField("Bucket", String.class).orElse(null);
    String host = request.host();
    if (named != null && host != null && host.length() > named.length() && host.startsWith(named)
        && host.charAt(named.length()) == '.') {
      bucket = named; // virtual-hosted style: the path is the key
      key = path;
    } else {
      int slash = path.indexOf('/');
      bucket = slash < 0 ? path : path.substring(0, slash);
      key = slash < 0 ? "" : path.substring(slash + 1);
    }

    Map<String, List<String>> params = request.rawQueryParameters();
    String op = S3Ops.of(method, !bucket.isEmpty(), !key.isEmpty(), params.keySet(),
        request.firstMatchingHeader("x-amz-copy-source").isPresent());
    String subject = key;
    if (op.equals(S3Ops.LIST)) {
      List<String> prefix = params.get("prefix");
      if (prefix != null) {
        subject = prefix.isEmpty() || prefix.get(0) == null ? "" : prefix.get(0);
      }
    } else if (op.equals(S3Ops.BULK_DELETE)) {
      subject = original instanceof DeleteObjectsRequest && ((DeleteObjectsRequest) original).delete() != null
          && !((DeleteObjectsRequest) original).delete().objects().isEmpty()
          ? ((DeleteObjectsRequest) original).delete().objects().get(0).key() : "";
    }

    Optional<String> sent = request.firstMatchingHeader("x-amz-decoded-content-length");
    if (sent.isEmpty()) {
      sent = request.firstMatchingHeader("Content-Length");
    }
    long bytesIn = sent.map(s -> S3Ops.parseLong(s, 0)).orElse(0L);

    int status = response == null ? 0 : response.statusCode();
    long bytesOut;
    if (method.equals("HEAD") || status == 204) {
      bytesOut = 0;
    } else if (response == null) {
      bytesOut = -1;
    } else {
      bytesOut = response.firstMatchingHeader("Content-Length").map(s -> S3Ops.parseLong(s, -1)).orElse(-1L);
    }
    return new S3RequestLog.Record(startMicros, durationMicros, method, op, status, bytesIn, bytesOut, bucket, subject);
  }
}
