package ckptbench.metering;

import java.io.IOException;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The store's 1 KiB requests as this JVM's S3 client makes them: the client S3A configured for the
 * bucket (the one its own requests and the strategies' direct S3 calls go through), each call timed
 * whole, from the SDK call to its return. A checkpoint file's PUT costs a strategy at least that
 * much in this JVM, whatever it does around it; a store-side time (the metering proxy's) leaves the
 * client's own work out, and no client gets under it.
 *
 * <p>For each fresh key under the given prefix, in turn: PUT, HEAD, COPY to a second key, LIST of
 * the key as prefix (one entry), DELETE (and an untimed DELETE of the copy), the sequence of
 * {@code ckptbench.experiments.store_alone.floor_samples}; a timed key waits first with no request in flight, as a
 * checkpoint's PUT comes after Spark planned its batch. The loop runs here, not in Python, so no
 * py4j call is timed; the untimed keys, unpaused, warm the SDK's request path (its JIT compilation,
 * the connection pool) first, as a long-running query's driver is warm.
 */
public final class ClientFloor {

  /** The requests made for each key, in order; COPY's copy is deleted untimed. */
  static final String[] OPS = {"PUT", "HEAD", "COPY", "LIST", "DELETE"};

  private ClientFloor() {
  }

  /**
   * Times {@code samples} keys' requests, each after {@code pauseMs} idle, following {@code warmup}
   * untimed keys, under {@code prefix} (an {@code s3a://bucket/path} URL) with the S3A client of
   * {@code conf}. Returns one line per timed request, {@code op<TAB>milliseconds}, for the caller to
   * parse; leaves nothing behind.
   */
  public static String sample(String prefix, Configuration conf, int warmup, int samples, double pauseMs)
      throws IOException, InterruptedException {
    Path root = new Path(prefix);
    S3AFileSystem fs = (S3AFileSystem) root.getFileSystem(conf);
    S3Client s3 = fs.getS3AInternals().getAmazonS3Client("ckptbench: the store's floor as this JVM's client sees it");
    String bucket = fs.getBucket();
    String base = root.toUri().getPath().replaceFirst("^/", "");
    base = base.isEmpty() || base.endsWith("/") ? base : base + "/";
    byte[] body = new byte[1024];
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < warmup + samples; i++) {
      String key = base + UUID.randomUUID();
      if (i >= warmup && pauseMs > 0) {
        Thread.sleep((long) pauseMs, (int) ((pauseMs % 1) * 1e6));
      }
      long[] at = new long[OPS.length + 1];
      at[0] = System.nanoTime();
      s3.putObject(b -> b.bucket(bucket).key(key), RequestBody.fromBytes(body));
      at[1] = System.nanoTime();
      s3.headObject(b -> b.bucket(bucket).key(key));
      at[2] = System.nanoTime();
      s3.copyObject(b -> b.sourceBucket(bucket).sourceKey(key).destinationBucket(bucket).destinationKey(key + ".copy"));
      at[3] = System.nanoTime();
      s3.listObjectsV2(b -> b.bucket(bucket).prefix(key).maxKeys(1));
      at[4] = System.nanoTime();
      s3.deleteObject(b -> b.bucket(bucket).key(key));
      at[5] = System.nanoTime();
      s3.deleteObject(b -> b.bucket(bucket).key(key + ".copy"));
      if (i >= warmup) {
        for (int op = 0; op < OPS.length; op++) {
          out.append(OPS[op]).append('\t').append((at[op + 1] - at[op]) / 1e6).append('\n');
        }
      }
    }
    return out.toString();
  }
}
