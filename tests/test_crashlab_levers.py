"""The crash lab in configurations of Spark's own checkpoint levers (``crashlab.configured``), against
real servers: a series' drivers start with a preset's settings and query options; RocksDB with
checkpoint format v2 keeps exactly-once; async progress tracking, which Spark documents as not
exactly-once end to end, duplicates the rows of a foreach writer that is idempotent per (partition,
epoch) and keeps exactly-once without it, and the lab shows both; a configuration Spark refuses is
recorded with its message instead of cycles; the foreach sink's verifier catches a writer that is
not idempotent. Then, without Spark: the verdict's rules for a sink whose batches are not atomic,
the plans' configurations, and the figures per configuration that the recommendation reads.

Each series starts two driver JVMs however few its cycles, so each here runs one cycle.
"""

from __future__ import annotations

import dataclasses
import re
import types

import pandas as pd
import pytest

from ckptbench import config, metrics
from ckptbench.experiments import crashlab
from ckptbench.record import disk, results, schema
from ckptbench.report import page
from helpers import bucket_of, crash_lab

ROWS = 100  # per batch: the lab's default


def needs_spark_4(spark) -> None:
    if int(spark.version.split(".")[0]) < 4:
        pytest.skip(f"Spark {spark.version} refuses async progress tracking with a foreach sink and has no format v2")


def exactly_once(series) -> None:
    assert series.error is pd.NA or series.error is None, series.error
    assert (series.duplicates, series.lost, series.partial, series.unexpected) == (0, 0, 0, 0)


def killed_inside_commit(spark, suite_stores, workload: str):
    """One cycle of conditional x ``workload`` killed inside the write of commits/N, after the
    sink wrote batch N: the restart re-runs batch N. The record and its cycle."""
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, recorder):
        crash.series("conditional", workload, 1, ("inside-commit",))
    record = recorder.results({})
    [cycle] = record.cycles.itertuples()
    assert cycle.restart_ok and cycle.landed, cycle.error
    assert cycle.first_batch == cycle.offsets_at_kill == cycle.committed_at_kill + 1
    return record, cycle


def test_a_foreach_writer_idempotent_per_epoch_keeps_exactly_once_in_sparks_own_configuration(spark, suite_stores):
    """Killed inside the write of commits/N, after the writer wrote batch N: the restart re-runs
    batch N, and the writer replaces its files whole."""
    record, cycle = killed_inside_commit(spark, suite_stores, "stateless-foreach")
    assert (cycle.duplicates, cycle.lost, cycle.partial) == (0, 0, 0)
    [series] = record.crash_series.itertuples()
    assert (series.workload, series.preset) == ("stateless-foreach", "default")
    exactly_once(series)
    assert series.last_batch >= cycle.first_batch and series.orphan_files == -1  # no sink log to ask


def test_async_progress_tracking_replays_skipped_batches_as_one_and_the_lab_sees_it(spark, suite_stores, monkeypatch):
    """Spark's documented limit ("offset ranges for batch can be changed in case of failure"),
    measured: async progress tracking writes offsets once an interval, and a restart re-runs every
    batch since the last offsets written before the latest as ONE batch under the latest's id, so
    the writer above, exactly-once without the lever, writes the rows of the batches between
    them a second time, under another epoch. Killed just after an offsets/N stored after skipped
    ones: the duplicates are exactly the rows of the batches skipped. The interval is made long
    (5 s) so that batches run between two written offsets however slow the machine."""
    needs_spark_4(spark)
    lever = config.LEVERS["async-progress"]
    monkeypatch.setitem(config.LEVERS, "async-progress",
                        dataclasses.replace(lever, options={**lever.options, config.ASYNC_INTERVAL: "5000"}))
    store = suite_stores.get("embedded")
    with crash_lab(spark, store, keep=True) as (crash, recorder):
        crash.series("conditional", "stateless-foreach", 1, ("after-skipped-offsets",), preset="async-progress")
        assert {d.config.options[config.ASYNC_PROGRESS] for d in crash.drivers} == {"true"}
        prefix = recorder.rows["crash_series"][0]["prefix"]
        names = [k.rsplit("/", 1)[1] for k in store.list_keys(bucket_of(store), f"{prefix}/checkpoint/offsets/")]
        store.empty_bucket(bucket_of(store), prefix + "/")
    offsets = sorted(int(n) for n in names if n.isdigit())
    record = recorder.results({})
    [cycle] = record.cycles.itertuples()
    assert cycle.restart_ok and cycle.landed, cycle.error
    killed = cycle.offsets_at_kill  # its offsets stored, its commit not: the restart re-runs it
    before = max(o for o in offsets if o < killed)  # the offsets written before it
    assert killed - before >= 2 and cycle.committed_at_kill == before, (offsets, cycle)
    assert cycle.first_batch == killed
    skipped = (killed - before - 1) * ROWS
    assert (cycle.duplicates, cycle.lost, cycle.partial) == (skipped, 0, 0)
    [series] = record.crash_series.itertuples()
    assert (series.preset, series.duplicates, series.lost, series.partial, series.unexpected) == (
        "async-progress", skipped, 0, 0, 0)
    # The configuration's figures, not the strategy's own.
    assert metrics.duplicated_rows(record, "conditional", preset="async-progress") == skipped
    assert metrics.crash_cycles(record, "conditional") == 0
    assert page.safety(record)["conditional", "async-progress"].duplicated == skipped


