"""The manifest strategy's own promises, on real stores over HTTP (moto and Ceph RGW).

The generic contract (create/cancel/overwrite/delete) is in test_contract.py; here: crashes
between staging and publishing and between compaction steps (a JVM of its own, halted by the
manager's fault-injection setting), concurrent writers in two JVMs, what compaction and cleanup
leave in the bucket, directories, the requests a checkpoint file costs (through the metering
proxy), and a streaming query that restarts on it. Assertions are on what is stored, never on
timings; the few sleeps only let the cleanup delay pass.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckpt_impls import build, jars, manifest_format
from ckptbench.experiments.contract import java_class
from ckptbench.harness.spark import settings_set
from helpers import CheckpointFiles, bucket_of, own_events

MANAGER = "ckptbench.checkpoint.ManifestCheckpointFileManager"
HALT_STATUS = 86  # ManifestCheckpointFileManager.HALT_STATUS
DRIVER = Path(__file__).parent / "java" / "ManifestDriver.java"
HOUR_MS = 3_600_000


@pytest.fixture(params=("embedded", "ceph"))
def manifest_store(request, suite_stores):
    return suite_stores.get(request.param)


@pytest.fixture
def prefix() -> str:
    return f"manifest-{uuid.uuid4().hex[:8]}"


#: The manager's default (its declared option): files up to this size go inside their record.
INLINE_MAX = int(next(o.default for o in ckpt_impls.get("manifest").options if o.name.endswith(".inlineMaxBytes")))


def settings(interval: int = 10, delay_ms: int = HOUR_MS, halt_at: str | None = None,
             inline_max: int | None = None) -> dict[str, str]:
    """The manager's settings; ``inline_max=0`` stages every file, as files above the limit are."""
    out = {"ckptbench.manifest.compactInterval": str(interval), "ckptbench.manifest.cleanupDelayMs": str(delay_ms)}
    if inline_max is not None:
        out["ckptbench.manifest.inlineMaxBytes"] = str(inline_max)
    if halt_at:
        out["ckptbench.manifest.haltAt"] = halt_at
    return out


class Manifest(CheckpointFiles):
    """The manifest strategy's manager in the Spark JVM for ``s3a://bucket/prefix``, plus a view
    of what it stored, read with boto3."""

    def __init__(self, spark, store, bucket: str, prefix: str, conf: dict[str, str]) -> None:
        super().__init__(spark, "manifest", store, prefix, bucket=bucket, settings=conf)

    # -- what is stored ------------------------------------------------------------------------

    def directory_key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}".rstrip("/")

    def manifest_prefix(self, rel: str) -> str:
        return manifest_format.prefix(self.directory_key(rel))

    def stored(self, rel: str, kind: str) -> dict[str, str]:
        """Keys of one kind ("r" records, "c" compacts, "s" staged) in ``rel``'s manifest, by name."""
        base = self.manifest_prefix(rel) + kind + "/"
        return {k[len(base):]: k for k in self.store.list_keys(self.bucket, base)}

    def numbers(self, rel: str, kind: str) -> list[int]:
        return sorted(int(n) for n in self.stored(rel, kind))

    def get(self, key: str) -> str:
        return self.store.client().get_object(Bucket=self.bucket, Key=key)["Body"].read().decode()

    def hint(self, rel: str) -> int | None:
        try:
            return int(self.get(self.manifest_prefix(rel) + "hint"))
        except self.store.client().exceptions.NoSuchKey:
            return None

    def compact(self, rel: str, number: int) -> manifest_format.Compact:
        return manifest_format.parse_compact(self.get(manifest_format.compact_key(self.directory_key(rel), number)))

    def record(self, rel: str, seq: int) -> list[list[str]]:
        key = manifest_format.record_key(self.directory_key(rel), seq)
        return manifest_format.parse_record(self.get(key), seq)


# -- a JVM of its own, to kill ----------------------------------------------------------------


