package ckptbench.metering;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.URI;
import java.util.List;
import java.util.Map;

import com.amazonaws.AmazonServiceException;
import com.amazonaws.AmazonWebServiceRequest;
import com.amazonaws.Request;
import com.amazonaws.Response;
import com.amazonaws.handlers.HandlerAfterAttemptContext;
import com.amazonaws.handlers.HandlerBeforeAttemptContext;
import com.amazonaws.handlers.HandlerContextKey;
import com.amazonaws.handlers.RequestHandler2;
import com.amazonaws.http.HttpResponse;
import com.amazonaws.http.timers.client.SdkInterruptedException;
import com.amazonaws.services.s3.model.DeleteObjectsRequest;

/**
 * Records every HTTP attempt of every AWS SDK v1 client in this JVM into {@link S3RequestLog}:
 * retries are attempts of their own, as they are requests of their own to the store.
 *
 * <p>Registered for every client the SDK builds through the classpath resource
 * {@code com/amazonaws/global/handlers/request.handler2s} in this jar (the SDK's
 * {@code HandlerChainFactory.getGlobalHandlers} reads every copy of it on the SDK's class
 * loader). S3A 3.3.x and the strategies' own S3 calls (through S3A's client) use such clients.
 *
 * <p>Per attempt: {@code beforeAttempt} notes the time in the request's handler context, and
 * {@code afterAttempt} (run once per attempt, in a {@code finally}, whether it got a response,
 * an error response or an I/O error) derives the record from the request as it was sent (signed
 * headers, query parameters, resource path) and appends it. The operation and subject follow the
 * metering proxy's rules ({@link S3Ops}; the key: for a LIST its {@code prefix}, for a bulk
 * DELETE its first key). Status: the response's, or the service error's, or that of a response
 * head that came before the attempt failed (noted in {@code beforeUnmarshalling}: an interrupt
 * while the body was read), or 0 when no response came (an I/O error; such an attempt may or
 * may not have reached the store). Bytes sent: {@code x-amz-decoded-content-length} (an aws-chunked upload's
 * payload) or else {@code Content-Length}, 0 without either; bytes received: the response's
 * declared {@code Content-Length} (0 for a HEAD, -1 when not known: an error, or no length).
 * The duration is the client's: from the attempt's start (before a retry's back-off pause and
 * the signing) to its end (response head read and, for all but a streamed GET body, handled).
 *
 * <p>Cheap by design: no logging, no locks; a failure to understand a request loses that record
 * (counted as dropped), never the request.
 *
 * <p>Limit: the SDK runs a client's handlers in order and stops at the first one after which it
 * finds the thread interrupted. Global handlers come last, so on an interrupted thread (a query
 * being stopped) a handler registered before this one would keep it from seeing that attempt.
 * S3A 3.3.1 registers none; S3A 3.3.2+ adds its audit handlers there.
 */
public final class S3RequestMeter extends RequestHandler2 {

  private static final HandlerContextKey<Long> STARTED = new HandlerContextKey<>("ckptbench.metering.started");
  /** The status of a response head this attempt got, noted before the SDK reads its body. */
  private static final HandlerContextKey<Integer> ANSWERED = new HandlerContextKey<>("ckptbench.metering.answered");

  /** {@code getBucketName()} of each request class that has one (null: it has none). */
  private static final ClassValue<MethodHandle> BUCKET_GETTER = new ClassValue<MethodHandle>() {
    @Override
    protected MethodHandle computeValue(Class<?> type) {
      try {
        return MethodHandles.publicLookup().findVirtual(type, "getBucketName", MethodType.methodType(String.class))
            .asType(MethodType.methodType(String.class, Object.class));
      } catch (ReflectiveOperationException | RuntimeException e) {
        return null;
      }
    }
  };

  @Override
  public void beforeAttempt(HandlerBeforeAttemptContext context) {
    if (S3RequestLog.isEnabled()) {
      S3RequestLog.began(); // before the start is read: in flight by the time it began
      context.getRequest().addHandlerContext(STARTED, System.nanoTime());
    }
  }

  @Override
  public HttpResponse beforeUnmarshalling(Request<?> request, HttpResponse response) {
    if (response != null && request.getHandlerContext(STARTED) != null) {
      request.addHandlerContext(ANSWERED, response.getStatusCode());
    }
    return response;
  }

