package ckptbench.checkpoint;

import java.io.IOException;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;


/**
 * The manifest of one directory: which files and subdirectories it holds and where each file's
 * bytes are, kept under {@code <dir>/_manifest/} (for the bucket's root: {@code _manifest/}):
 * <ul>
 *   <li>{@code r/<seq>}: record {@code seq} (1, 2, ...), one change such as "file f is now staged
 *       object s" or "file f now holds these bytes" (a small file, inline). Created with {@code If-None-Match: *}, so each number is taken exactly once
 *       and the records are a single history every writer agrees on.</li>
 *   <li>{@code c/<k>}: compact {@code k} (1, 2, ...): the live view after some record, plus the
 *       garbage still waiting for its delay. Also created with {@code If-None-Match: *}.</li>
 *   <li>{@code hint}: the number of the latest compact as last written; only a starting point.</li>
 *   <li>{@code s/<uuid>}: staged objects, the bytes of files too large to go inline; a key is
 *       never written twice.</li>
 * </ul>
 * Numbers are zero-padded to 20 digits; everything but staged objects is UTF-8 text, one item per
 * line, names URL-encoded, inline bytes in Base64.
 *
 * <p>Reading never LISTs: a view is the compact the hint leads to (then any newer compact, probed
 * by number) and the records after it, fetched by number until the first 404. A 404 proves the
 * end of the history only if that record was never removed, and records are removed only
 * {@code cleanupDelayMs} after a compact covering them exists. So a view remembers since when it
 * is known to be current ({@code trustedSince}): following records from it is sound for half the
 * delay; after that it is rebuilt from the hint, and a read that still ends past the delay fails
 * rather than trust its 404. This assumes no single request stalls for more than half the delay
 * and that clocks agree to well within it (as Spark's own file-sink log cleanup does).
 *
 * <p>Every {@code compactInterval} records the writer that published the last of them writes the
 * next compact: the live entries plus garbage generations (records and compacts it supersedes,
 * staged objects replaced or removed since the previous compact), each removable after the delay.
 * Before writing it, it deletes every generation whose delay has passed and staged objects no
 * record references that are older than the delay (a crash between staging and publishing; the
 * only LIST, used for garbage alone, and sent at most once a delay: the compact records when, so
 * a restarted writer knows too). A compact holds only the live view and the garbage of the
 * last delay, so neither its size nor compaction time grows with history. Each step is safe to
 * crash in: deletions are redone by the next compaction, a compact whose hint was not written is
 * found by probing and the hint repaired by the next load, an overdue compaction is done then.
 *
 * <p>Thread-safe: every method holds this object's lock, network round trips included.
 */
final class DirManifest {

  /** The reserved name of the manifest's folder in every directory. */
  static final String FOLDER = "_manifest";

  private static final String RECORD_MAGIC = "ckptbench-manifest-record 1";
  private static final String COMPACT_MAGIC = "ckptbench-manifest-compact 1";
  /** Ends a file entry whose bytes are at the file's own key rather than in a staged object. */
  private static final String OWN_KEY = "key";
  /** Starts the last field of a file entry that holds the file's bytes (Base64). */
  private static final String INLINE = "inline:";

  /** Settings from the Hadoop configuration, shared by every manifest of one manager. */
  static final class Settings {
    static final long MIN_CLEANUP_DELAY_MS = 1000;
    static final int MAX_INLINE_BYTES = 65536;

    final int compactInterval;
    final long cleanupDelayMs;
    final int inlineMaxBytes;
    final String haltAt;

    Settings(int compactInterval, long cleanupDelayMs, int inlineMaxBytes, String haltAt) {
      if (compactInterval < 1) {
        throw new IllegalArgumentException("compactInterval must be at least 1, got " + compactInterval);
      }
      if (cleanupDelayMs < MIN_CLEANUP_DELAY_MS) {
        // Views are trusted for half the delay: shorter would make nearly every read a reload.
        throw new IllegalArgumentException("cleanupDelayMs must be at least " + MIN_CLEANUP_DELAY_MS
            + ", got " + cleanupDelayMs);
      }
      if (inlineMaxBytes < 0 || inlineMaxBytes > MAX_INLINE_BYTES) {
        // Every compact carries the live inline files: bounded, it stays a small object.
        throw new IllegalArgumentException("inlineMaxBytes must be between 0 and " + MAX_INLINE_BYTES
            + ", got " + inlineMaxBytes);
      }
      this.compactInterval = compactInterval;
      this.cleanupDelayMs = cleanupDelayMs;
      this.inlineMaxBytes = inlineMaxBytes;
      this.haltAt = haltAt;
    }