def test_format_v2_on_rocksdb_keeps_exactly_once(spark, suite_stores):
    """Killed while a batch's state is uploaded; the state files carry format v2's unique ids, so
    the drivers ran with the preset's settings and the provider's class."""
    needs_spark_4(spark)
    store = suite_stores.get("embedded")
    with crash_lab(spark, store, keep=True) as (crash, recorder):
        crash.series("rename", "stateful", 1, ("during-state-upload",), preset="format-v2", provider="rocksdb")
        prefix = recorder.rows["crash_series"][0]["prefix"]
        state = store.list_keys(bucket_of(store), f"{prefix}/checkpoint/state/")
        store.empty_bucket(bucket_of(store), prefix + "/")
    record = recorder.results({})
    [cycle] = record.cycles.itertuples()
    assert cycle.restart_ok and cycle.landed, cycle.error
    assert (cycle.duplicates, cycle.lost, cycle.partial) == (0, 0, 0)
    [series] = record.crash_series.itertuples()
    assert series.preset == "format-v2"
    exactly_once(series)
    assert [k for k in state if re.search(r"/\d+_[0-9a-f-]{36}\.zip$", k)], state[:20]


def test_a_configuration_spark_refuses_is_recorded_with_its_message(spark, suite_stores):
    """Async progress tracking on the stateful workload: Spark refuses it before the first batch
    (its parquet sink, and its state); the series says so in Spark's words and runs no cycle."""
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, recorder):
        crash.series("conditional", "stateful", 1, preset="async-progress")
    record = recorder.results({})
    assert len(record.cycles) == 0
    [series] = record.crash_series.itertuples()
    assert series.error.startswith(crashlab.REFUSED), series.error
    assert "does not support async progress tracking" in series.error
    assert (series.cycles, series.preset, series.duplicates, series.lost) == (0, "async-progress", 0, 0)
    assert page.safety(record)["conditional", "async-progress"].cycles == 0


def test_a_foreach_writer_that_appends_is_caught_replaying_a_batch(spark, suite_stores):
    """The broken twin: appending, killed inside the write of commits/N after its write of batch N;
    the restart re-runs batch N and the writer appends it again."""
    record, cycle = killed_inside_commit(spark, suite_stores, "unsafe-foreach-writer")
    assert cycle.duplicates == ROWS, "the re-run batch's rows are in the output twice"
    assert cycle.lost == 0
    assert metrics.duplicated_rows(record, "conditional") == ROWS
    assert metrics.cycles_not_exactly_once(record, "conditional") == 1


def test_a_lever_this_spark_lacks_starts_no_driver():
    """Format v2 on Spark 3.5: no driver starts (it would ignore the setting); the row says why."""
    recorder = results.Recorder()
    fake = types.SimpleNamespace(version="3.5.6")
    store = types.SimpleNamespace(run_prefix="run/")
    with crashlab.CrashLab(fake, store, "b", recorder) as crash:
        crash.series("rename", "stateful", 3, preset="format-v2", provider="rocksdb")
        assert crash.drivers == []
        with pytest.raises(ValueError, match="unknown state store provider 'hbase'"):
            crash.series("rename", "stateful", 1, preset="format-v2", provider="hbase")
    [row] = recorder.rows["crash_series"]
    assert row["error"].startswith(crashlab.REFUSED + "Spark 3.5.6 has no format-v2") and row["cycles"] == 0


def test_the_verdict_on_a_sink_whose_batches_are_not_atomic():
    """A foreach sink shows each task's rows on their own: past the last commit a batch may be
    partly written (a restart re-runs it), at rest too; duplicates and values too many still count."""
    foreach, file_sink = crashlab.WORKLOADS["stateless-foreach"], crashlab.WORKLOADS["stateless"]
    assert not foreach.atomic_batches and file_sink.atomic_batches
    whole = {0: (10, 10), 1: (10, 10), 2: (10, 10)}
    ahead = {**whole, 3: (10, 10), 4: (10, 10), 5: (4, 4)}  # async: batches past the last commit
    assert crashlab.judge(ahead, 2, foreach, 10, at_rest=True).exactly_once
    assert not crashlab.judge(ahead, 2, file_sink, 10, at_rest=True).exactly_once
    assert crashlab.judge({**whole, 4: (14, 10)}, 2, foreach, 10, at_rest=True).duplicates == 4
    assert crashlab.judge({**whole, 4: (12, 12)}, 2, foreach, 10, at_rest=True).unexpected == 2
    lost = crashlab.judge({0: (10, 10), 2: (6, 6)}, 2, foreach, 10, at_rest=True)
    assert (lost.lost, lost.partial) == (14, 1)