@pytest.fixture(scope="module")
def driver_classpath(tmp_path_factory) -> str:
    classpath = ":".join([f"{jars.pyspark_jars_dir()}/*", str(jars.MANAGERS_JAR), *map(str, jars.s3a_jars())])
    classes = tmp_path_factory.mktemp("manifest-driver")
    # Written against Spark 4.1+'s CheckpointFileManager, rewritten for the running Spark as the strategies are.
    source = build._for_package([DRIVER], jars.checkpoint_package(), classes / "src")[0]
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath, "-d", str(classes), str(source)],
                   check=True)
    return f"{classes}:{classpath}"


class Driver:
    """ManifestDriver writing ``<dir>/<name_prefix><i>``; Hadoop settings and keys go in on stdin."""

    def __init__(self, classpath: str, spark, directory: str, name_prefix: str, count: int,
                 conf: dict[str, str]) -> None:
        s3a = spark._jsc.hadoopConfiguration().getValByRegex(r"^fs\.s3a\..*")
        # One line per setting: a value Hadoop's defaults spread over lines (S3A 3.4+'s list of
        # credential providers) is a comma-separated list, which Hadoop trims item by item.
        lines = [f"{k}={' '.join(str(s3a[k]).split())}" for k in s3a.keySet()] + [f"{k}={v}" for k, v in conf.items()]
        # A file, so the JVM's logging never blocks it; open for the driver's whole life.
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["java", "-cp", classpath, "ManifestDriver", directory, name_prefix, str(count)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.proc.stdin.write("\n".join(lines) + "\n\n")
        self.proc.stdin.flush()
        ready = self.proc.stdout.readline()
        assert ready == "ready\n", ready + self.stderr()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.close()

    def finish(self) -> tuple[int, list[str]]:
        out = self.proc.stdout.read()
        self.proc.wait(180)
        wrote = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("wrote ")]
        return self.proc.returncode, wrote


def run_driver(classpath, spark, directory, name_prefix, count, conf) -> tuple[int, list[str], str]:
    d = Driver(classpath, spark, directory, name_prefix, count, conf)
    d.go()
    status, wrote = d.finish()
    return status, wrote, d.stderr()


# -- crashes ----------------------------------------------------------------------------------


def test_crash_between_staging_and_publishing(spark, manifest_store, prefix, driver_classpath):
    bucket = bucket_of(manifest_store)
    conf = settings(interval=3, delay_ms=1500, inline_max=0)
    m = Manifest(spark, manifest_store, bucket, prefix, conf)
    m.mkdirs("log")
    m.write("log/0", b"zero")
    m.write("log/1", b"one")

    status, wrote, err = run_driver(driver_classpath, spark, f"s3a://{bucket}/{prefix}/log", "crash", 1,
                                    {**conf, "ckptbench.manifest.haltAt": "afterStage"})
    assert status == HALT_STATUS, err
    assert wrote == []
    assert len(m.stored("log", "s")) == 3, "the crashed write should have staged its bytes"
    assert m.numbers("log", "r") == [1, 2], "the crashed write must not have published a record"

    # Nothing uncommitted is visible, to a new instance as to the old one; commits are intact.
    for view in (Manifest(spark, manifest_store, bucket, prefix, conf), m):
        assert not view.exists("log/crash0")
        assert view.names("log") == {"0", "1"}
        assert view.read("log/0") == b"zero" and view.read("log/1") == b"one"
        with pytest.raises(Py4JJavaError) as raised:
            view.read("log/crash0")
        assert java_class(raised.value) == "java.io.FileNotFoundException"

    # The next writer proceeds, with the record number the crashed one never took.
    m.write("log/crash0", b"again")
    assert m.read("log/crash0") == b"again"
    assert m.record("log", 3)[0][:2] == ["put", "crash0"]

    # Once older than the delay, the orphaned staged object goes with the next compaction.
    time.sleep(1.6)
    for i in (2, 3, 4):
        m.write(f"log/{i}", b"more")
    live = m.compact("log", max(m.numbers("log", "c"))).files
    assert set(live) == {"0", "1", "2", "3", "4", "crash0"}
    assert set(m.stored("log", "s")) == set(live.values())


