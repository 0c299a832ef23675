"""A request is its batch's by the checkpoint file it touches, not by when it came
(``ckptbench.record.attribution``), on fixed records: a batch's figures stay its own where a
request fell in the next batch's window or between batches, and where state store maintenance met
every batch; maintenance's requests are counted apart, with their spread; ``drift`` lists a
change in a batch's own requests and shows the timing-driven ones apart.
"""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import ckpt_impls
from ckptbench import metrics
from ckptbench.metrics import drift
from ckptbench.record import attribution, results
from helpers import T0, asv_result, fixed_streaming_record, progress
from infra.s3ops import Event, area_of

#: Measured batches 1-4, batch b from T0 + b to T0 + b + 0.5 s.
MEASURED = [progress(b, 2.0) for b in (1, 2, 3, 4)]


def request(at: float, op: str, key: str, bytes_in: int = 0) -> Event:
    """A request ``at`` seconds after T0, its area as the metering proxy gives it."""
    return Event(T0 + at, T0 + at + 0.002, op, op, area_of(key), "b", key, 200, bytes_in, 0)


def call(start: float, end: float, key: str, method: str = "list") -> dict:
    """A call of the state store's maintenance, as the maintenance watch logs it."""
    return {"start": T0 + start, "end": T0 + end, "method": method, "thread": "state-store-maintenance-task",
            "key": key}


def test_the_file_a_request_touches_names_its_batch():
    assert attribution.named_batch("PUT", "p/checkpoint/offsets/3") == 3
    assert attribution.named_batch("HEAD", "p/checkpoint/commits/3/") == 3  # S3A's probe of a directory
    assert attribution.named_batch("PUT", "p/checkpoint/offsets/.3.1b2c3d4e-5f60-4a1b-8c9d-0e1f2a3b4c5d.tmp") == 3
    assert attribution.named_batch("DELETE", "p/checkpoint/offsets/.3.1b2c.tmp") == 3  # the temp, after its rename
    assert attribution.named_batch("DELETE", "p/checkpoint/offsets/3") is None  # a later batch's purge
    assert attribution.named_batch("PUT", "p/out/_spark_metadata/9.compact") == 9
    assert attribution.named_batch("PUT", "p/checkpoint/sources/0/9.compact") == 9
    assert attribution.named_batch("PUT", "p/checkpoint/state/0/1/5.delta") == 4  # version V: batch V - 1
    assert attribution.named_batch("PUT", "p/checkpoint/state/0/1/.5.delta.crc") == 4
    assert attribution.named_batch("PUT", "p/checkpoint/state/0/1/5_3f2a9c.changelog") == 4  # format v2
    assert attribution.named_batch("PUT", "p/checkpoint/state/0/1/left-keyToNumValues/5.delta") == 4
    for key in ("p/checkpoint/offsets", "p/checkpoint/offsets/", "p/checkpoint/state/0/1/SSTs/000012-9a.sst",
                "p/checkpoint/state/0/_metadata/metadata", "p/out/part-00003-c000.parquet",
                "p/checkpoint/offsets/_manifest/r/00000000000000000003", "p/checkpoint/metadata"):
        assert attribution.named_batch("PUT", key) is None, key


