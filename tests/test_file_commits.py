"""The checkpoint files' commit time as the JVM timed it (the ``file_commits`` table), on fixed
records: which batch a file's name gives it, a batch's sum over its own files and per kind, the
interval of the median, a record without timings, and the check the real run's test makes
(``helpers.file_commit_mismatches``) catching a broken case. The real run is
``tests/test_requests.py``'s maintenance watch test."""

from __future__ import annotations

import html
import math
import re

import pandas as pd
import pytest

from benchmarks.commit_latency import JvmTimed
from ckptbench import metrics
from ckptbench.record import attribution, results, schema
from ckptbench.report import page
from helpers import ROOT, T0, file_commit_mismatches, fixed_streaming_record, progress

CKPT = "p/checkpoint"


@pytest.mark.parametrize(("key", "batch"), [
    (f"{CKPT}/offsets/7", 7),
    (f"{CKPT}/commits/7", 7),
    (f"{CKPT}/sources/0/7", 7),
    ("p/output/_spark_metadata/9.compact", 9),
    (f"{CKPT}/state/0/3/8.delta", 7),  # a state store's version V is committed by batch V - 1
    (f"{CKPT}/state/0/3/8.delta.crc", 7),
    (f"{CKPT}/state/0/3/8.snapshot", None),  # only maintenance writes one
    (f"{CKPT}/state/0/3/8.changelog", 7),
    (f"{CKPT}/state/0/3/8_0b1c2d3e-aaaa-bbbb-cccc-0123456789ab.zip", 7),  # checkpoint format v2
    (f"{CKPT}/metadata", None),
    (f"{CKPT}/state/0/_metadata/schema", None),
    (f"{CKPT}/state/0/3/SSTs/000008-4e0c.sst", None),
])
def test_a_files_name_gives_its_batch(key, batch):
    assert attribution.named_batch("PUT", key) == batch


def commit(run: int, key: str, ms: float, outcome: str = "closed") -> dict:
    kind = key.split("/")[2] if "/state/" not in key else "state"
    return {"run": run, "batch_id": attribution.named_batch("PUT", key), "kind": kind, "key": key, "start": T0,
            "ms": ms, "outcome": outcome}


@pytest.fixture
def record() -> results.Results:
    """Run 0: a warm-up batch 0 and measured batches 1 to 3, each with its offsets, commits and a
    state file; batch 2's state file cancelled and written again; a RocksDB snapshot zip the
    maintenance wrote (named for batch 1, as changelog checkpointing has it) and the checkpoint's
    metadata file (no batch), both left out. Run 1: a run
    with no timing (a cluster's, or an older record's)."""
    recorder = results.Recorder()
    run = recorder.add_run("rename", "stateful", 1000, "p")
    recorder.add_batches(run, "warmup", [progress(0, 5.0)])
    recorder.add_batches(run, "measured", [progress(b, 5.0) for b in (1, 2, 3)])
    rows = [commit(run, f"{CKPT}/metadata", 50.0), commit(run, f"{CKPT}/offsets/0", 40.0)]
    for b, (offsets, commits, state) in {1: (1.25, 0.5, 2.0), 2: (1.5, 0.75, 3.0), 3: (2.25, 0.5, 1.0)}.items():
        rows += [commit(run, f"{CKPT}/offsets/{b}", offsets), commit(run, f"{CKPT}/commits/{b}", commits),
                 commit(run, f"{CKPT}/state/0/0/{b + 1}.delta", state)]
    rows += [commit(run, f"{CKPT}/state/0/0/3.delta", 0.25, "cancelled"),
             commit(run, f"{CKPT}/state/0/0/2.zip", 30.0)]
    recorder.add("file_commits", rows)
    recorder.add_maintenance(run, [{"start": T0, "end": T0 + 1, "method": "createAtomic", "thread": "m",
                                    "key": f"{CKPT}/state/0/0/2.zip"}])
    recorder.add_run("direct", "stateful", 1000, "q")
    recorder.add_batches(1, "measured", [progress(b, 5.0) for b in (1, 2, 3)])
    return recorder.results({"plan": {"keys": [1000]}})


