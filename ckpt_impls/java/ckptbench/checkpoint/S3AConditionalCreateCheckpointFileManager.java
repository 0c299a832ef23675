package ckptbench.checkpoint;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.hadoop.fs.s3a.RemoteFileChangedException;

/**
 * Direct writes made create-only by the store, through S3A's own conditional create
 * (HADOOP-19256, hadoop-aws 3.4.2+): {@link DirectWriteCheckpointFileManager} with the
 * create-only write asked of S3A as {@code createFile(path).must("fs.option.create.conditional
 * .overwrite", true)}, which sends {@code If-None-Match: *} on the PUT (and on
 * CompleteMultipartUpload for a file written in parts) and no HEAD or LIST before it.
 *
 * <p>Guarantees:
 * <ul>
 *   <li>{@code close} publishes the whole file at once, as {@code direct}; {@code cancel} always
 *       aborts the upload (S3A's stream is {@code Abortable}), so nothing becomes visible. It never
 *       closes-then-deletes: a delete after a refused create would remove the other writer's file.</li>
 *   <li>{@code overwriteIfPossible=false} is enforced by the store in the same request: its 412,
 *       which S3A raises from {@code close} as {@code RemoteFileChangedException}, becomes
 *       {@code FileAlreadyExistsException} and the old content stays. Two writers can never both
 *       create one file, on a store that honours the header ({@code ckptbench probe} checks one;
 *       this manager does not probe it).</li>
 *   <li>{@code overwriteIfPossible=true} is S3A's plain overwrite.</li>
 *   <li>A PUT whose answer was lost (the store applied it, the connection broke) and that the SDK
 *       retries meets its own write: 412, so {@code close} fails with
 *       {@code FileAlreadyExistsException} although the file is whole and holds the bytes written.
 *       Spark stops the query as if another query wrote the checkpoint; a restart reads the file.
 *       (The {@code conditional} strategy tells its own retried write apart; S3A offers no way to.)
 *       A 409 (AWS: a conflicting conditional write in progress) fails {@code close} with S3A's
 *       {@code AWSBadRequestException}, not retried.</li>
 *   <li>{@code list}, {@code mkdirs}, {@code open}, {@code exists} and {@code delete} are
 *       {@code direct}'s, through S3A.</li>
 *   <li>At construction it refuses, with {@code UnsupportedFileSystemException} in one line, a
 *       filesystem without the path capability {@code fs.option.create.conditional.overwrite}:
 *       S3A before 3.4.2 (Spark 3.5's hadoop-aws 3.3.4 rejects the option), or S3A with
 *       {@code fs.s3a.create.conditional.enabled=false}. Without it a create-only write would be
 *       a check and a write, which two writers can both pass.</li>
 * </ul>
 */
public class S3AConditionalCreateCheckpointFileManager extends DirectWriteCheckpointFileManager {

  /** The create option (Hadoop's {@code Options.CreateFileOptionKeys}), also a path capability. */
  static final String CONDITIONAL_OVERWRITE = "fs.option.create.conditional.overwrite";
  /** S3A's switch of the feature; true unless set. */
  static final String CONDITIONAL_ENABLED = "fs.s3a.create.conditional.enabled";

  public S3AConditionalCreateCheckpointFileManager(Path path, Configuration conf) throws IOException {
    super(path, conf, true);
    String missing = null;
    if (!fs.hasPathCapability(path, CONDITIONAL_OVERWRITE)) {
      missing = fs.getConf().getBoolean(CONDITIONAL_ENABLED, true)
          ? "conditional create (" + CONDITIONAL_OVERWRITE + ", S3A in hadoop-aws 3.4.2+)"
          : "conditional create, switched off by " + CONDITIONAL_ENABLED + "=false (unset it)";
    } else if (!fs.hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM)) {
      missing = "abortable output streams (" + CommonPathCapabilities.ABORTABLE_STREAM + ")";
    }
    if (missing != null) {
      throw new UnsupportedFileSystemException("Strategy 's3a-conditional' needs " + missing
          + ", which " + fs.getClass().getName() + " for " + fs.getUri() + " does not offer; use strategy"
          + " 'conditional' (If-None-Match: * on S3A's client) or 'direct' instead");
    }
  }

  @Override
  protected FSDataOutputStream openForWrite(Path path, boolean overwriteIfPossible) throws IOException {
    if (overwriteIfPossible) {
      return fs.create(path, true);
    }
    FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path);
    builder.must(CONDITIONAL_OVERWRITE, true);
    return builder.build();
  }

  /** The store's 412 (S3A's {@code RemoteFileChangedException}) is another writer's file: {@code FileAlreadyExistsException}. */
  @Override
  protected IOException closeFailed(Path path, IOException failure) {
    if (!(failure instanceof RemoteFileChangedException)) {
      return failure;
    }
    FileAlreadyExistsException exists = new FileAlreadyExistsException(
        path + " already exists: the store refused the create-only write (If-None-Match: *)");
    exists.initCause(failure);
    return exists;
  }
}