@pytest.mark.parametrize("point", ["beforeCompactWrite", "afterCompactWrite"])
def test_crash_during_compaction_is_repaired_on_next_open(spark, manifest_store, prefix, driver_classpath, point):
    bucket = bucket_of(manifest_store)
    conf = settings(interval=4)
    status, wrote, err = run_driver(driver_classpath, spark, f"s3a://{bucket}/{prefix}/log", "f", 6,
                                    {**conf, "ckptbench.manifest.haltAt": point})
    assert status == HALT_STATUS, err
    # The 4th record was published, then its writer died compacting (inside close).
    assert wrote == ["f0", "f1", "f2"]
    m = Manifest(spark, manifest_store, bucket, prefix, conf)
    assert m.numbers("log", "r") == [1, 2, 3, 4]
    assert m.numbers("log", "c") == ([] if point == "beforeCompactWrite" else [1])
    assert m.hint("log") is None

    # Opening repairs: the missing compact is written, or the hint is made to name it.
    assert m.names("log") == {"f0", "f1", "f2", "f3"}
    assert m.numbers("log", "c") == [1]
    assert m.hint("log") == 1
    compact = m.compact("log", 1)
    assert compact.through == 4 and set(compact.files) == {"f0", "f1", "f2", "f3"}
    assert m.read("log/f3") == b"f3"

    for i in range(4, 9):
        m.write(f"log/f{i}", f"f{i}".encode())
    assert m.numbers("log", "c") == [1, 2] and m.hint("log") == 2
    assert Manifest(spark, manifest_store, bucket, prefix, conf).names("log") == {f"f{i}" for i in range(9)}


# -- concurrent writers -----------------------------------------------------------------------


@pytest.mark.parametrize("inline_max", [INLINE_MAX, 0], ids=["inline", "staged"])
def test_writers_in_two_jvms_never_take_the_same_record_number(spark, manifest_store, prefix, driver_classpath,
                                                                inline_max):
    if manifest_store.racy_conditional_put:
        pytest.skip(manifest_store.racy_conditional_put)
    bucket, count = bucket_of(manifest_store), 40
    conf = settings(interval=4, inline_max=inline_max)  # an hour's delay: every record stays to be checked
    directory = f"s3a://{bucket}/{prefix}/log"
    drivers = [Driver(driver_classpath, spark, directory, name, count, conf) for name in ("a", "b")]
    for d in drivers:
        d.go()
    for d in drivers:
        status, wrote = d.finish()
        assert status == 0, d.stderr()
        assert len(wrote) == count

    m = Manifest(spark, manifest_store, bucket, prefix, conf)
    expected = {f"{w}{i}" for w in "ab" for i in range(count)}
    assert m.names("log") == expected
    assert all(m.read(f"log/{n}") == n.encode() for n in ("a0", "b0", f"a{count - 1}", f"b{count - 1}"))
    # One record per close: had two writers shared a number, one file would be missing here.
    records = m.numbers("log", "r")
    assert records == list(range(1, 2 * count + 1))
    published = [op[1] for seq in records for op in m.record("log", seq)]
    assert sorted(published) == sorted(expected)
    # Compacts are numbered without gaps and each covers more records than the one before.
    compacts = m.numbers("log", "c")
    assert compacts == list(range(1, len(compacts) + 1))
    throughs = [m.compact("log", c).through for c in compacts]
    assert throughs == sorted(set(throughs))
    # The directory itself was registered once, whichever writer got there first.
    parent = [op for seq in m.numbers("", "r") for op in m.record("", seq)]
    assert [op[:2] for op in parent] == [["dir", "log"]]


