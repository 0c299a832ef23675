package ckptbench.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ConcurrentSkipListSet;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;

/**
 * THE BENCHMARK'S FLOOR, NOT A STRATEGY: keeps checkpoint files in this JVM's memory and sends no
 * request for them, so Spark's walCommit / commitOffsets measured through it are Spark's own share
 * of a commit (serializing, its existence checks, its bookkeeping), with no store behind them.
 * ckptbench runs it beside the strategies ({@code ckpt_impls.FLOOR}) and subtracts it; it is not
 * among the strategies a user can choose, deploy or be recommended.
 *
 * <p>Files live in one map per JVM, keyed by {@code bucket/key} of the qualified path, so it only
 * measures a query whose driver and executors share one JVM ({@code local[N]}); nothing survives
 * the JVM. It keeps the contract's semantics (create-only refused when the file exists, cancel
 * leaves nothing, open of a missing file raises {@link FileNotFoundException}), so Spark takes the
 * same paths it takes on a store. Each file published or deleted is logged ({@link #drain}) so the
 * benchmark can count the checkpoint files a batch writes and deletes.
 *
 * <p>One exception, off the offsets and commits logs the floor times: a RocksDB state store's
 * {@code <version>.zip} is also written to (and deleted from) the path's {@code FileSystem},
 * because Spark unzips it from there, not through the manager ({@link RocksDBPaths}); Spark 3.5
 * does so whenever a task loads a version, so without the copy its RocksDB queries fail with
 * {@link FileNotFoundException}. RocksDB's SST and log files go through the {@code FileSystem}
 * whatever the manager.
 */
public class InMemoryCheckpointFileManager implements CheckpointFileManager {

  private static final ConcurrentSkipListMap<String, byte[]> FILES = new ConcurrentSkipListMap<>();
  private static final ConcurrentSkipListSet<String> DIRECTORIES = new ConcurrentSkipListSet<>();
  /**
   * Lines "start (epoch microseconds) TAB PUT or DELETE TAB bytes TAB bucket/key" of the files
   * published and deleted, not yet drained: the file operations Spark asked for that a store must see.
   */
  private static final ConcurrentLinkedQueue<String> WRITES = new ConcurrentLinkedQueue<>();

  private final FileSystem fs;
  private final Path root;

  public InMemoryCheckpointFileManager(Path path, Configuration conf) throws IOException {
    this.fs = path.getFileSystem(conf);
    this.root = fs.makeQualified(path);
  }

  /**
   * The files published and deleted under {@code prefix} (a {@code bucket/key} prefix) since the
   * last call, one line each (see {@link #WRITES}); they and the files themselves are forgotten.
   */
  public static String drain(String prefix) {
    StringBuilder out = new StringBuilder();
    WRITES.removeIf(line -> {
      if (line.substring(line.lastIndexOf('\t') + 1).startsWith(prefix)) {
        out.append(line).append('\n');
        return true;
      }
      return false;
    });
    under(FILES, prefix).clear();
    DIRECTORIES.subSet(prefix, prefix + Character.MAX_VALUE).clear();
    return out.toString();
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    String key = BucketKeys.of(path);
    return new BufferedPublishStream(bytes -> {
      long startMicros = System.currentTimeMillis() * 1000;
      if (!overwriteIfPossible && FILES.containsKey(key)) {
        throw new FileAlreadyExistsException(path + " already exists");
      }
      if (RocksDBPaths.isCheckpointZip(key)) {
        try (FSDataOutputStream out = fs.create(path, true)) {
          out.write(bytes);
        }
      }
      if (overwriteIfPossible) {
        FILES.put(key, bytes);
      } else if (FILES.putIfAbsent(key, bytes) != null) {
        throw new FileAlreadyExistsException(path + " already exists");
      }
      WRITES.add(startMicros + "\tPUT\t" + bytes.length + "\t" + key);
    });
  }

  @Override
  public FSDataInputStream open(Path path) {
    byte[] bytes = FILES.get(BucketKeys.of(path));
    if (bytes == null) {
      throw Unchecked.io(new FileNotFoundException(path + " does not exist"));
    }
    return new FSDataInputStream(new ByteArraySeekableInputStream(bytes));
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    String prefix = BucketKeys.of(path) + "/";
    List<FileStatus> out = new ArrayList<>();
    List<String> seenDirs = new ArrayList<>();
    for (Map.Entry<String, byte[]> e : under(FILES, prefix).entrySet()) {
      String rest = e.getKey().substring(prefix.length());
      int slash = rest.indexOf('/');
      if (slash < 0) {
        add(out, filter, new FileStatus(e.getValue().length, false, 1, 0, 0, new Path(path, rest)));
      } else if (!seenDirs.contains(rest.substring(0, slash))) {
        seenDirs.add(rest.substring(0, slash));
      }
    }
    for (String dir : DIRECTORIES.subSet(prefix, prefix + Character.MAX_VALUE)) {
      String rest = dir.substring(prefix.length());
      String child = rest.contains("/") ? rest.substring(0, rest.indexOf('/')) : rest;
      if (!seenDirs.contains(child)) {
        seenDirs.add(child);
      }
    }
    for (String dir : seenDirs) {
      add(out, filter, new FileStatus(0, true, 1, 0, 0, new Path(path, dir)));
    }
    return out.toArray(new FileStatus[0]);
  }

  private static void add(List<FileStatus> out, PathFilter filter, FileStatus status) {
    if (filter.accept(status.getPath())) {
      out.add(status);
    }
  }

  @Override
  public void mkdirs(Path path) {
    DIRECTORIES.add(BucketKeys.of(path));
  }

  @Override
  public boolean exists(Path path) {
    String key = BucketKeys.of(path);
    String under = key + "/";
    return FILES.containsKey(key) || DIRECTORIES.contains(key)
        || !DIRECTORIES.subSet(under, under + Character.MAX_VALUE).isEmpty()
        || !under(FILES, under).isEmpty();
  }

  @Override
  public void delete(Path path) {
    String key = BucketKeys.of(path);
    String under = key + "/";
    if (RocksDBPaths.isCheckpointZip(key)) {
      try {
        fs.delete(path, false);
      } catch (IOException e) {
        throw Unchecked.io(e);
      }
    }
    long startMicros = System.currentTimeMillis() * 1000;
    List<String> deleted = new ArrayList<>(under(FILES, under).keySet());
    if (FILES.containsKey(key)) {
      deleted.add(key);
    }
    FILES.remove(key);
    DIRECTORIES.remove(key);
    under(FILES, under).clear();
    DIRECTORIES.subSet(under, under + Character.MAX_VALUE).clear();
    for (String file : deleted) {
      WRITES.add(startMicros + "\tDELETE\t0\t" + file);
    }
  }

  /** The entries of {@code files} whose key starts with {@code prefix}. */
  private static Map<String, byte[]> under(ConcurrentSkipListMap<String, byte[]> files, String prefix) {
    return files.subMap(prefix, prefix + Character.MAX_VALUE);
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
