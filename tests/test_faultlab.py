"""The fault lab (``ckptbench.experiments.faultlab``): its rates on fixed records, its table in the report,
bad input on the command line, and real runs: queries on moto and Ceph RGW under fault
profiles, through the metering proxy."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import ckpt_impls
from ckptbench import config, decide, metrics
from ckptbench.experiments import faultlab
from ckptbench.harness import querylab
from ckptbench.record import disk, results, schema
from ckptbench.report import faults, page
from helpers import T0, ckptbench, ckptbench_here, one_error_line, progress
from infra.faults import Injection
from infra.s3ops import Event


def _event(at: float, method: str, op: str, key: str, status: int) -> Event:
    return Event(T0 + at, T0 + at + 0.002, method, op, "offsets", "b", key, status, 0, 0)


def fixed_record() -> results.Results:
    """Three strategies under one profile: rename died at its second batch of four in one of its
    two runs; direct completed both; conditional's one run stalled after two; injections and
    requests at known times."""
    recorder = results.Recorder()
    outcomes = [("rename", 0, 1, "died", "FileNotFoundException: No such file or directory: s3a://b/ck/commits/.0.tmp"),
                ("rename", 1, 4, "completed", None), ("direct", 0, 4, "completed", None),
                ("direct", 1, 4, "completed", None),
                ("conditional", 0, 2, "stalled", "only 2 of 4 batches within 300s")]
    for strategy, seed, done, outcome, error in outcomes:
        run = recorder.add_run(strategy, "stateful", 100, f"faults/{strategy}-{seed}")
        if error:
            recorder.fail_run(run, error)
        recorder.add_fault_run(run, profile="eventual", seed=seed, batches=4, batches_done=done, outcome=outcome,
                               cause="" if outcome != "died" else error.replace("FileNotFound", "java.io.FileNotFound"),
                               recovered=True if outcome == "died" else None, exactly_once=None, seconds=3.0)
        recorder.add_batches(run, "measured", [progress(b, 50.0) for b in range(done)])
    recorder.add_requests(0, [
        _event(0.01, "PUT", "PUT", "ck/offsets/0", 0),  # a lost response ...
        _event(0.02, "PUT", "PUT", "ck/offsets/0", 412),  # ... and its retry
        _event(0.03, "HEAD", "HEAD", "ck/commits/0", 404),
        _event(0.04, "HEAD", "HEAD", "ck/commits/0", 200),  # after a 404: not a retry
        _event(0.05, "GET", "GET", "ck/offsets/0", 503),
        _event(0.06, "HEAD", "HEAD", "ck/offsets/0", 200),  # another method: not a retry
        _event(0.07, "GET", "GET", "ck/offsets/0", 200)], [progress(0, 50.0)])  # a retry
    recorder.add_requests(2, [_event(0.01, "PUT", "PUT", "ck/offsets/0", 500),
                              _event(0.02, "PUT", "PUT", "ck/offsets/1", 200)], [progress(0, 50.0)])
    recorder.add_injections(0, [Injection(T0 + 0.01, "PUT", "b", "ck/offsets/0", "stale-list")] * 3)
    recorder.add_injections(2, [Injection(T0 + 0.01, "PUT", "b", "ck/offsets/0", "stale-missing")])
    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": "faultlab", "store": "embedded",
           "describe": "embedded (emulator)", "emulator": True, "size": "quick", "commit": "0" * 40,
           "created": "2026-11-24T00:00:00+00:00", "versions": {"spark": "4.3.0"},
           "plan": {"batches": 4, "seeds": [0, 1], "recovery_batches": 2},
           "profiles": {"eventual": "pre-2020 S3 consistency"}}
    return recorder.results(env)


def test_rates_on_a_fixed_record(tmp_path):
    record = disk.read(disk.write(fixed_record(), tmp_path / "faultlab"))  # as written and read back
    assert metrics.death_rate(record, "rename", "eventual") == 0.5
    assert metrics.death_rate(record, "direct", "eventual") == 0.0
    assert metrics.failed_batch_rate(record, "rename", "eventual") == 3 / 8
    assert metrics.failed_batch_rate(record, "direct", "eventual") == 0.0
    assert metrics.death_rate(record, "conditional", "eventual") == 0.0  # a stall is not a death
    assert metrics.failed_batch_rate(record, "conditional", "eventual") == 0.5
    assert metrics.retried_per_run(record, "rename", "eventual") == 2 / 2  # the 412 and the GET, over 2 runs
    assert metrics.retried_per_run(record, "direct", "eventual") == 0.0  # offsets/1 is another key
    assert metrics.injected_per_run(record, "rename", "eventual") == 3 / 2
    assert metrics.injected_per_run(record, "direct", "eventual") == 1 / 2
    assert record.fault_runs.recovered.isna().sum() == 4
    with pytest.raises(KeyError, match="no fault-lab run of manifest under eventual"):
        metrics.death_rate(record, "manifest", "eventual")


def test_retried_counts_what_follows_a_failure_only():
    requests = fixed_record().requests
    flags = metrics.retried(requests)
    assert list(requests[flags].status) == [412, 200]
    assert list(requests[flags].method) == ["PUT", "GET"]


def test_summary_table_and_report_section():
    record = fixed_record()
    [rename, direct, conditional] = faults.fault_summary(record)
    assert (rename["strategy"], rename["runs"], rename["died"], rename["recovered"]) == ("rename", 2, 1, "1/1")
    assert rename["cause"].startswith("java.io.FileNotFoundException")
    assert (direct["died"], direct["cause"], direct["recovered"]) == (0, "", "0/0")
    assert (conditional["died"], conditional["stalled"]) == (0, 1)
    assert conditional["cause"] == "only 2 of 4 batches within 300s"
    table = faults.fault_table(record)
    assert ("| stateful | eventual | rename | 2 | 1 | 0 | 38% | 1.0 | 1.5 | 1/1 | - | "
            "java.io.FileNotFoundException") in table
    section = page._faults("embedded", record)
    assert section.tables[0].header == faults.FAULT_HEADER and len(section.tables[0].rows) == 3
    assert "aws-projection" not in " ".join(section.text)
    # The eventual profile's verdict, with the run's causes, in words: conditional stalled too.
    findings = faults.eventual_findings(record)
    assert findings[0].startswith("eventual x stateful: failed: rename in 1 of 2 runs (java.io.FileNotFoundException")
    assert "conditional in 1 of 1 runs (only 2 of 4 batches within 300s)" in findings[0]
    assert findings[0].endswith("no failure: direct.")
    assert findings[-1].startswith("rename fails as the reference articles describe, but this run does not show "
                                   "the others safe: conditional failed too")
    assert findings[-1] in " ".join(section.text) and findings[-1] in table


def test_the_eventual_verdict_says_when_the_reference_failure_is_reproduced_and_when_not():
    record = fixed_record()
    stalled = record.fault_runs.outcome == "stalled"
    record.fault_runs.loc[stalled, "outcome"] = "completed"  # conditional no longer fails
    assert faults.eventual_findings(record)[-1].startswith("So this run reproduces the reference articles' failure")
    record.fault_runs["outcome"] = "completed"  # nobody fails
    assert faults.eventual_findings(record)[-1] == ("rename did not fail in this run, so it does not reproduce "
                                                      "the reference articles' failure.")
    record.runs = record.runs[record.runs.strategy != "rename"]  # nor ran
    assert faults.eventual_findings(record)[-1] == ("rename was not run under these profiles, so this run says "
                                                      "nothing of the reference articles' failure.")


def outage_record() -> results.Results:
    """Under outage-5s: rename rode it out (its first batch after the store was back ended 6 s after
    the outage's start), conditional died 2 s in and resumed on restart, direct's file sink died and
    lost rows; under eventual, a run with no outage."""
    recorder = results.Recorder()
    rows = [("rename", "stateful", "outage-5s", "completed", math.nan, 6.0, None, None),
            ("conditional", "stateful", "outage-5s", "died", 2.0, math.nan, True, None),
            ("direct", "file_sink", "outage-5s", "died", 3.0, math.nan, True, False),
            ("rename", "stateful", "eventual", "completed", math.nan, math.nan, None, None)]
    for strategy, workload, profile, outcome, died, resumed, recovered, exactly_once in rows:
        run = recorder.add_run(strategy, workload, 100, f"faults/{strategy}-{profile}")
        recorder.add_fault_run(run, profile=profile, seed=0, batches=4, batches_done=4 if outcome == "completed" else 1,
                               outcome=outcome, cause="" if outcome == "completed" else "java.net.SocketException",
                               recovered=recovered, exactly_once=exactly_once, seconds=9.0,
                               outage_s=5.0 if profile == "outage-5s" else None, died_after_s=died,
                               resumed_after_s=resumed)
    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": "faultlab", "store": "ceph", "describe": "ceph",
           "emulator": False, "size": "quick", "commit": "0" * 40, "created": "2026-11-24T00:00:00+00:00",
           "versions": {"spark": "4.3.0"}, "plan": {"batches": 4, "seeds": [0], "recovery_batches": 2},
           "profiles": {"outage-5s": "the store unreachable for 5 s", "eventual": "pre-2020 S3 consistency"}}
    return recorder.results(env)


def test_outage_times_and_table_on_a_fixed_record(tmp_path):
    record = disk.read(disk.write(outage_record(), tmp_path / "faultlab"))
    assert metrics.rode_out_rate(record, "rename", "outage-5s") == 1.0
    assert metrics.rode_out_rate(record, "conditional", "outage-5s") == 0.0
    assert metrics.time_to_death(record, "conditional", "outage-5s") == 2.0
    assert math.isnan(metrics.time_to_death(record, "rename", "outage-5s"))
    assert metrics.time_to_resume(record, "rename", "outage-5s") == 6.0
    assert metrics.time_to_outcome(record, "conditional", "outage-5s") == 2.0
    assert metrics.time_to_outcome(record, "rename", "outage-5s") == 6.0
    assert math.isnan(metrics.rode_out_rate(record, "rename", "eventual"))  # no outage began
    rows = faults.outage_rows(record)
    assert rows == [["stateful", "outage-5s", "rename", "1", "5.0", "1", "0", "0", "-", "6.0", "-", "-"],
                    ["stateful", "outage-5s", "conditional", "1", "5.0", "0", "1", "0", "2.0", "-", "1/1", "-"],
                    ["file_sink", "outage-5s", "direct", "1", "5.0", "0", "1", "0", "3.0", "-", "1/1", "1"]]
    table = faults.fault_table(record)
    assert "Store outages" in table and "| stateful | outage-5s | conditional | 1 | 5.0 | 0 | 1 | 0 | 2.0 |" in table
    section = page._faults("ceph", record)
    assert [t.caption for t in section.tables][1] == "Store outages" and section.tables[1].rows == rows
    assert "Store outages" not in faults.fault_table(fixed_record())  # a record without outages: no such table
    assert len(page._faults("embedded", fixed_record()).tables) == 1


def outage_150s_record(runs: dict[str, list[float | None]]) -> results.Results:
    """File-sink runs under outage-150s per strategy: each a death's seconds into the outage, or
    None for a run that rode it out."""
    recorder = results.Recorder()
    for strategy, deaths in runs.items():
        for seed, died in enumerate(deaths):
            run = recorder.add_run(strategy, "file_sink", 100, f"faults/{strategy}-{seed}")
            recorder.add_fault_run(run, profile="outage-150s", seed=seed, batches=4,
                                   batches_done=4 if died is None else 2,
                                   outcome="completed" if died is None else "died", cause="", recovered=None,
                                   exactly_once=True, seconds=9.0, outage_s=150.0,
                                   died_after_s=math.nan if died is None else died,
                                   resumed_after_s=155.0 if died is None else math.nan)
    return recorder.results({"plan": {"keys": [100]}})


def test_each_strategy_beside_sparks_default_under_an_outage():
    """Against rename: dying more often where the whole interval says so, then dying sooner (even
    once the store was back), a tie where the runs overlap, nothing called from one run."""
    record = outage_150s_record({"rename": [None, 120.0, None, 130.0, None], "conditional": [3.0, 2.0, 2.5, 4.0, 1.0],
                                 "direct": [None, 125.0, 140.0, 118.0, None], "manifest": [60.0],
                                 "abortable": [160.0, 151.0, 155.0, 152.0, 158.0]})  # outlive 2 of rename's 5
    lived = metrics.seconds_lived(record, "rename", "outage-150s")
    assert list(lived) == [math.inf, 120.0, math.inf, 130.0, math.inf]
    rows = {row[2]: row for row in faults.against_default_rows(record)}
    assert set(rows) == {"conditional", "direct", "manifest", "abortable"}
    assert rows["conditional"][3:7] == ["0 of 5", "-60 points [-100, -20]", "1.0, 2.0, 2.5, 3.0, 4.0", "0% [0, 0]"]
    assert rows["conditional"][-1] == "died more often than rename"
    assert rows["abortable"][-1] == "died more often than rename"  # though each after rename's deaths
    assert rows["direct"][3:5] == ["2 of 5", "-20 points [-80, +40]"]
    assert rows["direct"][-1] == "a tie: the runs cannot tell it from rename"
    assert rows["manifest"][-1] == "too few runs to call (two or more each)" and rows["manifest"][6] == "0% (one run)"
    sooner = outage_150s_record({"rename": [150.0, 152.0, 155.0], "direct": [10.0, 11.0, 12.0]})
    assert faults.against_default_rows(sooner)[0][-1] == "died sooner than rename"  # once back, too
    assert faults.against_default_rows(outage_150s_record({"rename": [5.0, 6.0, 7.0], "direct": [8.0, 9.0, 10.0]})
                                       )[0][-1] == "died later than rename"
    both_rode = outage_150s_record({"rename": [None, None], "conditional": [None, None]})
    assert faults.against_default_rows(both_rode)[0][-1] == "neither died in it"
    assert faults.against_default_rows(outage_150s_record({"rename": [5.0, 6.0, 7.0], "direct": [None] * 3}))[0][-1] \
        == "died less often than rename"
    assert "each strategy beside rename" in faults.fault_table(record)


def test_the_decision_reads_the_labs_call_beside_sparks_default():
    """Where Spark's default did not ride every run out, a strategy the lab calls dying more often
    (or sooner) still comes after those it does not: the decision's outages carry the lab's call,
    and one run of either calls nothing."""
    record = outage_150s_record({"rename": [None, 120.0, None, None, None], "conditional": [3.0, 2.0, 2.5, 4.0, 1.0],
                                 "direct": [None, 125.0, None, None, None], "manifest": [60.0]})
    found = page.outages(record)["file_sink"]
    assert {s: o.worse_than_default for s, o in ((s, p["outage-150s"]) for s, p in found.items())} == {
        "rename": False, "conditional": True, "direct": False, "manifest": False}
    rows = {row[2]: row[-1] for row in faults.against_default_rows(record)}
    assert rows == {"conditional": "died more often than rename",
                    "direct": "a tie: the runs cannot tell it from rename",
                    "manifest": "too few runs to call (two or more each)"}
    c = decide.Candidate("conditional")
    decide._outages(c, found)
    assert c.outage_worse == ("died after 2.5 s in outage-150s (store away 150 s), more often or sooner than Spark's "
                              "default")
    c = decide.Candidate("direct")
    decide._outages(c, found)
    assert c.outage_worse is None


def test_the_chance_one_outlives_the_other_counts_ties_half():
    assert metrics.outlives_interval([math.inf, math.inf], [math.inf, 1.0]).value == 0.75
    assert metrics.outlives_interval([1.0, 2.0], [3.0, 4.0]).value == 0.0
    assert math.isnan(metrics.outlives_interval([1.0], [2.0, 3.0]).low)  # one value: no interval


@pytest.mark.parametrize("args", [
    ("bench", "--fault-profile", "bogus"),
    ("measure", "--fault-profile", "bogus"),
    ("faultlab", "--profiles", "none,bogus"),
])
def test_an_unknown_profile_is_one_line_naming_the_valid_ones(args):
    line = one_error_line(ckptbench_here(*args))
    assert "unknown fault profile 'bogus'; valid fault profiles: none, latency-fixed" in line


def test_an_unknown_profile_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv(config.Settings.ENV["fault_profile"], "bogus")
    with pytest.raises(ValueError, match="CKPT_FAULT_PROFILE must be one of none, latency-fixed"):
        config.Settings.from_env()
    line = one_error_line(ckptbench("bench", env={config.Settings.ENV["fault_profile"]: "bogus"}))
    assert "unknown fault profile 'bogus'" in line


# -- real runs ---------------------------------------------------------------------------------------

@pytest.fixture(params=[config.default_store()])
def lab_store(request, suite_stores):
    """The store the benchmarks default to: the proxy injects a fault the same in front of every
    store, and how each store answers a request retried after a lost answer is test_lost_response's."""
    return suite_stores.get(request.param)


@pytest.mark.slow
def test_runs_under_profiles_are_recorded(spark, metered_stores, lab_store):
    """Every strategy, the file sink, under ``none`` and ``lost-response``:
    each run recorded with its outcome; with no faults every query completes, injects nothing
    and the file sink holds every row once; the lost responses are injected and retried."""
    store, bucket = metered_stores(lab_store)
    plan = faultlab.FaultPlan(("none", "lost-response"), ("file_sink",), 4, (0,), 100)
    lab = querylab.QueryLab(spark, store, bucket, config.PLANS["smallest"])
    recorder = results.Recorder()
    for workload in plan.workloads:
        for profile in plan.profiles:
            for strategy in ckpt_impls.STRATEGIES:
                faultlab.run_one(lab, recorder, strategy, workload, profile, 0, plan)
    record = recorder.results({"plan": {"keys": [100]}})
    for strategy in ckpt_impls.STRATEGIES:
        clean = metrics.fault_runs(record, strategy, "none")
        assert list(clean.outcome) == ["completed"] and list(clean.batches_done) == [4]
        assert metrics.injected_per_run(record, strategy, "none") == 0
        assert metrics.retried_per_run(record, strategy, "none") == 0
        assert list(clean.exactly_once.dropna()) == [True]
        lossy = metrics.fault_runs(record, strategy, "lost-response")
        assert set(lossy.outcome) <= set(faultlab.OUTCOMES)
        assert all(isinstance(error, str) for error in lossy[lossy.outcome != "completed"].error)
    lost = record.injections[record.injections.fault == "lost-response"]
    assert len(lost) > 0 and set(lost.op) <= {"PUT", "COPY", "DELETE", "BULK_DELETE", "MPU_INIT", "MPU_PART",
                                                "MPU_COMPLETE", "MPU_ABORT"}
    assert metrics.retried(record.requests).sum() >= len(lost) / 2  # the SDK retries what it lost
    assert not math.isnan(metrics.failed_batch_rate(record, "rename", "lost-response"))


@pytest.mark.slow
def test_the_stateless_workload_checkpoints_offsets_and_commits_alone(spark, metered_stores, lab_store):
    """The fault lab's stateless workload (rate to a noop sink) runs its batches and writes no state
    and no output: it writes its offsets and commits logs (and the checkpoint's metadata), nothing
    the stateful workload or the file sink adds."""
    store, bucket = metered_stores(lab_store)
    plan = faultlab.FaultPlan(("none",), ("stateless",), 3, (0,), 100)
    lab = querylab.QueryLab(spark, store, bucket, config.PLANS["smallest"])
    recorder = results.Recorder()
    faultlab.run_one(lab, recorder, "rename", "stateless", "none", 0, plan)
    record = recorder.results({"plan": {"keys": [100]}})
    [run] = metrics.fault_runs(record, "rename", "none").itertuples()
    assert (run.outcome, run.batches_done) == ("completed", 3) and pd.isna(run.exactly_once)
    written = record.requests[record.requests.op.isin(["PUT", "COPY", "MPU_COMPLETE"])]
    assert {"offsets", "commits"} <= set(written.area), set(written.area)
    assert not [k for k in written.key if "/state/" in k or "/output" in k or "_spark_metadata" in k], written.key


@pytest.mark.spark
@pytest.mark.slow
def test_the_seeds_split_in_parts_read_back_as_one_record(tmp_path):
    """``--part K/N`` runs every N-th seed from the K-th, in processes of their own; the parts are
    read merged: every seed once, the runs numbered apart."""
    args = ("faultlab", "--store", "embedded", "--profiles", "none", "--workloads", "stateful", "--batches", "2",
            "--strategies", "rename", "--seeds", "3")
    env = {config.Settings.ENV["raw"]: str(tmp_path)}
    for part in ("1/2", "2/2"):
        done = ckptbench(*args, "--part", part, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
    assert "the parts written so far: part-1-of-2, part-2-of-2" in done.stdout, done.stdout
    where = disk.directory(tmp_path, "embedded", config.FAULTLAB)
    record = disk.read(where)
    assert sorted(record.fault_runs.seed) == [0, 1, 2] and record.fault_runs.run.is_unique
    assert [p["part"] for p in record.environment["parts"]] == [[1, 2], [2, 2]]
    assert "| stateful | none | rename | 3 |" in ckptbench("faultlab", "--record", str(where)).stdout


@pytest.mark.ceph
@pytest.mark.slow
def test_a_short_outage_on_ceph_is_ridden_out_by_our_own_sdk_calls(spark, metered_stores, suite_stores):
    """The file sink under outage-5s on Ceph RGW through conditional, whose S3 calls are its own
    (``S3ObjectStore``, as manifest's) with S3A's retry policy: the store goes away after the first
    batch; the run rode it out (a batch after the store was back, its time recorded), and the sink's
    output holds every row once."""
    store, bucket = metered_stores(suite_stores.get("ceph"))
    plan = faultlab.FaultPlan(("outage-5s",), ("file_sink",), 3, (0,), 100, outage_after=1)
    labs = querylab.QueryLab(spark, store, bucket, config.PLANS["smallest"])
    recorder = results.Recorder()
    faultlab.run_one(labs, recorder, "conditional", "file_sink", "outage-5s", 0, plan)
    record = recorder.results({"plan": {"keys": [100]}})
    runs = record.runs.merge(record.fault_runs, on="run")
    assert list(runs.outage_s) == [pytest.approx(5.0)]
    for run in runs.itertuples():
        assert run.outcome == "completed", (run.strategy, run.error)
        assert run.resumed_after_s > 0 and math.isnan(run.died_after_s)
        assert run.exactly_once
    assert set(record.injections.fault) == {"outage"}
