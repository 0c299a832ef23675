"""The metering proxy's counts for a micro-batch match what each strategy's own logic implies.

A stateful query checkpoints through each strategy to each store behind a metering proxy (the
harness's ``querylab.QueryLab``, as the suite runs it); in each measured batch, the requests on the checkpoint files
(offsets/, commits/ and the state store's files) say how each file was made visible:

- ``rename``: every file is a PUT of a temp object, a COPY of it onto the file's key and a
  DELETE of the temp: one COPY per PUT.
- ``direct`` and ``conditional``: a PUT straight to the file's key; no COPY anywhere.
- ``manifest``: offsets and commits are never stored under their own keys: PUTs go under the
  directory's ``_manifest/``; no COPY anywhere.
"""

from __future__ import annotations

import re
import time
import uuid

import pandas as pd
import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckptbench import config, metrics
from ckptbench.experiments.contract import java_class
from ckptbench.harness import querylab, workloads
from ckptbench.record import results
from helpers import CheckpointFiles, file_commit_mismatches, own_events

WARMUP, BATCHES, KEYS = 1, 3, 5
FILE_AREAS = ("offsets", "commits", "state")
#: A state store snapshot (and its checksum): maintenance's file, no batch's.
SNAPSHOT = re.compile(r"\.snapshot(?:\.crc)?$")
#: Spark's setting of how many batches' log and state files a query keeps, and a value it never reaches here.
RETAIN, RETAIN_ALL = "spark.sql.streaming.minBatchesToRetain", 100_000


def batch_requests(spark, metered, strategy) -> tuple[str, list[tuple[int, list]]]:
    """The checkpoint's key and, for each measured batch, its id and its requests."""
    proxied, bucket = metered
    recorder = results.Recorder()
    lab = querylab.QueryLab(spark, proxied, bucket, config.PLANS["smallest"])
    lab.run(recorder, strategy, "stateful", KEYS, WARMUP, BATCHES)
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


def test_conditional_sends_one_request_per_checkpoint_file(spark, metered):
    """The floor's in-memory manager counts the checkpoint files Spark writes per batch (offsets,
    commits, a state file per partition); conditional sends exactly one request for each: its
    existence checks are answered from memory. A LIST per check (the old way) makes it 1.5.

    A batch's own on both sides (``metrics.requests_per_checkpoint_file``), each request in the
    batch whose file it touches: the state store's maintenance, on its own schedule, lands in a
    run's few batches or not (its LISTs of partition directories among them), and a file written at
    a batch window's edge falls on either side of it, neither of which moves the figure: a second
    run counts the same requests in each batch."""
    proxied, bucket = metered
    recorder = results.Recorder()
    lab = querylab.QueryLab(spark, proxied, bucket, config.PLANS["smallest"])
    for strategy in ("conditional", ckpt_impls.FLOOR.name, "conditional"):
        lab.run(recorder, strategy, "stateful", KEYS, WARMUP, BATCHES)
    record = recorder.results({"plan": {"keys": [KEYS]}})
    first, conditional = record.runs_of("conditional", "stateful")
    # Each batch's requests by operation and area, the batches in any order: on a loaded machine the
    # batch ids a run's measured window holds can shift.
    per_batch = [sorted(tuple(sorted(batch.groupby(["op", "area"]).size().items()))
                        for _, batch in run.requests.groupby("batch_id")) for run in (first, conditional)]
    assert per_batch[0] == per_batch[1]
    assert metrics.checkpoint_files_per_batch(record, "stateful") >= 3  # offsets, commits, a state file or more
    requests = conditional.requests
    assert set(requests.op) == {"PUT"}, requests.groupby("op").size().to_dict()
    # Per batch, against the floor's count, exactly: a LIST per check would be 1.5.
    assert metrics.requests_per_checkpoint_file(record, conditional) == 1.0