    /** Fault injection: kills the JVM at the named step, as a crash there would. */
    void reached(String point) {
      if (point.equals(haltAt)) {
        System.err.println("ckptbench.manifest.haltAt=" + point + ": halting the JVM");
        System.err.flush();
        Runtime.getRuntime().halt(ManifestCheckpointFileManager.HALT_STATUS);
      }
    }
  }

  /** Where a file's bytes are (see {@link ManifestCheckpointFileManager} for which goes where). */
  enum Where {
    /** In staged object {@code s/<id>}, removed by cleanup once superseded. */
    STAGED,
    /** In the record itself (and the compacts after it): small files. */
    INLINE,
    /** At the file's own key, where the FileSystem reads it too. */
    OWN_KEY
  }

  /**
   * A live entry: a file or a subdirectory ({@code where == null}). {@code id} names a staged
   * file's staged object, and for the others the write, so that every write's record is unique.
   */
  static final class Entry {
    final String name;
    final Where where;
    final String id;
    final byte[] inline; // the bytes of an INLINE file, else null
    final long length;
    final long modifiedMs;

    private Entry(String name, Where where, String id, byte[] inline, long length, long modifiedMs) {
      this.name = name;
      this.where = where;
      this.id = id;
      this.inline = inline;
      this.length = length;
      this.modifiedMs = modifiedMs;
    }

    static Entry directory(String name, long modifiedMs) {
      return new Entry(name, null, null, null, 0, modifiedMs);
    }

    boolean isDirectory() {
      return where == null;
    }

    boolean isStaged() {
      return where == Where.STAGED;
    }
  }

  /** One change a record carries. */
  static final class Op {
    final String kind; // put, dir, del or clear
    final Entry entry; // for put and dir
    final String name; // null for clear

    private Op(String kind, Entry entry, String name) {
      this.kind = kind;
      this.entry = entry;
      this.name = name;
    }

    /** A file whose bytes are in staged object {@code staged}. */
    static Op putStaged(String name, String staged, long length, long modifiedMs) {
      return new Op("put", new Entry(name, Where.STAGED, staged, null, length, modifiedMs), name);
    }

    /** A file whose bytes go in the record; {@code writeId} tells this write's record apart. */
    static Op putInline(String name, String writeId, byte[] bytes, long modifiedMs) {
      return new Op("put", new Entry(name, Where.INLINE, writeId, bytes, bytes.length, modifiedMs), name);
    }

    /** A file whose bytes were PUT at its own key; {@code writeId} tells this write's record apart. */
    static Op putAtOwnKey(String name, String writeId, long length, long modifiedMs) {
      return new Op("put", new Entry(name, Where.OWN_KEY, writeId, null, length, modifiedMs), name);
    }

    static Op addDirectory(String name, long modifiedMs) {
      return new Op("dir", Entry.directory(name, modifiedMs), name);
    }

    static Op remove(String name) {
      return new Op("del", null, name);
    }

    static Op clear() {
      return new Op("clear", null, null);
    }
  }

  /** What to record, decided on the exact view the record will follow. */
  interface Plan {
    /** The changes to record; none to record nothing. May throw to refuse (e.g. the file exists). */
    List<Op> ops(DirManifest view) throws IOException;
  }

  /** Objects a compact superseded; removable once {@code notBeforeMs} has passed. */
  private static final class Garbage {
    final long notBeforeMs;
    final long recordsFrom; // records [from, to]; empty when from > to
    final long recordsTo;
    final long compact; // 0: none
    final List<String> staged;

    Garbage(long notBeforeMs, long recordsFrom, long recordsTo, long compact, List<String> staged) {
      this.notBeforeMs = notBeforeMs;
      this.recordsFrom = recordsFrom;
      this.recordsTo = recordsTo;
      this.compact = compact;
      this.staged = staged;
    }
  }

  /** A staged object a record replaced or removed, with that record's number. */
  private static final class Dropped {
    final long seq;
    final String staged;

    Dropped(long seq, String staged) {
      this.seq = seq;
      this.staged = staged;
    }
  }

  private static final class Compact {
    final long number;
    final long through;
    final TreeMap<String, Entry> entries;
    final List<Garbage> garbage;
    /** When a compactor last LISTed the staged objects for orphans (epoch ms; 0: never). */
    final long orphansListedMs;

