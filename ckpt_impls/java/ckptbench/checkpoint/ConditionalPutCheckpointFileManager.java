package ckptbench.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;

/**
 * Direct writes made create-only by the store itself: {@code If-None-Match: *} on the PUT.
 *
 * <p>Talks to the S3 API directly (with the client S3A configured for the bucket) instead of
 * through S3A's directory emulation, so a checkpoint file costs one PUT (and one HEAD after a
 * 412, see below); Spark's own existence checks are answered from memory where that is safe.
 *
 * <p>Guarantees:
 * <ul>
 *   <li>{@code createAtomic} buffers the file in memory; {@code close} sends it in one PUT, so the
 *       object appears whole or not at all; {@code cancel} sends nothing and leaves nothing.</li>
 *   <li>{@code overwriteIfPossible=false} is enforced by the store in the same request: a 412
 *       becomes {@code FileAlreadyExistsException} and the old content stays. Two writers can
 *       never both create one file.</li>
 *   <li>A PUT whose answer was lost (the store applied it, the connection broke) is retried by
 *       the SDK and gets 412 for this very write. The PUT carries a write id as user metadata;
 *       after a 412, and only then, one HEAD compares it, and when it is this write's the close
 *       succeeds. On a store that drops user metadata that case still fails with
 *       {@code FileAlreadyExistsException} although the file is whole and holds the bytes
 *       written: Spark stops the query as if another query wrote the checkpoint, and a restart
 *       reads the file. AWS's 409 (conflicting conditional writes in progress) is retried a
 *       bounded number of times ({@code ckptbench.conditionalPut.conflict.*}), then fails as an
 *       {@code IOException}. See {@link S3ObjectStore}.</li>
 *   <li>At start it checks, once per store and bucket in this JVM, that the store honours the
 *       header (a second conditional PUT of a probe key must fail) and refuses to start if not,
 *       rather than silently losing the guarantee.</li>
 *   <li>Directories are prefixes: {@code mkdirs} writes a {@code dir/} marker; a path exists when
 *       it is an object or has anything under it. {@code delete} removes the object and anything
 *       under it; a file whose directory listing this JVM holds, with nothing under it, costs one
 *       DELETE (see {@link #delete}).</li>
 *   <li>{@code exists} sends no request when the path's directory was listed in this JVM: the
 *       listing, kept up to date by this JVM's own writes and deletes ({@link KnownListings}),
 *       answers. Otherwise it costs one LIST of at most two keys, except for a metadata log's
 *       batch file (a name of digits only, such as {@code commits/7}): then it lists that
 *       directory once and answers from the listing. So a batch costs exactly one PUT per
 *       checkpoint file: Spark 4 lists {@code offsets/} and {@code commits/} when the query
 *       starts, Spark 3.5 only {@code offsets/} (and {@code commits/} on a restart), and its
 *       per-batch check before writing {@code offsets/N} and {@code commits/N} (formerly a LIST
 *       each) is answered from memory.</li>
 * </ul>
 *
 * <p>Why answering from a listing is safe: the answer can be stale only about what another JVM
 * did since, that is, another query writing the same checkpoint. Spark's check before a write
 * ({@code HDFSMetadataLog.addNewBatchByStream}) is followed by a create-only PUT, which the store
 * refuses (412, {@code FileAlreadyExistsException}) when the file is there after all, and Spark
 * stops the query reporting concurrent writers, exactly as a fresh check would have made it do
 * (its {@code add} would have returned false, which Spark also treats as another writer). Spark's
 * check before a read ({@code applyFnToBatchByStream}) can only miss another writer's file, and
 * that writer's query, or this one, is stopped by the next create-only PUT of the same batch.
 * Two queries in ONE JVM share the listings, so they see each other's writes.
 * Files are held in memory until close: fine for checkpoint files, and a single PUT is limited
 * to 5 GiB.
 */
public class ConditionalPutCheckpointFileManager extends ConditionalS3CheckpointFileManager {

  private final KnownListings known;