@pytest.mark.parametrize("inline_max", [INLINE_MAX, 0], ids=["inline", "staged"])
def test_stale_writer_catches_up_and_cannot_overwrite(spark, manifest_store, prefix, inline_max):
    bucket, conf = bucket_of(manifest_store), settings(inline_max=inline_max)
    a = Manifest(spark, manifest_store, bucket, prefix, conf)
    b = Manifest(spark, manifest_store, bucket, prefix, conf)
    a.mkdirs("commits")
    assert not a.exists("commits/0")  # a's view is now loaded, and about to go stale
    b.write("commits/0", b"from b")
    with pytest.raises(Py4JJavaError) as raised:
        a.write("commits/0", b"from a")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert a.read("commits/0") == b"from b"
    staged = a.stored("commits", "s")
    assert len(staged) == (0 if inline_max else 1), f"the refused write left its staged object: {staged}"
    b.write("commits/1", b"from b")
    a.write("commits/1", b"overwrite", overwrite=True)  # overwrite=true: the later record wins
    assert b.read("commits/1") == b"overwrite"
    assert a.numbers("commits", "r") == [1, 2, 3]


# -- compaction and cleanup -------------------------------------------------------------------


def test_compaction_keeps_only_the_live_view_and_cleanup_follows_the_delay(spark, manifest_store, prefix):
    bucket = bucket_of(manifest_store)
    delay_ms = 2000
    m = Manifest(spark, manifest_store, bucket, prefix, settings(interval=5, delay_ms=delay_ms, inline_max=0))
    m.mkdirs("log")
    for i in range(40):
        m.write(f"log/{i}", str(i).encode())
    for i in range(35):
        m.delete(f"log/{i}")
    # 75 records, a compact every 5: the latest holds the 5 live files and nothing of history.
    latest = max(m.numbers("log", "c"))
    compact = m.compact("log", latest)
    assert compact.number == 15 and compact.through == 75
    assert set(compact.files) == {"35", "36", "37", "38", "39"}
    assert all(g.records[1] <= 75 for g in compact.garbage)

    # After the delay, the next compaction removes everything superseded before it: every
    # record up to 75, every compact but the latest two, every staged object no file needs.
    time.sleep(delay_ms / 1000 + 0.5)
    for i in range(40, 45):
        m.write(f"log/{i}", str(i).encode())
    assert m.numbers("log", "r") == [76, 77, 78, 79, 80]
    assert m.numbers("log", "c") == [15, 16] and m.hint("log") == 16
    compact = m.compact("log", 16)
    assert set(compact.files) == {str(i) for i in range(35, 45)}
    assert set(m.stored("log", "s")) == set(compact.files.values())
    # The garbage it still carries: compact 15 and records 76-80, removable after the delay.
    assert [(g.records, g.compact, g.staged) for g in compact.garbage] == [((76, 80), 15, [])]
    assert m.names("log") == {str(i) for i in range(35, 45)}
    assert m.read("log/44") == b"44"


# -- paths ------------------------------------------------------------------------------------


def test_delete_then_recreate_a_directory(spark, manifest_store, prefix):
    """Files: the generic contract (test_contract.py). Here a whole directory goes and comes back."""
    m = Manifest(spark, manifest_store, bucket_of(manifest_store), prefix, settings())
    m.write("offsets/0", b"first")
    m.mkdirs("state/0")
    m.write("state/0/1.delta", b"delta")
    m.write("state/top", b"top")
    m.delete("state")
    assert not any(m.exists(p) for p in ("state", "state/0", "state/0/1.delta", "state/top"))
    with pytest.raises(Py4JJavaError) as raised:
        m.names("state")
    assert java_class(raised.value) == "java.io.FileNotFoundException"
    m.mkdirs("state/0")  # a new directory: nothing of the old one comes back
    assert m.names("state") == {"0/"} and m.names("state/0") == set()
    m.write("state/0/1.delta", b"new delta")
    assert m.read("state/0/1.delta") == b"new delta"
    assert Manifest(spark, manifest_store, bucket_of(manifest_store), prefix,
                    settings()).names("") == {"offsets/", "state/"}


