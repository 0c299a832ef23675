"""The results model and every derived number, on fixed inputs whose right answers are known, and
one recorded run read by ``measure`` (table and CLI) and by the asv benchmarks alike.

The fixed inputs are chosen so that a plausible wrong definition gives another number: nearest
rank instead of interpolated percentiles, a mean over the batches that had requests instead of
over all measured batches, warm-up batches counted, a multipart upload counted part by part.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_impls
from benchmarks.commit_latency import CommitLatency
from benchmarks.requests import Requests
from ckptbench import metrics
from ckptbench.experiments import measure, store_alone
from ckptbench.harness import querylab
from ckptbench.metrics import drift
from ckptbench.record import disk, results, schema
from ckptbench.report import tables
from helpers import T0, asv_result, ckptbench, event, fixed_streaming_record, progress

ROOT = Path(__file__).resolve().parent.parent
@pytest.fixture
def record() -> results.Results:
    """Warm-up batch 0, measured batches 1-5 of one run; requests in batches 0, 1, 1, 2, 3 (MPU) and
    between batches."""
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    warm = [progress(0, 900.0, state_ms=1000)]
    measured = [progress(b, wal, trigger=t, state_ms=s) for b, wal, t, s in
                [(1, 10.0, 100, 1), (2, 20.0, 100, 2), (3, 30.0, 300, 3), (4, 40.0, 100, 4), (5, 50.0, 100, 100)]]
    recorder.add_batches(run, "warmup", warm)
    recorder.add_batches(run, "measured", measured)
    events = [event(0.01, "PUT", "p/offsets/0", ms=99),  # warm-up: left out
              event(1.01, "PUT", "p/offsets/1", ms=4, bytes_in=1024),
              event(1.02, "LIST", "p/offsets/1", ms=1),
              event(2.01, "PUT", "p/state/1.delta", ms=6, bytes_in=2048),
              event(3.01, "MPU_PART", "p/state/big", ms=10, bytes_in=3 * 2**20),
              event(3.02, "MPU_PART", "p/state/big", ms=10, bytes_in=3 * 2**20),
              event(3.03, "PUT", "p/state/small", ms=1, bytes_in=2**20),
              event(6.9, "DELETE", "p/state/old", ms=1)]  # after the last window: between batches
    recorder.add_requests(run, events, warm + measured)
    recorder.add_samples("floor", "PUT", [3.0, 1.0, 2.0, 100.0])
    recorder.add_samples("floor", "HEAD", [1.0, 1.0])
    recorder.add_samples("overhead", "PUT", [10.0, 10.0, 10.0], route="direct")
    recorder.add_samples("overhead", "PUT", [10.5, 11.0, 19.0], route="proxied")
    return recorder.results({"plan": {"keys": [10]}, "store": "test", "experiment": "streaming"})


def test_a_request_goes_to_the_batch_whose_window_it_started_in():
    """Windows with a millisecond of slack each side (progress timestamps are whole milliseconds):
    back to back, a request in both slacks goes to the earlier batch; before the first window, in
    a gap and after the last, to none. Batches given out of order are found all the same."""
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    # Batch 1: T0+1 to T0+1.5; batch 2 right after it (T0+1.5 to T0+2); batch 3: T0+3 to T0+3.1.
    progresses = [progress(3, 1.0, trigger=100), progress(1, 1.0, trigger=500)]
    progresses.append({**progress(2, 1.0, trigger=500), "timestamp": progress(1, 1.0)["timestamp"][:-4] + "500Z"})
    starts = {0.9: None, 0.9995: 1, 1.2: 1, 1.5005: 1, 1.5015: 2, 2.0009: 2, 2.5: None, 3.05: 3, 3.1011: None,
              9.0: None}
    recorder.add_requests(run, [event(at, "PUT", f"p/offsets/{at}") for at in starts], progresses)
    got = {row["key"]: row["batch_id"] for row in recorder.rows["requests"]}
    assert got == {f"p/offsets/{at}": batch for at, batch in starts.items()}


def test_durations_exclude_warmup_and_interpolate(record):
    run = record.run("conditional", "stateful")
    assert metrics.duration_percentile(run, "walCommit", 50) == 30.0
    assert metrics.duration_percentile(run, "walCommit", 95) == pytest.approx(48.0)  # nearest rank: 50
    assert metrics.duration_percentile(run, "walCommit", 50, warmup=True) == 900.0
    assert metrics.state_commit_percentile(run, 50) == 3.0


def test_requests_per_batch_is_a_mean_over_every_measured_batch(record):
    run = record.run("conditional", "stateful")
    # Batches 1-5 had 2, 1, 3, 0, 0 requests: 6 / 5 (over the batches with any: 6 / 3 = 2).
    assert metrics.requests_per_batch(run) == pytest.approx(1.2)
    assert metrics.requests_per_batch(run, ops=["PUT"]) == pytest.approx(0.6)
    assert metrics.requests_per_batch(run, areas=["offsets"]) == pytest.approx(0.4)
    assert metrics.requests_by_op(run) == {"PUT": pytest.approx(0.6), "MPU_PART": pytest.approx(0.4),
                                           "LIST": pytest.approx(0.2)}
    assert metrics.requests_outside_batches(run) == pytest.approx(1 / 5)
    # Store time per batch: 5, 6, 21, 0, 0 -> median 5 (a mean would give 6.4; epoch floats: +-1 us).
    assert metrics.store_ms_per_batch(run) == pytest.approx(5.0, abs=1e-3)
    assert metrics.put_latency_percentile(run, "state", 50) == pytest.approx(3.5, abs=1e-3)


def test_largest_upload_sums_a_multipart_upload(record):
    run = record.run("conditional", "stateful")
    largest = metrics.largest_upload(run, "state")
    assert list(largest) == [0, 2048, 6 * 2**20, 0, 0]
    assert metrics.compacts(run, "state", interval=2) == [(1, 0.0), (3, 6 * 2**20), (5, 0.0)]
    # Compaction batches 1, 3, 5 ((N+1) % 2 == 0) took 100, 300, 100 ms, the others 100, 100.
    assert metrics.compaction_ratio(run, 2) == 1.0
    assert metrics.compaction_ratio(run, 4) == 3.0  # batch 3 alone


def test_floor_and_proxy_overhead_from_samples(record):
    assert metrics.floor_percentile(record, "PUT", 50) == 2.5
    # Paired differences 0.5, 1, 9: median 1 (a difference of medians would give 1 too; of means 3.17).
    assert metrics.proxy_added_ms(record, "PUT") == pytest.approx(1.0)
    assert metrics.proxy_added_pct_of_put(record, "PUT") == pytest.approx(10.0)
    assert metrics.wal_commit_in_store_puts(record, record.run("conditional", "stateful")) == 12.0


def test_copy_fit_says_whether_copy_moves_the_data():
    recorder = results.Recorder()
    for size in (2**20, 4 * 2**20, 16 * 2**20):
        mib = size / 2**20
        recorder.add_samples("copy", "PUT", [1 + 10 * mib] * 3, size=size)
        recorder.add_samples("copy", "COPY", [2 + 0.1 * mib] * 3, size=size)
    fit = metrics.copy_fit(recorder.results({}))
    assert fit["ms_per_mib"] == pytest.approx(0.1) and fit["put_ms_per_mib"] == pytest.approx(10)
    assert not fit["moves_data"] and fit["mb_per_s"] != fit["mb_per_s"]  # NaN: no throughput fitted
    recorder = results.Recorder()
    for size in (2**20, 4 * 2**20):
        recorder.add_samples("copy", "PUT", [10 * size / 2**20] * 2, size=size)
        recorder.add_samples("copy", "COPY", [1 + 5 * size / 2**20] * 2, size=size)
    fit = metrics.copy_fit(recorder.results({}))
    assert fit["moves_data"] and fit["mb_per_s"] == pytest.approx(2**20 / 1e6 * 1000 / 5)


@pytest.mark.parametrize(("share", "said"), [(0.5, "moves"), (0.2, "moves"), (0.11, "near"), (0.05, "near"),
                                             (0.049, "shares"), (float("nan"), "near"), (None, "near")])
def test_copy_verdict_keeps_a_margin_around_the_threshold(share, said):
    assert metrics.copy_verdict(share) == said


def test_a_failed_run_raises_with_its_reason():
    recorder = results.Recorder()
    run = recorder.add_run("direct", "stateful", 10, "p")
    recorder.fail_run(run, "QueryFailed:   the store\nsaid no")
    with pytest.raises(results.RunFailed, match="direct x stateful failed: QueryFailed: the store said no"):
        recorder.results({}).run("direct", "stateful", 10)
    with pytest.raises(KeyError):
        recorder.results({}).run("manifest", "stateful", 10)


def test_a_record_reads_back_as_written_and_refuses_another_schema(record, tmp_path):
    record.environment["schema_version"] = schema.SCHEMA_VERSION
    back = disk.read(disk.write(record, tmp_path / "rec"))
    run = back.run("conditional", "stateful")
    assert metrics.requests_per_batch(run) == pytest.approx(1.2)
    assert metrics.duration_percentile(run, "walCommit", 95) == pytest.approx(48.0)
    assert list(disk.read_all(tmp_path)) == ["test"]
    env = json.loads((tmp_path / "rec" / "environment.json").read_text())
    (tmp_path / "rec" / "environment.json").write_text(json.dumps({**env, "schema_version": 0}))
    with pytest.raises(disk.SchemaMismatch, match=f"schema 0, this ckptbench reads {schema.SCHEMA_VERSION}: rerun"):
        disk.read(tmp_path / "rec")
    assert disk.read_all(tmp_path) == {}  # another schema's record is skipped, not misread


def _crash_part(strategy: str, created: str) -> results.Results:
    recorder = results.Recorder()
    for series in range(2):
        recorder.rows["crash_series"].append({"series": series, "strategy": strategy, "workload": "stateless",
                                              "cycles": 1, "duplicates": 0, "lost": series})
        recorder.rows["cycles"].append({"series": series, "strategy": strategy, "workload": "stateless", "cycle": 0})
    return recorder.results({"schema_version": schema.SCHEMA_VERSION, "store": "t", "experiment": "crashlab",
                             "created": created, "seed": 1})


def test_a_record_in_parts_reads_merged_and_a_whole_one_replaces_them(tmp_path):
    where = tmp_path / "t-crashlab"
    disk.write_part(_crash_part("direct", "a"), where, 1, 2)
    disk.write_part(_crash_part("manifest", "b"), where, 2, 2)
    merged = disk.read(where)
    # Both parts' series 0 and 1, numbered apart, each cycle still with its own series.
    assert list(merged.crash_series.series) == [0, 1, 2, 3]
    assert list(merged.crash_series.strategy) == ["direct", "direct", "manifest", "manifest"]
    assert list(merged.cycles.series) == list(merged.crash_series.series)
    assert list(merged.cycles.strategy) == list(merged.crash_series.strategy)
    assert [p["created"] for p in merged.environment["parts"]] == ["a", "b"]
    assert list(disk.read_all(tmp_path)["t"]) == ["crashlab"]
    disk.write_part(_crash_part("rename", "c"), where, 1, 3)  # a split into 3 replaces the split into 2
    assert list(disk.read(where).crash_series.strategy) == ["rename", "rename"]
    disk.write(_crash_part("conditional", "d"), where)  # a whole record replaces every part
    assert disk.parts_of(where) == [] and list(disk.read(where).crash_series.strategy) == ["conditional"] * 2


def test_a_schema_2_record_reads_with_no_settings_recorded(record, tmp_path):
    record.environment["schema_version"] = 2
    record.tables["runs"] = record.runs.drop(columns="settings")  # what schema 2 wrote
    back = disk.read(disk.write(record, tmp_path / "rec"))
    assert back.environment["schema_version"] == schema.SCHEMA_VERSION
    assert list(back.runs.settings) == ["{}"] * len(back.runs)


# -- drift --------------------------------------------------------------------------------------


def test_drift_moves_and_summary(tmp_path):
    assert drift.move(100, 100) == 0 and drift.move(0, 0) == 0
    assert drift.move(90, 110) == pytest.approx(0.2)
    a = asv_result(tmp_path / "a" / "asv" / "m" / "r.json", "host-ceph",
                   {"x.A.track_p50": 100.0, "x.A.track_n": [10.0, 20.0], "x.B.track_q": 1.0})
    asv_result(tmp_path / "b" / "asv" / "m" / "r.json", "host-ceph",
                   {"x.A.track_p50": 110.0, "x.A.track_n": [10.0, 30.0], "x.B.track_q": float("nan")})
    assert drift.values(a) == {"x.A.track_p50": 100.0, "x.A.track_n['a']": 10.0, "x.A.track_n['b']": 20.0,
                               "x.B.track_q": 1.0}
    text = drift.compare(tmp_path / "a", tmp_path / "b")
    # Moves 0.0952, 0, 0.4 (NaN left out): median 9.5%, 2 of 3 within 15%.
    assert re.search(r"^all +3 values +median move +9\.5% +within 15%: +67%$", text, re.M), text
    assert "differ" not in text
    assert text.splitlines()[-3].strip().startswith("40.0%  x.A.track_n['b']: 20 -> 30"), text


def test_drift_says_where_the_recommendation_changed(tmp_path):
    # Three results directories of records alone: B as A, C with manifest's walCommit raised past the others'.
    for name, wal in (("a", None), ("b", None), ("c", {"rename": 40.0, "direct": 30.0, "conditional": 20.0,
                                                        "manifest": 50.0})):
        disk.write(fixed_streaming_record(wal), disk.directory(tmp_path / name / "raw", "ceph", "streaming"))
    same = ckptbench("drift", str(tmp_path / "a"), str(tmp_path / "b"))
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[-2:] == ["  same     ceph file_sink: conditional -> conditional",
                                             "  same     ceph stateful-hdfs-noop-2p: manifest -> manifest"], same.stdout
    changed = ckptbench("drift", str(tmp_path / "a"), str(tmp_path / "c"))
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.splitlines()[-2:] == ["  same     ceph file_sink: conditional -> conditional",
                                                "  changed  ceph stateful-hdfs-noop-2p: manifest -> conditional"], \
        changed.stdout


# -- one recorded run, read by measure and by the suite ---------------------------------------


@pytest.fixture(scope="module")
def recorded(spark, suite_stores, metered_stores, tmp_path_factory) -> Path:
    """A real record: the stateful workload for two strategies through the metering proxy, with the
    store's floor, as ``measure`` records it, written to disk."""
    store = suite_stores.get("embedded")
    proxied, bucket = metered_stores(store)
    plan = dataclasses.replace(measure.plan(batches=4, warmup=1), floor_samples=20)
    recorder = results.Recorder()
    store_alone.record_store_alone(recorder, proxied, bucket, plan, parts=("floor",))
    bench = querylab.QueryLab(spark, proxied, bucket, plan)
    for strategy in ("rename", "conditional"):
        bench.run(recorder, strategy, "stateful", plan.keys[0], plan.warmup, plan.batches)
    record = recorder.results(results.environment(proxied, "measure", "test", dataclasses.asdict(plan)))
    return disk.write(record, tmp_path_factory.mktemp("record") / "embedded-measure")


