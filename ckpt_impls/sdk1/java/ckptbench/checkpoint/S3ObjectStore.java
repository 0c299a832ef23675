package ckptbench.checkpoint;

import java.io.ByteArrayInputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import com.amazonaws.AbortedException;
import com.amazonaws.AmazonClientException;
import com.amazonaws.AmazonServiceException;
import com.amazonaws.services.s3.AmazonS3;
import com.amazonaws.services.s3.model.AmazonS3Exception;
import com.amazonaws.services.s3.model.DeleteObjectsRequest;
import com.amazonaws.services.s3.model.ListObjectsV2Request;
import com.amazonaws.services.s3.model.ListObjectsV2Result;
import com.amazonaws.services.s3.model.ObjectMetadata;
import com.amazonaws.services.s3.model.PutObjectRequest;
import com.amazonaws.services.s3.model.S3Object;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.Invoker;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.S3ARetryPolicy;
import org.apache.hadoop.util.functional.CallableRaisingIOE;

/**
 * One bucket seen through the plain S3 API (no directory emulation), with the client, endpoint,
 * credentials and signer of the S3A filesystem configured for that bucket, so a strategy that
 * talks S3 directly needs no settings of its own. Keys are the path without its leading slash.
 *
 * <p>The one class of the strategies that uses the AWS SDK (v1, as S3A 3.3.x does): its methods
 * take and return plain Java types ({@link Page}, {@link Entry}, bytes), so S3A 3.4.x (SDK v2) needs
 * a new body for this class and nothing else in the strategies.
 *
 * <p>Create-only PUTs ({@code If-None-Match: *}, every conditional write of the strategies goes
 * through {@link #put}) survive a lost answer. When the store applied a PUT but the connection
 * broke before its answer arrived, the SDK (v1) sends the same PUT again by itself: it retries any
 * attempt that failed with an {@code IOException}, up to {@code fs.s3a.attempts.maximum} times
 * (S3A 3.3.1: 10), when the body can be reset, as an in-memory one can. That retry meets the
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
 * {@code fs.s3a.retry.interval} and {@code fs.s3a.retry.throttle.*} mean what they mean to S3A,
 * on top of the SDK's own retries ({@code fs.s3a.attempts.maximum}, the client's). A store that is
 * away costs a query here what it costs S3A before it fails. Each request counts as idempotent:
 * reads, LISTs and DELETEs are, an unconditional PUT writes the same bytes again, and a
 * create-only PUT sent again meets its own object and is settled by its write id as above. A 412
 * or 409 of a create-only PUT is never retried there: it is the answer, handled as above.
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
  final AmazonS3 s3;
  final String bucket;
  /** Attempts and delays of a create-only PUT answered 409. */
  private final Backoff conflictRetry;
  /** S3A's retries, from the filesystem's configuration. */
  private final Invoker invoker;

  private S3ObjectStore(S3AFileSystem fs, Backoff conflictRetry) {
    this.fs = fs;
    this.conflictRetry = conflictRetry;
    this.s3 = fs.getAmazonS3ClientForTesting("ckptbench: S3 requests outside S3A's directory emulation");
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
    } catch (AmazonClientException e) {
      if (e instanceof AmazonServiceException || e instanceof AbortedException) {
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
        AmazonS3Exception answer = call("PUT", key, () -> {
          try {
            s3.putObject(putRequest(key, bytes, writeId));
            return null;
          } catch (AmazonS3Exception e) {
            if (createOnly && (e.getStatusCode() == 412 || e.getStatusCode() == 409)) {
              return e; // the store's answer to a create-only PUT: not to be retried here
            }
            throw e;
          }
        });
        if (answer == null) {
          return;
        }
        throw answer;
      } catch (AmazonS3Exception e) {
        if (createOnly && e.getStatusCode() == 412) {
          if (writeId.equals(writeIdOf(key))) {
            return; // our own earlier attempt landed; the SDK's retry of it was refused
          }
          throw new KeyExistsException("s3a://" + bucket + "/" + key + " already exists");
        }
        if (createOnly && e.getStatusCode() == 409 && attempt < conflictRetry.attempts) {
          Backoff.sleep(delay);
          delay = Math.min(delay * 2, conflictRetry.maxDelayMs);
          continue;
        }
        if (createOnly && e.getStatusCode() == 409) {
          throw new IOException("Conditional PUT s3a://" + bucket + "/" + key + " still conflicted"
              + " with another conditional write of the key after " + attempt + " attempts (409 "
              + e.getErrorCode() + "); raise " + CONFLICT_RETRY + ".attempts", e);
        }
        throw translate("PUT", key, e);
      } catch (AmazonClientException e) {
        throw translate("PUT", key, e);
      }
    }
  }

  /** A fresh request per attempt (its own stream of {@code bytes}); {@code writeId} null: unconditional. */
  private PutObjectRequest putRequest(String key, byte[] bytes, String writeId) {
    ObjectMetadata meta = new ObjectMetadata();
    meta.setContentLength(bytes.length);
    if (writeId != null) {
      meta.addUserMetadata(WRITE_ID, writeId);
    }
    PutObjectRequest req = new PutObjectRequest(bucket, key, new ByteArrayInputStream(bytes), meta);
    if (writeId != null) {
      req.putCustomRequestHeader("If-None-Match", "*");
    }
    return req;
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
      return call("HEAD", key, () -> s3.getObjectMetadata(bucket, key)).getUserMetaDataOf(WRITE_ID);
    } catch (AmazonS3Exception e) {
      if (e.getStatusCode() == 404) {
        return null;
      }
      throw translate("HEAD", key, e);
    } catch (AmazonClientException e) {
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
      return call("GET", key, () -> {
        try (S3Object obj = s3.getObject(bucket, key); InputStream in = obj.getObjectContent()) {
          return in.readAllBytes();
        }
      });
    } catch (AmazonS3Exception e) {
      if (e.getStatusCode() == 404) {
        return null;
      }
      throw translate("GET", key, e);
    } catch (AmazonClientException e) {
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
    ListObjectsV2Request req = new ListObjectsV2Request()
        .withBucketName(bucket).withPrefix(prefix).withMaxKeys(maxKeys).withContinuationToken(token);
    if (delimited) {
      req.setDelimiter("/");
    }
    try {
      ListObjectsV2Result page = call("LIST", prefix, () -> s3.listObjectsV2(req));
      List<Entry> objects = new ArrayList<>();
      page.getObjectSummaries().forEach(
          o -> objects.add(new Entry(o.getKey(), o.getSize(), o.getLastModified().getTime())));
      return new Page(objects, page.getCommonPrefixes(), page.getNextContinuationToken());
    } catch (AmazonClientException e) {
      throw translate("LIST", prefix, e);
    }
  }

  /** DELETE one key; S3 answers 204 whether or not it existed. */
  void delete(String key) throws IOException {
    try {
      call("DELETE", key, () -> {
        s3.deleteObject(bucket, key);
        return null;
      });
    } catch (AmazonClientException e) {
      throw translate("DELETE", key, e);
    }
  }

  /** Bulk DELETE of the given keys, 1000 per request; missing keys are no error. */
  void deleteKeys(Collection<String> keys) throws IOException {
    List<DeleteObjectsRequest.KeyVersion> batch = new ArrayList<>();
    for (String key : keys) {
      batch.add(new DeleteObjectsRequest.KeyVersion(key));
      if (batch.size() == 1000) {
        deleteBatch(batch);
        batch.clear();
      }
    }
    if (!batch.isEmpty()) {
      deleteBatch(batch);
    }
  }

  private void deleteBatch(List<DeleteObjectsRequest.KeyVersion> keys) throws IOException {
    try {
      call("DELETE", keys.get(0).getKey(),
          () -> s3.deleteObjects(new DeleteObjectsRequest(bucket).withKeys(keys).withQuiet(true)));
    } catch (AmazonClientException e) {
      throw translate("DELETE", keys.get(0).getKey(), e);
    }
  }

  /** Bulk DELETE of every key under {@code prefix}. */
  void deletePrefix(String prefix) throws IOException {
    String token = null;
    do {
      Page page = listPage(prefix, false, 1000, token);
      List<DeleteObjectsRequest.KeyVersion> keys = new ArrayList<>();
      page.objects().forEach(o -> keys.add(new DeleteObjectsRequest.KeyVersion(o.key())));
      if (!keys.isEmpty()) {
        deleteBatch(keys);
      }
      token = page.next();
    } while (token != null);
  }

  /**
   * The SDK's failure as an {@link IOException}; an interrupted request (the SDK's
   * {@link AbortedException}: {@code query.stop()} interrupts the stream thread) as an
   * {@link InterruptedIOException}, as S3A's own translation does, because that is what Spark's
   * stream execution recognises as a stop rather than a failure of the query.
   */
  private IOException translate(String op, String key, AmazonClientException e) {
    String what = op + " s3a://" + bucket + "/" + key;
    if (e instanceof AbortedException) {
      InterruptedIOException stopped = new InterruptedIOException(what + " interrupted: " + e.getMessage());
      stopped.initCause(e);
      return stopped;
    }
    return new IOException(what + " failed: " + e.getMessage(), e);
  }
}
