"""The crash lab (``ckptbench.experiments.crashlab``) against real servers: drivers killed with SIGKILL at crash
points and restarted keep exactly-once with the strategies that should, and every verifier is shown
catching a broken case: a non-idempotent sink replaying a batch, an output missing a data file or
listing one twice, a log file written twice. Two drivers on one ``conditional`` checkpoint end in
a clean error. A driver's keys reach it on stdin, never on a command line.

Each driver is a JVM of its own (10-60 s to start on 2 shared cores), so cycles are few here; the
asv suite and ``python -m ckptbench crashlab`` run many.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import pandas as pd
import pytest

from ckptbench import metrics
from ckptbench.experiments import crashlab
from ckptbench.record import disk, results, schema
from helpers import CheckpointFiles, bucket_of, ckptbench_here, crash_lab, one_error_line
from infra.metered import MeteredStore
from infra.net import command_lines, proc_stat

ROWS = 100  # per batch: the lab's default


@pytest.mark.parametrize("name, strategy, workload, points, cycles", [
    # Points share a series where they can: each series starts one driver more than it has cycles.
    # A random kill of rename's and conditional's stateless drivers: the smallest bench's crash lab
    # (tests/test_benchmarks.py); after-offsets: on Ceph, below.
    ("embedded", "rename", "stateless", ("inside-publish",), 1),
    ("embedded", "manifest", "stateful", ("during-state-upload", "during-compaction"), 2),
    ("ceph", "conditional", "stateless", ("after-offsets",), 1),
    ("embedded", "direct", "wide", ("during-multipart-upload",), 1),
])
def test_killed_and_restarted_drivers_keep_exactly_once(spark, suite_stores, name, strategy, workload, points, cycles):
    """Killed inside a batch (after offsets/N, during the state upload), anywhere (random), or by
    the proxy inside a request (publishing offsets/N, writing a compaction, a multipart upload's
    first part); the manifest strategy's sink log and checkpoint are read through its own manager."""
    with crash_lab(spark, suite_stores.get(name)) as (crash, recorder):
        crash.series(strategy, workload, cycles, points)
    record = recorder.results({})
    assert len(record.cycles) == cycles
    for row in record.cycles.itertuples():
        assert row.restart_ok, row.error
        assert row.landed, f"{row.crash_point} was never reached"
        assert (row.duplicates, row.lost, row.partial) == (0, 0, 0)
        assert row.jvm_start_ms > 0 and row.recovery_ms > 0 and row.recovery_requests > 0
        if row.crash_point == "inside-publish":
            # The proxy killed the driver at the COPY publishing offsets/N: never stored.
            assert row.offsets_at_kill == row.committed_at_kill
            assert row.first_batch == row.offsets_at_kill + 1
        elif row.crash_point not in ("random", "during-compaction", "during-multipart-upload"):
            # Killed inside a batch: offsets/N stored, commits/N not; the restart re-runs batch N.
            assert row.offsets_at_kill == row.committed_at_kill + 1
            assert row.first_batch == row.offsets_at_kill
    [series] = record.crash_series.itertuples()
    assert series.error is pd.NA or series.error is None
    assert (series.duplicates, series.lost, series.partial, series.unexpected) == (0, 0, 0, 0)
    assert series.last_batch >= record.cycles.first_batch.max()
    # The upload the kill cut short stays pending (S3A purges pending uploads after a day).
    if points == ("during-multipart-upload",):
        assert series.pending_uploads >= cycles  # one per sink file in flight
    else:
        assert series.pending_uploads == 0
    if strategy != "rename":
        assert series.temp_objects == 0
    assert metrics.duplicated_rows(record, strategy) == metrics.lost_rows(record, strategy) == 0
    assert metrics.restart_failure_rate(record, strategy) == 0


def test_a_kill_inside_a_request_lands_only_when_the_request_comes(spark, suite_stores, monkeypatch):
    """``landed`` is the proxy's own kill: a point whose request never comes is not landed (the
    lab kills the driver itself when it has waited long enough), one whose request comes is. The
    wait is cut short for the point that never comes only: on a loaded machine the other's request
    may take longer than the short wait."""
    never = crashlab.CrashPoint("never", "no such request", inside=lambda prefix: (("MPU_PART", "^nowhere/"),))
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        for point, landed in ((never, False), (crashlab.CRASH_POINTS["inside-publish"], True)):
            # where the lab reads it
            monkeypatch.setattr(crashlab.lab, "WAIT_LIMIT_S", 3.0 if point is never else crashlab.WAIT_LIMIT_S)
            prefix = f"crash/landing-{uuid.uuid4().hex[:8]}"
            driver = crash.driver("conditional", "stateless", prefix)
            driver.wait("progress", crashlab.RESTART_LIMIT_S)
            assert crash._watch(driver, point, prefix, 0.0)[0] == landed
            assert not driver.alive()
        assert [i.fault for i in crash.store.proxy.injections()] == ["kill-before-forwarding"]  # the second's


