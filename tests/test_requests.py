"""The metering proxy's counts for a micro-batch match what each strategy's own logic implies.

A stateful query checkpoints through each strategy to each store behind a metering proxy (the
harness's ``runs.Lab``, as the suite runs it); in each measured batch, the requests on the checkpoint files
(offsets/, commits/ and the state store's files) say how each file was made visible:

- ``rename``: every file is a PUT of a temp object, a COPY of it onto the file's key and a
  DELETE of the temp: one COPY per PUT.
- ``direct`` and ``conditional``: a PUT straight to the file's key; no COPY anywhere.
- ``manifest``: offsets and commits are never stored under their own keys: PUTs go under the
  directory's ``_manifest/``; no COPY anywhere.
"""

from __future__ import annotations

import uuid

import pandas as pd
import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckptbench import metrics, results, runs
from conftest import CheckpointFiles, java_class

WARMUP, BATCHES, KEYS = 1, 3, 5
FILE_AREAS = ("offsets", "commits", "state")


def batch_requests(spark, metered, strategy) -> tuple[str, list[tuple[int, list]]]:
    """The checkpoint's key and, for each measured batch, its id and its requests."""
    proxied, bucket = metered
    recorder = results.Recorder()
    runs.Lab(spark, proxied, bucket, runs.PLANS["smallest"]).run(recorder, strategy, "stateful", KEYS, WARMUP, BATCHES)
    run = recorder.results({}).run(strategy, "stateful", KEYS)
    by_batch = run.requests.groupby("batch_id")
    return f"{run.info.prefix}/checkpoint", [(batch, list(rows.itertuples())) for batch, rows in by_batch]


def test_requests_per_batch_follow_the_strategy(spark, metered, strategy):
    checkpoint, batches = batch_requests(spark, metered, strategy)
    assert len(batches) == BATCHES
    for batch, events in batches:
        ok = [e for e in events if 200 <= e.status < 300]
        puts = [e.key for e in ok if e.op == "PUT" and e.area in FILE_AREAS]
        copies = [e.key for e in ok if e.op == "COPY"]
        logs = {f"{checkpoint}/offsets/{batch}", f"{checkpoint}/commits/{batch}"}
        seen = f"batch {batch}: PUT {puts}, COPY {copies}"
        if strategy == "rename":
            assert puts and all(ckpt_impls.TEMP_FILE.search(k) for k in puts), seen
            assert len(copies) == len(puts) and logs <= set(copies), seen
            assert not any(ckpt_impls.TEMP_FILE.search(k) for k in copies), seen
            deleted = {e.key for e in ok if e.op == "DELETE"}
            assert set(puts) <= deleted, f"{seen}, DELETE {sorted(deleted)}"
        elif strategy == "manifest":
            assert not copies, seen
            log_puts = [e.key for e in ok if e.op == "PUT" and e.area in ("offsets", "commits")]
            assert log_puts and all("/_manifest/" in k for k in log_puts), seen
        else:
            assert not copies, seen
            assert logs <= set(puts), seen
            assert not any(ckpt_impls.TEMP_FILE.search(k) for k in puts), seen


#: What the state store's maintenance thread sends (every 5 s, ``runs.SPARK_CONF``), on its own
#: schedule, through the strategy: a LIST of a partition's directory (for a snapshot, for the
#: clean-up) and a ``<version>.snapshot`` file. A batch's own files keep Spark's names under
#: ``conditional``, so its requests and the floor's files tell maintenance apart by key.
MAINTENANCE = r"/state/\d+/\d+/$|\.snapshot$"


@pytest.mark.parametrize(("key", "maintenance"), [
    ("p/checkpoint/state/0/1/", True),  # a partition's directory, listed
    ("p/checkpoint/state/0/1/7.snapshot", True),
    ("p/checkpoint/state/0/1/7.delta", False),  # a batch's state file
    ("p/checkpoint/state/0/1/7.delta/", False),  # a LIST under a file, as an existence check sends
    ("p/checkpoint/commits/7/", False),
    ("p/checkpoint/offsets/7", False),
])
def test_maintenance_is_told_apart_by_key(key, maintenance):
    assert bool(pd.Series([key]).str.contains(MAINTENANCE).iloc[0]) == maintenance


