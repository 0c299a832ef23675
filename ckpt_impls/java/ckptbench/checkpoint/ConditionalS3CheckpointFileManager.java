package ckptbench.checkpoint;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * What the managers that talk to the S3 API themselves share: the client S3A configured for the
 * checkpoint's bucket, the qualified root, and the refusal to start on a store that ignores
 * {@code If-None-Match: *}, since their guarantees rest on it. Never local.
 */
abstract class ConditionalS3CheckpointFileManager implements CheckpointFileManager {

  protected final Path root;
  protected final S3ObjectStore store;

  /** {@code purpose}: what the conditional PUT is for, named in the error if the store ignores it. */
  ConditionalS3CheckpointFileManager(Path path, Configuration conf, String strategy, String purpose)
      throws IOException {
    this.store = S3ObjectStore.forPath(path, conf, strategy);
    this.root = store.qualify(path);
    store.requireConditionalPut(store.key(root), strategy, purpose, "direct");
  }

  @Override
  public boolean isLocal() {
    return false;
  }

  @Override
  public Path createCheckpointDirectory() {
    mkdirs(root);
    return root;
  }
}
