package org.example.ownclient;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.PositionedReadable;
import org.apache.hadoop.fs.Seekable;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3Configuration;
import software.amazon.awssdk.services.s3.model.CommonPrefix;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * A third party's S3-native manager, as the tests build one from source in a package and jar of its
 * own: an AWS SDK v2 client of its own, configured the way S3A is from S3A's base keys
 * ({@code fs.s3a.endpoint}, {@code fs.s3a.path.style.access}, {@code fs.s3a.endpoint.region}) with
 * the SDK's default credential chain (the JVM's environment), or, with {@code
 * org.example.ownclient.credentials=keys}, from its own keys {@code org.example.ownclient.access.key}
 * and {@code org.example.ownclient.secret.key}. It writes a file as one PUT on
 * close, with {@code If-None-Match: *} unless asked to overwrite, so a second creator of a file gets
 * FileAlreadyExistsException; cancel sends nothing. A directory is a marker object. Each PUT's body
 * is signed whole, and checksums are sent only where S3 requires them: S3-compatible stores refuse
 * the SDK's chunked uploads and trailing checksums (Ceph RGW 16 answers 400). Its
 * nested class is the same manager broken as published managers have broken; the tests show the
 * crash lab catching it.
 */
public class OwnClientCheckpointFileManager implements CheckpointFileManager {
  static final String OPTIONS = "org.example.ownclient.";
  private final Path root;
  private final S3Client s3;

