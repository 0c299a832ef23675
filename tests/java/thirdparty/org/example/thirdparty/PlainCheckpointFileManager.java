package org.example.thirdparty;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * A third party's manager, as the tests build one from source in a package and jar of its own: it
 * writes the final path through the Hadoop FileSystem and publishes on close, with no conflict
 * detection beyond the FileSystem's own existence check. Its nested classes are the same manager
 * broken, each in one way published managers have broken; the tests show the contract and the labs
 * catching each.
 */
public class PlainCheckpointFileManager implements CheckpointFileManager {
  protected final FileSystem fs;
  private final Path root;

  /** Rethrows an IOException unwrapped: Spark catches FileAlreadyExistsException and FileNotFoundException by type. */
  @SuppressWarnings("unchecked")
  static <T extends Throwable> RuntimeException sneaky(Throwable e) throws T {
    throw (T) e;
  }

  public PlainCheckpointFileManager(Path path, Configuration conf) throws IOException {
    this.root = path;
    this.fs = path.getFileSystem(conf);
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    try {
      return new Plain(fs, path, fs.create(path, overwriteIfPossible));
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      return fs.open(path);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    try {
      return fs.listStatus(path, filter);
    } catch (FileNotFoundException e) {
      return new FileStatus[0];
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public void mkdirs(Path path) {
    try {
      fs.mkdirs(path);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean exists(Path path) {
    try {
      return fs.exists(path);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public void delete(Path path) {
    try {
      fs.delete(path, true);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean isLocal() {
    return false;
  }

  @Override
  public Path createCheckpointDirectory() {
    Path qualified = fs.makeQualified(root);
    mkdirs(qualified);
    return qualified;
  }

  /** Publishes on close; cancel aborts the upload (where the stream cannot, closes and deletes). */
  static final class Plain extends CancellableFSDataOutputStream {
    private final FileSystem fs;
    private final Path path;
    private final FSDataOutputStream out;

    Plain(FileSystem fs, Path path, FSDataOutputStream out) {
      super(out);
      this.fs = fs;
      this.path = path;
      this.out = out;
    }

    @Override
    public void cancel() {
      if (out.hasCapability(StreamCapabilities.ABORTABLE_STREAM)) {
        out.abort(); // nothing is published, an overwritten file keeps its content
        return;
      }
      try {
        out.close();
        fs.delete(path, false);
      } catch (IOException e) {
        throw sneaky(e);
      }
    }
  }

  /** exists() only for files: a restarted query sees no log directory, so no batches. */
  public static class ExistsOnlyForFiles extends PlainCheckpointFileManager {
    public ExistsOnlyForFiles(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public boolean exists(Path path) {
      try {
        return fs.getFileStatus(path).isFile();
      } catch (FileNotFoundException e) {
        return false;
      } catch (IOException e) {
        throw sneaky(e);
      }
    }
  }

  /** mkdirs() does nothing: an empty directory is never there. */
  public static class MkdirsDoesNothing extends PlainCheckpointFileManager {
    public MkdirsDoesNothing(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public void mkdirs(Path path) {}
  }

  /** list() ignores its filter: Spark's log readers see temp files and other names as batches. */
  public static class ListIgnoresItsFilter extends PlainCheckpointFileManager {
    public ListIgnoresItsFilter(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
      return super.list(path, p -> true);
    }
  }

  /**
   * list() of a directory with a subdirectory throws IllegalArgumentException, as a manager does that
   * makes a Path of a directory marker's empty name.
   */
  public static class ListThrowsOnASubdirectory extends PlainCheckpointFileManager {
    public ListThrowsOnASubdirectory(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
      FileStatus[] found = super.list(path, filter);
      for (FileStatus status : found) {
        if (status.isDirectory()) {
          new Path("");
        }
      }
      return found;
    }
  }

  /** list() of dir/1 also returns dir/10's entries, as a key prefix without its trailing slash does. */
  public static class ListsAPrefix extends PlainCheckpointFileManager {
    public ListsAPrefix(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
      List<FileStatus> out = new ArrayList<>(List.of(super.list(path, filter)));
      for (FileStatus sibling : super.list(path.getParent(), p -> true)) {
        String name = sibling.getPath().getName();
        if (sibling.isDirectory() && name.startsWith(path.getName()) && !name.equals(path.getName())) {
          out.addAll(List.of(super.list(sibling.getPath(), filter)));
        }
      }
      return out.toArray(new FileStatus[0]);
    }
  }

  /** open() of a missing file throws a plain IOException, not FileNotFoundException. */
  public static class MissingIsAnIoError extends PlainCheckpointFileManager {
    public MissingIsAnIoError(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public FSDataInputStream open(Path path) {
      try {
        return fs.open(path);
      } catch (IOException e) {
        throw sneaky(new IOException("cannot read " + path));
      }
    }
  }

  /** A create with overwriteIfPossible=false overwrites an existing file anyway. */
  public static class CreateOverwrites extends PlainCheckpointFileManager {
    public CreateOverwrites(Path path, Configuration conf) throws IOException {
      super(path, conf);
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
      return super.createAtomic(path, true);
    }
  }

  /** Not a manager Spark's factory can build: no (Path, Configuration) constructor. */
  public static class NoConstructor extends PlainCheckpointFileManager {
    public NoConstructor(Configuration conf) throws IOException {
      super(new Path("s3a://nowhere/"), conf);
    }
  }
}
