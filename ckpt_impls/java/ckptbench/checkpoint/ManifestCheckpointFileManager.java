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
 *   <li>{@code createAtomic} buffers the file in memory; {@code close} publishes it as the next
 *       record. A file of at most {@code inlineMaxBytes} goes in the record itself, one PUT; a
 *       larger one is first PUT to a staged key used by no other write, and the record names it.
 *       Until that record exists nothing is visible; once it does the whole file is.
 *       {@code cancel} sends nothing. A crash between staging and publishing leaves only an
 *       unreferenced staged object, which a later compaction removes once it is older than the
 *       cleanup delay; an inline file has no such step.</li>
 *   <li>{@code overwriteIfPossible=false} is decided on exactly the history the record extends:
 *       if another writer took the record number first, the writer catches up and decides again,
 *       so two writers can never both create one file, and a refused write leaves the old
 *       content ({@code FileAlreadyExistsException}).</li>
 *   <li>A record PUT whose answer was lost (the store applied it, the connection broke) is
 *       retried by the SDK and gets 412 for the writer's own record. It is taken as written: by
 *       its write id (one HEAD, only after a 412, see {@link S3ObjectStore}) or, on a store that
 *       drops user metadata, by the record's bytes, which carry an id no other write uses (the
 *       staged key's, or the write's own).
 *       Taken as another's, it would make the writer refuse its own file and delete its staged
 *       bytes, leaving a listed file that cannot be read. A compact's lost answer is likewise
 *       taken as written, or adopted as the same compact (its hint then repaired by the next
 *       load).</li>
 *   <li>{@code open}, {@code exists} and {@code list} never LIST the store (but in RocksDB's
 *       SST and log folders, below): they follow the manifest's records by number.
 *       {@code delete} records a removal (a missing path is no error); deleting a directory
 *       empties it, subdirectories first, then removes it.</li>
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
 * <p>Files Spark's RocksDB state store also reaches with the Hadoop FileSystem, which knows
 * nothing of manifests ({@link RocksDBPaths} names them, from Spark 3.5.9's and 4.3.0's
 * {@code RocksDBFileManager}); without this, a task loading a version from the checkpoint failed
 * ({@code FileNotFoundException: .../state/0/0/1.zip}):
 * <ul>
 *   <li>A checkpoint {@code <version>.zip}, written through this manager and unzipped with
 *       {@code FileSystem.open}, is PUT at its own key instead of a staged one, then published as
 *       a record like any file: still 2 requests, the record naming the write so a lost answer is
 *       still told apart. So the manifest lists it (Spark finds versions by listing), and the
 *       FileSystem reads it where it expects it. What differs from a staged file: its bytes are
 *       visible to the FileSystem from the PUT, before the record, and an overwrite replaces them
 *       in place, so two writers overwriting one zip leave the last PUT's bytes, whole (a PUT is
 *       atomic), whichever record came last. That is safe for RocksDB: a zip is named by its
 *       version, Spark reads one only for a version it committed or found listed, and a zip
 *       rewritten by a retried or speculative task is a complete checkpoint of that version
 *       either way (its SST files are uploaded under names unique per upload, as Spark's own
 *       comment on {@code RocksDBFileManager} says). Without overwrite, the PUT is create-only:
 *       refused when the key holds any object, listed or not. Its deleter removes the key after
 *       the record that removes the name (a removed staged object waits for the cleanup delay;
 *       an own key cannot, since the next write of the name reuses it).</li>
 *   <li>{@code SSTs/} and {@code logs/} in a state store directory, and the files in them, are
 *       the FileSystem's: RocksDB uploads and fetches them with it and only probes, lists and
 *       deletes them through this manager. Every call on them is handed to
 *       {@link ConditionalPutCheckpointFileManager} (a LIST or a HEAD as that strategy sends), so
 *       the manifest never lists them and deleting them removes them. Deleting a directory
 *       through this manager leaves such folders under it (Spark deletes old SST files one by
 *       one, never a state store directory).</li>
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
 * {@code createAtomic} + {@code close} 1 PUT (the record) for an inline file, 2 PUTs (staged
 * object, record) for a larger one, so Spark's {@code HDFSMetadataLog.add} of an offsets or
 * commits file costs 1; {@code open} 1 GET (the next record, to be current) for an inline file,
 * 2 for a staged one; {@code delete} 1 GET + 1 PUT. Each record other writers added since costs one more GET, and a
 * record number another writer took first one more HEAD (the 412's write-id check). Every
 * {@code compactInterval} records the publishing writer adds a LIST of the staged objects (if
 * none was sent for the cleanup delay), at most one bulk DELETE per 1000 keys, a PUT of the
 * compact and a PUT of the hint. Loading a view
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
 *   <li>{@code ckptbench.manifest.inlineMaxBytes} (default 4096,
 *       0 to 65536): the largest file kept in its record. Each compact carries every live inline
 *       file of its directory, so the bound keeps compacts small (a metadata log keeps 100
 *       batches by default: at most 100 x this, Base64-encoded); 0 stages every file.</li>
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
  /** RocksDB's SST and log files ({@link RocksDBPaths#isFileSystemOnly}): at their own keys, as {@code conditional} keeps every file. */
  private final ConditionalPutCheckpointFileManager fileSystemFiles;
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
        // 4096: offsets and commits files fit (see the README for their measured sizes); larger state files are staged.
        conf.getInt("ckptbench.manifest.inlineMaxBytes", 4096),
        haltAt);
    this.fileSystemFiles = new ConditionalPutCheckpointFileManager(path, conf);
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
      if (RocksDBPaths.isFileSystemOnly(store.key(target))) {
        return fileSystemFiles.createAtomic(target, overwriteIfPossible);
      }
      return new BufferedPublishStream(bytes -> publishFile(target, bytes, overwriteIfPossible));
    } catch (IOException e) {
      throw Unchecked.io(e);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      Path p = store.qualify(path);
      if (RocksDBPaths.isFileSystemOnly(store.key(p))) {
        return fileSystemFiles.open(p);
      }
      DirManifest.Entry e = p.getParent() == null ? null : lookUp(p);
      if (e == null || e.isDirectory()) {
        throw new FileNotFoundException(p + (e == null ? " does not exist" : " is a directory"));
      }
      byte[] bytes = switch (e.where) {
        case INLINE -> e.inline;
        case OWN_KEY -> store.getIfExists(store.key(p));
        case STAGED -> store.getIfExists(manifest(p.getParent()).stagedKey(e.id));
      };
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
      if (RocksDBPaths.isFileSystemOnly(store.key(dir))) {
        return fileSystemFiles.list(dir, filter);
      }
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
      Path dir = writable(path);
      if (RocksDBPaths.isFileSystemOnly(store.key(dir))) {
        fileSystemFiles.mkdirs(dir);
        return;
      }
      ensureDirectory(dir, false);
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
      if (RocksDBPaths.isFileSystemOnly(store.key(p))) {
        return fileSystemFiles.exists(p);
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
      String key = store.key(p);
      if (RocksDBPaths.isFileSystemOnly(key)) {
        fileSystemFiles.delete(p);
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
      List<DirManifest.Entry> removed = new ArrayList<>(1);
      manifest(p.getParent()).publish(view -> {
        removed.clear();
        DirManifest.Entry current = view.get(name);
        if (current == null) {
          return List.of();
        }
        removed.add(current);
        return List.of(DirManifest.Op.remove(name));
      });
      deleteOwnKeys(p.getParent(), removed);
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
    List<DirManifest.Entry> removed = new ArrayList<>();
    m.publish(view -> {
      removed.clear();
      removed.addAll(view.entries());
      return view.isEmpty() ? List.of() : List.of(DirManifest.Op.clear());
    });
    deleteOwnKeys(dir, removed);
  }

  /**
   * After a record removed {@code removed} from {@code dir}: deletes the bytes of those kept at
   * their own key (staged objects are left to compaction's delayed cleanup). Removal first, so a
   * listed file always has its bytes; a crash in between leaves an unlisted object, which a
   * later write of the name replaces.
   */
  private void deleteOwnKeys(Path dir, List<DirManifest.Entry> removed) throws IOException {
    for (DirManifest.Entry e : removed) {
      if (e.where == DirManifest.Where.OWN_KEY) {
        store.delete(store.key(new Path(dir, e.name)));
      }
    }
  }

  /**
   * Publishes the bytes as the next record of the parent: in the record itself when small, else
   * staged under a fresh key first (a RocksDB checkpoint zip: at its own key).
   */
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
    String id = UUID.randomUUID().toString();
    long now = System.currentTimeMillis();
    DirManifest.Where where = RocksDBPaths.isCheckpointZip(store.key(path)) ? DirManifest.Where.OWN_KEY
        : bytes.length <= settings.inlineMaxBytes ? DirManifest.Where.INLINE : DirManifest.Where.STAGED;
    if (where == DirManifest.Where.INLINE) {
      m.publish(view -> {
        refuseIfTaken(view.get(name), path, overwrite);
        return List.of(DirManifest.Op.putInline(name, id, bytes, now));
      });
      return;
    }
    boolean atOwnKey = where == DirManifest.Where.OWN_KEY;
    String bytesKey = atOwnKey ? store.key(path) : m.stagedKey(id);
    try {
      // At its own key, a file another write may hold is never replaced unless overwriting.
      store.put(bytesKey, bytes, atOwnKey && !overwrite);
    } catch (S3ObjectStore.KeyExistsException taken) {
      throw new FileAlreadyExistsException(path + " already exists (its key holds an object)");
    }
    settings.reached("afterStage");
    DirManifest.Op put = atOwnKey
        ? DirManifest.Op.putAtOwnKey(name, id, bytes.length, now)
        : DirManifest.Op.putStaged(name, id, bytes.length, now);
    try {
      m.publish(view -> {
        refuseIfTaken(view.get(name), path, overwrite);
        return List.of(put);
      });
    } catch (FileAlreadyExistsException refused) {
      // Certainly unpublished (unlike after an I/O error, when the record may have landed), so
      // remove it now: a staged key is this write's alone, and so is an own key it created or
      // one beside a directory of that name; if that fails, the sweep of unreferenced staged
      // objects will (an own key stays, unlisted, until the name is written again).
      try {
        store.delete(bytesKey);
      } catch (IOException ignored) {
        // left for the sweep
      }
      throw refused;
    }
  }

  /** Refuses a write of {@code path} over {@code current}, its entry in the view the record would follow. */
  private static void refuseIfTaken(DirManifest.Entry current, Path path, boolean overwrite)
      throws FileAlreadyExistsException {
    if (current != null && current.isDirectory()) {
      throw new FileAlreadyExistsException(path + " is a directory");
    }
    if (current != null && !overwrite) {
      throw new FileAlreadyExistsException(path + " already exists");
    }
  }
}
