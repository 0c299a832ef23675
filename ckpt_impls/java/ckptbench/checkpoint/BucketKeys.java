package ckptbench.checkpoint;

import org.apache.hadoop.fs.Path;

/**
 * How the benchmark's in-JVM logs name a path: {@code bucket/key}, its authority and its path,
 * never its scheme. {@code ckptbench/runs.py} drains those logs by that prefix and splits the
 * bucket off at the first slash.
 */
final class BucketKeys {

  private BucketKeys() {}

  static String of(Path path) {
    String authority = path.toUri().getAuthority();
    return (authority == null ? "" : authority) + path.toUri().getPath();
  }
}
