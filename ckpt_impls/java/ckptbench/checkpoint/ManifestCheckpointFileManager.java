package ckptbench.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;

/**
 * Visibility through a per-directory manifest instead of renames or listings: a file exists when
 * its directory's manifest says so, and the manifest is a numbered history of records that the
 * store itself keeps single-writer with {@code If-None-Match: *}. Layout, reading and compaction
 * are described in {@link DirManifest}; a directory's manifest lives at
 * {@code <dir>/_manifest/}, so it is found from the path alone. Such a checkpoint can only be
 * read through this manager.
 *
 * <p>Guarantees:
 * <ul>
 *   <li>{@code createAtomic} buffers the file in memory; {@code close} PUTs the bytes to a staged
 *       key used by no other write, then publishes it as the next record. Until that record
 *       exists nothing is visible; once it does the whole file is. {@code cancel} sends nothing.
 *       A crash between staging and publishing leaves only an unreferenced staged object, which
 *       a later compaction removes once it is older than the cleanup delay.</li>
 *   <li>{@code overwriteIfPossible=false} is decided on exactly the history the record extends:
 *       if another writer took the record number first, the writer catches up and decides again,
 *       so two writers can never both create one file, and a refused write leaves the old
 *       content ({@code FileAlreadyExistsException}).</li>
 *   <li>A record PUT whose answer was lost (the store applied it, the connection broke) is
 *       retried by the SDK and gets 412 for the writer's own record. It is taken as written: by
 *       its write id (one HEAD, only after a 412, see {@link S3ObjectStore}) or, on a store that
 *       drops user metadata, by the record's bytes, which name a staged key no other write uses.
 *       Taken as another's, it would make the writer refuse its own file and delete its staged
 *       bytes, leaving a listed file that cannot be read. A compact's lost answer is likewise
 *       taken as written, or adopted as the same compact (its hint then repaired by the next
 *       load).</li>
 *   <li>{@code open}, {@code exists} and {@code list} never LIST the store: they follow the
 *       manifest's records by number. {@code delete} records a removal (a missing path is no
 *       error); deleting a directory empties it, subdirectories first, then removes it.</li>
 *   <li>Directories are entries in their parent's manifest: {@code mkdirs} records each missing
 *       one, outermost first, and so does the first write into a directory. Outermost means up to
 *       the bucket root, or with {@code ckptbench.manifest.root} (a directory URL) up to that
 *       directory: it and its ancestors are taken to exist, and nothing is written in them
 *       but below it (how a benchmark run keeps to its own prefix in a user's bucket). {@code exists(dir)}
 *       is true exactly when it was made and not deleted, and after a restart too;
 *       {@code list} of a missing directory raises {@code FileNotFoundException}.</li>
 *   <li>At start it checks, once per store and bucket in this JVM, that the store honours
 *       {@code If-None-Match: *}, and refuses to start if not: record numbers would no longer be
 *       taken once.</li>
 * </ul>
 *
 * <p>{@code exists} answers from the directory's view as this manager last saw it, sending
 * nothing once the view is loaded (formerly a GET of the next record, a 404, per check). Why that
 * is safe: the view can be stale only about another writer's records. Spark checks before
 * writing a batch file ({@code HDFSMetadataLog.addNewBatchByStream}), and the write that follows
 * publishes a record whose number the stale view would reuse: the store refuses it (412), the
 * writer catches up and refuses the file ({@code FileAlreadyExistsException}), which Spark
 * reports as another query writing the checkpoint, the truth. Spark's check before reading
 * ({@code applyFnToBatchByStream}) can only miss another writer's file, and the next record
 * either publishes is refused the same way. {@code open} and {@code list} still bring the view
 * up to date first.
 *
 * <p>Requests per checkpoint file, once a directory's view is loaded: {@code exists} none;
 * {@code createAtomic} + {@code close} 2 PUTs (staged object, record), so Spark's
 * {@code HDFSMetadataLog.add} costs 2; {@code open} 2 GETs (next record, staged object);
 * {@code delete} 1 GET + 1 PUT. Each record other writers added since costs one more GET, and a
 * record number another writer took first one more HEAD (the 412's write-id check). Every
 * {@code compactInterval} records the publishing writer adds a LIST of the staged objects, at
 * most one bulk DELETE per 1000 keys, a PUT of the compact and a PUT of the hint. Loading a view
 * (a new instance, or one idle for half the cleanup delay) costs the hint, the compact, a probe
 * for the next compact and the records since: about 3 GETs plus one per record.
 *
 * <p>Settings (Hadoop configuration):
 * <ul>
 *   <li>{@code ckptbench.manifest.compactInterval} (default 10): records between compacts.</li>
 *   <li>{@code ckptbench.manifest.cleanupDelayMs} (default 600000, at least 1000): how long
 *       superseded records, compacts and staged objects stay readable for views loaded before
 *       they were superseded. It must far exceed any single request and the clock skew between
 *       writers; a view idle for half of it is reloaded.</li>
 *   <li>{@code ckptbench.manifest.haltAt}: FAULT INJECTION for tests only. Halts the JVM
 *       ({@code Runtime.halt}, exit status {@value #HALT_STATUS}) at a step, as a crash there
 *       would: {@code afterStage} (bytes staged, record not written), {@code beforeCompactWrite}
 *       (due garbage deleted, compact not written), {@code afterCompactWrite} (compact written,
 *       hint not).</li>
 * </ul>
 */
