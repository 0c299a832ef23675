package org.example.thirdparty;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.example.library.Helper;

/** A manager that needs a library its jar leaves out ({@code org.example.library}). */
public class NeedsALibrary extends PlainCheckpointFileManager {
  public NeedsALibrary(Path path, Configuration conf) throws IOException {
    super(path, conf);
  }

  public NeedsALibrary(Path path, Configuration conf, Helper helper) throws IOException {
    super(path, conf);
  }
}
