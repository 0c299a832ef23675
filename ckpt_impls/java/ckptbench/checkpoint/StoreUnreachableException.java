package ckptbench.checkpoint;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;

/**
 * A request that S3A's retry policy gave up on because the store never answered (no status from
 * it, not an interrupt): one message naming the request, the store and how long it was tried, with
 * the retry settings that bounded it, for both SDK bodies of {@code S3ObjectStore}.
 */
final class StoreUnreachableException extends IOException {

  StoreUnreachableException(String op, String bucket, String key, String endpoint, long startNanos,
      Configuration conf, Exception cause) {
    super(String.format("%s s3a://%s/%s: the store at %s did not answer for %.1f s"
        + " (S3A's retry policy: fs.s3a.retry.limit %d, fs.s3a.attempts.maximum %d): %s", op, bucket, key,
        endpoint, (System.nanoTime() - startNanos) / 1e9, conf.getInt("fs.s3a.retry.limit", 7),
        conf.getInt("fs.s3a.attempts.maximum", 5), cause.getMessage()), cause);
  }
}