@pytest.mark.parametrize("strategy", ["rename", "conditional"])
def test_the_maintenance_watch_logs_maintenance_calls_and_none_of_a_batch(spark, suite_stores, metered_stores,
                                                                         strategy):
    """``ckpt_impls.MAINTENANCE_WATCH`` around Spark's default manager (``rename``) and around one of
    ours logs what the state store's maintenance does, a ``.snapshot`` file (after
    ``minDeltasForSnapshot`` batches) and a partition directory's listing, and nothing a batch
    writes: were it to log every call, a batch's ``.delta``, ``offsets/`` and ``commits/`` files
    would show; were it to log none, no snapshot would. Spark 4.x writes a snapshot from a task's
    thread when maintenance lags behind (seen here: this session's maintenance threads also serve
    earlier tests' queries), so the snapshot is logged by its name, a listing by its thread.
    Maintenance runs every 5 s (``config.SPARK_CONF``): the query runs until a snapshot is logged,
    or fails at a deadline. On one store: what it logs is Spark's calls, whatever the store.

    The same run shows the watch timing every checkpoint file's commit (``querylab.file_commits``):
    each file the checkpoint holds has one closed timing of its kind and none is timed that it does
    not hold (``file_commit_mismatches``; left out: maintenance's snapshots, which it may still be
    writing as the query stops, and a write the stop cut short: rename's temp file, or the file of
    a batch after the last awaited whose timing is not closed), each batch's
    offsets, commits and state files are timed under its id, and the clock is finer than Spark's
    whole milliseconds."""
    proxied, bucket = metered_stores(suite_stores.get("embedded"))
    prefix = f"{proxied.run_prefix}watch-{strategy}-{uuid.uuid4().hex[:8]}"
    ckpt_impls.use(spark, strategy, watch_maintenance=True)
    # Every file the query writes stays: past minBatchesToRetain (100) batches Spark deletes the
    # oldest, and a query may run more than that before maintenance writes its first snapshot.
    spark.conf.set(RETAIN, str(RETAIN_ALL))
    query = workloads.stateful(spark, f"s3a://{bucket}/{prefix}/checkpoint", keys=KEYS, rows_per_batch=KEYS)
    calls: list[dict] = []
    try:
        deadline = time.monotonic() + 180
        while not any(c["key"].endswith(".snapshot") for c in calls) and time.monotonic() < deadline:
            workloads.await_batches(query, 1, 60)
            calls += querylab.maintenance_calls(spark, bucket, prefix + "/")
        batches = query.lastProgress["batchId"]
    finally:
        query.stop()
        spark.conf.unset(RETAIN)
        ckpt_impls.use(spark, "rename")
    seen = sorted({(c["method"], c["thread"], c["key"].split("/checkpoint/")[1]) for c in calls})
    assert any(c["method"] == "createAtomic" and c["key"].endswith(".snapshot") for c in calls), seen
    assert batches >= 10  # a snapshot needs minDeltasForSnapshot deltas
    for c in calls:
        assert c["start"] <= c["end"], c
        assert re.search(r"/state/\d+/\d+(/\d+\.snapshot)?$", c["key"]), seen  # no batch file
        assert c["key"].endswith(".snapshot") or c["thread"].startswith("state-store-maintenance"), seen
    stored = {k for k in proxied.inner.list_keys(bucket, f"{prefix}/checkpoint/")
              if not k.endswith("/") and not ckpt_impls.TEMP_FILE.search(k)}  # a write stop() cut short
    commits = pd.DataFrame(querylab.file_commits(spark, bucket, prefix + "/"))
    commits = commits[~commits.key.str.contains(SNAPSHOT)]
    # A batch after the last one awaited may be cut short by stop() once the store has its file:
    # that file's timing is not closed. It is left out; every awaited batch's is compared.
    cut_short = set(commits.key[(commits.batch_id > batches) & (commits.outcome != "closed")])
    assert file_commit_mismatches(commits, {k for k in stored - cut_short if not SNAPSHOT.search(k)}) == []
    assert {"offsets", "commits", "state", "metadata"} <= set(commits.kind), sorted(set(commits.kind))
    timed = set(zip(commits.batch_id, commits.kind, strict=True))
    assert not {(b, kind) for b in range(batches + 1) for kind in FILE_AREAS} - timed, sorted(timed)
    assert (commits.ms % 1 > 0).any(), list(commits.ms)


def own_ops(proxied, mark, prefix: str) -> list[str]:
    """The operations the proxy saw since ``mark`` on keys under ``prefix`` (``own_events``)."""
    return [e.op for e in own_events(proxied.proxy, mark, prefix)]


def test_conditional_lists_a_log_directory_once_for_its_batch_files(spark, metered):
    """Spark 3.5 does not list ``commits/`` when a new query starts, so without a listing each
    batch's check before writing ``commits/N`` cost a LIST. The first check of a batch file lists
    its directory; the next batches' checks are answered from that listing."""
    proxied, bucket = metered
    prefix = f"fresh-{uuid.uuid4().hex[:8]}"
    fm = CheckpointFiles(spark, "conditional", proxied, prefix, bucket=bucket)
    mark = proxied.proxy.mark()
    for batch in range(3):
        assert not fm.exists(f"commits/{batch}")
        fm.write(f"commits/{batch}", b"v1")
    assert own_ops(proxied, mark, prefix) == ["LIST", "PUT", "PUT", "PUT"]


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
    assert own_ops(proxied, mark, prefix) == ["PUT"]

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
    assert own_ops(proxied, mark, fm.prefix) == ["DELETE"]
    mark = proxied.proxy.mark()
    fm.delete("offsets/2")  # a directory: what is under it goes too
    assert own_ops(proxied, mark, fm.prefix)[:2] == ["DELETE", "LIST"]
    # Files, not names: SeaweedFS lists an emptied prefix (2/) as a directory for a while after.
    assert fm.visible("offsets") == {"offsets/1"} and fm.objects() == {"offsets/1"}

    other = CheckpointFiles(spark, "conditional", proxied, f"purge-{uuid.uuid4().hex[:8]}", bucket=bucket)
    proxied.client().put_object(Bucket=bucket, Key=f"{other.prefix}/offsets/5", Body=b"x")
    proxied.client().put_object(Bucket=bucket, Key=f"{other.prefix}/offsets/5/under", Body=b"x")
    other.delete("offsets/5")  # its directory never listed here: anything under it is deleted too
    assert other.objects() == set()