public class ManifestCheckpointFileManager extends ConditionalS3CheckpointFileManager {

  /** Exit status of a JVM stopped by {@code ckptbench.manifest.haltAt}. */
  static final int HALT_STATUS = 86;

  private static final Set<String> HALT_POINTS =
      Set.of("afterStage", "beforeCompactWrite", "afterCompactWrite");

  private final DirManifest.Settings settings;
  private final Map<String, DirManifest> manifests = new ConcurrentHashMap<>();
  /** Directories seen registered in their parent: writes into them skip that check. */
  private final Set<String> knownDirectories = ConcurrentHashMap.newKeySet();
  /** {@code ckptbench.manifest.root} (a full s3a:// URL), or null: the bucket root is the only one. */
  private final String root;

  public ManifestCheckpointFileManager(Path path, Configuration conf) throws IOException {
    super(path, conf, "manifest", "stop two writers taking the same manifest record number");
    String haltAt = conf.getTrimmed("ckptbench.manifest.haltAt", "");
    if (!haltAt.isEmpty() && !HALT_POINTS.contains(haltAt)) {
      throw new IllegalArgumentException("ckptbench.manifest.haltAt must be one of " + HALT_POINTS
          + ", not '" + haltAt + "'");
    }
    this.settings = new DirManifest.Settings(
        conf.getInt("ckptbench.manifest.compactInterval", 10),
        conf.getLong("ckptbench.manifest.cleanupDelayMs", 600_000L),
        haltAt);
    String rootSetting = conf.getTrimmed("ckptbench.manifest.root", "");
    // Not qualified: a root in another bucket (a session's other store) is no root of this one's.
    this.root = rootSetting.isEmpty() ? null : new Path(rootSetting).toString().replaceAll("/+$", "");
  }