def test_a_non_idempotent_sink_replaying_a_batch_is_caught(spark, suite_stores):
    """foreachBatch appending parquet with no batch-id check, killed after its write and before
    commits/N: the restart re-runs the batch and writes it again."""
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, recorder):
        crash.series("conditional", "unsafe-foreach", 1, ("after-sink-commit",))
    record = recorder.results({})
    [cycle] = record.cycles.itertuples()
    assert cycle.restart_ok and cycle.landed
    assert cycle.first_batch == cycle.offsets_at_kill == cycle.committed_at_kill + 1
    assert cycle.duplicates == ROWS, "the re-run batch's rows are in the output twice"
    assert cycle.lost == 0
    assert metrics.duplicated_rows(record, "conditional") == ROWS
    assert metrics.cycles_not_exactly_once(record, "conditional") == 1


def test_a_damaged_output_is_caught(spark, suite_stores):
    """A clean output, then a data file its log lists deleted (lost rows, a partly visible batch),
    then a file listed twice (duplicates)."""
    store = suite_stores.get("embedded")
    bucket, workload = bucket_of(store), crashlab.WORKLOADS["stateless"]
    with crash_lab(spark, store, keep=True) as (crash, _):
        prefix = f"crash/damaged-{uuid.uuid4().hex[:8]}"
        driver = crash.driver("conditional", "stateless", prefix, batches=3)
        driver.wait("stopped", crashlab.RESTART_LIMIT_S)
        base = f"s3a://{bucket}/{prefix}"
        clean = crashlab.verify(spark, "conditional", workload, base, ROWS, at_rest=True)
        assert clean.exactly_once and clean.last >= 2 and clean.rows == (clean.last + 1) * ROWS

        files = sorted(spark.read.parquet(f"{base}/output").inputFiles())
        rows_of = {f: spark.read.parquet(f).count() for f in files}
        gone, twice = files[0], files[-1]
        s3 = store.client()
        s3.delete_object(Bucket=bucket, Key=gone.split(f"{bucket}/", 1)[1])
        lost = crashlab.verify(spark, "conditional", workload, base, ROWS, at_rest=True)
        assert lost.lost == rows_of[gone] and lost.duplicates == 0
        assert lost.partial == (1 if rows_of[gone] < ROWS else 0)

        # A copy of another data file, listed in the sink's log for batch 0 as well.
        copy_key = f"{prefix}/output/part-copy-{uuid.uuid4().hex}.snappy.parquet"
        source = twice.split(f"{bucket}/", 1)[1]
        s3.copy_object(Bucket=bucket, Key=copy_key, CopySource={"Bucket": bucket, "Key": source})
        log_key = f"{prefix}/output/_spark_metadata/0"
        text = s3.get_object(Bucket=bucket, Key=log_key)["Body"].read().decode()
        entry = json.loads(text.splitlines()[1])
        entry["path"] = f"s3a://{bucket}/{copy_key}"
        s3.put_object(Bucket=bucket, Key=log_key, Body=(text.rstrip("\n") + "\n" + json.dumps(entry)).encode())
        doubled = crashlab.verify(spark, "conditional", workload, base, ROWS, at_rest=True)
        assert doubled.duplicates == rows_of[twice]
        assert doubled.lost == lost.lost
        store.empty_bucket(bucket, prefix + "/")


def test_the_rules_of_the_verdict():
    """``judge`` on fixed counts ({batch: (rows, distinct)}), 10 rows per batch, commits through 2."""
    stateless, stateful = crashlab.WORKLOADS["stateless"], crashlab.WORKLOADS["stateful"]
    whole = {0: (10, 10), 1: (10, 10), 2: (10, 10)}
    assert crashlab.judge(whole, 2, stateless, 10, at_rest=True).exactly_once
    # The sink a batch ahead of commits/ (killed between _spark_metadata/3 and commits/3): fine whole...
    assert crashlab.judge({**whole, 3: (10, 10)}, 2, stateless, 10, at_rest=True).exactly_once
    # ...not partly visible, at rest; while a writer runs, batches past the last commit are not judged.
    assert crashlab.judge({**whole, 3: (4, 4)}, 2, stateless, 10, at_rest=True).partial == 1
    assert crashlab.judge({**whole, 3: (4, 4)}, 2, stateless, 10, at_rest=False).exactly_once
    assert crashlab.judge({**whole, 5: (10, 10)}, 2, stateless, 10, at_rest=True).unexpected == 10
    broken = crashlab.judge({0: (10, 10), 1: (13, 7), 3: (2, 1)}, 2, stateless, 10, at_rest=False)
    assert (broken.duplicates, broken.lost, broken.partial) == (6 + 1, 3 + 10, 1)
    # Stateful: batch 0 holds 10 new values, every later batch 5.
    assert crashlab.judge({0: (10, 10), 1: (5, 5), 2: (5, 5)}, 2, stateful, 10, at_rest=True).exactly_once
    assert crashlab.judge({0: (10, 10), 1: (10, 10), 2: (5, 5)}, 2, stateful, 10, at_rest=True).unexpected == 5