def test_a_request_counts_in_the_batch_its_file_names_whenever_it_came():
    """Each batch writes its offsets, a delta (by rename) and its commit; batch 1's commit and
    delta land in batch 2's window, batch 4's commit after every window. Reads of a file before
    its write are the write's; a later batch's read of a written file (a compaction's), a log
    purge's DELETE and a LIST of a directory stay where they came."""
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    recorder.add_batches(run, "measured", MEASURED)
    events = []
    for b, late in ((1, 1.0), (2, 0.0), (3, 0.0), (4, 0.6)):
        events += [request(b + 0.01, "HEAD", f"p/offsets/{b}"), request(b + 0.02, "PUT", f"p/offsets/{b}"),
                   request(b + 0.1 + late, "PUT", f"p/state/0/0/.{b + 1}.delta.1b2c3d4e.tmp"),
                   request(b + 0.11 + late, "COPY", f"p/state/0/0/{b + 1}.delta"),
                   request(b + 0.12 + late, "DELETE", f"p/state/0/0/.{b + 1}.delta.1b2c3d4e.tmp"),
                   request(b + 0.3 + late, "PUT", f"p/commits/{b}")]
    events += [request(2.2, "GET", "p/offsets/1"), request(3.2, "DELETE", "p/offsets/0"),
               request(4.2, "LIST", "p/offsets/"), request(3.3, "DELETE", "p/state/0/0/1.delta")]
    recorder.add_requests(run, events, MEASURED)
    record = recorder.results({"plan": {"keys": [10]}})
    by_window = record.requests.groupby("batch_id").size().to_dict()
    assert by_window == {1: 2, 2: 11, 3: 8, 4: 3}  # what time windows gave: 1 and 2 mixed, 4's files lost

    run = record.run("conditional", "stateful")
    assert run.requests.groupby("batch_id").size().to_dict() == {1: 6, 2: 7, 3: 7, 4: 7}
    # An old state file's delete is maintenance's (past retention), even where no call was logged.
    assert list(run.outside.key) == list(run.maintenance_requests.key) == ["p/state/0/0/1.delta"]
    assert metrics.requests_per_batch(run, ops=["COPY"]) == 1.0
    assert metrics.requests_per_batch(run, areas=["commits"]) == 1.0
    assert metrics.largest_upload(run, "state").index.tolist() == [1, 2, 3, 4]


def own_run(recorder: results.Recorder, strategy: str, prefix: str, source: str, shift: float,
            maintained: bool) -> int:
    """A run of batches 1-4 that each write offsets/N, a state file and commits/N (the floor's
    files, one "request" each), each batch's last file ``shift`` seconds late (into the next
    window); ``maintained``: a maintenance call (a listing, a snapshot) over every batch."""
    run = recorder.add_run(strategy, "stateful", 10, prefix)
    recorder.add_batches(run, "measured", MEASURED)
    events, calls = [], []
    for b in (1, 2, 3, 4):
        events += [request(b + 0.01, "PUT", f"{prefix}/offsets/{b}"),
                   request(b + 0.1, "PUT", f"{prefix}/state/0/0/{b + 1}.delta", bytes_in=100),
                   request(b + 0.3 + shift, "PUT", f"{prefix}/commits/{b}")]
        if maintained:
            events += [request(b + 0.2, "LIST", f"{prefix}/state/0/0/")]
            calls += [call(b + 0.19, b + 0.21, f"{prefix}/state/0/0")]
    if maintained:  # a snapshot from a task's thread (Spark 4.x, maintenance lagging): its name tells
        events += [request(2.25, "PUT", f"{prefix}/state/0/0/2.snapshot")]
    recorder.add_requests(run, events, MEASURED, source=source)
    recorder.add_maintenance(run, calls)
    return run


@pytest.mark.parametrize("maintained", [True, False], ids=["every-batch-maintained", "none-maintained"])
def test_a_batchs_own_figures_do_not_depend_on_maintenance_or_windows(maintained):
    """Two runs of one configuration: the same requests of each batch, the second's last file of
    each batch late into the next window and, when ``maintained``, maintenance over every batch of
    both runs and the floor's (CI's case, where leaving out the batches it met left no batch).
    Every figure of a batch's own is the same for both and a number; maintenance's requests are
    counted apart."""
    recorder = results.Recorder()
    own_run(recorder, ckpt_impls.FLOOR.name, "f", "memory", 0.0, maintained)
    first = own_run(recorder, "conditional", "p", "proxy", 0.0, maintained)
    second = own_run(recorder, "conditional", "q", "proxy", 0.7, maintained)
    record = recorder.results({"plan": {"keys": [10]}})

    runs = [results.Run(record, first), results.Run(record, second)]
    figures = [(metrics.requests_per_batch(run), metrics.requests_by_op(run),
                {a: metrics.requests_per_batch(run, areas=[a]) for a in metrics.MANAGED},
                metrics.strategy_share(run), metrics.requests_per_batch(run, controlled=False),
                metrics.kib_sent_per_batch(run), metrics.requests_per_checkpoint_file(record, run)) for run in runs]
    assert figures[0] == figures[1]
    assert figures[0][0] == 3.0 and figures[0][-1] == 1.0
    assert metrics.checkpoint_files_per_batch(record, "stateful") == 3.0
    spread = metrics.timing_driven_spread(runs)
    assert spread == ((1.25, 1.0, 2.0) if maintained else (0.0, 0.0, 0.0))
    if maintained:
        assert sorted(runs[0].maintenance_requests.op) == ["LIST"] * 4 + ["PUT"]


