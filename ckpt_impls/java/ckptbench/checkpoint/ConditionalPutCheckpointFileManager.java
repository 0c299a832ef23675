package ckptbench.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

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
 * through S3A's directory emulation, so a checkpoint file costs one PUT plus Spark's own
 * existence check (and one HEAD after a 412, see below).
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
 *       it is an object or has anything under it. {@code exists} costs one LIST of at most two
 *       keys; {@code delete} removes the object and anything under it.</li>
 * </ul>
 * Files are held in memory until close: fine for checkpoint files, and a single PUT is limited
 * to 5 GiB.
 */
public class ConditionalPutCheckpointFileManager extends ConditionalS3CheckpointFileManager {

  public ConditionalPutCheckpointFileManager(Path path, Configuration conf) throws IOException {
    super(path, conf, "conditional", "stop two writers creating the same checkpoint file");
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    String key = store.key(path);
    return new BufferedPublishStream(bytes -> {
      try {
        store.put(key, bytes, !overwriteIfPossible);
      } catch (S3ObjectStore.KeyExistsException e) {
        throw new FileAlreadyExistsException(e.getMessage());
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
    String prefix = store.key(path) + "/";
    List<FileStatus> out = new ArrayList<>();
    try {
      String token = null;
      do {
        S3ObjectStore.Page page = store.listPage(prefix, true, 1000, token);
        for (S3ObjectStore.Entry o : page.objects()) {
          if (!o.key().equals(prefix)) { // the directory's own marker
            FileStatus status = new FileStatus(o.size(), false, 1, 0, o.lastModifiedMs(), store.path(o.key()));
            if (filter.accept(status.getPath())) {
              out.add(status);
            }
          }
        }
        for (String dir : page.prefixes()) {
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
    return out.toArray(new FileStatus[0]);
  }

  @Override
  public void mkdirs(Path path) {
    try {
      store.put(store.key(path) + "/", new byte[0], false);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  /**
   * One LIST of the keys starting with the path's key: the exact key sorts first when the file
   * exists; otherwise the directory's entries start with {@code key/}. Only a sibling such as
   * {@code key.compact} (sorting between the two) costs a second LIST, of {@code key/} itself.
   */
  @Override
  public boolean exists(Path path) {
    String key = store.key(path);
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

  @Override
  public void delete(Path path) {
    String key = store.key(path);
    try {
      store.delete(key);
      store.deletePrefix(key + "/");
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }
}