  @Override
  public void afterAttempt(HandlerAfterAttemptContext context) {
    Request<?> request = context.getRequest();
    Long started = request.getHandlerContext(STARTED);
    if (started == null) {
      return; // recording was off when this attempt began
    }
    long nanos = System.nanoTime() - started;
    long endMicros = S3RequestLog.nowMicros(); // one clock read for the record and the in-flight count
    Integer answered = request.getHandlerContext(ANSWERED);
    request.addHandlerContext(STARTED, null); // a retry's beforeAttempt sets its own
    request.addHandlerContext(ANSWERED, null);
    try {
      if (S3RequestLog.isEnabled()) {
        S3RequestLog.add(record(request, context.getResponse(), context.getException(), answered, nanos,
            endMicros));
      }
    } catch (RuntimeException e) {
      S3RequestLog.lost();
    } finally {
      S3RequestLog.ended(endMicros);
    }
  }

  static S3RequestLog.Record record(Request<?> request, Response<?> response, Exception exception, Integer answered,
      long nanos, long endMicros) {
    long durationMicros = nanos / 1000;
    long startMicros = endMicros - durationMicros;
    String method = request.getHttpMethod().name();

    String path = S3Ops.percentDecode(request.getResourcePath());
    if (path.startsWith("/")) {
      path = path.substring(1);
    }
    String bucket;
    String key;
    String named = bucketName(request.getOriginalRequest());
    URI endpoint = request.getEndpoint();
    String host = endpoint == null ? null : endpoint.getHost();
    if (named != null && host != null && host.length() > named.length() && host.startsWith(named)
        && host.charAt(named.length()) == '.') {
      bucket = named; // virtual-hosted style: the path is the key
      key = path;
    } else {
      int slash = path.indexOf('/');
      bucket = slash < 0 ? path : path.substring(0, slash);
      key = slash < 0 ? "" : path.substring(slash + 1);
    }

    Map<String, List<String>> params = request.getParameters();
    Map<String, String> headers = request.getHeaders();
    String op = S3Ops.of(method, !bucket.isEmpty(), !key.isEmpty(), params.keySet(),
        headers.containsKey("x-amz-copy-source"));
    String subject = key;
    if (op.equals(S3Ops.LIST)) {
      List<String> prefix = params.get("prefix");
      if (prefix != null) {
        subject = prefix.isEmpty() || prefix.get(0) == null ? "" : prefix.get(0);
      }
    } else if (op.equals(S3Ops.BULK_DELETE)) {
      AmazonWebServiceRequest original = request.getOriginalRequest();
      subject = original instanceof DeleteObjectsRequest && !((DeleteObjectsRequest) original).getKeys().isEmpty()
          ? ((DeleteObjectsRequest) original).getKeys().get(0).getKey() : "";
    }

    String sent = headers.get("x-amz-decoded-content-length");
    if (sent == null) {
      sent = headers.get("Content-Length");
    }
    long bytesIn = sent == null ? 0 : S3Ops.parseLong(sent, 0);

    int status;
    long bytesOut;
    if (response == null && exception instanceof SdkInterruptedException) {
      response = ((SdkInterruptedException) exception).getResponse(); // interrupted after a response
    }
    if (response != null && response.getHttpResponse() != null) {
      status = response.getHttpResponse().getStatusCode();
      List<String> lengths = response.getHttpResponse().getHeaderValues("Content-Length");
      String length = lengths == null || lengths.isEmpty() ? null : lengths.get(0);
      bytesOut = method.equals("HEAD") || status == 204 ? 0 : length == null ? -1 : S3Ops.parseLong(length, -1);
    } else {
      // A service error's status; else that of a response head that came before the attempt
      // failed (an interrupt while reading the body); else 0: no response.
      status = exception instanceof AmazonServiceException ? ((AmazonServiceException) exception).getStatusCode()
          : answered != null ? answered : 0;
      bytesOut = method.equals("HEAD") ? 0 : -1;
    }
    return new S3RequestLog.Record(startMicros, durationMicros, method, op, status, bytesIn, bytesOut, bucket, subject);
  }

  static String bucketName(AmazonWebServiceRequest original) {
    if (original == null) {
      return null;
    }
    MethodHandle getter = BUCKET_GETTER.get(original.getClass());
    if (getter == null) {
      return null;
    }
    try {
      return (String) getter.invokeExact((Object) original);
    } catch (Throwable e) {
      return null;
    }
  }
}
