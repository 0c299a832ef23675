package ckptbench.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
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
 *   <li>{@code exists} sends no request when the path's directory was listed in this JVM: the
 *       listing, kept up to date by this JVM's own writes and deletes ({@link KnownListings}),
 *       answers (formerly S3A's HEAD + LIST per check, for each batch's {@code offsets/N} and
 *       {@code commits/N}). The answer can be stale only about another JVM's writes since, that
 *       is, another query on the same checkpoint. Before a write Spark's check is redundant:
 *       S3A's {@code create(overwrite=false)} checks again itself and throws
 *       {@code FileAlreadyExistsException}, which Spark reports as concurrent writers; the
 *       guarantee on two writers is as before (none). Before a read, a stale answer can only
 *       miss the other query's file.</li>
 * </ul>
 * {@code ckptbench.direct.cancel.abort=false} forces the close-and-delete path even for
 * abortable streams (for stores whose abort is unreliable, and to test that path).
 *
 * <p>A subclass may change how a file is opened for writing ({@link #openForWrite}) and what a
 * failed {@code close} throws ({@link #closeFailed}); listing, existence checks, reads, deletes
 * and cancel stay these.
 */
public class DirectWriteCheckpointFileManager implements CheckpointFileManager {

  private static final Logger LOG = LoggerFactory.getLogger(DirectWriteCheckpointFileManager.class);

  private final Path root;
  /** The checkpoint's filesystem, as {@code path.getFileSystem(conf)} returns it. */
  protected final FileSystem fs;
  private final boolean abortOnCancel;
  private final Backoff deleteRetry;

  private final KnownListings known;

  public DirectWriteCheckpointFileManager(Path path, Configuration conf) throws IOException {
    this(path, conf, conf.getBoolean("ckptbench.direct.cancel.abort", true));
  }

  /** {@code abortOnCancel}: whether {@code cancel} aborts an abortable stream (else closes, then deletes). */
  protected DirectWriteCheckpointFileManager(Path path, Configuration conf, boolean abortOnCancel)
      throws IOException {
    this.root = path;
    this.fs = path.getFileSystem(conf);
    this.abortOnCancel = abortOnCancel;
    this.deleteRetry = Backoff.fromConf(conf, "ckptbench.direct.cancel.delete");
    this.known = new KnownListings(fs.getUri().toString());
  }

  /** The path's key in {@link #known}: its qualified path without the leading slash. */
  private String key(Path path) {
    String p = fs.makeQualified(path).toUri().getPath();
    return p.startsWith("/") ? p.substring(1) : p;
  }

  /** The stream that writes {@code path}'s final object: here S3A's {@code create}. */
  protected FSDataOutputStream openForWrite(Path path, boolean overwriteIfPossible) throws IOException {
    return fs.create(path, overwriteIfPossible);
  }

  /**
   * What a failed {@code close} of a write to {@code path} throws: here {@code failure} itself. A
   * {@code FileAlreadyExistsException} returned records the path as existing.
   */
  protected IOException closeFailed(Path path, IOException failure) {
    return failure;
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    String key = key(path);
    try {
      return new DirectOutputStream(path, key, openForWrite(path, overwriteIfPossible));
    } catch (FileAlreadyExistsException e) {
      known.created(key);
      throw Unchecked.io(e);
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
    String dir = key(path);
    long stamp = known.beforeListing(dir);
    try {
      FileStatus[] all = fs.listStatus(path);
      Set<String> names = new HashSet<>();
      Set<String> directories = new HashSet<>();
      List<FileStatus> out = new ArrayList<>();
      for (FileStatus status : all) {
        names.add(status.getPath().getName());
        if (status.isDirectory()) {
          directories.add(status.getPath().getName());
        }
        if (filter.accept(status.getPath())) {
          out.add(status);
        }
      }
      known.listed(dir, names, directories, stamp);
      return out.toArray(new FileStatus[0]);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void mkdirs(Path path) {
    String key = key(path);
    try {
      fs.mkdirs(path, FsPermission.getDirDefault());
      known.createdDirectory(key);
    } catch (IOException e) {
      known.unsure(key);
      throw Unchecked.io(e);
    }
  }

  /**
   * No request when the path's directory was listed in this JVM ({@link KnownListings}); else
   * S3A's probe (HEAD, then a LIST). See the class comment for why that is safe.
   */
  @Override
  public boolean exists(Path path) {
    Boolean answer = known.exists(key(path));
    if (answer != null) {
      return answer;
    }
    try {
      return fs.exists(path);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void delete(Path path) {
    String key = key(path);
    try {
      fs.delete(path, true);
      known.deleted(key);
    } catch (FileNotFoundException ignored) {
      // already gone: that is what delete promises
      known.deleted(key);
    } catch (IOException e) {
      known.unsure(key);
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
    private final String key;
    private final FSDataOutputStream target;
    private boolean terminated;

    DirectOutputStream(Path path, String key, FSDataOutputStream target) {
      super(target);
      this.path = path;
      this.key = key;
      this.target = target;
    }

    @Override
    public synchronized void close() throws IOException {
      if (terminated) {
        return;
      }
      terminated = true;
      try {
        target.close();
        known.created(key);
      } catch (IOException e) {
        IOException failure = closeFailed(path, e);
        if (failure instanceof FileAlreadyExistsException) {
          known.created(key);
        } else {
          known.unsure(key);
        }
        throw failure;
      } catch (RuntimeException e) {
        known.unsure(key);
        throw e;
      }
    }

    @Override
    public synchronized void cancel() {
      if (terminated) {
        return;
      }
      terminated = true;
      known.unsure(key); // aborted, or closed and then deleted: either way not ours to assume
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