  public OwnClientCheckpointFileManager(Path path, Configuration conf) {
    this.root = path;
    String endpoint = conf.getTrimmed("fs.s3a.endpoint", "");
    var builder = S3Client.builder()
        .credentialsProvider(credentials(conf))
        .region(Region.of(conf.getTrimmed("fs.s3a.endpoint.region", "us-east-1")))
        .forcePathStyle(conf.getBoolean("fs.s3a.path.style.access", false))
        .serviceConfiguration(S3Configuration.builder().chunkedEncodingEnabled(false).build())
        .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
        .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED);
    if (!endpoint.isEmpty()) {
      builder.endpointOverride(URI.create(endpoint.contains("://") ? endpoint : "https://" + endpoint));
    }
    this.s3 = builder.build();
  }

  static AwsCredentialsProvider credentials(Configuration conf) {
    if (conf.getTrimmed(OPTIONS + "credentials", "chain").equals("keys")) {
      return StaticCredentialsProvider.create(AwsBasicCredentials.create(
          conf.getTrimmed(OPTIONS + "access.key", ""), conf.getTrimmed(OPTIONS + "secret.key", "")));
    }
    return DefaultCredentialsProvider.builder().build();
  }

  static String bucket(Path path) {
    return path.toUri().getHost();
  }

  static String key(Path path) {
    String key = path.toUri().getPath();
    return key.startsWith("/") ? key.substring(1) : key;
  }

  /** Called once a file is in the store; the broken variant remembers it. */
  void created(Path path) {}

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    return new OnePut(this, path, overwriteIfPossible);
  }

  void put(Path path, byte[] bytes, boolean overwrite) throws IOException {
    PutObjectRequest.Builder req = PutObjectRequest.builder().bucket(bucket(path)).key(key(path));
    if (!overwrite) {
      req.ifNoneMatch("*");
    }
    try {
      s3.putObject(req.build(), RequestBody.fromBytes(bytes));
    } catch (S3Exception e) {
      if (e.statusCode() == 412) {
        throw new FileAlreadyExistsException(path + " exists");
      }
      throw new IOException("PUT " + path + ": " + e.getMessage(), e);
    }
    created(path);
  }

  /** Rethrows an IOException unwrapped: Spark catches FileNotFoundException by type. */
  @SuppressWarnings("unchecked")
  static <T extends Throwable> RuntimeException sneaky(Throwable e) throws T {
    throw (T) e;
  }

  @Override
  public FSDataInputStream open(Path path) {
    try {
      byte[] bytes = s3.getObjectAsBytes(b -> b.bucket(bucket(path)).key(key(path))).asByteArray();
      return new FSDataInputStream(new Bytes(bytes));
    } catch (NoSuchKeyException e) {
      throw sneaky(new FileNotFoundException(path.toString()));
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    String prefix = key(path).isEmpty() ? "" : key(path) + "/";
    List<FileStatus> found = new ArrayList<>();
    String token = null;
    do {
      ListObjectsV2Request.Builder req = ListObjectsV2Request.builder().bucket(bucket(path)).prefix(prefix)
          .delimiter("/");
      if (token != null) {
        req.continuationToken(token);
      }
      ListObjectsV2Response page = s3.listObjectsV2(req.build());
      for (S3Object o : page.contents()) {
        if (o.key().equals(prefix)) {
          continue; // the directory's own marker
        }
        Path file = new Path(path, o.key().substring(prefix.length()));
        if (filter.accept(file)) {
          found.add(new FileStatus(o.size(), false, 1, 0, o.lastModified().toEpochMilli(), file));
        }
      }
      for (CommonPrefix p : page.commonPrefixes()) {
        String name = p.prefix().substring(prefix.length(), p.prefix().length() - 1);
        Path dir = new Path(path, name);
        if (filter.accept(dir)) {
          found.add(new FileStatus(0, true, 1, 0, 0, dir));
        }
      }
      token = page.isTruncated() ? page.nextContinuationToken() : null;
    } while (token != null);
    return listed(path, found).toArray(new FileStatus[0]);
  }

  /** What {@code list} returns of {@code found} under {@code path}; the broken variant filters it. */
  List<FileStatus> listed(Path path, List<FileStatus> found) {
    return found;
  }

  /** A directory is an empty marker object at its key and a slash, as S3A writes one. */
  @Override
  public void mkdirs(Path path) {
    if (!key(path).isEmpty()) {
      s3.putObject(b -> b.bucket(bucket(path)).key(key(path) + "/"), RequestBody.empty());
    }
  }

  @Override
  public boolean exists(Path path) {
    try {
      s3.headObject(b -> b.bucket(bucket(path)).key(key(path)));
      return true;
    } catch (NoSuchKeyException e) {
      return s3.listObjectsV2(b -> b.bucket(bucket(path)).prefix(key(path) + "/").maxKeys(1)).keyCount() > 0;
    } catch (S3Exception e) {
      if (e.statusCode() == 404) {
        return s3.listObjectsV2(b -> b.bucket(bucket(path)).prefix(key(path) + "/").maxKeys(1)).keyCount() > 0;
      }
      throw e;
    }
  }

  @Override
  public void delete(Path path) {
    s3.deleteObject(b -> b.bucket(bucket(path)).key(key(path)));
  }

  @Override
  public boolean isLocal() {
    return false;
  }

  @Override
  public Path createCheckpointDirectory() {
    return root;
  }

  /** The file in memory until close, then one PUT; cancel drops it. */
  static final class OnePut extends CancellableFSDataOutputStream {
    private final OwnClientCheckpointFileManager manager;
    private final Path path;
    private final boolean overwrite;
    private final ByteArrayOutputStream buffer;
    private boolean done;

    OnePut(OwnClientCheckpointFileManager manager, Path path, boolean overwrite) {
      this(manager, path, overwrite, new ByteArrayOutputStream());
    }

    private OnePut(OwnClientCheckpointFileManager manager, Path path, boolean overwrite, ByteArrayOutputStream buffer) {
      super(buffer);
      this.manager = manager;
      this.path = path;
      this.overwrite = overwrite;
      this.buffer = buffer;
    }

    @Override
    public synchronized void close() throws IOException {
      if (done) {
        return;
      }
      done = true;
      super.close();
      manager.put(path, buffer.toByteArray(), overwrite);
    }

    @Override
    public synchronized void cancel() {
      done = true;
    }
  }

  /** A whole object in memory, seekable as FSDataInputStream needs. */
  static final class Bytes extends ByteArrayInputStream implements Seekable, PositionedReadable {
    Bytes(byte[] bytes) {
      super(bytes);
    }

    @Override
    public synchronized void seek(long position) throws IOException {
      if (position < 0 || position > count) {
        throw new EOFException("cannot seek to " + position + " in " + count + " bytes");
      }
      pos = (int) position;
    }

    @Override
    public synchronized long getPos() {
      return pos;
    }

    @Override
    public boolean seekToNewSource(long target) {
      return false;
    }

    @Override
    public int read(long position, byte[] into, int offset, int length) {
      if (position >= count) {
        return -1;
      }
      int n = (int) Math.min(length, count - position);
      System.arraycopy(buf, (int) position, into, offset, n);
      return n;
    }

    @Override
    public void readFully(long position, byte[] into, int offset, int length) throws IOException {
      if (read(position, into, offset, length) < length) {
        throw new EOFException("read past the end: " + (position + length) + " > " + count);
      }
    }

    @Override
    public void readFully(long position, byte[] into) throws IOException {
      readFully(position, into, 0, into.length);
    }
  }

  /**
   * Lists only the files this instance wrote, as a manager that trusts a listing cache of its own:
   * a restarted query (a new JVM, a new instance) sees an empty log, plans batch 0 again and fails
   * on the file that is there (Spark's CONCURRENT_STREAM_LOG_UPDATE).
   */
  public static class ListsOnlyItsOwn extends OwnClientCheckpointFileManager {
    private final Set<Path> mine = ConcurrentHashMap.newKeySet();

    public ListsOnlyItsOwn(Path path, Configuration conf) {
      super(path, conf);
    }

    @Override
    void created(Path path) {
      mine.add(path);
    }

    @Override
    List<FileStatus> listed(Path path, List<FileStatus> found) {
      return found.stream().filter(s -> s.isDirectory() || mine.contains(s.getPath())).toList();
    }
  }
}
