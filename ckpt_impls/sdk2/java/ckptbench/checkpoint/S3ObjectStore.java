package ckptbench.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.Invoker;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.S3ARetryPolicy;
import org.apache.hadoop.util.functional.CallableRaisingIOE;
import software.amazon.awssdk.core.exception.AbortedException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.Delete;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.ObjectIdentifier;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * One bucket seen through the plain S3 API (no directory emulation), with the client, endpoint,
 * credentials and signer of the S3A filesystem configured for that bucket, so a strategy that
 * talks S3 directly needs no settings of its own. Keys are the path without its leading slash.
 *
 * <p>The one class of the strategies that uses the AWS SDK, here v2 (S3A 3.4+, whose client
 * {@code S3AInternals.getAmazonS3Client} hands out); its methods take and return plain Java types
 * ({@link Page}, {@link Entry}, bytes), the same as the SDK v1 body's, which S3A 3.3 needs.
 * Its requests run outside any S3A audit span, which S3A allows unless
 * {@code fs.s3a.audit.reject.out.of.span.operations} is true.
 *
 * <p>Create-only PUTs ({@code If-None-Match: *}, every conditional write of the strategies goes
 * through {@link #put}) survive a lost answer. When the store applied a PUT but the connection
 * broke before its answer arrived, the SDK (v2) sends the same PUT again by itself: it retries any
 * attempt that failed with an {@code IOException}, up to {@code fs.s3a.attempts.maximum} times
 * (S3A 3.5.0: 5), from its in-memory body. That retry meets the
 * object its own first attempt wrote and gets 412. So each create-only PUT carries a fresh write
 * id as user metadata ({@code x-amz-meta-ckptbench-write-id}, the same on every attempt of one
 * write), and after a 412, and only then, one HEAD reads the key's id: ours means the write
 * succeeded; another id, or none, means another writer's object ({@link KeyExistsException}).
 * The normal path sends no extra request.
 *
 * <p>What remains: a store that does not keep user metadata on a conditional PUT shows no id, so
 * there a lost answer still looks like another writer's object ({@link KeyExistsException}) for
 * callers that cannot tell otherwise. Ceph RGW 16.2 and moto 5.2 keep it (tested through a relay
 * that loses the answer). A 409 (AWS's {@code ConditionalRequestConflict}: another conditional
 * write of the key in progress) is retried with growing delays, settings
 * {@code ckptbench.conditionalPut.conflict.attempts} (default 5), {@code .initialDelayMs} (100),
 * {@code .maxDelayMs} (5000), then fails as an {@code IOException}.
 *
 * <p>Every request is retried as S3A retries its own ({@link #call}): S3A's {@link Invoker} with
 * {@link S3ARetryPolicy} from the filesystem's configuration, so {@code fs.s3a.retry.limit},
 * {@code fs.s3a.retry.interval}, {@code fs.s3a.retry.throttle.*} and {@code
 * fs.s3a.retry.http.5xx.errors} mean what they mean to S3A, on top of the SDK's own retries ({@code
 * fs.s3a.attempts.maximum}, the client's). A store that is away costs a query here what it costs
 * S3A before it fails. Each request counts as idempotent: reads, LISTs and DELETEs are, an
 * unconditional PUT writes the same bytes again, and a create-only PUT sent again meets its own
 * object and is settled by its write id as above. A 412 or 409 of a create-only PUT is never
 * retried there: it is the answer, handled as above.
 */
final class S3ObjectStore {

  /** The store refused a create-if-absent PUT because the key exists. */
  static final class KeyExistsException extends IOException {
    KeyExistsException(String message) {
      super(message);
    }
  }

  /** User metadata (header {@code x-amz-meta-ckptbench-write-id}) naming a create-only PUT. */
  static final String WRITE_ID = "ckptbench-write-id";

  /** Hadoop settings prefix of {@link #conflictRetry}: {@code .attempts}, {@code .initialDelayMs}, {@code .maxDelayMs}. */
  static final String CONFLICT_RETRY = "ckptbench.conditionalPut.conflict";

  /** Endpoints (and buckets) already shown to honour {@code If-None-Match: *} in this JVM. */
  private static final Map<String, Boolean> PROBED = new ConcurrentHashMap<>();

  final S3AFileSystem fs;
  final S3Client s3;
  final String bucket;
  /** Attempts and delays of a create-only PUT answered 409. */
  private final Backoff conflictRetry;
  /** S3A's retries, from the filesystem's configuration. */
  private final Invoker invoker;

  private S3ObjectStore(S3AFileSystem fs, Backoff conflictRetry) {
    this.fs = fs;
    this.conflictRetry = conflictRetry;
    this.s3 = fs.getS3AInternals().getAmazonS3Client("ckptbench: S3 requests outside S3A's directory emulation");
    this.bucket = fs.getBucket();
    this.invoker = new Invoker(new S3ARetryPolicy(fs.getConf()), Invoker.LOG_EVENT);
  }

  /**
   * {@code request} (an SDK call) with S3A's retries; its last failure, untranslated, if it never
   * succeeds, but for a store that never answered (no status from it, not an interrupt): that is
   * a {@link StoreUnreachableException} naming the store and how long it was tried.
   */
  private <T> T call(String op, String key, CallableRaisingIOE<T> request) throws IOException {
    long start = System.nanoTime();
    try {
      return invoker.retryUntranslated(op + " s3a://" + bucket + "/" + key, true, request);
    } catch (SdkException e) {
      if (e instanceof S3Exception || interrupted(e)) {
        throw e;
      }
      throw new StoreUnreachableException(op, bucket, key, endpoint(), start, fs.getConf(), e);
    }
  }

  static S3ObjectStore forPath(Path path, Configuration conf, String strategy) throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    if (!(fs instanceof S3AFileSystem)) {
      throw new IOException("Checkpoint strategy '" + strategy + "' talks to S3 directly and needs"
          + " an s3a:// checkpoint location, not " + path + "; use 'direct' or 'rename' for"
          + " other filesystems");
    }
    return new S3ObjectStore((S3AFileSystem) fs, Backoff.fromConf(conf, CONFLICT_RETRY));
  }

  /** The endpoint this bucket is reached through, for messages and per-store caches. */
  String endpoint() {
    return fs.getConf().getTrimmed("fs.s3a.endpoint", "s3.amazonaws.com") + "/" + bucket;
  }

  Path qualify(Path path) {
    return fs.makeQualified(path);
  }

  String key(Path path) {
    String p = qualify(path).toUri().getPath();
    return p.startsWith("/") ? p.substring(1) : p;
  }

  Path path(String key) {
    return qualify(new Path("/" + key));
  }

  /**
   * PUT {@code bytes} at {@code key}. With {@code createOnly} the PUT carries
   * {@code If-None-Match: *}: the store itself refuses it (412) when the key exists, in the same
   * request, so two writers can never both create one key; that refusal raises
   * {@link KeyExistsException}.
   *
   * <p>A create-only PUT also carries a fresh write id as user metadata ({@value #WRITE_ID}), the
   * same on every attempt of this call. If the store applied an attempt whose answer was lost
   * (connection reset), the SDK retries the PUT and gets 412 for this very write; so on a 412
   * one HEAD reads the key's write id, and if it is ours the write succeeded. Another id, or none,
   * is another writer's object. A 409 (AWS's ConditionalRequestConflict: another conditional
   * write of the key is in progress) is retried with {@link #conflictRetry}'s delays; if it
   * persists this raises a plain {@link IOException}, not {@link KeyExistsException}, since
   * neither write may have happened.
   */
  void put(String key, byte[] bytes, boolean createOnly) throws IOException {
    String writeId = createOnly ? UUID.randomUUID().toString() : null;
    long delay = conflictRetry.initialDelayMs;
    for (int attempt = 1; ; attempt++) {
      try {
        S3Exception answer = call("PUT", key, () -> {
          try {
            s3.putObject(putRequest(key, writeId), RequestBody.fromBytes(bytes));
            return null;
          } catch (S3Exception e) {
            if (createOnly && (e.statusCode() == 412 || e.statusCode() == 409)) {
              return e; // the store's answer to a create-only PUT: not to be retried here
            }
            throw e;
          }
        });
        if (answer == null) {
          return;
        }
        throw answer;
      } catch (S3Exception e) {
        if (createOnly && e.statusCode() == 412) {
          if (writeId.equals(writeIdOf(key))) {
            return; // our own earlier attempt landed; the SDK's retry of it was refused
          }
          throw new KeyExistsException("s3a://" + bucket + "/" + key + " already exists");
        }
        if (createOnly && e.statusCode() == 409 && attempt < conflictRetry.attempts) {
          Backoff.sleep(delay);
          delay = Math.min(delay * 2, conflictRetry.maxDelayMs);
          continue;
        }
        if (createOnly && e.statusCode() == 409) {
          throw new IOException("Conditional PUT s3a://" + bucket + "/" + key + " still conflicted"
              + " with another conditional write of the key after " + attempt + " attempts (409 "
              + errorCode(e) + "); raise " + CONFLICT_RETRY + ".attempts", e);
        }
        throw translate("PUT", key, e);
      } catch (SdkException e) {
        throw translate("PUT", key, e);
      }
    }
  }

  /** {@code writeId} null: unconditional. */
  private PutObjectRequest putRequest(String key, String writeId) {
    PutObjectRequest.Builder req = PutObjectRequest.builder().bucket(bucket).key(key);
    if (writeId != null) {
      req.metadata(Map.of(WRITE_ID, writeId)).ifNoneMatch("*");
    }
    return req.build();
  }

  /**
   * Refuses to go on unless the store honours {@code If-None-Match: *}: a second conditional PUT
   * of a probe key under {@code underKey} must fail. Checked once per store and bucket in this
   * JVM; a strategy whose guarantee rests on the header calls it at start, so a store that
   * ignores it stops the query instead of silently losing the guarantee.
   *
   * @param consequence what the strategy cannot do without it, for the message
   * @param alternative the strategy to suggest instead
   */
  void requireConditionalPut(String underKey, String strategy, String consequence,
      String alternative) throws IOException {
    if (PROBED.putIfAbsent(endpoint(), Boolean.TRUE) != null) {
      return;
    }
    try {
      probeConditionalPut(underKey, strategy, consequence, alternative);
    } catch (IOException | RuntimeException e) {
      PROBED.remove(endpoint());
      throw e;
    }
  }

  private void probeConditionalPut(String underKey, String strategy, String consequence,
      String alternative) throws IOException {
    String key = (underKey.isEmpty() ? "" : underKey + "/") + ".ckptbench-probe-" + UUID.randomUUID();
    try {
      put(key, new byte[] {1}, true);
      try {
        put(key, new byte[] {2}, true);
      } catch (KeyExistsException expected) {
        return;
      }
      throw new IOException("The store at " + endpoint() + " ignores 'If-None-Match: *' on"
          + " PUT, so strategy '" + strategy + "' cannot " + consequence + "; use strategy '"
          + alternative + "' on this store");
    } finally {
      delete(key);
    }
  }

  /** The write id of {@code key} (one HEAD), or null when the key is missing or has none. */
  private String writeIdOf(String key) throws IOException {
    try {
      return call("HEAD", key, () -> s3.headObject(b -> b.bucket(bucket).key(key))).metadata().get(WRITE_ID);
    } catch (S3Exception e) {
      if (e.statusCode() == 404) {
        return null;
      }
      throw translate("HEAD", key, e);
    } catch (SdkException e) {
      throw translate("HEAD", key, e);
    }
  }

  /** GET the whole object; a missing key raises {@link FileNotFoundException}. */
  byte[] get(String key) throws IOException {
    byte[] bytes = getIfExists(key);
    if (bytes == null) {
      throw new FileNotFoundException("s3a://" + bucket + "/" + key + " does not exist");
    }
    return bytes;
  }

  /** GET the whole object, or null when the key does not exist. */
  byte[] getIfExists(String key) throws IOException {
    try {
      return call("GET", key, () -> s3.getObjectAsBytes(b -> b.bucket(bucket).key(key))).asByteArray();
    } catch (NoSuchKeyException e) {
      return null;
    } catch (S3Exception e) {
      if (e.statusCode() == 404) {
        return null;
      }
      throw translate("GET", key, e);
    } catch (SdkException e) {
      throw translate("GET", key, e);
    }
  }

  /** One listed object: its key, size in bytes and last-modified time (epoch milliseconds). */
  record Entry(String key, long size, long lastModifiedMs) {}

  /** One LIST page: its objects, its common prefixes (when grouped by '/'), the next page's token or null. */
  record Page(List<Entry> objects, List<String> prefixes, String next) {}

  /** One LIST v2 page of at most {@code maxKeys} under {@code prefix}, optionally grouped by '/'. */
  Page listPage(String prefix, boolean delimited, int maxKeys, String token)
      throws IOException {
    ListObjectsV2Request.Builder req = ListObjectsV2Request.builder()
        .bucket(bucket).prefix(prefix).maxKeys(maxKeys).continuationToken(token);
    if (delimited) {
      req.delimiter("/");
    }
    try {
      ListObjectsV2Response page = call("LIST", prefix, () -> s3.listObjectsV2(req.build()));
      List<Entry> objects = new ArrayList<>();
      page.contents().forEach(
          o -> objects.add(new Entry(o.key(), o.size(), o.lastModified().toEpochMilli())));
      List<String> prefixes = new ArrayList<>();
      page.commonPrefixes().forEach(p -> prefixes.add(p.prefix()));
      return new Page(objects, prefixes, page.nextContinuationToken());
    } catch (SdkException e) {
      throw translate("LIST", prefix, e);
    }
  }

  /** DELETE one key; S3 answers 204 whether or not it existed. */
  void delete(String key) throws IOException {
    try {
      call("DELETE", key, () -> s3.deleteObject(b -> b.bucket(bucket).key(key)));
    } catch (SdkException e) {
      throw translate("DELETE", key, e);
    }
  }

  /** Bulk DELETE of the given keys, 1000 per request; missing keys are no error. */
  void deleteKeys(Collection<String> keys) throws IOException {
    List<String> batch = new ArrayList<>();
    for (String key : keys) {
      batch.add(key);
      if (batch.size() == 1000) {
        deleteBatch(batch, batch.get(0));
        batch.clear();
      }
    }
    if (!batch.isEmpty()) {
      deleteBatch(batch, batch.get(0));
    }
  }

  /** One bulk DELETE (quiet: the answer lists only failures); {@code subject} names it in errors. */
  private void deleteBatch(List<String> keys, String subject) throws IOException {
    List<ObjectIdentifier> ids = new ArrayList<>(keys.size());
    keys.forEach(k -> ids.add(ObjectIdentifier.builder().key(k).build()));
    try {
      call("DELETE", subject, () -> s3.deleteObjects(
          b -> b.bucket(bucket).delete(Delete.builder().objects(ids).quiet(true).build())));
    } catch (SdkException e) {
      throw translate("DELETE", subject, e);
    }
  }

  /** Bulk DELETE of every key under {@code prefix}. */
  void deletePrefix(String prefix) throws IOException {
    String token = null;
    do {
      Page page = listPage(prefix, false, 1000, token);
      List<String> keys = new ArrayList<>();
      page.objects().forEach(o -> keys.add(o.key()));
      if (!keys.isEmpty()) {
        deleteBatch(keys, prefix);
      }
      token = page.next();
    } while (token != null);
  }

  private static String errorCode(S3Exception e) {
    return e.awsErrorDetails() == null ? "" : e.awsErrorDetails().errorCode();
  }

  /**
   * The SDK's failure as an {@link IOException}; an interrupted request (the SDK's
   * {@link AbortedException}, or an {@link InterruptedException} under it: {@code query.stop()}
   * interrupts the stream thread) as an {@link InterruptedIOException}, as S3A's own translation
   * does, because that is what Spark's stream execution recognises as a stop rather than a
   * failure of the query.
   */
  private IOException translate(String op, String key, SdkException e) {
    String what = op + " s3a://" + bucket + "/" + key;
    if (interrupted(e)) {
      InterruptedIOException stopped = new InterruptedIOException(what + " interrupted: " + e.getMessage());
      stopped.initCause(e);
      return stopped;
    }
    return new IOException(what + " failed: " + e.getMessage(), e);
  }

  private static boolean interrupted(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof AbortedException || t instanceof InterruptedException) {
        return true;
      }
    }
    return false;
  }
}