    Compact(long number, long through, TreeMap<String, Entry> entries, List<Garbage> garbage,
        long orphansListedMs) {
      this.number = number;
      this.through = through;
      this.entries = entries;
      this.garbage = garbage;
      this.orphansListedMs = orphansListedMs;
    }
  }

  private final S3ObjectStore store;
  private final Settings settings;
  private final String prefix;

  private boolean loaded;
  private final TreeMap<String, Entry> entries = new TreeMap<>();
  /** The last record applied to {@link #entries}. */
  private long lastSeq;
  private long compactNumber;
  private long compactThrough;
  private List<Garbage> garbage = new ArrayList<>();
  private long orphansListedMs;
  private final List<Dropped> droppedSinceCompact = new ArrayList<>();
  /** System.nanoTime() when record lastSeq + 1 was known not to have been removed. */
  private long trustedSince;

  DirManifest(S3ObjectStore store, Settings settings, String dirKey) {
    this.store = store;
    this.settings = settings;
    this.prefix = (dirKey.isEmpty() ? "" : dirKey + "/") + FOLDER + "/";
  }

  String stagedKey(String staged) {
    return prefix + "s/" + staged;
  }

  // ---- reading ----------------------------------------------------------------------------------

  /** Brings the view up to date with the store. */
  synchronized void refresh() throws IOException {
    if (stale()) {
      load();
    } else {
      readNewRecords();
    }
  }

  /**
   * Loads the view only if it is not loaded or no longer trusted; otherwise sends nothing and the
   * view stays as this writer last saw it (its own records included, another writer's since not).
   */
  synchronized void loadIfStale() throws IOException {
    if (stale()) {
      load();
    }
  }

  /** The entry named {@code name} in the view as it is (call {@link #refresh} first). */
  synchronized Entry get(String name) {
    return entries.get(name);
  }

  synchronized List<Entry> entries() {
    return new ArrayList<>(entries.values());
  }

  synchronized boolean isEmpty() {
    return entries.isEmpty();
  }

  /** Unloaded, or trusted for too long to follow records from: a removal could be unseen. */
  private boolean stale() {
    return !loaded
        || System.nanoTime() - trustedSince > TimeUnit.MILLISECONDS.toNanos(settings.cleanupDelayMs / 2);
  }

  /** Rebuilds the view from the hint, the compacts after it and the records after those. */
  private void load() throws IOException {
    byte[] hintBytes = store.getIfExists(prefix + "hint");
    long hint = hintBytes == null ? 0 : parseLong(new String(hintBytes, StandardCharsets.UTF_8).trim());
    Compact latest = null;
    if (hint > 0) {
      latest = readCompact(hint);
      if (latest == null) {
        // A hinted compact is removed only long after a newer one's compactor rewrote the hint.
        throw new IOException("Manifest " + where() + " is damaged: its hint names compact " + hint
            + ", which is missing (was the directory deleted while in use?)");
      }
    }
    long probedAt;
    while (true) {
      probedAt = System.nanoTime();
      Compact next = readCompact((latest == null ? 0 : latest.number) + 1);
      if (next == null) {
        break;
      }
      latest = next;
    }
    entries.clear();
    droppedSinceCompact.clear();
    if (latest == null) {
      lastSeq = compactNumber = compactThrough = orphansListedMs = 0;
      garbage = new ArrayList<>();
    } else {
      entries.putAll(latest.entries);
      lastSeq = compactThrough = latest.through;
      compactNumber = latest.number;
      garbage = latest.garbage;
      orphansListedMs = latest.orphansListedMs;
    }
    // No compact after `latest` existed at probedAt, so no record after it can have been removed
    // before probedAt + delay.
    trustedSince = probedAt;
    loaded = true;
    readNewRecords();
    if (compactNumber > hint) {
      // A compaction crashed before its hint, or raced with our read: repair the hint.
      store.put(prefix + "hint", Long.toString(compactNumber).getBytes(StandardCharsets.UTF_8), false);
    }
    if (lastSeq - compactThrough >= settings.compactInterval) {
      compact(); // overdue: its writer crashed before compacting
    }
  }

  /** Applies the records after lastSeq, up to the first missing one. */
  private void readNewRecords() throws IOException {
    while (true) {
      long sentAt = System.nanoTime();
      byte[] bytes = store.getIfExists(recordKey(lastSeq + 1));
      if (bytes != null) {
        apply(lastSeq + 1, parseRecord(lastSeq + 1, bytes));
        continue;
      }
      if (sentAt - trustedSince > TimeUnit.MILLISECONDS.toNanos(settings.cleanupDelayMs)) {
        throw new IOException("Reading manifest " + where() + " took longer than the cleanup delay ("
            + settings.cleanupDelayMs + " ms), so its end cannot be told from a removed record;"
            + " raise ckptbench.manifest.cleanupDelayMs");
      }
      // Records after lastSeq + 1 are written after it exists, so none is removed before
      // sentAt + delay.
      trustedSince = sentAt;
      return;
    }
  }

