package ckptbench.metering;

import java.util.Collections;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Counts S3 requests in every Spark JVM ({@code spark.plugins=ckptbench.metering.S3RequestsPlugin})
 * and gathers the records on the driver, where {@link S3RequestLog#drain} hands them to Python.
 *
 * <ul>
 *   <li>Driver: turns recording on for the driver JVM ({@link S3RequestMeter} records, into
 *       {@link S3RequestLog}) and keeps what executors ship ({@link DriverPlugin#receive}).
 *   <li>Executor: turns recording on and ships its records to the driver
 *       ({@link PluginContext#send}) in chunks, when a task ends and every
 *       {@code spark.ckptbench.requests.flushMs} (for requests outside tasks, such as state store
 *       maintenance), and once more at shutdown; each shipment, records or none, opens with a
 *       {@link S3RequestLog.Report} of whether the executor was idle, so the driver can find a
 *       moment at which every attempt begun anywhere had ended and reached it
 *       ({@link S3RequestLog#executorsIdleAt}). In local mode the executor is the driver's own
 *       JVM (executor id {@code driver}): its requests are already in the driver's log, so it
 *       ships nothing and each request is counted once.
 * </ul>
 *
 * <p>Settings: {@code spark.ckptbench.requests.enabled} (default true; false records nothing),
 * {@code .capacity} (records a JVM holds before dropping, default 200000), {@code .flushMs}
 * (default 200).
 */
public final class S3RequestsPlugin implements SparkPlugin {

  public static final String PREFIX = "spark.ckptbench.requests.";
  public static final String ENABLED = PREFIX + "enabled";
  public static final String CAPACITY = PREFIX + "capacity";
  public static final String FLUSH_MS = PREFIX + "flushMs";

  static boolean enabled(SparkConf conf) {
    return conf.getBoolean(ENABLED, true);
  }

  static int capacity(SparkConf conf) {
    return conf.getInt(CAPACITY, 200_000);
  }

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        S3RequestLog.reset();
        if (enabled(ctx.conf())) {
          S3RequestLog.enable(capacity(ctx.conf()), "driver");
        }
        return Collections.emptyMap();
      }

      @Override
      public Object receive(Object message) {
        if (message instanceof String) {
          S3RequestLog.received((String) message);
        }
        return null;
      }

      @Override
      public void shutdown() {
        S3RequestLog.setEnabled(false); // what is left stays drainable
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new Shipper();
  }

  /** The executor side: ships this executor's records to the driver. */
  static final class Shipper implements ExecutorPlugin {
    private PluginContext ctx;
    private ScheduledExecutorService timer;

    @Override
    public void init(PluginContext ctx, Map<String, String> extraConf) {
      if ("driver".equals(ctx.executorID()) || !enabled(ctx.conf())) {
        return; // local mode: the driver's JVM, already recording into the driver's log
      }
      this.ctx = ctx;
      S3RequestLog.enable(capacity(ctx.conf()), ctx.executorID());
      long every = ctx.conf().getLong(FLUSH_MS, 200);
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "ckptbench-s3-requests-shipper");
        t.setDaemon(true);
        return t;
      });
      timer.scheduleWithFixedDelay(this::ship, every, every, TimeUnit.MILLISECONDS);
    }

    /** Ships the report and the records, even none: the report alone tells the driver this JVM is idle. */
    void ship() {
      if (ctx == null) {
        return;
      }
      String report = S3RequestLog.Report.header(ctx.executorID());
      int[] count = new int[1];
      String chunk = S3RequestLog.drainLocal(count);
      try {
        ctx.send(report + chunk);
      } catch (Exception e) {
        S3RequestLog.lost(count[0]);
      }
    }

    @Override
    public void onTaskSucceeded() {
      ship();
    }

    @Override
    public void onTaskFailed(org.apache.spark.TaskFailedReason reason) {
      ship();
    }

    @Override
    public void shutdown() {
      if (timer != null) {
        timer.shutdownNow();
      }
      ship();
    }
  }
}
