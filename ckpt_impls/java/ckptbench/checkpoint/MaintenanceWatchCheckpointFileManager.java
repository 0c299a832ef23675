package ckptbench.checkpoint;

import java.io.IOException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
// Spark 4.1+'s package: ckpt_impls/build.py rewrites this import for an older Spark (3.5: ...execution.streaming).
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.CancellableFSDataOutputStream;

/**
 * NOT A STRATEGY, THE BENCHMARK'S VIEW OF STATE STORE MAINTENANCE: wraps the manager a run measures
 * ({@link #WATCHED_CONF} names its class; unset, Spark's default: the {@code rename} strategy),
 * passes every call through unchanged, and logs the calls Spark's state store maintenance made
 * ({@link #drain}). Maintenance (a partition's snapshot, deleting state files past retention) runs on
 * its own schedule beside the batches, so its requests land in a batch's window or not by chance;
 * the benchmark leaves the batches such a call overlapped out of the figures that count a batch's
 * own requests ({@code ckptbench.record.results.Run}).
 *
 * <p>A call is maintenance when it runs on one of Spark's {@code state-store-maintenance*} threads
 * (3.5's task thread; 4.x's task and its high- and low-priority pools), or when only maintenance
 * makes it, whatever thread runs it: writing a {@code .snapshot} file (or its {@code .crc}), or
 * deleting a file of a state partition's directory. The path rule is there because Spark 4.1+ wraps
 * a state store's manager in its {@code ChecksumCheckpointFileManager}, which writes and deletes
 * from its own pool threads. A write is logged from {@code createAtomic} to the end of its stream's
 * {@code close}, where a strategy's publishing request goes out.
 *
 * <p>It also times every file's commit, on every thread, whoever writes it ({@link #drainCommits}):
 * {@code createAtomic} to the end of its stream's {@code close} (or {@code cancel}), the first end
 * only, with {@link System#nanoTime}, beside Spark's own whole-millisecond walCommit and
 * commitOffsets. A {@code createAtomic} that throws wrote nothing and is not timed.
 *
 * <p>Both logs are this JVM's (static, as {@link InMemoryCheckpointFileManager}'s): they see
 * maintenance and the state stores' writes where they run in the driver, in local mode. The wrapper
 * costs a thread-name check per call and a stream wrapper per file, and adds no request. Spark
 * 4.x's {@code close()} is left to the trait's default, a no-op, which is what every manager
 * watched here has (3.5's trait has no {@code close()}).
 */
public final class MaintenanceWatchCheckpointFileManager implements CheckpointFileManager {

  /** The class of the manager watched; unset: Spark's own choice. */
  public static final String WATCHED_CONF = "spark.ckptbench.maintenanceWatch.managerClass";
  private static final String MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass";
  private static final String THREAD_PREFIX = "state-store-maintenance";
  private static final Pattern MAINTENANCE_WRITE = Pattern.compile("\\.snapshot(\\.crc)?$");
  private static final Pattern STATE_FILE = Pattern.compile("/state/\\d+/\\d+/[^/]+$");
  /** Lines "start TAB end (epoch microseconds) TAB method TAB thread TAB bucket/key" of maintenance calls, not yet drained. */
  private static final ConcurrentLinkedQueue<String> CALLS = new ConcurrentLinkedQueue<>();
  /** Lines "start (epoch microseconds) TAB nanoseconds TAB outcome TAB bucket/key" of files' commits, not yet drained. */
  private static final ConcurrentLinkedQueue<String> COMMITS = new ConcurrentLinkedQueue<>();

  private final CheckpointFileManager watched;

  public MaintenanceWatchCheckpointFileManager(Path path, Configuration conf) {
    Configuration watchedConf = new Configuration(conf);
    String watchedClass = conf.get(WATCHED_CONF);
    if (watchedClass == null) {
      watchedConf.unset(MANAGER_CONF);
    } else {
      watchedConf.set(MANAGER_CONF, watchedClass);
    }
    this.watched = CheckpointFileManager.create(path, watchedConf);
  }

