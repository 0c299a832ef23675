package ckptbench.metering;

import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The S3 requests this JVM made (one record per HTTP attempt, recorded by {@link S3RequestMeter})
 * and, on the driver, the records executors shipped to it ({@link S3RequestsPlugin}).
 *
 * <p>Off until {@link #enable} (the plugin calls it from {@code spark.ckptbench.requests.*}), so
 * a JVM that merely has this jar on its classpath records nothing. Appending is lock-free (a
 * {@link ConcurrentLinkedQueue} and a counter) and bounded: past {@code capacity} records not yet
 * drained, further ones are dropped and counted ({@link #dropped}), never blocking a request.
 *
 * <p>Wire format, one line per record, tab-separated (a key's tab, newline and backslash escaped
 * as {@code \t}, {@code \n}, {@code \\}): start (epoch microseconds), duration (microseconds),
 * method, op, status, bytes sent, bytes received, bucket, key, origin (the executor id, or
 * {@code driver}). {@code ckptbench/jvm_requests.py} reads it.
 */
public final class S3RequestLog {

  /** Records of this JVM's own requests not yet drained or shipped. */
  private static final ConcurrentLinkedQueue<Record> LOCAL = new ConcurrentLinkedQueue<>();
  private static final AtomicInteger LOCAL_SIZE = new AtomicInteger();
  /** On the driver: chunks of encoded records shipped by executors, not yet drained. */
  private static final ConcurrentLinkedQueue<String> RECEIVED = new ConcurrentLinkedQueue<>();
  private static final AtomicInteger RECEIVED_SIZE = new AtomicInteger();
  private static final AtomicLong DROPPED = new AtomicLong();
  private static final AtomicLong RECORDED = new AtomicLong();
  /** Attempts begun while recording that have not ended yet. */
  private static final AtomicInteger IN_FLIGHT = new AtomicInteger();
  /** When the latest of those attempts ended (epoch microseconds; 0: none yet). */
  private static final AtomicLong LAST_END_MICROS = new AtomicLong();
  /** On the driver: each executor's latest {@link Report}, by origin. */
  private static final Map<String, Report> REPORTS = new ConcurrentHashMap<>();

  private static volatile boolean enabled;
  private static volatile int capacity = 200_000;
  /** The id this JVM's records carry once encoded: {@code driver} or the executor's id. */
  private static volatile String origin = "driver";

  private S3RequestLog() {
  }

  /** One HTTP attempt. */
  static final class Record {
    final long startMicros;
    final long durationMicros;
    final String method;
    final String op;
    final int status;
    final long bytesIn;
    final long bytesOut;
    final String bucket;
    final String key;

    Record(long startMicros, long durationMicros, String method, String op, int status, long bytesIn,
        long bytesOut, String bucket, String key) {
      this.startMicros = startMicros;
      this.durationMicros = durationMicros;
      this.method = method;
      this.op = op;
      this.status = status;
      this.bytesIn = bytesIn;
      this.bytesOut = bytesOut;
      this.bucket = bucket;
      this.key = key;
    }
  }

  /** Start recording (up to {@code capacity} undrained records); {@code origin} names this JVM. */
  public static void enable(int capacity, String origin) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1, got " + capacity);
    }
    S3RequestLog.capacity = capacity;
    S3RequestLog.origin = origin;
    enabled = true;
  }

  /**
   * Stop recording and forget every record not drained yet: a new application in a JVM that ran
   * another (PySpark keeps its JVM across sessions) starts from nothing.
   */
  public static void reset() {
    enabled = false;
    drain();
    REPORTS.clear();
  }

  /** Stop or resume recording; what was recorded stays until drained. */
  public static void setEnabled(boolean on) {
    enabled = on;
  }

  public static boolean isEnabled() {
    return enabled;
  }

  /**
   * Attempts in this JVM begun while recording and not ended yet: once it reads 0, every attempt
   * that began before is in the log (a caller can then cut both its sources at that moment).
   */
  public static int inFlight() {
    return IN_FLIGHT.get();
  }

  static void began() {
    IN_FLIGHT.incrementAndGet();
  }

  /** An attempt ended at {@code endMicros} ({@link #nowMicros}). */
  static void ended(long endMicros) {
    LAST_END_MICROS.accumulateAndGet(endMicros, Math::max);
    IN_FLIGHT.decrementAndGet();
  }

  /** The wall clock in epoch microseconds: records' times and reports' are read from it alike. */
  static long nowMicros() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
  }

  /**
   * What an executor's shipment says of it besides its records: at {@code atMicros} none of its
   * attempts was in flight ({@code idle}), and the latest had ended at {@code lastEndMicros}. So
   * when {@code idle} and {@code lastEndMicros < t <= atMicros}, nothing was in flight at {@code t}.
   * Taken before the records are drained, so the shipment holds every attempt that ended before.
   */
  static final class Report {
    final long atMicros;
    final boolean idle;
    final long lastEndMicros;
    /** When the driver received it ({@link System#nanoTime}: this JVM's clock, for staleness). */
    final long receivedNanos;

    Report(long atMicros, boolean idle, long lastEndMicros, long receivedNanos) {
      this.atMicros = atMicros;
      this.idle = idle;
      this.lastEndMicros = lastEndMicros;
      this.receivedNanos = receivedNanos;
    }

    /** This JVM's report now, as its next shipment will carry it (header line, then records). */
    static String header(String origin) {
      long at = nowMicros();
      boolean idle = IN_FLIGHT.get() <= 0; // read before the last end: see the class comment
      return "#" + escape(origin) + '\t' + at + '\t' + (idle ? 1 : 0) + '\t' + LAST_END_MICROS.get() + '\n';
    }
  }

  /**
   * On the driver: whether every executor that shipped within the last {@code liveMillis} has
   * reported being idle at {@code cutMicros} (see {@link Report}): 1 yes (each of its attempts
   * that began before the cut ended and reached this log), 0 not yet known (a report taken after
   * the cut has not arrived), -1 no (an attempt may have been in flight at the cut: try a later one).
   */
  public static int executorsIdleAt(long cutMicros, long liveMillis) {
    long now = System.nanoTime();
    int answer = 1;
    for (Report r : REPORTS.values()) {
      if (now - r.receivedNanos > liveMillis * 1_000_000L) {
        continue; // an executor gone: nothing more will come from it
      }
      if (r.atMicros < cutMicros) {
        answer = 0;
      } else if (!r.idle || r.lastEndMicros >= cutMicros) {
        return -1;
      }
    }
    return answer;
  }

  /** Records lost to a full buffer since this JVM started. */
  public static long dropped() {
    return DROPPED.get();
  }

  /** Records appended since this JVM started (drained or not, dropped ones excluded). */
  public static long recorded() {
    return RECORDED.get();
  }

  /** A request that could not be recorded (not understood): counted as dropped. */
  static void lost() {
    DROPPED.incrementAndGet();
  }

  /** {@code n} records that could not be delivered: counted as dropped. */
  static void lost(int n) {
    DROPPED.addAndGet(n);
  }

  static void add(Record record) {
    if (LOCAL_SIZE.incrementAndGet() > capacity) {
      LOCAL_SIZE.decrementAndGet();
      DROPPED.incrementAndGet();
      return;
    }
    LOCAL.offer(record);
    RECORDED.incrementAndGet();
  }

  /**
   * A shipment arriving on the driver: its {@link Report} header line, then the records encoded
   * as {@link #drainLocal} encodes them. The records are filed before the report, so a report
   * read as idle vouches only for records already here.
   */
  public static void received(String shipment) {
    int split = shipment.indexOf('\n');
    String[] head = shipment.substring(1, split).split("\t");
    String chunk = shipment.substring(split + 1);
    int lines = lineCount(chunk);
    if (RECEIVED_SIZE.addAndGet(lines) > capacity) {
      RECEIVED_SIZE.addAndGet(-lines);
      DROPPED.addAndGet(lines);
    } else if (lines > 0) {
      RECEIVED.offer(chunk);
    }
    REPORTS.put(unescape(head[0]), new Report(Long.parseLong(head[1]), "1".equals(head[2]),
        Long.parseLong(head[3]), System.nanoTime()));
  }

  /** Takes this JVM's own records, encoded (with {@code origin}); {@code ""} when there are none. */
  static String drainLocal(int[] count) {
    StringBuilder out = new StringBuilder();
    String from = escape(origin);
    int n = 0;
    for (Record r; (r = LOCAL.poll()) != null; n++) {
      LOCAL_SIZE.decrementAndGet();
      out.append(r.startMicros).append('\t').append(r.durationMicros).append('\t').append(r.method)
          .append('\t').append(r.op).append('\t').append(r.status).append('\t').append(r.bytesIn)
          .append('\t').append(r.bytesOut).append('\t').append(escape(r.bucket)).append('\t')
          .append(escape(r.key)).append('\t').append(from).append('\n');
    }
    count[0] = n;
    return out.toString();
  }

  /**
   * Every record collected here, encoded, and forgets them: on the driver its own requests and
   * what executors shipped (in local mode the executor is this JVM, so each request once).
   */
  public static String drain() {
    StringBuilder out = new StringBuilder(drainLocal(new int[1]));
    for (String chunk; (chunk = RECEIVED.poll()) != null; ) {
      RECEIVED_SIZE.addAndGet(-lineCount(chunk));
      out.append(chunk);
    }
    return out.toString();
  }

  static int lineCount(String chunk) {
    int n = 0;
    for (int i = chunk.indexOf('\n'); i >= 0; i = chunk.indexOf('\n', i + 1)) {
      n++;
    }
    return n;
  }

  static String unescape(String s) {
    if (s.indexOf('\\') < 0) {
      return s;
    }
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' && i + 1 < s.length()) {
        char next = s.charAt(++i);
        out.append(next == 't' ? '\t' : next == 'n' ? '\n' : next);
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  static String escape(String s) {
    if (s.indexOf('\t') < 0 && s.indexOf('\n') < 0 && s.indexOf('\\') < 0) {
      return s;
    }
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n");
  }
}
