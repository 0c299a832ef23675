"""Spark's own checkpoint levers, run for real: real queries on the shared SparkSession, checkpointing
over HTTP to the embedded store behind the metering proxy, through ``querylab.QueryLab`` as the levers
experiment runs them (``ckptbench.experiments.levers``: the experiment itself starts a session of
its own, which one test process cannot hold beside the suite's).

- Spark refusing a configuration is a result, recorded with Spark's own reason (async progress
  tracking on a stateful job, checkpoint format v2 on the HDFS-backed state store), never
  recommended, and shown with that reason in the decision and in the report;
- ``querylab.refusal`` calls a refusal only what stopped a query before its first batch ended: the
  same Spark refusal raised after a query's batches ran is a failure, and a query whose store turns
  it away after its first batch is recorded as failed, not refused;
- async progress tracking changes what is measured: walCommit off the batch's path (near zero)
  where Spark's default waits for the store, on the same store;
- the report's "configurations side by side" section renders from such a record and opens
  offline in a 1024-pixel window (``tests/browser.py``).
"""

from __future__ import annotations

import dataclasses
import uuid

import browser  # tests/browser.py
import pytest

import ckpt_impls
from ckptbench import config, decide, metrics, progress
from ckptbench.config import Shape
from ckptbench.experiments import levers as levers_experiment
from ckptbench.harness import querylab, workloads
from ckptbench.harness.spark import settings_set
from ckptbench.record import disk, results
from ckptbench.report import levers as report_levers
from ckptbench.report import page
from helpers import skip_unless_ci
from infra.faults import Fault, Latency

pytestmark = pytest.mark.slow

PLAN = dataclasses.replace(config.PLANS["smallest"], warmup=1, batches=3)
STATEFUL = Shape("stateful", "hdfs")
STATELESS = Shape("stateless")
ASYNC_REFUSED = "Stateful streaming queries does not support async progress tracking"
V2_REFUSED = "STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED"
#: What the proxy adds to every PUT in the async progress test: a store's round trip the default's
#: walCommit must wait for (the emulator alone answers in about a millisecond), long beside what a
#: walCommit without a PUT takes on a loaded machine.
PUT_DELAY_S = 0.1


@pytest.fixture(scope="module")
def levers_lab(spark, suite_stores, metered_stores) -> querylab.QueryLab:
    store, bucket = metered_stores(suite_stores.get("embedded"))
    return querylab.QueryLab(spark, store, bucket, PLAN)


def record_of(bench: querylab.QueryLab, recorder: results.Recorder, shapes: list[Shape]) -> results.Results:
    """``recorder``'s runs as a ``levers`` record, its environment as the experiment writes it."""
    env = results.environment(bench.store, "levers", "smallest", dataclasses.asdict(PLAN), spark=bench.spark,
                              **bench.where, checkpoint_settings=querylab.checkpoint_settings(bench.spark),
                              shapes=[dataclasses.asdict(s) | {"name": s.name} for s in shapes], staged=False,
                              not_measured={})
    return recorder.results(env)


@pytest.fixture(scope="module")
def hdfs_record(levers_lab) -> results.Results:
    """The HDFS-backed stateful job in every configuration it is offered that the suite's one session
    runs (task slots per core need a session each: test_recommend's end-to-end run has them), with
    Spark's default manager and ``conditional``."""
    recorder = results.Recorder()
    for preset in (p for p in config.presets_for(STATEFUL) if config.slots_of(p) == 1):
        for strategy in ("rename", "conditional"):
            levers_lab.run(recorder, strategy, STATEFUL, STATEFUL.keys, PLAN.warmup, PLAN.batches, preset=preset)
    return record_of(levers_lab, recorder, [STATEFUL])