def test_measure_and_the_suite_show_the_same_numbers(recorded):
    record = disk.read(recorded)
    latency, requests = CommitLatency(), Requests()
    table = subprocess.run([sys.executable, "-m", "ckptbench", "measure", "--record", str(recorded)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    for row in tables.measure_rows(record):
        strategy = row["strategy"]
        suite = {"wal_commit_p50": latency.track_wal_commit_p50(record, strategy, "stateful"),
                 "wal_commit_p95": latency.track_wal_commit_p95(record, strategy, "stateful"),
                 "commit_offsets_p50": latency.track_commit_offsets_p50(record, strategy, "stateful"),
                 "commit_offsets_p95": latency.track_commit_offsets_p95(record, strategy, "stateful"),
                 "requests_per_batch": requests.track_total_per_batch(record, strategy, "stateful")}
        assert {k: row[k] for k in suite} == suite
        printed = next(line for line in table.stdout.splitlines() if f"| {strategy} |" in line)
        assert (f"| {suite['wal_commit_p50']:.1f} / {suite['wal_commit_p95']:.1f} | "
                f"{suite['commit_offsets_p50']:.1f} / {suite['commit_offsets_p95']:.1f} |") in printed, printed
        assert f"| {suite['requests_per_batch']:.3g} (" in printed, printed
    assert {row["strategy"] for row in tables.measure_rows(record)} == {"rename", "conditional"}


def test_whole_millisecond_durations_are_read_as_the_millisecond_they_stand_for():
    """Ties spread over their millisecond: the p50 of a run of 3s, 4s and 5s moves by less than a
    millisecond as one batch moves, and a value standing alone stays itself."""
    assert metrics.whole_ms_percentile([3, 4, 4, 4, 5], 50) == 4.0
    assert metrics.whole_ms_percentile([3, 3, 4, 4, 4, 4, 5], 50) == 3.875
    assert metrics.whole_ms_percentile([3, 3, 4, 4, 4, 5, 5], 50) == 4.0
    assert metrics.whole_ms_percentile([0, 0, 0, 1], 50) == pytest.approx(1 / 3)  # 0 stands for 0 to 0.5, never below
    assert metrics.whole_ms_percentile([10.0, 12.0, 14.0, 40.0], 50) == 13.0


def test_spark_share_overhead_and_requests_per_checkpoint_file():
    """The benchmark floor's run gives Spark's share and the files per batch; a strategy's overhead
    is its p50 minus that share minus the PUT p50 of Spark's own client. Chosen so that a wrong
    definition shows: a mean instead of a p50, the store-side PUT instead of the client's, the data
    area's or RocksDB's SST requests counted, the floor taken for a strategy."""
    recorder = results.Recorder()
    floor = recorder.add_run(ckpt_impls.FLOOR.name, "stateful", 10, "f")
    strategy = recorder.add_run("conditional", "stateful", 10, "p")
    measured = [progress(b, 2.0) for b in (1, 2, 3, 4)]
    recorder.add_batches(floor, "measured", measured)
    recorder.add_batches(strategy, "measured", [progress(b, wal) for b, wal in ((1, 10.0), (2, 12.0), (3, 14.0),
                                                                                 (4, 40.0))])
    recorder.add_requests(floor, [event(b + 0.01, "PUT", f"f/offsets/{b}") for b in (1, 2, 3, 4)]
                          + [event(b + 0.02, "PUT", f"f/state/{b}.delta") for b in (1, 2, 3, 4)],
                          measured, source="memory")
    requests = [event(b + 0.01, op, f"p/offsets/{b}") for b in (1, 2, 3, 4) for op in ("PUT", "LIST")]
    requests += [event(b + 0.02, "PUT", f"p/state/{b}.delta") for b in (1, 2, 3, 4)]
    requests.append(dataclasses.replace(event(1.03, "PUT", "p/out/part-0"), area="data"))  # not a checkpoint file
    requests.append(event(2.03, "PUT", "p/state/0/0/SSTs/000008-a1.sst"))  # RocksDB's upload, not the strategy's
    recorder.add_requests(strategy, requests, measured)
    recorder.add_samples("floor", "PUT", [1.0, 1.0])  # at the store
    recorder.add_samples("floor", "PUT", [3.0, 4.0, 5.0], route=metrics.JVM_ROUTE)
    record = recorder.results({"plan": {"keys": [10]}})

    assert record.strategies() == ["conditional"]
    run = record.run("conditional", "stateful")
    assert metrics.spark_share_ms(record, "stateful") == 2.0
    assert metrics.checkpoint_files_per_batch(record, "stateful") == 2.0
    assert metrics.strategy_overhead_ms(record, run) == 13.0 - 2.0 - 4.0  # p50 13, not the mean 19
    assert metrics.strategy_overhead_of_put(record, run) == 7.0 / 4.0
    assert metrics.requests_per_checkpoint_file(record, run) == 1.5  # 3 per batch, the data and SST PUTs left out


def test_a_batch_state_store_maintenance_overlapped_keeps_its_own_figures():
    """Maintenance runs on its own schedule: its requests are told apart request by request, so the
    batches its calls met stay in every figure, with their own requests only. Here a LIST in batch
    2, a call over batch 4's end and a snapshot in the floor's batch 1; a call that ended before
    batch 3 began and one between batches make nothing. Counted with them in, the figure would be
    1.2, not 1; with the batches they met left out, it would rest on half of them."""
    recorder = results.Recorder()
    floor = recorder.add_run(ckpt_impls.FLOOR.name, "stateful", 10, "f")
    strategy = recorder.add_run("conditional", "stateful", 10, "p")
    measured = [progress(b, 2.0) for b in (1, 2, 3, 4)]  # batch b: T0 + b to T0 + b + 0.5 s
    for run in (floor, strategy):
        recorder.add_batches(run, "measured", measured)
    files = [event(b + 0.01, "PUT", f"f/offsets/{b}") for b in (1, 2, 3, 4)]
    recorder.add_requests(floor, [*files, event(1.2, "PUT", "f/state/0/0/9.snapshot")], measured, source="memory")
    requests = [event(b + 0.01, "PUT", f"p/offsets/{b}") for b in (1, 2, 3, 4)]
    requests += [event(2.3, "LIST", "p/state/0/0/"), event(4.45, "LIST", "p/state/0/1/"),
                 event(3.7, "LIST", "p/state/0/2/")]
    recorder.add_requests(strategy, requests, measured)

    def call(start, end, key, method="list"):
        return [{"start": T0 + start, "end": T0 + end, "method": method, "thread": "state-store-maintenance-task",
                 "key": key}]

    recorder.add_maintenance(floor, call(1.19, 1.21, "f/state/0/0/9.snapshot", "createAtomic"))
    recorder.add_maintenance(strategy, call(2.29, 2.31, "p/state/0/0") + call(4.44, 4.6, "p/state/0/1")
                             + call(2.9, 2.998, "p/state/0/3") + call(3.69, 3.71, "p/state/0/2"))
    record = recorder.results({"plan": {"keys": [10]}})

    run = record.run("conditional", "stateful")
    assert list(run.batches.batch_id) == [1, 2, 3, 4]
    assert metrics.checkpoint_files_per_batch(record, "stateful") == 1.0
    assert metrics.requests_per_checkpoint_file(record, run) == 1.0
    assert metrics.requests_per_batch(run) == metrics.requests_per_batch(metrics.floor_run(record, "stateful")) == 1.0
    # Apart: the three LISTs, where they landed (the one at 3.7 after batch 3's window: until batch 4).
    assert list(metrics.timing_driven_by_batch(run)) == [0, 1, 1, 1]
    assert metrics.timing_driven_spread([run]) == (0.75, 0.0, 1.0)
    assert sorted(run.maintenance_requests.call) == ["list"] * 3


def test_the_requests_a_maintenance_call_made_are_told_apart_from_a_batchs_own():
    """Request by request: the reads of the directory a ``list`` call listed, within its span (S3A's
    HEAD and LIST, a manifest's GET of a record), and the requests on the file a snapshot write
    named, under its temp name and S3A's probe of it, or in its directory's manifest, are
    maintenance's, whatever batch they fell in. Left to the batch: a task's delta PUT in the same
    directory during the listing and its HEAD of its temp file, a LIST of that directory after the
    call ended, a LIST of another partition's directory within the span, and the directory marker
    cleanup around the write."""
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    measured = [progress(b, 2.0) for b in (1, 2)]  # batch b: T0 + b to T0 + b + 0.5 s
    recorder.add_batches(run, "measured", measured)
    made = [event(1.101, "LIST", "p/state/0/0/"), event(1.1011, "HEAD", "p/state/0/0"),
            event(1.1012, "GET", "p/state/0/0/_manifest/r/3"),
            event(1.302, "PUT", "p/state/0/1/.9.snapshot.1b2c.tmp"), event(1.303, "COPY", "p/state/0/1/9.snapshot"),
            event(1.304, "LIST", "p/state/0/1/9.snapshot/"), event(1.3045, "PUT", "p/state/0/1/_manifest/r/7"),
            event(1.7, "LIST", "p/state/0/0/")]  # between batches
    own = [event(1.102, "PUT", "p/state/0/0/2.delta"), event(1.1021, "HEAD", "p/state/0/0/.2.delta.5e6f.tmp"),
           event(1.2, "LIST", "p/state/0/0/"), event(1.103, "LIST", "p/state/0/1/"),
           event(1.305, "BULK_DELETE", "p/state/0/1/"), event(2.01, "PUT", "p/offsets/2")]
    recorder.add_requests(run, made + own, measured)
    recorder.add_maintenance(run, [
        {"start": T0 + start, "end": T0 + end, "method": method, "thread": "state-store-maintenance-task", "key": key}
        for start, end, method, key in ((1.1, 1.11, "list", "p/state/0/0"), (1.3, 1.31, "createAtomic",
                                        "p/state/0/1/9.snapshot"), (1.69, 1.71, "list", "p/state/0/0"))])
    record = recorder.results({"plan": {"keys": [10]}})

    run = record.run("conditional", "stateful")
    assert sorted(run.maintenance_requests.start - T0) == pytest.approx([e.start - T0 for e in made])
    assert sorted(run.requests.start - T0) == pytest.approx(sorted(e.start - T0 for e in own))
    assert metrics.requests_per_batch(run) == 3.0  # 6.5 with maintenance's in
    assert sorted(run.outside.start - T0) == pytest.approx([e.start - T0 for e in made])
    # Without the calls (a cluster, an older record), only the snapshot's file name tells: its temp
    # PUT, its COPY and S3A's probe of it are maintenance's; the rest of the 6.5 stays, the LIST
    # between batches apart.
    bare = results.Results(record.environment, {k: v for k, v in record.tables.items() if k != "maintenance"})
    assert metrics.requests_per_batch(bare.run("conditional", "stateful")) == 5.0


def test_a_file_spark_deletes_counts_once_on_both_sides():
    """Past ``minBatchesToRetain`` Spark deletes each log's oldest file every batch: the floor logs
    the delete as a file operation, so one DELETE per deleted file stays at one request per file
    (a floor counting its writes only reads more than one per file once deletes begin)."""
    recorder = results.Recorder()
    floor = recorder.add_run(ckpt_impls.FLOOR.name, "stateful", 10, "f")
    strategy = recorder.add_run("conditional", "stateful", 10, "p")
    measured = [progress(b, 2.0) for b in (1, 2)]
    for run, prefix in ((floor, "f"), (strategy, "p")):
        recorder.add_batches(run, "measured", measured)
        ops = [event(b + 0.01, "PUT", f"{prefix}/offsets/{b}") for b in (1, 2)]
        ops.append(dataclasses.replace(event(2.02, "DELETE", f"{prefix}/offsets/0"), method="DELETE"))
        recorder.add_requests(run, ops, measured, source="memory" if run == floor else "proxy")
    record = recorder.results({"plan": {"keys": [10]}})
    assert metrics.checkpoint_files_per_batch(record, "stateful") == 1.5
    assert metrics.requests_per_checkpoint_file(record, record.run("conditional", "stateful")) == 1.0


def test_a_record_without_the_floor_says_not_available_not_failed():
    """On a cluster the floor is not run (its files would live in the driver's memory, not where the
    tasks run): the figures it gives are NaN, which the report shows as n/a; a floor run that failed
    still raises."""
    recorder = results.Recorder()
    strategy = recorder.add_run("conditional", "stateful", 10, "p")
    measured = [progress(b, 10.0) for b in (1, 2)]
    recorder.add_batches(strategy, "measured", measured)
    recorder.add_requests(strategy, [event(b + 0.01, "PUT", f"p/offsets/{b}") for b in (1, 2)], measured)
    recorder.add_samples("floor", "PUT", [4.0, 4.0])
    record = recorder.results({"plan": {"keys": [10]}})
    run = record.run("conditional", "stateful")
    assert not metrics.has_floor(record)
    for value in (metrics.spark_share_ms(record, "stateful"), metrics.checkpoint_files_per_batch(record, "stateful"),
                  metrics.strategy_overhead_ms(record, run), metrics.requests_per_checkpoint_file(record, run)):
        assert math.isnan(value)
    failed = results.Recorder()
    floor = failed.add_run(ckpt_impls.FLOOR.name, "stateful", 10, "f")
    failed.fail_run(floor, "boom")
    with pytest.raises(results.RunFailed):
        metrics.spark_share_ms(failed.results({"plan": {"keys": [10]}}), "stateful")


def test_a_runs_rows_are_its_own_in_the_tables_order_whatever_order_the_runs_are_in():
    record = disk.read(Path(__file__).resolve().parent.parent / "docs" / "sample-report" / "raw" / "ceph-streaming")
    shuffled = results.Results(record.environment,
                               {**record.tables, "requests": record.requests.sample(frac=1, random_state=1)})
    table = shuffled.requests
    for run in record.runs.run:
        assert shuffled.rows_of("requests", run).index.tolist() == table.index[table.run == run].tolist()
        for source in ("proxy", "jvm"):
            assert shuffled.requests_counted(run, source).index.tolist() == (
                table.index[(table.run == run) & (table.source == source)].tolist())
    assert shuffled.rows_of("requests", 10_000).empty and shuffled.sources_of(10_000) == []


def test_what_a_record_works_out_is_kept_once_and_left_out_of_a_pickle():
    record = disk.read(Path(__file__).resolve().parent.parent / "docs" / "sample-report" / "raw" / "ceph-streaming")
    run = record.run("conditional", "stateful")
    assert record.rows_of("requests", run.run) is record.rows_of("requests", run.run)
    assert record.causes() is record.causes()
    copy = pickle.loads(pickle.dumps(record))
    assert sorted(copy.__dict__) == ["environment", "tables"]
    assert copy.rows_of("requests", run.run).equals(record.rows_of("requests", run.run))


def test_a_bench_run_takes_back_its_own_records_and_no_other_runs(tmp_path):
    from ckptbench import config

    settings = config.Settings("ceph", "smallest", None, tmp_path, bench_run="run-1", beside=("seaweedfs crash lab",))
    disk.save(results.Recorder().results({"schema_version": schema.SCHEMA_VERSION, "experiment": "crashlab",
                                          "store": "ceph"}), settings)
    found = disk.of_this_run(settings, "crashlab")
    assert found.environment["bench_run"] == "run-1" and found.environment["beside"] == ["seaweedfs crash lab"]
    assert disk.of_this_run(dataclasses.replace(settings, bench_run="run-2"), "crashlab") is None
    assert disk.of_this_run(dataclasses.replace(settings, bench_run=""), "crashlab") is None
    assert disk.of_this_run(settings, "faultlab") is None
    assert disk.of_this_run(dataclasses.replace(settings, store="seaweedfs"), "crashlab") is None
