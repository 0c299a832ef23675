import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import ckptbench.checkpoint.ManifestCheckpointFileManager;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * Drives ManifestCheckpointFileManager in a JVM of its own, so a test can kill it mid-write
 * (ckptbench.manifest.haltAt) or run several writers at once.
 *
 * <p>Hadoop settings, credentials included, arrive on stdin as key=value lines ended by an empty
 * line, never on the command line. The driver then prints "ready" and waits for a line "go", so
 * a test can start several drivers together.
 *
 * <p>Usage: {@code ManifestDriver <dir> <prefix> <count>} writes {@code <dir>/<prefix><i>} for
 * i in [0, count) with overwrite=false, the file's name as its content, printing "wrote <name>"
 * after each close returns.
 */
public final class ManifestDriver {
  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    Configuration conf = new Configuration();
    for (String line = in.readLine(); line != null && !line.isEmpty(); line = in.readLine()) {
      int eq = line.indexOf('=');
      conf.set(line.substring(0, eq), line.substring(eq + 1));
    }
    Path dir = new Path(args[0]);
    CheckpointFileManager fm = new ManifestCheckpointFileManager(dir, conf);
    System.out.println("ready");
    System.out.flush();
    if (!"go".equals(in.readLine())) {
      return;
    }
    for (int i = 0; i < Integer.parseInt(args[2]); i++) {
      String name = args[1] + i;
      CheckpointFileManager.CancellableFSDataOutputStream out = fm.createAtomic(new Path(dir, name), false);
      out.write(name.getBytes(StandardCharsets.UTF_8));
      out.close();
      System.out.println("wrote " + name);
      System.out.flush();
    }
  }
}