def test_list_honours_the_filter_and_reports_files_as_files(spark, manifest_store, prefix):
    m = Manifest(spark, manifest_store, bucket_of(manifest_store), prefix, settings())
    m.mkdirs("log/sub")
    odd = "a b+c%d.é"
    for name in ("0", "1", "x", odd):
        m.write(f"log/{name}", name.encode())
    assert m.names("log") == {"0", "1", "x", odd, "sub/"}
    batches = m.statuses("log", "[0-9]*")
    assert {s.getPath().getName() for s in batches} == {"0", "1"}
    assert all(s.isFile() and not s.isDirectory() and s.getLen() == 1 for s in batches)
    assert m.names("log", "nothing-matches") == set()
    assert m.read(f"log/{odd}") == odd.encode()
    assert m.names("log/sub") == set()


def test_exists_of_a_directory_follows_mkdirs_writes_deletes_and_restarts(spark, manifest_store, prefix):
    bucket, conf = bucket_of(manifest_store), settings()
    m = Manifest(spark, manifest_store, bucket, prefix, conf)
    # HDFSMetadataLog treats exists(dir) == false as an empty log: it must be exact.
    assert not m.exists("") and not m.exists("offsets")
    with pytest.raises(Py4JJavaError) as raised:
        m.names("offsets")
    assert java_class(raised.value) == "java.io.FileNotFoundException"
    m.mkdirs("offsets")
    assert m.exists("") and m.exists("offsets") and m.names("offsets") == set()
    m.write("offsets/0", b"o0")
    # A write into a directory nobody made makes it, and its parents, as HDFS does.
    m.write("state/0/1/1.delta", b"d")
    assert all(m.exists(p) for p in ("state", "state/0", "state/0/1"))
    assert m.names("state/0") == {"1/"}

    restarted = Manifest(spark, manifest_store, bucket, prefix, conf)
    assert restarted.exists("offsets") and restarted.exists("state/0/1")
    assert [s.isFile() for s in restarted.statuses("offsets")] == [True]
    assert restarted.names("") == {"offsets/", "state/"}
    with pytest.raises(Py4JJavaError) as raised:
        restarted.mkdirs("offsets/0")  # a file, not a directory
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    with pytest.raises(Py4JJavaError):
        restarted.write("log/_manifest/x", b"reserved")
    # No object in the bucket is named after a checkpoint file: only manifests exist.
    keys = manifest_store.list_keys(bucket, prefix + "/")
    assert keys and all("/_manifest/" in "/" + k for k in keys)


def test_a_root_keeps_every_manifest_below_it(spark, manifest_store, prefix):
    """With ``ckptbench.manifest.root`` (how a benchmark run keeps to its prefix in a user's bucket)
    nothing is written above the root; without it, the bucket root gets a manifest."""
    bucket = f"manifest-root-{uuid.uuid4().hex[:8]}"
    manifest_store.create_bucket(bucket)
    ckpt_impls.attach(spark, manifest_store, bucket)
    try:
        conf = {**settings(), "ckptbench.manifest.root": f"s3a://{bucket}/{prefix}/run/"}
        root = Manifest(spark, manifest_store, bucket, f"{prefix}/run", conf)
        assert root.exists("") and root.names("") == set()  # taken to exist, with nothing recorded
        rooted = Manifest(spark, manifest_store, bucket, f"{prefix}/run/checkpoint", conf)
        rooted.write("offsets/0", b"o0")
        assert rooted.read("offsets/0") == b"o0" and rooted.names("offsets") == {"0"}
        assert root.names("") == {"checkpoint/"}
        keys = manifest_store.list_keys(bucket)
        assert keys and all(k.startswith(f"{prefix}/run/") for k in keys), keys

        Manifest(spark, manifest_store, bucket, f"{prefix}/other", settings()).write("offsets/0", b"o0")
        assert any(k.startswith("_manifest/") for k in manifest_store.list_keys(bucket))  # the bucket root's
    finally:
        manifest_store.empty_bucket(bucket)
        manifest_store.client().delete_bucket(Bucket=bucket)


