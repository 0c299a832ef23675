package org.example.thirdparty;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;

/**
 * A manager whose class names S3A's own: loading it needs the S3A jars that Spark has at run time
 * (spark.jars), which pyspark's jars directory lacks.
 */
public class OnS3A extends PlainCheckpointFileManager {
  public OnS3A(Path path, Configuration conf) throws IOException {
    super(path, conf);
  }

  public OnS3A(Path path, Configuration conf, S3AFileSystem s3a) throws IOException {
    super(path, conf);
  }
}