def test_rocksdb_uploads_go_with_their_zip():
    """SST uploads (RocksDB's own, through the FileSystem) go with the zip of their partition
    written next: a snapshot maintenance uploaded (changelog checkpointing) takes them, whichever
    batch it came in, so two runs whose snapshots came in different batches count the same
    requests a batch; a batch's own zip keeps them in its batch though it lands in the next
    window."""
    recorder = results.Recorder()
    counted = []
    for prefix, snapshot_in in (("p", 2), ("q", 3)):
        run = recorder.add_run("conditional", "stateful", 10, prefix)
        recorder.add_batches(run, "measured", MEASURED)
        part = f"{prefix}/state/0/0"
        events = [request(b + 0.1, "PUT", f"{part}/{b + 1}.changelog") for b in (1, 2, 3, 4)]
        at = snapshot_in + 0.2
        events += [request(at, "HEAD", f"{part}/SSTs/000009-1b2c.sst"), request(at + 0.01, "PUT", f"{part}/SSTs/"
                   "000009-1b2c.sst"), request(at + 0.02, "PUT", f"{part}/{snapshot_in}.zip")]
        recorder.add_requests(run, events, MEASURED)
        recorder.add_maintenance(run, [call(at + 0.019, at + 0.03, f"{part}/{snapshot_in}.zip", "createAtomic")])
        counted.append(run)
    # A batch's own zip (changelog checkpointing off): uploads in batch 1's window, the zip in batch 2's.
    own = recorder.add_run("direct", "stateful", 10, "r")
    recorder.add_batches(own, "measured", MEASURED)
    recorder.add_requests(own, [request(1.4, "PUT", "r/state/0/0/SSTs/000001-9a.sst"),
                                request(1.45, "PUT", "r/state/0/0/logs/000002-9a.log"),
                                request(2.001, "PUT", "r/state/0/0/2.zip")], MEASURED)
    record = recorder.results({"plan": {"keys": [10]}})

    first, second = (results.Run(record, run) for run in counted)
    for run in (first, second):
        assert metrics.requests_per_batch(run, controlled=False) == 0.0  # RocksDB's own: maintenance's
        assert metrics.strategy_share(run) == 1.0
        assert sorted(run.maintenance_requests.op) == ["HEAD", "PUT", "PUT"]
    assert list(metrics.timing_driven_by_batch(first)) == [0, 3, 0, 0]
    assert list(metrics.timing_driven_by_batch(second)) == [0, 0, 3, 0]
    batch_own = record.run("direct", "stateful")
    assert batch_own.requests.groupby("batch_id").size().to_dict() == {1: 3}
    assert metrics.requests_per_batch(batch_own, controlled=False) == 0.5
    # Where no call was logged (a cluster), a zip beside changelogs is a snapshot all the same.
    bare = results.Results(record.environment, {k: v for k, v in record.tables.items() if k != "maintenance"})
    for run in counted:
        assert sorted(results.Run(bare, run).maintenance_requests.op) == ["HEAD", "PUT", "PUT"]


def commit(start: float, ms: float, key: str) -> dict:
    """A file's commit as the maintenance watch times it (a row of ``file_commits``)."""
    return {"batch_id": attribution.named_batch("PUT", key), "kind": area_of(key), "key": key, "start": T0 + start,
            "ms": ms, "outcome": "closed"}