  /** Whether {@code dir} (qualified) is taken to exist with no entry: the bucket root, or the
   * configured root or one of its ancestors. */
  private boolean isRoot(Path dir) {
    if (dir.getParent() == null) {
      return true;
    }
    String d = dir.toString();
    return root != null && (root.equals(d) || root.startsWith(d + "/"));
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    try {
      Path target = writable(path);
      return new BufferedPublishStream(bytes -> publishFile(target, bytes, overwriteIfPossible));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      Path p = store.qualify(path);
      DirManifest.Entry e = p.getParent() == null ? null : lookUp(p);
      if (e == null || e.isDirectory()) {
        throw new FileNotFoundException(p + (e == null ? " does not exist" : " is a directory"));
      }
      byte[] bytes = store.getIfExists(manifest(p.getParent()).stagedKey(e.staged));
      if (bytes == null) {
        throw new FileNotFoundException(p + " was removed while being opened");
      }
      return new FSDataInputStream(new ByteArraySeekableInputStream(bytes));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    try {
      Path dir = store.qualify(path);
      DirManifest m = manifest(dir);
      m.refresh();
      List<DirManifest.Entry> entries = m.entries();
      if (entries.isEmpty() && !isRoot(dir)) {
        // Empty or missing: only the parent knows which, as Hadoop's listStatus must tell.
        DirManifest.Entry self = lookUp(dir);
        if (self == null) {
          throw new FileNotFoundException(dir + " does not exist");
        }
        if (!self.isDirectory()) {
          return filter.accept(dir) ? new FileStatus[] {status(dir.getParent(), self)} : new FileStatus[0];
        }
      }
      List<FileStatus> out = new ArrayList<>();
      for (DirManifest.Entry e : entries) {
        FileStatus s = status(dir, e);
        if (filter.accept(s.getPath())) {
          out.add(s);
        }
      }
      return out.toArray(new FileStatus[0]);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void mkdirs(Path path) {
    try {
      ensureDirectory(writable(path), false);
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  /**
   * From the directory's view as this manager last saw it, with no request once it is loaded
   * (and trusted): see the class comment for why a stale "absent" is safe.
   */
  @Override
  public boolean exists(Path path) {
    try {
      Path p = store.qualify(path);
      if (isRoot(p)) {
        return true;
      }
      DirManifest parent = manifest(p.getParent());
      parent.loadIfStale();
      return parent.get(p.getName()) != null;
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public void delete(Path path) {
    try {
      Path p = store.qualify(path);
      if (isRoot(p)) {
        empty(p);
        return;
      }
      DirManifest.Entry e = lookUp(p);
      if (e == null) {
        return;
      }
      if (e.isDirectory()) {
        empty(p);
      }
      String name = p.getName();
      manifest(p.getParent()).publish(
          view -> view.get(name) == null ? List.of() : List.of(DirManifest.Op.remove(name)));
      String key = store.key(p);
      knownDirectories.removeIf(k -> k.equals(key) || k.startsWith(key + "/"));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  private DirManifest manifest(Path dir) {
    return manifests.computeIfAbsent(store.key(dir), key -> new DirManifest(store, settings, key));
  }

  /** The entry for {@code p} (not the bucket root) in its parent's up-to-date manifest, or null. */
  private DirManifest.Entry lookUp(Path p) throws IOException {
    DirManifest parent = manifest(p.getParent());
    parent.refresh();
    return parent.get(p.getName());
  }

  private static FileStatus status(Path dir, DirManifest.Entry e) {
    return new FileStatus(e.length, e.isDirectory(), 1, 0, e.modifiedMs, new Path(dir, e.name));
  }

  /** {@code path} qualified, refused if any part is the manifests' reserved folder name. */
  private Path writable(Path path) throws IOException {
    Path p = store.qualify(path);
    for (Path q = p; q.getParent() != null; q = q.getParent()) {
      if (q.getName().equals(DirManifest.FOLDER)) {
        throw new IOException("Strategy 'manifest' reserves the name " + DirManifest.FOLDER
            + " for its manifests; cannot write " + p);
      }
    }
    return p;
  }

  /**
   * Makes {@code dir} an entry of its parent's manifest, and the parent of its own, and so on
   * outwards until one exists (a root always does: {@link #isRoot}). With {@code trustCache}, a
   * directory this instance has seen registered is not checked again: the hot path of a write.
   */
  private void ensureDirectory(Path dir, boolean trustCache) throws IOException {
    if (isRoot(dir)) {
      return;
    }
    String key = store.key(dir);
    if (trustCache && knownDirectories.contains(key)) {
      return;
    }
    DirManifest.Entry e = lookUp(dir);
    if (e == null) {
      ensureDirectory(dir.getParent(), true);
      String name = dir.getName();
      long now = System.currentTimeMillis();
      manifest(dir.getParent()).publish(view -> {
        DirManifest.Entry current = view.get(name);
        if (current == null) {
          return List.of(DirManifest.Op.addDirectory(name, now));
        }
        if (current.isDirectory()) {
          return List.of();
        }
        throw new FileAlreadyExistsException(dir + " is a file, not a directory");
      });
    } else if (!e.isDirectory()) {
      throw new FileAlreadyExistsException(dir + " is a file, not a directory");
    }
    knownDirectories.add(key);
  }

  /** Removes everything under {@code dir}: subdirectories first, then one record clearing it. */
  private void empty(Path dir) throws IOException {
    DirManifest m = manifest(dir);
    m.refresh();
    for (DirManifest.Entry e : m.entries()) {
      if (e.isDirectory()) {
        empty(new Path(dir, e.name));
      }
    }
    m.publish(view -> view.isEmpty() ? List.of() : List.of(DirManifest.Op.clear()));
  }

  /** Stages the bytes under a fresh key and publishes them as the next record of the parent. */
  private void publishFile(Path path, byte[] bytes, boolean overwrite) throws IOException {
    Path dir = path.getParent();
    String name = path.getName();
    ensureDirectory(dir, true);
    DirManifest m = manifest(dir);
    if (!overwrite && m.get(name) != null) {
      // Fail before staging anything, once an up-to-date view confirms it.
      m.refresh();
      if (m.get(name) != null) {
        throw new FileAlreadyExistsException(path + " already exists");
      }
    }
    String staged = UUID.randomUUID().toString();
    store.put(m.stagedKey(staged), bytes, false);
    settings.reached("afterStage");
    long now = System.currentTimeMillis();
    try {
      m.publish(view -> {
        DirManifest.Entry current = view.get(name);
        if (current != null && current.isDirectory()) {
          throw new FileAlreadyExistsException(path + " is a directory");
        }
        if (current != null && !overwrite) {
          throw new FileAlreadyExistsException(path + " already exists");
        }
        return List.of(DirManifest.Op.putFile(name, staged, bytes.length, now));
      });
    } catch (FileAlreadyExistsException refused) {
      // Certainly unpublished (unlike after an I/O error, when the record may have landed), so
      // remove it now; if that fails, the sweep of unreferenced staged objects will.
      try {
        store.delete(m.stagedKey(staged));
      } catch (IOException ignored) {
        // left for the sweep
      }
      throw refused;
    }
  }
}
