"""Spark's checkpoint contract, for every strategy on every store, driven in the JVM.

Managers are built by Spark's own factory (``CheckpointFileManager.create``) from the
strategy's class setting, exactly as a streaming query builds them. What is left in the
bucket is checked with boto3 over the whole prefix.
"""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from conftest import CheckpointFiles, java_class, race


@pytest.fixture
def fm(spark, strategy, store, prefix) -> CheckpointFiles:
    return CheckpointFiles(spark, strategy, store, prefix)


def test_nested_mkdirs_is_idempotent(fm):
    assert not fm.exists("a/b/c")
    fm.mkdirs("a/b/c")
    fm.mkdirs("a/b/c")
    assert fm.exists("a/b/c") and fm.exists("a/b") and fm.exists("a")
    fm.mkdirs("a/b")
    assert fm.exists("a/b/c")


def test_list_honours_filters(fm):
    fm.mkdirs("log/sub")
    for name in ("0", "1", "x"):
        fm.write(f"log/{name}", name.encode())
    assert fm.names("log", "*") == {"0", "1", "x", "sub/"}
    assert fm.names("log", "[0-9]*") == {"0", "1"}
    assert fm.names("log", "nothing-matches") == set()
    assert all(s.isFile() for s in fm.statuses("log", "[0-9]*"))
    assert "log/" in fm.names("", "*")


def test_create_without_overwrite(fm):
    fm.mkdirs("offsets")
    fm.create("offsets/0", False, b"partial").cancel()
    assert not fm.exists("offsets/0")
    fm.assert_files(set())

    fm.write("offsets/0", b"first")
    assert fm.read("offsets/0") == b"first"

    with pytest.raises(Py4JJavaError) as raised:
        fm.write("offsets/0", b"second")
    assert java_class(raised.value) in ("org.apache.hadoop.fs.FileAlreadyExistsException", "java.io.IOException")
    assert fm.read("offsets/0") == b"first"
    fm.assert_files({"offsets/0"})


def test_create_with_overwrite(fm):
    fm.mkdirs("state")  # as Spark's state store does: FileContext needs the parent
    fm.create("state/1.delta", True, b"partial").cancel()
    assert not fm.exists("state/1.delta")
    fm.write("state/1.delta", b"v1", overwrite=True)
    assert fm.read("state/1.delta") == b"v1"
    fm.write("state/1.delta", b"v2", overwrite=True)
    assert fm.read("state/1.delta") == b"v2"
    fm.create("state/1.delta", True, b"partial").cancel()
    assert fm.read("state/1.delta") == b"v2", "a cancelled overwrite changed the content"
    fm.assert_files({"state/1.delta"})


def test_open_after_delete_fails_and_delete_of_missing_path_succeeds(fm):
    fm.mkdirs("commits")
    fm.write("commits/0", b"c0")
    fm.delete("commits/0")
    assert not fm.exists("commits/0")
    with pytest.raises(Py4JJavaError) as raised:
        fm.read("commits/0")
    assert java_class(raised.value) == "java.io.FileNotFoundException"
    fm.delete("commits/0")
    fm.delete("never/written")
    fm.assert_files(set())
    fm.write("commits/0", b"again")  # overwrite=false: a deleted path is free again
    assert fm.read("commits/0") == b"again"
    fm.assert_files({"commits/0"})


def test_two_concurrent_creates_exactly_one_wins(spark, strategy, store, prefix):
    if not ckpt_impls.get(strategy).exclusive_create:
        pytest.skip(f"{strategy} does not promise exclusive creates (its check and write are separate requests)")
    if store.racy_conditional_put:
        pytest.skip(store.racy_conditional_put)
    fm = CheckpointFiles(spark, strategy, store, prefix)
    fm.mkdirs("race")
    for i in range(10):
        rel = f"race/{i}"
        outcome = race(fm, rel)
        winners = [w for w, result in outcome.items() if result == "won"]
        assert len(winners) == 1, f"{rel}: {outcome}"
        loser = 1 - winners[0]
        assert outcome[loser] == "org.apache.hadoop.fs.FileAlreadyExistsException"
        assert fm.read(rel) == f"writer-{winners[0]}".encode()