def test_the_plans_configurations():
    """full runs every configuration on every strategy; quick and smallest none (bench's crash check
    runs those a decision leads with); a part runs its share of the cycles."""
    strategies = ["rename", "direct", "conditional", "manifest"]
    assert crashlab.PLANS["smallest"].configured_series(strategies) == []
    assert crashlab.PLANS["quick"].configured_series(strategies) == []
    full = crashlab.PLANS["full"]
    assert len(full.configured_series(strategies)) == len(crashlab.CONFIGURATIONS) * len(strategies)
    for workload, preset, provider in crashlab.CONFIGURATIONS:
        assert workload in crashlab.WORKLOADS and provider in (None, *config.PROVIDERS)
        crashlab.configuration(preset, provider)  # known levers
    assert crashlab.configuration("format-v2", "rocksdb") == (
        {config.STATE_PROVIDER: config.ROCKSDB, config.FORMAT_VERSION: "2"}, {})
    # The window of async progress tracking's replay: only where the query runs with it.
    skipped, foreach = crashlab.CRASH_POINTS["after-skipped-offsets"], crashlab.WORKLOADS["stateless-foreach"]
    assert skipped.applies_to(foreach, crashlab.configuration("async-progress")[1])
    assert not skipped.applies_to(foreach, {}) and not skipped.applies_to(crashlab.WORKLOADS["stateful"], {})
    assert [skipped.confirm(before, 4) for before in (set(), {3}, {1}, {0, 1}, {1, 3})] == [
        False, False, True, True, False]
    one = dataclasses.replace(crashlab.PLANS["smallest"], configurations=crashlab.CONFIGURATIONS[:1],
                              configuration_strategies=("rename", "conditional"))
    assert one.in_part(1, 2).configured_series(strategies) == [
        ("rename", "stateless-foreach", "async-progress", None, 1),
        ("conditional", "stateless-foreach", "async-progress", None, 1)]
    assert one.in_part(2, 2).configured_series(strategies) == []
    with_none = crashlab.expected_seconds(crashlab.CrashPlan(1, ("stateless",), ()), strategies)
    with_one = crashlab.expected_seconds(crashlab.CrashPlan(1, ("stateless",), (), configurations=(
        ("stateless-foreach", "async-progress", None),)), strategies)
    assert with_one == pytest.approx(with_none + len(strategies) * (crashlab.CYCLE_S + crashlab.SERIES_OVERHEAD_S))


def _series(recorder, number: int, preset: str, duplicates: int, lost: int, cycles: int,
            error: str | None = None) -> None:
    recorder.rows["crash_series"].append({
        "series": number, "strategy": "direct", "workload": "stateless", "cycles": cycles, "seed": 1,
        "rows_per_batch": 100, "prefix": "p", "error": error, "last_batch": 9, "duplicates": duplicates,
        "lost": lost, "partial": 0, "unexpected": 0, "temp_objects": 0, "orphan_files": 0, "pending_uploads": 0,
        "objects": 5, "preset": preset})
    for cycle in range(cycles):
        recorder.rows["cycles"].append({
            "series": number, "strategy": "direct", "workload": "stateless", "cycle": cycle, "crash_point": "random",
            "seed": 1, "landed": True, "restart_ok": True, "recovery_ms": 100.0, "duplicates": duplicates,
            "lost": lost, "partial": 0})


def test_figures_per_configuration_leave_the_strategys_own_alone(tmp_path):
    """A strategy's crash figures count its series in Spark's own configuration only; each other
    configuration has its own, which ``page.safety`` keys (strategy, preset) and ``decide`` reads."""
    recorder = results.Recorder()
    _series(recorder, 0, "default", 0, 0, 2)
    _series(recorder, 1, "async-progress", 7, 3, 1)
    _series(recorder, 2, "format-v2", 0, 0, 0, error=crashlab.REFUSED + "Spark says no")
    env = {"schema_version": schema.SCHEMA_VERSION, "store": "t", "experiment": "crashlab"}
    record = disk.read(disk.write(recorder.results(env), tmp_path / "t-crashlab"))
    assert metrics.crash_cycles(record, "direct") == 2
    assert (metrics.duplicated_rows(record, "direct"), metrics.lost_rows(record, "direct")) == (0, 0)
    assert metrics.cycles_not_exactly_once(record, "direct") == 0
    assert metrics.crash_cycles(record, "direct", preset="async-progress") == 1
    assert metrics.duplicated_rows(record, "direct", preset="async-progress") == 7
    assert metrics.cycles_not_exactly_once(record, "direct", preset="async-progress") == 1
    found = page.safety(record)
    assert (found["direct"].cycles, found["direct"].duplicated, found["direct"].lost) == (2, 0, 0)
    assert (found["direct", "async-progress"].duplicated, found["direct", "async-progress"].lost) == (7, 3)
    assert found["direct", "format-v2"].cycles == 0
    assert "default" not in {key[1] for key in found if isinstance(key, tuple)}