  public ConditionalPutCheckpointFileManager(Path path, Configuration conf) throws IOException {
    super(path, conf, "conditional", "stop two writers creating the same checkpoint file");
    this.known = new KnownListings(store.endpoint());
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    String key = store.key(path);
    return new BufferedPublishStream(bytes -> {
      try {
        store.put(key, bytes, !overwriteIfPossible);
        known.created(key);
      } catch (S3ObjectStore.KeyExistsException e) {
        known.created(key);
        throw new FileAlreadyExistsException(e.getMessage());
      } catch (IOException | RuntimeException e) {
        known.unsure(key);
        throw e;
      }
    });
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      return new FSDataInputStream(new ByteArraySeekableInputStream(store.get(store.key(path))));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    String dirKey = store.key(path);
    String prefix = dirKey + "/";
    List<FileStatus> out = new ArrayList<>();
    Set<String> names = new HashSet<>();
    Set<String> directories = new HashSet<>();
    long stamp = known.beforeListing(dirKey);
    try {
      String token = null;
      do {
        S3ObjectStore.Page page = store.listPage(prefix, true, 1000, token);
        for (S3ObjectStore.Entry o : page.objects()) {
          if (!o.key().equals(prefix)) { // the directory's own marker
            names.add(o.key().substring(prefix.length()));
            FileStatus status = new FileStatus(o.size(), false, 1, 0, o.lastModifiedMs(), store.path(o.key()));
            if (filter.accept(status.getPath())) {
              out.add(status);
            }
          }
        }
        for (String dir : page.prefixes()) {
          String name = dir.substring(prefix.length(), dir.length() - 1);
          names.add(name);
          directories.add(name);
          Path dirPath = store.path(dir.substring(0, dir.length() - 1));
          if (filter.accept(dirPath)) {
            out.add(new FileStatus(0, true, 1, 0, 0, dirPath));
          }
        }
        token = page.next();
      } while (token != null);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
    known.listed(dirKey, names, directories, stamp);
    return out.toArray(new FileStatus[0]);
  }

  @Override
  public void mkdirs(Path path) {
    String key = store.key(path);
    try {
      store.put(key + "/", new byte[0], false);
      known.createdDirectory(key);
    } catch (IOException e) {
      known.unsure(key);
      throw Unchecked.io(e);
    }
  }

  /** A metadata log's batch file: its name is a batch number ({@code offsets/7}, {@code sources/0/7}). */
  private static boolean isBatchFile(Path path) {
    String name = path.getName();
    return !name.isEmpty() && name.chars().allMatch(c -> c >= '0' && c <= '9');
  }

  /**
   * No request when the path's directory was listed in this JVM ({@link KnownListings}): Spark
   * lists a metadata log's directory when a query starts (Spark 3.5 not {@code commits/} of a new
   * query), so every batch's check of {@code offsets/N} and {@code commits/N} is answered from
   * memory. A batch file whose directory is not known lists the directory, once: after that its
   * checks are answered from memory too. Otherwise one LIST of the
   * keys starting with the path's key: the exact key sorts first when the file exists; otherwise
   * the directory's entries start with {@code key/}. Only a sibling such as {@code key.compact}
   * (sorting between the two) costs a second LIST, of {@code key/} itself. A LIST rather than a
   * HEAD: these probes are of directories as often as of files (at a query's start), and a HEAD
   * answers only for a file, so a directory would cost it a HEAD and a LIST.
   */
  @Override
  public boolean exists(Path path) {
    String key = store.key(path);
    Boolean answer = known.exists(key);
    if (answer == null && isBatchFile(path)) {
      list(path.getParent(), p -> true); // installs the listing, unless a write raced it
      answer = known.exists(key);
    }
    if (answer != null) {
      return answer;
    }
    try {
      S3ObjectStore.Page page = store.listPage(key, false, 1, null);
      if (page.objects().isEmpty()) {
        return false;
      }
      String first = page.objects().get(0).key();
      if (first.equals(key) || first.startsWith(key + "/")) {
        return true;
      }
      if (first.charAt(key.length()) > '/') {
        return false;
      }
      return !store.listPage(key + "/", false, 1, null).objects().isEmpty();
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  /**
   * One DELETE for a file this JVM knows has nothing under it (its directory's listing, kept up to
   * date by its own writes: Spark's purge of a metadata log's old batch files, one per log per
   * batch past {@code minBatchesToRetain}); otherwise the object and a LIST-driven delete of
   * anything under {@code key/}. Something another JVM wrote under a known lone file since the
   * listing stays: no Spark checkpoint puts anything under a file's name.
   */
  @Override
  public void delete(Path path) {
    String key = store.key(path);
    try {
      boolean loneFile = known.isLoneFile(key);
      store.delete(key);
      if (!loneFile) {
        store.deletePrefix(key + "/");
      }
      known.deleted(key);
    } catch (IOException e) {
      known.unsure(key);
      throw Unchecked.io(e);
    }
  }
}
