package org.example.thirdparty;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.CheckpointFileManager;

/** A manager built against the other Spark version's CheckpointFileManager (its pre-4.1 package). */
public class ForOtherSpark implements CheckpointFileManager {
  public ForOtherSpark(Path path, Configuration conf) {}
}