  // ---- writing ----------------------------------------------------------------------------------

  /**
   * Records the changes {@code plan} decides on, as the next record after the view it saw. If
   * another writer took that number, catches up and asks {@code plan} again, so the decision is
   * always made on exactly the history the record extends. Compacts when due.
   */
  synchronized void publish(Plan plan) throws IOException {
    if (stale()) {
      load();
    }
    while (true) {
      List<Op> ops = plan.ops(this);
      if (ops.isEmpty()) {
        return;
      }
      long seq = lastSeq + 1;
      byte[] record = encodeRecord(seq, ops);
      long sentAt = System.nanoTime();
      try {
        store.put(recordKey(seq), record, true);
      } catch (S3ObjectStore.KeyExistsException taken) {
        // Another writer's record, as a rule: S3ObjectStore already took a 412 for our own
        // earlier attempt (answer lost, PUT retried) when the store kept the write id. On a store
        // that drops user metadata it cannot; the record's bytes still tell, since a put names a
        // staged key no other write uses, and another writer's identical record is the same
        // change on the same history. The GET is the one catching up would send anyway.
        byte[] existing = store.getIfExists(recordKey(seq));
        if (existing != null) {
          apply(seq, parseRecord(seq, existing));
        }
        refresh();
        if (!Arrays.equals(record, existing)) {
          continue;
        }
        if (lastSeq - compactThrough >= settings.compactInterval) {
          compact();
        }
        return;
      }
      apply(seq, ops);
      // Record seq + 1 can only be written after ours, which did not exist at sentAt.
      trustedSince = sentAt;
      if (lastSeq - compactThrough >= settings.compactInterval) {
        compact();
      }
      return;
    }
  }

  private void apply(long seq, List<Op> ops) {
    for (Op op : ops) {
      switch (op.kind) {
        case "put":
        case "dir":
          drop(seq, entries.put(op.entry.name, op.entry));
          break;
        case "del":
          drop(seq, entries.remove(op.name));
          break;
        default: // clear
          for (Entry e : entries.values()) {
            drop(seq, e);
          }
          entries.clear();
      }
    }
    lastSeq = seq;
  }

  /**
   * A staged file's entry replaced or removed: its staged object becomes garbage. An inline
   * file's bytes go with its records; a file at its own key is not garbage: a later write of
   * the name may already hold that key, so its deleter removes it.
   */
  private void drop(long seq, Entry replaced) {
    if (replaced != null && replaced.isStaged()) {
      droppedSinceCompact.add(new Dropped(seq, replaced.id));
    }
  }

  // ---- compaction and cleanup -------------------------------------------------------------------

  /**
   * Writes compact {@code compactNumber + 1} holding the view through lastSeq, after removing the
   * garbage whose delay has passed. Removal comes first so that a crash before the compact is
   * written leaves the previous compact, which still lists that garbage, in charge.
   */
  private void compact() throws IOException {
    long now = System.currentTimeMillis();
    List<Garbage> keep = new ArrayList<>();
    Set<String> due = new LinkedHashSet<>();
    for (Garbage g : garbage) {
      if (g.notBeforeMs <= now) {
        for (long seq = g.recordsFrom; seq <= g.recordsTo; seq++) {
          due.add(recordKey(seq));
        }
        if (g.compact > 0) {
          due.add(compactKey(g.compact));
        }
        for (String staged : g.staged) {
          due.add(stagedKey(staged));
        }
      } else {
        keep.add(g);
      }
    }
    // Orphans are found by their age, so a LIST more often than once a delay finds nothing due
    // that the next one would not: each is removed within two delays of its staging either way.
    long listed = orphansListedMs;
    if (now - orphansListedMs >= settings.cleanupDelayMs) {
      due.addAll(orphans(now, keep));
      listed = now;
    }
    store.deleteKeys(due);
    settings.reached("beforeCompactWrite");

    List<String> dropped = new ArrayList<>();
    for (Dropped d : droppedSinceCompact) {
      dropped.add(d.staged);
    }
    keep.add(new Garbage(now + settings.cleanupDelayMs, compactThrough + 1, lastSeq, compactNumber, dropped));
    Compact next = new Compact(compactNumber + 1, lastSeq, entries, keep, listed);
    try {
      store.put(compactKey(next.number), encodeCompact(next, now), true);
    } catch (S3ObjectStore.KeyExistsException raced) {
      Compact theirs = readCompact(next.number);
      if (theirs != null) {
        adopt(theirs);
      }
      return;
    }
    settings.reached("afterCompactWrite");
    store.put(prefix + "hint", Long.toString(next.number).getBytes(StandardCharsets.UTF_8), false);
    compactNumber = next.number;
    compactThrough = lastSeq;
    garbage = keep;
    orphansListedMs = listed;
    droppedSinceCompact.clear();
  }

