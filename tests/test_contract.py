"""Spark's checkpoint contract, for every strategy on every store, driven in the JVM.

Managers are built by Spark's own factory (``CheckpointFileManager.create``) from the
strategy's class setting, exactly as a streaming query builds them. What is left in the
bucket is checked with boto3 over the whole prefix.
"""

from __future__ import annotations

import re
import threading

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from conftest import bucket_of


TEMP_FILE = re.compile(r"(^|/)\.[^/]+\.tmp$")


class Manager:
    """A JVM CheckpointFileManager for ``s3a://bucket/prefix`` plus byte-level helpers."""

    def __init__(self, spark, strategy: str, store, prefix: str) -> None:
        jvm = spark._jvm
        self.jvm, self.store, self.bucket, self.prefix = jvm, store, bucket_of(store), prefix
        conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
        manager_class = ckpt_impls.get(strategy).manager_class
        if manager_class:
            conf.set(ckpt_impls.MANAGER_CLASS_CONF, manager_class)
        else:
            conf.unset(ckpt_impls.MANAGER_CLASS_CONF)
        factory = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
        self.fm = factory.create(self.path(""), conf)

    def path(self, rel: str):
        return self.jvm.org.apache.hadoop.fs.Path(f"s3a://{self.bucket}/{self.prefix}/{rel}".rstrip("/"))

    def create(self, rel: str, overwrite: bool, data: bytes):
        out = self.fm.createAtomic(self.path(rel), overwrite)
        out.write(bytearray(data))
        return out

    def write(self, rel: str, data: bytes, overwrite: bool = False) -> None:
        """Write as HDFSMetadataLog.write does: close, or cancel if that fails."""
        out = self.create(rel, overwrite, data)
        try:
            out.close()
        except Py4JJavaError:
            out.cancel()
            raise

    def read(self, rel: str) -> bytes:
        stream = self.fm.open(self.path(rel))
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    def exists(self, rel: str) -> bool:
        return self.fm.exists(self.path(rel))

    def names(self, rel: str, glob: str) -> set[str]:
        statuses = self.fm.list(self.path(rel), self.jvm.org.apache.hadoop.fs.GlobFilter(glob))
        return {s.getPath().getName() + ("/" if s.isDirectory() else "") for s in statuses}

    def objects(self) -> set[str]:
        """Every object under the prefix except directory markers, relative to the prefix."""
        keys = self.store.list_keys(self.bucket, self.prefix + "/")
        return {k[len(self.prefix) + 1:] for k in keys if not k.endswith("/")}

    def assert_objects(self, strategy: str, expected: set[str]) -> None:
        """Exactly ``expected`` is stored, besides the temp files a strategy is known to leave."""
        objects = self.objects()
        temps = {k for k in objects if TEMP_FILE.search(k)}
        assert objects - temps == expected
        if not ckpt_impls.get(strategy).leaves_temp_files:
            assert not temps, f"{strategy} left temp objects: {temps}"


def java_class(error: Py4JJavaError) -> str:
    return error.java_exception.getClass().getName()


@pytest.fixture
def fm(spark, strategy, store, prefix) -> Manager:
    return Manager(spark, strategy, store, prefix)


def test_nested_mkdirs_is_idempotent(fm):
    assert not fm.exists("a/b/c")
    fm.fm.mkdirs(fm.path("a/b/c"))
    fm.fm.mkdirs(fm.path("a/b/c"))
    assert fm.exists("a/b/c") and fm.exists("a/b") and fm.exists("a")
    fm.fm.mkdirs(fm.path("a/b"))
    assert fm.exists("a/b/c")


def test_list_honours_filters(fm):
    fm.fm.mkdirs(fm.path("log/sub"))
    for name in ("0", "1", "x"):
        fm.write(f"log/{name}", name.encode())
    assert fm.names("log", "*") == {"0", "1", "x", "sub/"}
    assert fm.names("log", "[0-9]*") == {"0", "1"}
    assert fm.names("log", "nothing-matches") == set()
    statuses = fm.fm.list(fm.path("log"), fm.jvm.org.apache.hadoop.fs.GlobFilter("[0-9]*"))
    assert all(s.isFile() for s in statuses)
    assert "log/" in fm.names("", "*")


def test_create_without_overwrite(fm, strategy):
    fm.fm.mkdirs(fm.path("offsets"))
    fm.create("offsets/0", False, b"partial").cancel()
    assert not fm.exists("offsets/0")
    assert fm.objects() == set(), "cancel left an object behind"

    fm.write("offsets/0", b"first")
    assert fm.read("offsets/0") == b"first"

    with pytest.raises(Py4JJavaError) as raised:
        fm.write("offsets/0", b"second")
    assert java_class(raised.value) in ("org.apache.hadoop.fs.FileAlreadyExistsException", "java.io.IOException")
    assert fm.read("offsets/0") == b"first"
    fm.assert_objects(strategy, {"offsets/0"})


def test_create_with_overwrite(fm, strategy):
    fm.fm.mkdirs(fm.path("state"))  # as Spark's state store does: FileContext needs the parent
    fm.create("state/1.delta", True, b"partial").cancel()
    assert not fm.exists("state/1.delta")
    fm.write("state/1.delta", b"v1", overwrite=True)
    assert fm.read("state/1.delta") == b"v1"
    fm.write("state/1.delta", b"v2", overwrite=True)
    assert fm.read("state/1.delta") == b"v2"
    fm.create("state/1.delta", True, b"partial").cancel()
    assert fm.read("state/1.delta") == b"v2", "a cancelled overwrite changed the content"
    fm.assert_objects(strategy, {"state/1.delta"})


def test_open_after_delete_fails_and_delete_of_missing_path_succeeds(fm):
    fm.fm.mkdirs(fm.path("commits"))
    fm.write("commits/0", b"c0")
    fm.fm.delete(fm.path("commits/0"))
    assert not fm.exists("commits/0")
    with pytest.raises(Py4JJavaError) as raised:
        fm.read("commits/0")
    assert java_class(raised.value) == "java.io.FileNotFoundException"
    fm.fm.delete(fm.path("commits/0"))
    fm.fm.delete(fm.path("never/written"))
    assert fm.objects() == set()


def test_two_concurrent_creates_exactly_one_wins(spark, strategy, store, prefix):
    if not ckpt_impls.get(strategy).exclusive_create:
        pytest.skip(f"{strategy} does not promise exclusive creates (its check and write are separate requests)")
    fm = Manager(spark, strategy, store, prefix)
    fm.fm.mkdirs(fm.path("race"))
    for i in range(10):
        rel = f"race/{i}"
        streams = [fm.create(rel, False, f"writer-{w}".encode()) for w in (0, 1)]
        barrier, outcome = threading.Barrier(2), {}

        def close(w: int) -> None:
            barrier.wait()
            try:
                streams[w].close()
                outcome[w] = "won"
            except Py4JJavaError as e:
                outcome[w] = java_class(e)

        threads = [threading.Thread(target=close, args=(w,)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        winners = [w for w, result in outcome.items() if result == "won"]
        assert len(winners) == 1, f"{rel}: {outcome}"
        loser = 1 - winners[0]
        assert outcome[loser] == "org.apache.hadoop.fs.FileAlreadyExistsException"
        assert fm.read(rel) == f"writer-{winners[0]}".encode()