def outside_manifests(m: Manifest) -> set[str]:
    """The objects under the prefix that no manifest holds, relative to it."""
    return {k for k in m.objects() if "/_manifest/" not in "/" + k}


def test_rocksdb_files_the_filesystem_reads_are_at_their_own_keys(spark, manifest_store, prefix, tmp_path):
    """Spark's RocksDB state store writes ``<version>.zip`` through the manager but unzips it with
    ``FileSystem.open``, and moves its SST and log files with the FileSystem alone, probing,
    listing and deleting them through the manager (``RocksDBPaths``). Both must work through S3A
    exactly as RocksDB calls it, while everything else stays the manifest's alone."""
    jvm = spark._jvm
    bucket = bucket_of(manifest_store)
    m = Manifest(spark, manifest_store, bucket, prefix, settings())
    fs = m.path("").getFileSystem(spark._jsc.hadoopConfiguration())
    state = "checkpoint/state/0/1"

    def read_with_filesystem(rel: str) -> bytes:
        stream = fs.open(m.path(rel))
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    m.mkdirs(state)
    m.write(f"{state}/1.zip", b"zip of version 1", overwrite=True)
    m.write(f"{state}/2.changelog", b"changelog", overwrite=True)
    assert read_with_filesystem(f"{state}/1.zip") == b"zip of version 1"
    assert m.names(state) == {"1.zip", "2.changelog"} and m.read(f"{state}/1.zip") == b"zip of version 1"
    assert outside_manifests(m) == {f"{state}/1.zip"}  # the changelog is the manifest's alone
    m.write(f"{state}/1.zip", b"version 1 again", overwrite=True)  # a re-run batch: replaced in place
    assert read_with_filesystem(f"{state}/1.zip") == b"version 1 again"
    with pytest.raises(Py4JJavaError) as raised:
        m.write(f"{state}/1.zip", b"not replaced")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert read_with_filesystem(f"{state}/1.zip") == b"version 1 again"

    # An SST file as RocksDB uploads it: copyFromLocalFile, straight to its key.
    local = tmp_path / "000008.sst"
    local.write_bytes(b"sst")
    sst = f"{state}/SSTs/000008-4e0c.sst"
    assert not m.exists(f"{state}/SSTs")
    fs.copyFromLocalFile(jvm.org.apache.hadoop.fs.Path(local.as_uri()), m.path(sst))
    assert m.exists(f"{state}/SSTs") and m.names(f"{state}/SSTs") == {"000008-4e0c.sst"}
    restarted = Manifest(spark, manifest_store, bucket, prefix, settings())
    assert restarted.names(state) == {"1.zip", "2.changelog"} and restarted.read(sst) == b"sst"
    restarted.delete(sst)
    restarted.delete(f"{state}/1.zip")
    assert not restarted.exists(sst) and restarted.names(state) == {"2.changelog"}
    assert not outside_manifests(m), "deleted files left their objects"
    with pytest.raises(Py4JJavaError):
        read_with_filesystem(f"{state}/1.zip")


# -- requests per checkpoint file -------------------------------------------------------------