def test_a_batch_sums_its_own_files_per_kind_and_in_all(record):
    run = results.Run(record, 0)
    assert metrics.file_commit_ms_per_batch(run).to_dict() == {1: 3.75, 2: 5.5, 3: 3.75}
    assert metrics.file_commit_ms_per_batch(run, ["offsets"]).to_dict() == {1: 1.25, 2: 1.5, 3: 2.25}
    assert metrics.file_commit_ms_per_batch(run, ["offsets", "commits"]).to_dict() == {1: 1.75, 2: 2.25, 3: 2.75}
    assert metrics.file_commit_ms_per_batch(run, ["_spark_metadata"]).to_dict() == {1: 0.0, 2: 0.0, 3: 0.0}
    # the snapshot maintenance wrote, the warm-up's and the metadata file are no batch's own
    assert set(metrics.own_file_commits(run).key) == {
        f"{CKPT}/{kind}/{b}" for kind in ("offsets", "commits") for b in (1, 2, 3)} | {
        f"{CKPT}/state/0/0/{v}.delta" for v in (2, 3, 4)}


def test_the_median_per_batch_has_its_interval_and_a_run_without_timings_has_none(record):
    found = metrics.file_commit_ms_interval([results.Run(record, 0)])
    assert found.value == 3.75 and found.low <= 3.75 <= found.high
    pooled = metrics.file_commit_ms_interval([results.Run(record, 0), results.Run(record, 0)], ["offsets"])
    assert pooled.value == 1.5
    untimed = results.Run(record, 1)
    assert metrics.file_commit_ms_per_batch(untimed).empty
    assert math.isnan(metrics.file_commit_ms_interval([untimed]).value)


def test_the_suite_tracks_the_median_per_batch_by_kind(record):
    track = JvmTimed().track_ms_per_batch_p50
    assert track.unit == "ms"
    assert track(record, "rename", "stateful", "all") == 3.75
    assert track(record, "rename", "stateful", "offsets") == 1.5
    assert math.isnan(track(record, "direct", "stateful", "all"))  # not timed: no figure, not zero


def test_a_record_before_the_table_reads_it_empty():
    old = results.Results({"schema_version": schema.since(schema.SCHEMAS["file_commits"]) - 1}, {})
    assert list(old.file_commits.columns) == list(schema.TABLES["file_commits"]) and old.file_commits.empty


def test_the_check_of_a_real_run_catches_a_broken_one():
    """``file_commit_mismatches``, which the real run's test requires empty, agrees with a run
    whose files and timings match, and names each way they can disagree."""
    stored = {f"{CKPT}/offsets/0", f"{CKPT}/commits/0", f"{CKPT}/state/0/0/1.delta"}
    timed = pd.DataFrame([commit(0, k, 1.0) for k in sorted(stored)] + [
        commit(0, f"{CKPT}/offsets/1", 1.0, "cancelled")])  # a write cancelled stored nothing
    assert file_commit_mismatches(timed, stored) == []
    missing = timed[timed.key != f"{CKPT}/commits/0"]
    assert file_commit_mismatches(missing, stored) == [f"stored, not timed: {CKPT}/commits/0"]
    extra = pd.concat([timed, pd.DataFrame([commit(0, f"{CKPT}/offsets/2", 1.0)])])
    assert file_commit_mismatches(extra, stored) == [f"timed, not stored: {CKPT}/offsets/2"]
    twice = pd.concat([timed, timed.iloc[:1]])
    assert file_commit_mismatches(twice, stored) == [f"timed twice: {CKPT}/commits/0"]
    wrong = timed.assign(kind=timed.kind.where(timed.key != f"{CKPT}/offsets/0", "commits"))
    assert file_commit_mismatches(wrong, stored) == [f"kind commits, not offsets: {CKPT}/offsets/0"]


def test_the_report_shows_the_jvm_timing_beside_walcommit():
    """The stateful table's column (``page.JVM_TIMED``, in the committed sample report): a
    strategy whose files were timed shows its offsets and commits median per batch with its
    interval, then all its files'; one without timings says n/a, not zero."""
    record = fixed_streaming_record()
    runs = record.runs.set_index("strategy")
    rows = [commit(int(runs.run["manifest"]), f"{CKPT}/{kind}/{b}", ms * b)
            for b in range(1, 6) for kind, ms in (("offsets", 0.5), ("commits", 0.25))]
    record.tables["file_commits"] = schema.frame("file_commits", rows)
    timed = page.jvm_timed(record.runs_of("manifest", "stateful"))
    assert re.fullmatch(r"2\.25 \[\d\.\d\d, \d\.\d\d\] / 2\.25", timed), timed
    assert page.jvm_timed(record.runs_of("rename", "stateful")) == "n/a"
    sample = ROOT / "docs" / "sample-report" / "report" / "index.html"
    assert page.JVM_TIMED in html.unescape(sample.read_text())