def test_conditional_sends_one_request_per_checkpoint_file(spark, metered):
    """The floor's in-memory manager counts the checkpoint files Spark writes per batch (offsets,
    commits, a state file per partition); conditional sends exactly one request for each: its
    existence checks are answered from memory. A LIST per check (the old way) makes it 1.5.

    Maintenance is left out on both sides: it lands in a run's few batches or not (a fresh-clone
    CI run, 2026-11-24: 4 LISTs of partition directories in 6 batches)."""
    proxied, bucket = metered
    recorder = results.Recorder()
    lab = runs.Lab(spark, proxied, bucket, runs.PLANS["smallest"])
    for strategy in ("conditional", ckpt_impls.FLOOR.name):
        lab.run(recorder, strategy, "stateful", KEYS, WARMUP, BATCHES)
    record = recorder.results({"plan": {"keys": [KEYS]}})
    conditional, floor = record.run("conditional", "stateful"), metrics.floor_run(record, "stateful")

    def own(run: results.Run) -> pd.DataFrame:
        requests = run.requests
        return requests[~requests.key.str.contains(MAINTENANCE)]

    files = len(own(floor)) / len(floor.batches)
    assert files >= 3, files  # offsets, commits and at least one state file
    requests = own(conditional)
    assert set(requests.op) == {"PUT"}, requests.groupby("op").size().to_dict()
    # Per batch, against the floor's count: a file written at a batch window's edge can fall on
    # either side of it in one of the two runs (13 floor files in 3 batches once in CI), so within
    # one file over the batches; a LIST per check would be 1.5.
    assert len(requests) / len(conditional.batches) / files == pytest.approx(1.0, abs=1 / BATCHES)


def test_conditional_lists_a_log_directory_once_for_its_batch_files(spark, metered):
    """Spark 3.5 does not list ``commits/`` when a new query starts, so without a listing each
    batch's check before writing ``commits/N`` cost a LIST. The first check of a batch file lists
    its directory; the next batches' checks are answered from that listing."""
    proxied, bucket = metered
    fm = CheckpointFiles(spark, "conditional", proxied, f"fresh-{uuid.uuid4().hex[:8]}", bucket=bucket)
    mark = proxied.proxy.mark()
    for batch in range(3):
        assert not fm.exists(f"commits/{batch}")
        fm.write(f"commits/{batch}", b"v1")
    assert [e.op for e in proxied.proxy.events_since(mark)] == ["LIST", "PUT", "PUT", "PUT"]


def test_conditional_existence_checks_come_from_its_listing(spark, metered):
    """After a listing, exists costs no request and sees the manager's own writes; a file another
    writer made since is missed, and the create-only PUT that follows refuses to overwrite it."""
    proxied, bucket = metered
    prefix = f"listing-{uuid.uuid4().hex[:8]}"
    fm = CheckpointFiles(spark, "conditional", proxied, prefix, bucket=bucket)
    fm.mkdirs("offsets")
    fm.write("offsets/0", b"0")
    assert fm.names("offsets") == {"0"}
    mark = proxied.proxy.mark()
    assert fm.exists("offsets/0") and not fm.exists("offsets/1")
    fm.write("offsets/1", b"1")
    assert fm.exists("offsets/1")
    assert [e.op for e in proxied.proxy.events_since(mark)] == ["PUT"]

    proxied.client().put_object(Bucket=bucket, Key=f"{prefix}/offsets/2", Body=b"other writer")
    assert not fm.exists("offsets/2")  # stale: another writer wrote it since the listing
    with pytest.raises(Py4JJavaError) as raised:
        fm.write("offsets/2", b"mine")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert fm.read("offsets/2") == b"other writer"
    assert fm.exists("offsets/2")  # the 412 taught it


def test_conditional_deletes_a_known_lone_file_in_one_request(spark, metered):
    """Spark purges a metadata log's oldest batch file every batch past minBatchesToRetain: a file
    in a listed directory with nothing under it goes in one DELETE. A directory, or a file whose
    directory this JVM has not listed, also has whatever is under it deleted (a LIST first)."""
    proxied, bucket = metered
    fm = CheckpointFiles(spark, "conditional", proxied, f"purge-{uuid.uuid4().hex[:8]}", bucket=bucket)
    fm.mkdirs("offsets")
    for name in ("0", "1", "2/inside"):
        fm.write(f"offsets/{name}", b"x")
    assert fm.names("offsets") == {"0", "1", "2/"}
    mark = proxied.proxy.mark()
    fm.delete("offsets/0")
    assert [e.op for e in proxied.proxy.events_since(mark)] == ["DELETE"]
    mark = proxied.proxy.mark()
    fm.delete("offsets/2")  # a directory: what is under it goes too
    assert [e.op for e in proxied.proxy.events_since(mark)][:2] == ["DELETE", "LIST"]
    assert fm.names("offsets") == {"1"}

    other = CheckpointFiles(spark, "conditional", proxied, f"purge-{uuid.uuid4().hex[:8]}", bucket=bucket)
    proxied.client().put_object(Bucket=bucket, Key=f"{other.prefix}/offsets/5", Body=b"x")
    proxied.client().put_object(Bucket=bucket, Key=f"{other.prefix}/offsets/5/under", Body=b"x")
    other.delete("offsets/5")  # its directory never listed here: anything under it is deleted too
    assert other.objects() == set()