  /** Takes over another writer's compact of the same number. */
  private void adopt(Compact c) {
    if (c.through > lastSeq) {
      entries.clear();
      entries.putAll(c.entries);
      lastSeq = c.through;
      droppedSinceCompact.clear();
    } else {
      droppedSinceCompact.removeIf(d -> d.seq <= c.through);
    }
    compactNumber = c.number;
    compactThrough = c.through;
    garbage = c.garbage;
    orphansListedMs = c.orphansListedMs;
  }

  /**
   * Staged objects older than the delay that neither the view nor pending garbage references:
   * bytes whose writer crashed before publishing them. A LIST that misses some only defers them
   * to the next compaction.
   */
  private List<String> orphans(long now, List<Garbage> pending) throws IOException {
    Set<String> referenced = new HashSet<>();
    for (Entry e : entries.values()) {
      if (e.isStaged()) {
        referenced.add(e.id);
      }
    }
    for (Garbage g : pending) {
      referenced.addAll(g.staged);
    }
    for (Dropped d : droppedSinceCompact) {
      referenced.add(d.staged);
    }
    List<String> out = new ArrayList<>();
    String stagedPrefix = prefix + "s/";
    String token = null;
    do {
      S3ObjectStore.Page page = store.listPage(stagedPrefix, false, 1000, token);
      for (S3ObjectStore.Entry o : page.objects()) {
        String staged = o.key().substring(stagedPrefix.length());
        if (!referenced.contains(staged) && o.lastModifiedMs() < now - settings.cleanupDelayMs) {
          out.add(o.key());
        }
      }
      token = page.next();
    } while (token != null);
    return out;
  }

  // ---- formats ----------------------------------------------------------------------------------

  private String recordKey(long seq) {
    return prefix + "r/" + String.format("%020d", seq);
  }

  private String compactKey(long number) {
    return prefix + "c/" + String.format("%020d", number);
  }

  private String where() {
    return "s3a://" + store.bucket + "/" + prefix;
  }

  private static byte[] encodeRecord(long seq, List<Op> ops) {
    StringBuilder out = new StringBuilder(RECORD_MAGIC).append(' ').append(seq).append('\n');
    for (Op op : ops) {
      switch (op.kind) {
        case "put":
          appendFile(out.append("put "), op.entry);
          break;
        case "dir":
          out.append("dir ").append(encode(op.name)).append(' ').append(op.entry.modifiedMs);
          break;
        case "del":
          out.append("del ").append(encode(op.name));
          break;
        default:
          out.append("clear");
      }
      out.append('\n');
    }
    return out.toString().getBytes(StandardCharsets.UTF_8);
  }

  private List<Op> parseRecord(long seq, byte[] bytes) throws IOException {
    String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n");
    if (!lines[0].equals(RECORD_MAGIC + " " + seq)) {
      throw corrupt(recordKey(seq), lines[0]);
    }
    List<Op> ops = new ArrayList<>();
    for (int i = 1; i < lines.length; i++) {
      String[] f = lines[i].split(" ");
      switch (f[0]) {
        case "put":
          Entry file = parseFile(f);
          ops.add(new Op("put", file, file.name));
          break;
        case "dir":
          ops.add(Op.addDirectory(decode(f[1]), parseLong(f[2])));
          break;
        case "del":
          ops.add(Op.remove(decode(f[1])));
          break;
        case "clear":
          ops.add(Op.clear());
          break;
        default:
          throw corrupt(recordKey(seq), lines[i]);
      }
    }
    return ops;
  }