def test_a_configuration_spark_refuses_is_recorded_with_sparks_reason(hdfs_record):
    runs = hdfs_record.runs
    assert sorted(runs[runs.refused].preset) == ["async-progress", "async-progress", "format-v2", "format-v2"]
    assert runs[~runs.refused].others_cpu.between(0, 1).all()  # how busy the machine was beside each one measured
    assert runs[runs.refused].others_cpu.isna().all()
    for strategy in ("rename", "conditional"):
        with pytest.raises(results.Refused, match=ASYNC_REFUSED):
            hdfs_record.run(strategy, STATEFUL.name, STATEFUL.keys, preset="async-progress")
        with pytest.raises(results.Refused, match=rf"{V2_REFUSED}.*HDFSBackedStateStoreProvider"):
            hdfs_record.run(strategy, STATEFUL.name, STATEFUL.keys, preset="format-v2")
        for preset in ("default", "no-checksum"):  # what Spark accepts ran every batch asked
            assert len(hdfs_record.run(strategy, STATEFUL.name, STATEFUL.keys, preset=preset).batches) == PLAN.batches

    d = decide.decide(hdfs_record, STATEFUL.name, 10.0)
    by_label = {c.label: c for c in d.candidates}
    for strategy in ("rename", "conditional"):
        assert by_label[f"{strategy} + async-progress"].refused
        assert by_label[f"{strategy} + async-progress"].out.startswith(f"Spark refuses it: {ASYNC_REFUSED}")
        assert V2_REFUSED in by_label[f"{strategy} + format-v2"].out
    assert d.chosen is not None and not d.chosen.refused and d.chosen.preset in ("default", "no-checksum")
    assert d.baseline is by_label["rename"]


def test_the_report_shows_every_configuration_and_opens_in_a_1024_px_window(hdfs_record, tmp_path):
    disk.write(hdfs_record, disk.directory(tmp_path / "raw", hdfs_record.environment["store"], "levers"))
    index = page.write(tmp_path)[0]
    html = index.read_text()
    assert f">embedded: {report_levers.TITLE}</h2>" in html
    assert f"Spark refuses it: {ASYNC_REFUSED}" in html and V2_REFUSED in html
    d = decide.decide(hdfs_record, STATEFUL.name, report_levers.TRIGGER_S)
    # The top of the page names the configuration and links to its decision.
    assert (f'<li><a href="#levers-embedded-{STATEFUL.name}">{STATEFUL.name} on embedded (an emulator: its '
            f"latencies say nothing about a real store): run {d.recommended}:") in html
    assert f'<div class="decision" id="levers-embedded-{STATEFUL.name}">' in html
    for c in d.candidates:
        assert f"<td>{c.label}" in html
    if browser.executable() is None:
        skip_unless_ci("chromium not installed (python -m ckptbench.install installs Debian's as root)")
    with browser.Chromium() as chrome:
        check = chrome.check_page(index, screenshot=tmp_path / "levers.png",
                                  ready="document.querySelectorAll('.decision').length === 1")
    assert check.problems() == [], f"screenshot {check.screenshot}"
    assert check.value is True, check.screenshot