def test_a_checkpoint_file_costs_one_request_inline_and_two_staged_and_no_list(spark, metered, prefix):
    """HDFSMetadataLog.add is exists(file) then createAtomic/close, counted through the proxy: the
    check comes from the loaded view (no request); a file up to the inline limit is its record
    alone, a larger one the staged object and the record."""
    store, bucket = metered
    proxy = store.proxy

    def since(mark: int):
        return own_events(proxy, mark, prefix)

    def ops(mark: int) -> list[str]:
        return [e.op for e in since(mark)]

    m = Manifest(spark, store, bucket, prefix, settings(interval=10))
    m.mkdirs("offsets")
    assert not m.exists("offsets/0")
    m.write("offsets/0", b"0")
    small, large = (b"o" * INLINE_MAX, b"o" * (INLINE_MAX + 1))

    mark = proxy.mark()
    for batch in range(1, 5):
        assert not m.exists(f"offsets/{batch}")
        m.write(f"offsets/{batch}", small)
    events = since(mark)
    assert [e.op for e in events] == ["PUT"] * 4 and all("/_manifest/r/" in e.key for e in events)
    mark = proxy.mark()
    for batch in range(5, 9):
        assert not m.exists(f"offsets/{batch}")
        m.write(f"offsets/{batch}", large)
    events = since(mark)
    assert [e.op for e in events] == ["PUT", "PUT"] * 4
    assert all("/_manifest/s/" in e.key for e in events[::2]) and all("/_manifest/r/" in e.key for e in events[1::2])

    mark = proxy.mark()
    assert m.exists("offsets/4") and m.read("offsets/4") == small
    assert ops(mark) == ["GET"]  # open: the next record (404); the bytes are in the view
    mark = proxy.mark()
    assert m.exists("offsets/5") and m.read("offsets/5") == large
    assert ops(mark) == ["GET", "GET"]  # open: the next record (404), the staged bytes

    # The 10th record compacts: one LIST (of staged objects, for orphans), compact, hint; the 20th
    # within the cleanup delay sends no LIST (test_crash_between_staging_and_publishing: one after it).
    mark = proxy.mark()
    m.write("offsets/9", b"9")
    assert ops(mark) == ["PUT", "LIST", "PUT", "PUT"]
    for batch in range(10, 19):
        m.write(f"offsets/{batch}", b"more")
    mark = proxy.mark()
    m.write("offsets/19", b"19")
    assert ops(mark) == ["PUT", "PUT", "PUT"]
    # A new view reads the inline bytes from the compact, staged ones from their objects.
    reloaded = Manifest(spark, store, bucket, prefix, settings(interval=10))
    assert [reloaded.read(f"offsets/{b}") for b in (0, 4, 5, 9)] == [b"0", small, large, b"9"]


# -- a streaming query ------------------------------------------------------------------------


def test_stateful_query_restarts_at_the_next_batch(spark, manifest_store, prefix):
    from pyspark.sql import functions as F

    bucket = bucket_of(manifest_store)
    checkpoint = f"s3a://{bucket}/{prefix}/checkpoint"
    chosen = {ckpt_impls.MANAGER_CLASS_CONF: ckpt_impls.get("manifest").manager_class,
              "ckptbench.manifest.compactInterval": "4"}  # compactions within the run

    def run(batches: int) -> list[int]:
        query = (spark.readStream.format("rate").option("rowsPerSecond", 20).load()
                 .groupBy((F.col("value") % 5).alias("k")).count()
                 .writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", checkpoint).trigger(processingTime="200 milliseconds").start())
        try:
            deadline = time.monotonic() + 120
            while len(query.recentProgress) < batches and query.isActive and time.monotonic() < deadline:
                time.sleep(0.2)
            assert query.exception() is None
        finally:
            query.stop()
        return [p["batchId"] for p in query.recentProgress]

    with settings_set(spark, chosen):
        first = run(12)
        assert len(first) >= 12
        m = Manifest(spark, manifest_store, bucket, f"{prefix}/checkpoint", settings())
        committed = max(int(n) for n in m.names("commits"))
        assert committed >= first[-1]
        second = run(2)
        assert second[0] == committed + 1
        assert m.exists("state/0/0") and any(n.endswith(".delta") for n in m.names("state/0/0"))
        assert m.numbers("offsets", "c"), "the offsets log should have been compacted"
