"""What counting in the JVM costs walCommit (``ckptbench.experiments.counting``), on a fixed record
whose answer is known: which arm each batch was in, read from the requests the JVM recorded, and
an overhead smaller than Spark's one-millisecond step found where the arms' medians cannot see it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ckptbench.experiments import counting
from ckptbench.record import results
from ckptbench.report import tables
from helpers import T0, event, progress

#: What counting adds to each counted batch's walCommit before Spark rounds it to whole milliseconds:
#: 5% of the 5 ms p50, less than the step.
ADDED_MS = 0.25


@pytest.fixture(scope="module")
def overhead() -> counting.Overhead:
    """One conditional query of 801 measured batches: 400 counted (both of walCommit's requests in
    ``offsets/`` recorded, and in some a third: Spark deleting an old file), 400 not (none), one
    switched midway (one of two); walCommit ~5 ms with
    noise, ``ADDED_MS`` more when counted, rounded to whole milliseconds as Spark reports it."""
    rng = np.random.default_rng(7)
    arms = [*rng.permutation(["on"] * 400 + ["off"] * 400).tolist(), "mixed"]
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    measured, requests = [], []
    for batch, arm in enumerate(arms, start=1):
        wal = 5 + rng.normal(0, 0.8) + (ADDED_MS if arm == "on" else 0)
        measured.append(progress(batch, float(max(1, round(wal)))))
        recorded = {"on": 2, "off": 0, "mixed": 1}[arm]
        requests += [event(batch + 0.01 * (i + 1), op, f"p/offsets/{batch}")
                     for i, op in enumerate(("LIST", "PUT")[:recorded])]
        if arm == "on" and batch % 10 == 0:  # Spark deleting an old offsets file past minBatchesToRetain
            requests.append(event(batch + 0.05, "DELETE", f"p/offsets/{batch - 100}"))
    recorder.add_batches(run, "measured", measured)
    recorder.add_requests(run, requests, measured, source="jvm")
    record = recorder.results({"plan": {"keys": [10]}, "experiment": "jvm_counting"})
    return counting.Overhead(record, {"on_ns": 6600.0, "off_ns": 20.0})


def test_each_batch_joins_the_arm_its_recorded_requests_show(overhead):
    assert overhead.count("conditional", "on") == 400
    assert overhead.count("conditional", "off") == 400
    assert (overhead.batches("conditional").arm == "mixed").sum() == 1
    assert overhead.wal_commit_requests("conditional") == 2.0


def test_an_overhead_below_sparks_millisecond_is_resolved(overhead):
    """Both arms' medians are 5 ms, so their ratio says 0%; the trimmed means find the 5% added."""
    assert overhead.p50("conditional", "on") == overhead.p50("conditional", "off") == 5.0
    low, high = overhead.overhead_interval("conditional")
    assert 0 < low < 100 * ADDED_MS / 5 < high
    assert high - low < 5  # percentage points: 800 batches resolve less than the step of 20
    assert overhead.overhead_pct("conditional") == pytest.approx(100 * ADDED_MS / 5, abs=2.5)


def test_the_bound_is_the_handler_cost_times_walcommits_requests(overhead):
    assert overhead.bound_pct("conditional") == pytest.approx(100 * 2 * 6600e-6 / 5.0)


def test_the_table_has_a_row_per_strategy(overhead):
    lines = tables.counting_table(counting.figures(overhead, ["conditional"])).markdown().splitlines()
    assert lines[0].startswith("| strategy |") and len(lines) == 3
    assert lines[2].startswith("| conditional | 400 / 400 | 5.0 / 5.0 |")


def test_a_batch_a_switch_landed_in_joins_neither_arm_whatever_its_count():
    """Batches longer than their trigger: the switch lands inside the next batch, and the JVM records
    a part of its ``offsets/`` requests, here the same part three times, more often than the whole
    (24). The switches' times leave those batches out, and the whole count is walCommit's; without
    them the part would be taken for the whole."""
    recorder = results.Recorder()
    run = recorder.add_run("rename", "stateful", 10, "p")
    arms = ["on", "mixed", "off", "off", "mixed", "on", "mixed", "off", "off"]
    measured, requests, switches = [], [], []
    for batch, arm in enumerate(arms, start=1):
        measured.append(progress(batch, 40.0))
        recorded = {"on": 24, "off": 0, "mixed": 13}[arm]
        requests += [event(batch + 0.01 * (i + 1), "HEAD", f"p/offsets/{batch}") for i in range(recorded)]
        at = batch + (0.1 if arm == "mixed" else 0.7)  # inside the batch's half second, or after it
        switches.append({"before": T0 + at, "after": T0 + at + 0.002, "on": arm != "off"})
    recorder.add_batches(run, "measured", measured)
    recorder.add_requests(run, requests, measured, source="jvm")
    env = {"plan": {"keys": [10]}, "experiment": "jvm_counting"}
    without = counting.Overhead(recorder.results(env), {"on_ns": 6600.0, "off_ns": 20.0})
    assert without.wal_commit_requests("rename") == 13  # the part, taken for the whole
    recorder.add("counting_switches", switches)
    timed = counting.Overhead(recorder.results(env), {"on_ns": 6600.0, "off_ns": 20.0})
    assert timed.batches("rename").arm.tolist() == arms
    assert timed.wal_commit_requests("rename") == 24
    # Two batches counted, four not: the experiment adds a query until each arm has MIN_ARM.
    assert counting.short(recorder, switches, "rename")


def test_a_query_is_added_only_while_an_arm_is_short(overhead):
    recorder = results.Recorder()
    recorder.rows = {name: overhead.record.tables[name].to_dict("records") for name in overhead.record.tables}
    assert not counting.short(recorder, [], "conditional")
    assert counting.short(recorder, [], "rename")  # no batches of it at all


def test_the_trigger_leaves_the_last_warm_up_batch_room_to_end():
    def warmup(*ms):
        return pd.DataFrame({"batch_id": range(len(ms)), "triggerExecution": ms})

    assert counting.trigger_s("rename", warmup(17463.0, 4142.0, 2000.0)) == pytest.approx(4.0)
    assert counting.trigger_s("conditional", warmup(607.0, 356.0, 200.0)) == counting.TRIGGERS_S["conditional"]
    assert counting.trigger_s("rename", warmup()) == counting.TRIGGER_S
    assert counting.trigger_s("rename", warmup(90000.0, 80000.0, 60000.0)) == counting.LONGEST_TRIGGER_S
