package ckptbench.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.conf.Configuration;

/**
 * Retries an action with growing delays: {@code initialDelayMs}, doubled each time up to
 * {@code maxDelayMs}, for at most {@code attempts} tries. Read from the Hadoop configuration
 * under a prefix so each strategy can be tuned on its own:
 * {@code <prefix>.attempts}, {@code <prefix>.initialDelayMs}, {@code <prefix>.maxDelayMs}.
 */
final class Backoff {

  interface Action {
    void run() throws IOException;
  }

  final int attempts;
  final long initialDelayMs;
  final long maxDelayMs;

  Backoff(int attempts, long initialDelayMs, long maxDelayMs) {
    if (attempts < 1) {
      throw new IllegalArgumentException("attempts must be at least 1, got " + attempts);
    }
    this.attempts = attempts;
    this.initialDelayMs = initialDelayMs;
    this.maxDelayMs = maxDelayMs;
  }

  static Backoff fromConf(Configuration conf, String prefix) {
    return new Backoff(
        conf.getInt(prefix + ".attempts", 5),
        conf.getLong(prefix + ".initialDelayMs", 100),
        conf.getLong(prefix + ".maxDelayMs", 5000));
  }

  /** Runs {@code action} until it succeeds; after the last failed attempt throws with {@code what} in the message. */
  void run(String what, Action action) {
    long delay = initialDelayMs;
    IOException last = null;
    for (int attempt = 1; attempt <= attempts; attempt++) {
      try {
        action.run();
        return;
      } catch (IOException e) {
        last = e;
      }
      if (attempt < attempts) {
        sleep(delay);
        delay = Math.min(delay * 2, maxDelayMs);
      }
    }
    throw new UncheckedIOException(
        "Failed to " + what + " after " + attempts + " attempts; stopping the query rather than"
            + " leaving a partial checkpoint file visible: " + last.getMessage(), last);
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while backing off", e);
    }
  }
}
