package ckptbench.checkpoint;

import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * The files of Spark's RocksDB state store that Spark also reaches with the Hadoop
 * {@code FileSystem}, not only through the {@code CheckpointFileManager}. From
 * {@code RocksDBFileManager} of Spark 3.5.9 (its source) and 4.3.0 (its bytecode), for a state
 * store directory {@code <checkpoint>/state/<operator>/<partition>[/<store name>]}:
 * <ul>
 *   <li>{@code <version>.zip} (4.x with checkpoint format 2: {@code <version>_<id>.zip}), the
 *       version's RocksDB metadata: written with the manager's {@code createAtomic}
 *       (overwrite allowed), listed, probed and deleted through the manager, but unzipped with
 *       {@code FileSystem.open} ({@code Utils.unzipFilesFromFile}) when a task loads that version
 *       and when maintenance resolves old versions' files; 4.x reads it through the manager only
 *       with checkpoint format 2.</li>
 *   <li>{@code SSTs/} and {@code logs/} below it: RocksDB's immutable files, uploaded with
 *       {@code FileSystem.copyFromLocalFile} and fetched with {@code copyToLocalFile} under names
 *       made unique per upload; maintenance probes and lists these directories ({@code exists},
 *       {@code list}) and deletes old files through the manager.</li>
 * </ul>
 * Everything else of a state store (the RocksDB store's {@code .changelog} files, the
 * HDFS-backed store's {@code .delta} and {@code .snapshot}, Spark 4.1+'s {@code .crc} companions,
 * schema and metadata files) goes through the manager both ways. A path counts as a state file
 * when a folder named {@code state} is above it, as in {@code infra/s3ops.py}'s classification of
 * requests.
 */
final class RocksDBPaths {

  /** {@code RocksDBImmutableFile.SST_FILES_DFS_SUBDIR} and {@code LOG_FILES_DFS_SUBDIR}. */
  private static final Set<String> FILESYSTEM_DIRS = Set.of("SSTs", "logs");

  private RocksDBPaths() {}

  /** The key's folders and name below its first {@code state} folder; empty when there is none. */
  private static List<String> belowState(String key) {
    List<String> parts = Arrays.asList(key.split("/"));
    int state = parts.indexOf("state");
    return state < 0 ? List.of() : parts.subList(state + 1, parts.size());
  }

  /** A RocksDB checkpoint zip: written through the manager, read back with the FileSystem. */
  static boolean isCheckpointZip(String key) {
    List<String> below = belowState(key);
    return below.size() >= 3 && below.get(below.size() - 1).endsWith(".zip");
  }

  /** RocksDB's SST or log folder, or a file in one: moved with the FileSystem alone. */
  static boolean isFileSystemOnly(String key) {
    return belowState(key).stream().anyMatch(FILESYSTEM_DIRS::contains);
  }
}