def test_a_log_file_written_twice_is_caught(spark, suite_stores):
    """Where keys mirror paths, two stored writes of one log key; for the manifest strategy, two
    records putting one name. One write of each file is no damage."""
    store = suite_stores.get("embedded")
    bucket = bucket_of(store)
    with MeteredStore(store) as metered:
        s3, prefix = metered.client(), f"crash/twice-{uuid.uuid4().hex[:8]}"
        mark = metered.proxy.mark()
        for key in ("checkpoint/offsets/5", "checkpoint/offsets/5", "checkpoint/commits/5",
                    "output/_spark_metadata/5", "checkpoint/.5.tmp"):
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"v1")
        events = metered.proxy.events_since(mark)
        assert crashlab.overwritten_logs(events, store, bucket, prefix, keys_mirror_paths=True) == [
            "checkpoint/offsets/5"]
        assert crashlab.overwritten_logs(events[2:], store, bucket, prefix, keys_mirror_paths=True) == []

    files = CheckpointFiles(spark, "manifest", store, f"{prefix}-m/checkpoint")
    files.write("offsets/5", b"a")
    files.write("commits/5", b"a")
    assert crashlab.overwritten_logs([], store, bucket, f"{prefix}-m", keys_mirror_paths=False) == []
    files.write("offsets/5", b"b", overwrite=True)
    assert crashlab.overwritten_logs([], store, bucket, f"{prefix}-m", keys_mirror_paths=False) == [
        "checkpoint/offsets/5"]
    store.empty_bucket(bucket, prefix)


def test_the_outcome_classes():
    base = {"first_error": None, "second_error": None, "verify_error": None, "overwritten_logs": 0,
            "duplicates": 0, "lost": 0, "partial": 0, "unexpected": 0}
    conflict = "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs detected for 5."
    assert crashlab.classify(base) == "both-ran-no-damage-seen"
    assert crashlab.classify({**base, "second_error": conflict}) == "clean-error"
    assert crashlab.classify({**base, "second_error": "java.lang.OutOfMemoryError"}) == "other-error"
    for damage in ({"duplicates": 3}, {"lost": 1}, {"overwritten_logs": 1}, {"verify_error": "unreadable"}):
        assert crashlab.classify({**base, "second_error": conflict, **damage}) == "silent-damage"


def test_the_two_writer_runs_raced_or_not_take_the_plans_strategies():
    strategies = ["rename", "direct", "conditional"]
    plan = crashlab.CrashPlan(1, ("stateless",), ("stateless",), ("conditional",), two_writer_starts=(0, 3),
                              two_writer_races=("offsets", "commits"))
    assert plan.two_writer_runs(strategies) == [("conditional", "stateless", 0), ("conditional", "stateless", 3)]
    assert plan.race_runs(strategies) == [("conditional", "stateless", "offsets"),
                                          ("conditional", "stateless", "commits")]
    every = dataclasses.replace(plan, two_writer_strategies=None)
    assert [s for s, *_ in every.race_runs(strategies)] == strategies * 2
    assert [s for s, *_ in every.in_part(2, 2).race_runs(strategies)] == ["direct", "rename", "conditional"]


@pytest.mark.ceph
def test_a_driver_gets_its_keys_on_stdin_and_dies_whole(spark, suite_stores):
    """No secret on the command line of the driver or its JVM (Ceph checks the keys, so a batch
    committed there proves they arrived); a kill takes the JVM with the driver."""
    store = suite_stores.get("ceph")
    secret = store.credentials.secret_key
    with crash_lab(spark, store) as (crash, _):
        driver = crash.driver("conditional", "stateless", f"crash/keys-{uuid.uuid4().hex[:8]}")
        ready = driver.wait("ready", crashlab.RESTART_LIMIT_S)
        driver.wait("progress", crashlab.RESTART_LIMIT_S)
        group = driver.processes()
        assert driver.pid in group and ready["jvm_pid"] in group, (group, ready)
        lines = {pid: line for pid, line in command_lines().items() if pid in group}
        assert "org.apache.spark.deploy.SparkSubmit" in lines[ready["jvm_pid"]]
        assert not [pid for pid, line in lines.items() if secret in line]
        driver.kill()
        assert driver.processes() == []
        jvm = proc_stat(ready["jvm_pid"])
        assert jvm is None or jvm[1] == "Z", jvm