  /**
   * The maintenance calls on paths under {@code prefix} (a {@code bucket/key} prefix) since the last
   * call, one line each (see {@link #CALLS}). All are forgotten: the others were an earlier query's,
   * whose state store providers Spark keeps maintaining until it unloads them.
   */
  public static String drain(String prefix) {
    return drainFrom(CALLS, prefix);
  }

  /**
   * The files' commits on paths under {@code prefix} (a {@code bucket/key} prefix) since the last
   * call, one line each (see {@link #COMMITS}): outcome {@code closed}, {@code failed} (its
   * {@code close} threw) or {@code cancelled}. All are forgotten, as in {@link #drain}.
   */
  public static String drainCommits(String prefix) {
    return drainFrom(COMMITS, prefix);
  }

  private static String drainFrom(ConcurrentLinkedQueue<String> queue, String prefix) {
    StringBuilder out = new StringBuilder();
    for (String line = queue.poll(); line != null; line = queue.poll()) {
      if (line.substring(line.lastIndexOf('\t') + 1).startsWith(prefix)) {
        out.append(line).append('\n');
      }
    }
    return out.toString();
  }

  private static boolean onMaintenanceThread() {
    return Thread.currentThread().getName().startsWith(THREAD_PREFIX);
  }

  private static long nowMicros() {
    return System.currentTimeMillis() * 1000;
  }

  private static void log(long startMicros, String method, Path path) {
    CALLS.add(startMicros + "\t" + nowMicros() + "\t" + method + "\t" + Thread.currentThread().getName()
        .replace('\t', ' ') + "\t" + BucketKeys.of(path));
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    boolean maintenance = onMaintenanceThread() || MAINTENANCE_WRITE.matcher(path.getName()).find();
    long start = nowMicros();
    long started = System.nanoTime();
    CancellableFSDataOutputStream stream = watched.createAtomic(path, overwriteIfPossible);
    AtomicBoolean ended = new AtomicBoolean();
    return new CancellableFSDataOutputStream(stream) {
      @Override
      public void close() throws IOException {
        boolean closed = false;
        try {
          super.close();
          closed = true;
        } finally {
          end(closed ? "closed" : "failed");
        }
      }

      @Override
      public void cancel() {
        try {
          stream.cancel();
        } finally {
          end("cancelled");
        }
      }

      private void end(String outcome) {
        if (!ended.getAndSet(true)) {
          COMMITS.add(start + "\t" + (System.nanoTime() - started) + "\t" + outcome + "\t" + BucketKeys.of(path));
        }
        if (maintenance) {
          log(start, "createAtomic", path);
        }
      }
    };
  }

  /** {@code call}'s result; logged as {@code method} on {@code path} when {@code maintenance}. */
  private static <T> T watch(String method, Path path, boolean maintenance, Supplier<T> call) {
    if (!maintenance) {
      return call.get();
    }
    long start = nowMicros();
    try {
      return call.get();
    } finally {
      log(start, method, path);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    return watch("open", path, onMaintenanceThread(), () -> watched.open(path));
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    return watch("list", path, onMaintenanceThread(), () -> watched.list(path, filter));
  }

  @Override
  public FileStatus[] list(Path path) {
    return watch("list", path, onMaintenanceThread(), () -> watched.list(path));
  }

  @Override
  public void mkdirs(Path path) {
    watch("mkdirs", path, onMaintenanceThread(), () -> {
      watched.mkdirs(path);
      return null;
    });
  }

  @Override
  public boolean exists(Path path) {
    return watch("exists", path, onMaintenanceThread(), () -> watched.exists(path));
  }

  @Override
  public void delete(Path path) {
    boolean maintenance = onMaintenanceThread() || STATE_FILE.matcher(path.toUri().getPath()).find();
    watch("delete", path, maintenance, () -> {
      watched.delete(path);
      return null;
    });
  }

  @Override
  public boolean isLocal() {
    return watched.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    return watched.createCheckpointDirectory();
  }
}