class FailAfterFirstBatch:
    """A progress bar for ``QueryLab.run`` that, told of the query's first batch, has the proxy answer
    every PUT from then on with 403 (the store turning the query away mid-run)."""

    def __init__(self, proxy) -> None:
        self.proxy, self.batches = proxy, 0

    def set_postfix_str(self, label: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        if self.batches == 0 and n:
            self.proxy.inject(Fault("PUT", status=403))
        self.batches += n


def test_a_query_the_store_turns_away_after_its_first_batch_failed_it_was_not_refused(levers_lab):
    recorder = results.Recorder()
    bar = FailAfterFirstBatch(levers_lab.proxy)
    try:
        levers_lab.run(recorder, "rename", STATELESS, STATELESS.keys, 1, 20, bar)
    finally:
        levers_lab.proxy.clear_faults()
    record = record_of(levers_lab, recorder, [STATELESS])
    [run] = record.runs.itertuples()
    assert isinstance(run.error, str) and "403" in run.error, run.error
    assert not run.refused, run.error
    with pytest.raises(results.RunFailed) as raised:
        record.run("rename", STATELESS.name, STATELESS.keys)
    assert not isinstance(raised.value, results.Refused)
    [candidate] = decide.decide(record, STATELESS.name, 10.0).candidates
    assert not candidate.refused and candidate.out.startswith("its run failed")


def test_sparks_refusal_after_batches_ran_is_a_failure(spark, levers_lab):
    """The same exception, Spark's real refusal of a stateful query with async progress: a refusal
    for the query it stopped before any batch ended, a failure for one that had run batches."""
    ckpt_impls.use(spark, "conditional")
    base = f"s3a://{levers_lab.bucket}/{levers_lab.store.run_prefix}refusal-{uuid.uuid4().hex[:8]}"
    options = config.preset("async-progress")[1]
    with settings_set(spark, STATEFUL.conf()):
        refused = workloads.described(spark, f"{base}/refused/checkpoint", f"{base}/refused/output", STATEFUL,
                                      querylab.measured_options(options, STATEFUL.trigger_s))
    try:
        with pytest.raises(workloads.QueryFailed) as raised:
            workloads.await_batches(refused, 1, timeout=120)
    finally:
        refused.stop()
    ran = workloads.described(spark, f"{base}/ran/checkpoint", f"{base}/ran/output", STATELESS)
    try:
        workloads.await_batches(ran, 1, timeout=120)
        assert refused.lastProgress is None and ran.lastProgress is not None
        assert ASYNC_REFUSED in querylab.refusal(raised.value, refused)
        assert querylab.refusal(raised.value, ran) is None
    finally:
        ran.stop()


def test_a_refusal_is_remembered_per_job_so_every_job_it_refuses_has_its_own_refused_run(levers_lab):
    """Two stateful jobs, one after the other in one session as ``levers`` measures them, each in
    async progress (which Spark refuses for both), their refusals remembered across the session:
    each job's record holds its refusal, and the repeats after the first run no query."""
    rocksdb = Shape("stateful", "rocksdb")
    plan = dataclasses.replace(PLAN, repeats=2)
    recorder, refused = results.Recorder(), set()
    bar = progress.Recorder("configurations", 0, "batch")
    for shape in (STATEFUL, rocksdb):
        levers_experiment._measure(levers_lab, recorder, shape, [("async-progress", "rename")], plan, bar,
                                   range(plan.repeats), refused, {})
    record = record_of(levers_lab, recorder, [STATEFUL, rocksdb])
    for shape in (STATEFUL, rocksdb):
        with pytest.raises(results.Refused, match=ASYNC_REFUSED):
            record.run("rename", shape.name, shape.keys, preset="async-progress")
    assert len(record.runs) == 2  # one query per job: its second repeat is the refusal already recorded
    assert refused == {(shape.name, "async-progress", "rename") for shape in (STATEFUL, rocksdb)}


def test_async_progress_takes_the_offsets_write_off_the_batchs_path(levers_lab):
    recorder = results.Recorder()
    levers_lab.proxy.inject(Latency(PUT_DELAY_S, ops=("PUT",)))
    try:
        for preset in ("default", "async-progress"):
            levers_lab.run(recorder, "conditional", STATELESS, STATELESS.keys, 2, 8, preset=preset)
    finally:
        levers_lab.proxy.clear_faults()
    record = record_of(levers_lab, recorder, [STATELESS])
    default, async_progress = (record.run("conditional", STATELESS.name, STATELESS.keys, preset=preset)
                               for preset in ("default", "async-progress"))
    # Spark's default writes offsets/N on the batch's path, through the PUT the proxy holds.
    assert metrics.duration_percentile(default, "walCommit", 50) >= PUT_DELAY_S * 1000
    # Async progress writes it off the path: its walCommit waits for no PUT, on the same store...
    assert metrics.duration_percentile(async_progress, "walCommit", 50) < PUT_DELAY_S * 1000 / 2
    # ...and the offsets are still written.
    assert (async_progress.requests.area == "offsets").sum() > 0


def test_a_session_runs_the_task_slots_it_started_with_and_a_clusters_are_not_set_here(levers_lab):
    assert levers_lab.slots == 1 and levers_lab.task_slots == 2  # the suite's local[2]
    assert levers_lab.lacks_slots("default") is None
    with pytest.raises(ValueError, match="configuration slots-2 runs 2 task slots per core; this session runs 1"):
        levers_lab.lacks_slots("slots-2")
    on_a_cluster = querylab.QueryLab(levers_lab.spark, levers_lab.store, levers_lab.bucket, PLAN)
    on_a_cluster.task_slots = None  # as a spark:// master's: its executors' cores set their slots
    recorder = results.Recorder()
    on_a_cluster.run(recorder, "rename", STATELESS, STATELESS.keys, 1, 1, preset="slots-4")
    [run] = recorder.rows["runs"]
    assert run["refused"] and run["error"].startswith("4 task slots per core are a local master's threads here")