@pytest.mark.parametrize("batch_meanwhile", [False, True], ids=["snapshot-alone", "batch-committing-too"])
def test_a_snapshots_requests_on_its_directory_are_maintenances_where_no_batch_wrote_there(batch_meanwhile):
    """S3A's write of a snapshot sends requests on the partition's directory itself (its probe, its
    marker cleanup) that name no file, as a batch's write there does. They fall in batch 2's window.
    Where the files' commits show no batch file of that directory being committed during the
    snapshot's call, they are maintenance's, and batch 2's own requests are those of a run without
    the snapshot; where a batch's delta was being committed there meanwhile, they stay the batch's."""
    part = "p/state/0/0"
    recorder = results.Recorder()
    run = recorder.add_run("rename", "stateful", 10, "p")
    recorder.add_batches(run, "measured", MEASURED)
    own = [request(b + 0.1, "PUT", f"{part}/{b + 1}.delta") for b in (1, 2, 3, 4)]
    snapshot = [request(2.3, "HEAD", part), request(2.31, "LIST", part + "/"),
                request(2.32, "PUT", f"{part}/.2.snapshot.1b2c.tmp"), request(2.33, "BULK_DELETE", part + "/"),
                request(2.34, "COPY", f"{part}/2.snapshot")]
    recorder.add_requests(run, own + snapshot, MEASURED)
    recorder.add_maintenance(run, [call(2.299, 2.36, f"{part}/2.snapshot", "createAtomic")])
    commits = [commit(b + 0.099, 2.0, f"{part}/{b + 1}.delta") for b in (1, 2, 3, 4)]
    commits.append(commit(2.299, 61.0, f"{part}/2.snapshot"))
    if batch_meanwhile:
        commits.append(commit(2.25, 100.0, f"{part}/9.delta"))
    recorder.add("file_commits", [{"run": run, **row} for row in commits])
    made = results.Run(recorder.results({"plan": {"keys": [10]}}), run)
    on_directory = ["BULK_DELETE", "HEAD", "LIST"]
    if batch_meanwhile:
        assert made.requests.groupby("batch_id").size().to_dict() == {1: 1, 2: 4, 3: 1, 4: 1}
        assert sorted(made.maintenance_requests.op) == ["COPY", "PUT"]
    else:
        assert made.requests.groupby("batch_id").size().to_dict() == {1: 1, 2: 1, 3: 1, 4: 1}
        assert sorted(made.maintenance_requests.op) == sorted(["COPY", "PUT", *on_directory])
        assert set(made.maintenance_requests[made.maintenance_requests.op.isin(on_directory)].call) == {
            "createAtomic"}


def test_drift_lists_a_change_in_a_batchs_own_requests_and_shows_maintenance_apart(tmp_path):
    """Two runs of one commit: a batch's own request counts equal, maintenance's moved. Then a
    broken case: one own count changed (a request a batch sent, or one told to the wrong batch),
    which ``own_requests_changed`` catches and ``compare`` lists."""
    own = "requests.Requests.track_total_per_batch"
    apart = "requests.Requests.track_timing_driven_per_batch"
    a = asv_result(tmp_path / "a" / "asv" / "m" / "r.json", "host-ceph",
                   {own: [4.0, 10.0], apart: [0.5, 2.0], "commit_latency.C.track_p50": 9.0})
    b = asv_result(tmp_path / "b" / "asv" / "m" / "r.json", "host-ceph",
                   {own: [4.0, 10.0], apart: [0.0, 3.0], "commit_latency.C.track_p50": 9.0})
    broken = asv_result(tmp_path / "c" / "asv" / "m" / "r.json", "host-ceph",
                        {own: [4.0, 11.0], apart: [0.5, 2.0], "commit_latency.C.track_p50": 9.0})
    assert drift.own_requests_changed(drift.values(a), drift.values(b)) == {}
    text = drift.compare(a, b)
    assert "a batch's own requests: 2 values, 0 changed" in text, text
    assert f"  200.0%  {apart}['a']: 0.5 -> 0" in text.splitlines(), text
    assert drift.own_requests_changed(drift.values(a), drift.values(broken)) == {f"{own}['b']": (10.0, 11.0)}
    text = drift.compare(a, broken)
    assert "a batch's own requests: 2 values, 1 changed (the same commit on one store sends the same):" in text, text
    assert f"  {own}['b']: 10 -> 11" in text.splitlines(), text


def test_a_pickled_record_works_its_attribution_out_again_from_its_tables():
    """A pickle carries a record's tables, not what was worked out from them: the copy's attribution
    is worked out again, and is the same."""
    record = fixed_streaming_record()
    before = record.causes()
    record.rows_of("batches", 0)
    copy = pickle.loads(pickle.dumps(record))
    assert "_causes" not in vars(copy) and "_by_run" not in vars(copy)
    pd.testing.assert_frame_equal(copy.causes(), before)
    assert "_causes" in vars(copy)
