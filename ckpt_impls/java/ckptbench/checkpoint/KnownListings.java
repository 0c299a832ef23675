package ckptbench.checkpoint;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * What this JVM knows of the directories (key prefixes) a manager listed in full, kept up to date
 * by this JVM's own writes and deletes there, so an existence check can be answered without a
 * request. Shared by every manager of one store and bucket in the JVM (Spark makes one per
 * metadata log and per state store provider), so one manager's write is seen by the others.
 *
 * <p>It can only be wrong about what another JVM did since the listing. Spark asks
 * {@code exists} before writing a batch file ({@code HDFSMetadataLog.addNewBatchByStream}):
 * there a wrong "absent" is caught by the create-only PUT that follows, whose 412 Spark reports
 * as another query writing the checkpoint, the truth. It also asks before reading one
 * ({@code applyFnToBatchByStream}), where a wrong answer can only come from another writer of
 * the same checkpoint, which the create-only PUT of its next batch file stops.
 *
 * <p>A listing is installed only if no write or delete in that directory happened while it was
 * taken (a per-directory change count), so a list racing this JVM's own write never hides it.
 * A write whose outcome is unknown (an I/O error) forgets its directory's listing.
 */
final class KnownListings {

  /** A directory's children: every name in it, and those with anything under them. */
  private record Listing(Set<String> names, Set<String> directories) {
  }

  /** Per store and bucket scope, then directory key (no trailing slash): what is in it. */
  private static final Map<String, Map<String, Listing>> LISTINGS = new ConcurrentHashMap<>();
  private static final Map<String, Map<String, AtomicLong>> CHANGES = new ConcurrentHashMap<>();

  private final Map<String, Listing> listings;
  private final Map<String, AtomicLong> changes;

  KnownListings(String scope) {
    this.listings = LISTINGS.computeIfAbsent(scope, s -> new ConcurrentHashMap<>());
    this.changes = CHANGES.computeIfAbsent(scope, s -> new ConcurrentHashMap<>());
  }

  private static String parent(String key) {
    int slash = key.lastIndexOf('/');
    return slash < 0 ? "" : key.substring(0, slash);
  }

  private static String child(String key) {
    return key.substring(key.lastIndexOf('/') + 1);
  }

  private AtomicLong changesOf(String dir) {
    return changes.computeIfAbsent(dir, d -> new AtomicLong());
  }

  /** Whether {@code key} (a file or a directory) exists, or null when its directory is not known. */
  Boolean exists(String key) {
    Listing listing = listings.get(parent(key));
    return listing == null ? null : listing.names().contains(child(key));
  }

  /**
   * Whether {@code key} is known to be a file with nothing under it (its directory is known, it
   * is there, and nothing was listed or written under {@code key/}); false when not known so.
   */
  boolean isLoneFile(String key) {
    Listing listing = listings.get(parent(key));
    return listing != null && listing.names().contains(child(key))
        && !listing.directories().contains(child(key));
  }

  /** Call before listing {@code dir}; pass the result to {@link #listed}. */
  long beforeListing(String dir) {
    return changesOf(dir).get();
  }

  /**
   * {@code dir} holds exactly {@code names} (files and subdirectories), of which
   * {@code directories} have anything under them, as listed after {@code stamp}.
   */
  void listed(String dir, Set<String> names, Set<String> directories, long stamp) {
    Listing known = new Listing(ConcurrentHashMap.newKeySet(), ConcurrentHashMap.newKeySet());
    known.names().addAll(names);
    known.directories().addAll(directories);
    AtomicLong count = changesOf(dir);
    synchronized (count) {
      if (count.get() == stamp) {
        listings.put(dir, known);
      }
    }
  }

  /** The object {@code key} now exists (written, or refused as existing), and so does each directory above it. */
  void created(String key) {
    String name = child(key);
    changed(parent(key), listing -> listing.names().add(name));
    createdDirectory(parent(key));
  }

  /** The directory {@code key} (its marker, or something under it) now exists, and so does each one above it. */
  void createdDirectory(String key) {
    for (String k = key; !k.isEmpty(); k = parent(k)) {
      String name = child(k);
      changed(parent(k), listing -> {
        listing.names().add(name);
        listing.directories().add(name);
      });
    }
  }

  /**
   * {@code key} and everything under it are gone. Its directory keeps its other entries; were it
   * left empty and unmarked it would vanish from its own parent, which still lists it: a
   * harmless "exists" for an empty directory.
   */
  void deleted(String key) {
    String name = child(key);
    changed(parent(key), listing -> {
      listing.names().remove(name);
      listing.directories().remove(name);
    });
    forgetUnder(key);
  }

  /** A write or delete of {@code key} may or may not have happened: its directory, and anything listed under it, is no longer known. */
  void unsure(String key) {
    String dir = parent(key);
    changed(dir, listing -> listings.remove(dir));
    forgetUnder(key);
  }

  /** Counts a change in {@code dir}, so that a listing taken meanwhile is not installed, and applies {@code edit} to its known names, if any. */
  private void changed(String dir, Consumer<Listing> edit) {
    AtomicLong count = changesOf(dir);
    synchronized (count) {
      count.incrementAndGet();
      Listing listing = listings.get(dir);
      if (listing != null) {
        edit.accept(listing);
      }
    }
  }

  /** Forgets the listings of {@code key} as a directory and of every directory under it. */
  private void forgetUnder(String key) {
    listings.keySet().removeIf(d -> d.equals(key) || d.startsWith(key + "/"));
  }
}
