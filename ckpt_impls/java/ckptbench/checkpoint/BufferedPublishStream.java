package ckptbench.checkpoint;

import java.io.ByteArrayOutputStream;
import java.io.IOException;

// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;

/**
 * Holds the whole file in memory; {@code close} hands the bytes to {@code publish} once,
 * {@code cancel} drops them unsent, so nothing reaches the store until the file is complete.
 */
final class BufferedPublishStream extends CancellableFSDataOutputStream {

  interface Publish {
    void publish(byte[] bytes) throws IOException;
  }

  private final ByteArrayOutputStream buffer;
  private final Publish publish;
  private boolean terminated;

  BufferedPublishStream(Publish publish) {
    this(new ByteArrayOutputStream(), publish);
  }

  private BufferedPublishStream(ByteArrayOutputStream buffer, Publish publish) {
    super(buffer);
    this.buffer = buffer;
    this.publish = publish;
  }

  @Override
  public synchronized void close() throws IOException {
    if (terminated) {
      return;
    }
    terminated = true;
    publish.publish(buffer.toByteArray());
  }

  @Override
  public synchronized void cancel() {
    terminated = true;
  }
}
