package ckptbench.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.fs.permission.FsPermission;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Direct-write checkpointing (Qubole's approach) on any Hadoop {@link FileSystem}, e.g. S3A.
 *
 * <p>{@code createAtomic} writes straight to the final path; on an object store the object
 * becomes visible only when {@code close} completes the upload, so no rename (COPY + DELETE)
 * and no temp object is ever needed.
 *
 * <p>Guarantees:
 * <ul>
 *   <li>{@code close} publishes the whole file at once (S3 PUT / CompleteMultipartUpload).</li>
 *   <li>{@code cancel} aborts the upload when the stream is {@code Abortable} (S3A since 3.3.1),
 *       so nothing becomes visible. Otherwise it closes and deletes the path, retrying the delete
 *       with growing back-off ({@code ckptbench.direct.cancel.delete.attempts},
 *       {@code .initialDelayMs}, {@code .maxDelayMs}); if the delete never succeeds it throws,
 *       failing the query: correctness over availability.</li>
 *   <li>{@code overwriteIfPossible=false} fails with {@code FileAlreadyExistsException} when the
 *       path exists. The check and the write are two requests, so two concurrent writers can
 *       both pass it: use {@link ConditionalPutCheckpointFileManager} where that matters.</li>
 * </ul>
 * {@code ckptbench.direct.cancel.abort=false} forces the close-and-delete path even for
 * abortable streams (for stores whose abort is unreliable, and to test that path).
 */
public class DirectWriteCheckpointFileManager implements CheckpointFileManager {

  private static final Logger LOG = LoggerFactory.getLogger(DirectWriteCheckpointFileManager.class);

  private final Path root;
  private final FileSystem fs;
  private final boolean abortOnCancel;
  private final Backoff deleteRetry;

  public DirectWriteCheckpointFileManager(Path path, Configuration conf) throws IOException {
    this.root = path;
    this.fs = path.getFileSystem(conf);
    this.abortOnCancel = conf.getBoolean("ckptbench.direct.cancel.abort", true);
    this.deleteRetry = Backoff.fromConf(conf, "ckptbench.direct.cancel.delete");
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    try {
      return new DirectOutputStream(path, fs.create(path, overwriteIfPossible));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      return fs.open(path);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    try {
      return fs.listStatus(path, filter);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void mkdirs(Path path) {
    try {
      fs.mkdirs(path, FsPermission.getDirDefault());
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public boolean exists(Path path) {
    try {
      return fs.exists(path);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void delete(Path path) {
    try {
      fs.delete(path, true);
    } catch (FileNotFoundException ignored) {
      // already gone: that is what delete promises
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public boolean isLocal() {
    return "file".equals(fs.getScheme());
  }

  @Override
  public Path createCheckpointDirectory() {
    Path qualified = fs.makeQualified(root);
    mkdirs(qualified);
    return qualified;
  }

  /** Writes to the final path; close publishes, cancel aborts (or closes and deletes). */
  private final class DirectOutputStream extends CancellableFSDataOutputStream {
    private final Path path;
    private final FSDataOutputStream target;
    private boolean terminated;

    DirectOutputStream(Path path, FSDataOutputStream target) {
      super(target);
      this.path = path;
      this.target = target;
    }

    @Override
    public synchronized void close() throws IOException {
      if (terminated) {
        return;
      }
      terminated = true;
      target.close();
    }

    @Override
    public synchronized void cancel() {
      if (terminated) {
        return;
      }
      terminated = true;
      if (abortOnCancel && target.hasCapability(StreamCapabilities.ABORTABLE_STREAM)) {
        target.abort();
        return;
      }
      try {
        target.close();
      } catch (IOException e) {
        // The upload may or may not have completed: the delete below settles it either way.
        LOG.warn("Closing cancelled write to {} failed; deleting it anyway", path, e);
      }
      deleteRetry.run("delete cancelled checkpoint file " + path, () -> fs.delete(path, false));
    }
  }
}