def test_metrics_over_a_fixed_record(tmp_path):
    """Every crash metric on rows whose answers are known, read back from disk."""
    recorder = results.Recorder()
    cycle = {"series": 0, "strategy": "direct", "workload": "stateless", "crash_point": "random", "seed": 1,
             "delay_s": 1.0, "landed": True, "wait_s": 1.0, "offsets_at_kill": 3, "committed_at_kill": 2,
             "first_batch": 3, "error": None, "verified_through": 3, "seconds": 20.0}
    for i, (ok, ms, requests, dup) in enumerate([(True, 100.0, 10, 0), (True, 200.0, 30, 5), (True, 300.0, 20, 0),
                                                 (False, float("nan"), None, None)]):
        recorder.rows["cycles"].append({**cycle, "cycle": i, "restart_ok": ok, "recovery_ms": ms,
                                        "recovery_requests": requests, "jvm_start_ms": 1000.0 * (i + 1),
                                        "duplicates": dup, "lost": 0 if ok else None, "partial": 0 if ok else None})
    recorder.rows["crash_series"].append({"series": 0, "strategy": "direct", "workload": "stateless", "cycles": 4,
                                          "seed": 1, "rows_per_batch": 100, "prefix": "p", "error": "cycle 3: x",
                                          "last_batch": 9, "duplicates": 5, "lost": 2, "partial": 1, "unexpected": 0,
                                          "temp_objects": 0, "orphan_files": 3, "pending_uploads": 1, "objects": 50})
    for start, outcome in ((3, "clean-error"), (0, "silent-damage")):
        recorder.rows["two_writers"].append({"strategy": "direct", "workload": "stateless", "head_start": start,
                                             "seed": 1, "outcome": outcome, "overwritten_logs": int(start == 0),
                                             "overwritten_files": "checkpoint/offsets/0" if start == 0 else None})
    record = disk.read(disk.write(recorder.results({"schema_version": schema.SCHEMA_VERSION, "store": "t",
                                                       "experiment": "crashlab"}), tmp_path / "t-crashlab"))
    assert metrics.crash_cycles(record, "direct") == 4
    assert metrics.restart_failure_rate(record, "direct") == 0.25
    assert metrics.recovery_percentile(record, "direct", 50) == 200.0  # the failed restart left out
    assert metrics.recovery_percentile(record, "direct", 95) == pytest.approx(290.0)
    assert metrics.recovery_requests(record, "direct") == 20.0
    assert metrics.jvm_start_percentile(record, "direct", 50) == 2500.0
    assert metrics.duplicated_rows(record, "direct") == 5 and metrics.lost_rows(record, "direct") == 2
    assert metrics.cycles_not_exactly_once(record, "direct") == 1
    assert metrics.kills_inside_a_batch(record, "direct") == 4  # offsets 3, commits 2 in every row
    assert [metrics.leftover_objects(record, "direct", k) for k in metrics.LEFTOVER_KINDS] == [0, 3, 1]
    assert metrics.crash_cycles(record, "direct", "stateful") == 0
    assert metrics.two_writer_outcome_is(record, "direct", "clean-error", "stateless", 3) == 1.0
    assert metrics.two_writer_outcome_is(record, "direct", "silent-damage", "stateless", 0) == 1.0
    assert metrics.two_writer_run(record, "direct", "stateless", 0).overwritten_files == "checkpoint/offsets/0"


@pytest.mark.parametrize("args, says", [
    (["--workloads", "bogus"], "unknown workload 'bogus'"),
    (["--points", "sideways"], "unknown crash point 'sideways'"),
    (["--cycles", "0"], "--cycles must be at least 1"),
    (["--strategies", "rename,nope"], "unknown strategy 'nope'"),
    (["--store", "hdfs"], "unknown store 'hdfs'"),
    (["--two-writer-starts", "3,soon"], "--two-writer-starts takes batch counts"),
    (["--part", "3/2"], "--part takes K/N with 1 <= K <= N"),
    (["--part", "half"], "--part takes K/N"),
    (["--workloads", "stateless", "--points", "during-state-upload"], "no crash point of during-state-upload"),
])
def test_bad_input_is_one_line(args, says):
    assert says in one_error_line(ckptbench_here("crashlab", *args))