  private static byte[] encodeCompact(Compact c, long createdMs) {
    StringBuilder out = new StringBuilder(COMPACT_MAGIC).append(' ').append(c.number)
        .append(" through ").append(c.through).append(" created ").append(createdMs)
        .append(" orphans-listed ").append(c.orphansListedMs).append('\n');
    for (Entry e : c.entries.values()) {
      if (e.isDirectory()) {
        out.append("dir ").append(encode(e.name)).append(' ').append(e.modifiedMs);
      } else {
        appendFile(out.append("file "), e);
      }
      out.append('\n');
    }
    for (Garbage g : c.garbage) {
      out.append("garbage ").append(g.notBeforeMs).append(' ').append(g.recordsFrom).append(' ')
          .append(g.recordsTo).append(' ').append(g.compact);
      for (String staged : g.staged) {
        out.append(' ').append(staged);
      }
      out.append('\n');
    }
    return out.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** Compact {@code number}, or null when it does not exist. */
  private Compact readCompact(long number) throws IOException {
    byte[] bytes = store.getIfExists(compactKey(number));
    if (bytes == null) {
      return null;
    }
    String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n");
    String[] head = lines[0].split(" ");
    if (!lines[0].startsWith(COMPACT_MAGIC + " " + number + " through ") || head.length != 9
        || !head[7].equals("orphans-listed")) {
      throw corrupt(compactKey(number), lines[0]);
    }
    TreeMap<String, Entry> live = new TreeMap<>();
    List<Garbage> pending = new ArrayList<>();
    for (int i = 1; i < lines.length; i++) {
      String[] f = lines[i].split(" ");
      switch (f[0]) {
        case "file":
          Entry file = parseFile(f);
          live.put(file.name, file);
          break;
        case "dir":
          live.put(decode(f[1]), Entry.directory(decode(f[1]), parseLong(f[2])));
          break;
        case "garbage":
          pending.add(new Garbage(parseLong(f[1]), parseLong(f[2]), parseLong(f[3]), parseLong(f[4]),
              new ArrayList<>(List.of(f).subList(5, f.length))));
          break;
        default:
          throw corrupt(compactKey(number), lines[i]);
      }
    }
    return new Compact(number, parseLong(head[4]), live, pending, parseLong(head[8]));
  }

  /**
   * {@code <name> <id> <length> <modifiedMs>}, then for a file not staged where its bytes are:
   * {@code inline:<base64 of the bytes>} or {@code key} (at its own key).
   */
  private static void appendFile(StringBuilder out, Entry e) {
    out.append(encode(e.name)).append(' ').append(e.id).append(' ').append(e.length)
        .append(' ').append(e.modifiedMs);
    if (e.where == Where.INLINE) {
      out.append(' ').append(INLINE).append(Base64.getEncoder().encodeToString(e.inline));
    } else if (e.where == Where.OWN_KEY) {
      out.append(' ').append(OWN_KEY);
    }
  }

  /** A {@code put} or {@code file} line's fields, as {@link #appendFile} wrote them after the kind. */
  private static Entry parseFile(String[] f) throws IOException {
    String name = decode(f[1]);
    if (f.length == 5) {
      return new Entry(name, Where.STAGED, f[2], null, parseLong(f[3]), parseLong(f[4]));
    }
    if (f.length == 6 && f[5].equals(OWN_KEY)) {
      return new Entry(name, Where.OWN_KEY, f[2], null, parseLong(f[3]), parseLong(f[4]));
    }
    if (f.length == 6 && f[5].startsWith(INLINE)) {
      byte[] bytes;
      try {
        bytes = Base64.getDecoder().decode(f[5].substring(INLINE.length()));
      } catch (IllegalArgumentException e) {
        throw new IOException("Malformed inline bytes in a manifest entry for " + name, e);
      }
      if (bytes.length != parseLong(f[3])) {
        throw new IOException("Manifest entry for " + name + " holds " + bytes.length + " bytes, not " + f[3]);
      }
      return new Entry(name, Where.INLINE, f[2], bytes, bytes.length, parseLong(f[4]));
    }
    throw new IOException("Malformed file entry in a manifest: " + String.join(" ", f));
  }

  private static String encode(String name) {
    return URLEncoder.encode(name, StandardCharsets.UTF_8);
  }

  private static String decode(String name) {
    return URLDecoder.decode(name, StandardCharsets.UTF_8);
  }

  private static long parseLong(String s) throws IOException {
    try {
      return Long.parseLong(s);
    } catch (NumberFormatException e) {
      throw new IOException("Malformed number in a manifest: " + s, e);
    }
  }

  private IOException corrupt(String key, String line) {
    return new IOException("Manifest object s3a://" + store.bucket + "/" + key
        + " is not in the expected format: " + line);
  }
}
