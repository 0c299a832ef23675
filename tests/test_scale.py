"""The scale axes (``ckptbench.experiments.scale``): the fits and projections on fixed inputs whose right answers
are known. The experiment itself through real Spark is checked on the smallest bench's record
(``tests/test_benchmarks.py``), which runs it."""

from __future__ import annotations

import pandas as pd
import pytest

from ckptbench import metrics
from ckptbench.experiments import scale
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.report import tables
from helpers import T0, event, progress

PLAN = {"partitions": [2, 20, 200], "operators": [1, 2], "operators_partitions": 20, "warmup": 0, "batches": 2,
        "long_batches": 6, "retain": 2, "windows": 3}


def _run(recorder, partitions, operators, kind, batches, state_puts, base=0):
    """A run whose every measured batch sends one offsets PUT and ``state_puts(batch)`` state PUTs."""
    run = recorder.add_run("conditional", "stateful", scale.KEYS, f"p{len(recorder.rows['runs'])}")
    measured = [progress(base + b, 10.0, trigger=500, state_ms=float(partitions)) for b in range(batches)]
    recorder.add_batches(run, "measured", measured)
    events = []
    for b in range(batches):
        events.append(event(base + b + 0.01, "PUT", "p/offsets/x"))
        events += [event(base + b + 0.02 + i / 10_000, "PUT", f"p/state/{i}.delta") for i in range(state_puts(b))]
    recorder.add_requests(run, events, measured)
    recorder.add_scale(run, partitions, operators, kind)
    return run


@pytest.fixture
def record() -> results.Results:
    """Points at 2, 20, 200 partitions (a state PUT per partition and batch), 2 operators at 20 (two
    per partition), and a long run of 6 batches whose state PUTs grow by one a batch, with heap
    readings growing 5 MiB every 2 batches."""
    recorder = results.Recorder()
    for partitions in PLAN["partitions"]:
        _run(recorder, partitions, 1, "point", 2, lambda b, p=partitions: p)
    _run(recorder, 20, 2, "point", 2, lambda b: 40)
    long = _run(recorder, 2, 1, "long", 6, lambda b: b, base=1000)
    for batch in (2, 4, 6):
        recorder.add_memory(long, batch=batch, heap_mib=100 + 2.5 * batch, manager_objects=10, manager_kib=1.0)
    return recorder.results({"plan": PLAN, "store": "test", "experiment": "scale", "maintenance_interval": "2s"})


def test_partitions_slope_is_requests_per_partition(record):
    intercept, slope, r2 = metrics.scale_fit(record, "partitions", "conditional", "requests")
    assert slope == pytest.approx(1.0) and intercept == pytest.approx(1.0) and r2 == pytest.approx(1.0)
    assert metrics.scale_fit(record, "partitions", "conditional", "requests_offsets")[1] == pytest.approx(0.0)
    assert metrics.scale_fit(record, "partitions", "conditional", "state_commit_p50")[1] == pytest.approx(1.0)


def test_operators_axis_is_taken_at_its_partitions(record):
    assert metrics.scale_values(record, "operators", "conditional", "requests") == [(1.0, 21.0), (2.0, 41.0)]


def test_the_long_run_is_cut_into_windows_and_fitted_per_1000_batches(record):
    # Batches 1000-1005, state PUTs 0..5: windows {0,1}, {2,3}, {4,5} hold 1.5, 3.5, 5.5 requests a batch.
    points = metrics.scale_values(record, "batches", "conditional", "requests")
    assert points == [(1.5, 1.5), (3.5, 3.5), (5.5, 5.5)]
    assert metrics.scale_fit(record, "batches", "conditional", "requests")[1] == pytest.approx(1000.0)


def test_projection_extrapolates_each_operation(record):
    assert metrics.projected_requests_by_op(record, "conditional", 1000) == {"PUT": pytest.approx(1001.0)}


def test_heap_growth_catches_a_growing_heap_and_passes_a_flat_one(record):
    assert metrics.heap_growth_mib(record, "conditional") == pytest.approx(2500.0)  # 2.5 MiB a batch
    assert metrics.heap_peak_mib(record, "conditional") == pytest.approx(115.0)
    flat = results.Results(record.environment, {**record.tables,
                                                "memory": record.memory.assign(heap_mib=100.0, manager_objects=10)})
    assert metrics.heap_growth_mib(flat, "conditional") == pytest.approx(0.0, abs=1e-6)
    assert metrics.manager_objects_growth(flat, "conditional") == pytest.approx(0.0, abs=1e-6)


def test_heap_growth_is_the_second_halfs_and_one_high_reading_does_not_tip_it(record):
    """What fills to a fixed bound fills over the first half (the heap climbs, then levels off), and
    a reading now and then comes out ~100 MiB high: a heap that levels off reads as bounded, one that
    keeps growing through the second half does not. Least squares over all readings: 5.4 MiB per
    1,000 batches for the one that levels off."""
    run = int(record.scale[record.scale.kind == "long"].run.iloc[0])

    def with_heap(heap):
        memory = pd.DataFrame({"run": run, "batch": [500 * (i + 1) for i in range(len(heap))], "heap_mib": heap,
                               "manager_objects": 10, "manager_kib": 1.0})
        return results.Results(record.environment, {**record.tables, "memory": memory})

    levels_off = [100, 110, 120, 130, 140, 150, 150, 151, 250, 150, 149, 151, 150, 350, 150, 151, 150, 149, 150, 151]
    assert metrics.heap_growth_mib(with_heap(levels_off), "conditional") == pytest.approx(0.0, abs=0.5)
    assert metrics.linear_fit([500 * (i + 1) / 1000 for i in range(20)], levels_off)[1] > 5
    grows = [100 + 5 * i for i in range(20)]
    grows[15] += 100
    assert metrics.heap_growth_mib(with_heap(grows), "conditional") == pytest.approx(10.0)  # 5 MiB per 500 batches


def test_the_request_log_is_drained_before_every_heap_reading():
    """The JVM's request log keeps every record until drained (up to 200,000): read undrained, the
    heap of a long query grows with the harness's own buffer (65,286 records over 7,700 batches of
    conditional, most of its heap's growth). The long query's sampler drains it into this process
    before each reading, which comes every ``every`` measured batches after the warm-up."""
    calls = []

    class Log:
        def pull(self):
            calls.append("pull")

    class Heap:
        def read(self):
            calls.append("read")
            return {"heap_mib": 1.0}

    class Bar:
        def update(self, n):
            pass

    sampled = scale._Sampled(Bar(), Heap(), every=2, skip=3, pull=Log().pull)
    for _ in range(3 + 6):
        sampled.update(1)
    assert [r["batch"] for r in sampled.readings] == [2, 4, 6]
    assert calls == ["pull", "read"] * 3


def test_a_record_of_the_batches_axis_alone_says_the_others_were_not_run(record):
    """``--axes batches`` (``scale.only``) runs the long query alone: its record's tables say "not
    run" for the other axes' slopes and projection, not "failed", and keep the memory table."""
    axes = scale.only(scale.Axes(**{k: tuple(v) if isinstance(v, list) else v for k, v in PLAN.items()}),
                      ("batches",))
    assert (axes.partitions, axes.operators, axes.long_batches) == ((), (), PLAN["long_batches"])
    long_only = results.Results({**record.environment, "plan": {**PLAN, "partitions": [], "operators": []},
                                 "long_partitions": 2},
                                {**record.tables, "scale": record.scale[record.scale.kind == "long"]})
    assert metrics.scale_axes_run(long_only) == ("batches",)
    points, slopes, memory = tables.scale_tables(long_only)
    assert {row[0] for row in points.rows} == {"batches"}
    assert slopes.rows[0][1:4] == ["not run"] * 3 and slopes.rows[0][-1] == "not run"
    assert slopes.rows[0][4].startswith("1e+03")  # requests per 1,000 batches, as fitted above
    assert memory.rows and "partitions:" not in points.note and "batches: one query" in points.note
    assert scale.only(axes, ("partitions",)).long_batches == 0


def test_a_points_figures_leave_out_maintenance_and_it_is_counted_per_partition_and_round():
    """Maintenance lists both partitions' directories twice in the 2-partition point's batch 0, 0.2 s
    apart (one round: under half the 2 s interval apart), and once more in batch 1 (a second): the
    point's per-batch figures are still one offsets PUT and a state PUT per partition, and
    maintenance made 6 requests over 4 partition-rounds."""
    recorder = results.Recorder()
    run = _run(recorder, 2, 1, "point", 2, lambda b: 2)
    listings = [(0.1, 0), (0.1, 1), (0.3, 0), (0.3, 1), (1.4, 0), (1.4, 1)]  # batch b: b to b + 0.5 s
    recorder.add_requests(run, [event(at + 0.0001 * p, "LIST", f"p0/state/0/{p}/") for at, p in listings],
                          [progress(b, 10.0, trigger=500) for b in range(2)])
    recorder.add_maintenance(run, [{"start": T0 + at + 0.0001 * p - 0.0002, "end": T0 + at + 0.0001 * p + 0.0002,
                                    "method": "list", "thread": "state-store-maintenance-task",
                                    "key": f"p0/state/0/{p}"} for at, p in listings])
    record = recorder.results({"plan": PLAN, "store": "test", "experiment": "scale", "maintenance_interval": "2s"})
    assert metrics.scale_values(record, "partitions", "conditional", "requests") == [(2.0, 3.0)]
    assert metrics.scale_values(record, "partitions", "conditional", "requests_state") == [(2.0, 2.0)]
    (_, point), = metrics.scale_points(record, "partitions", "conditional")
    assert metrics.maintenance_rounds(point) == 4  # each directory: 0.1 and 0.3 s one round, 1.4 s another
    assert metrics.maintenance_listings_per_partition_round(point) == 6 / 4
    assert metrics.maintenance_files_per_partition_batch(point) == 0.0


def test_maintenance_is_projected_from_its_listings_per_round_and_its_files_per_batch(record):
    """The listings (two LISTs a round, on each of 200 partitions of the largest point; no round in
    the other runs) come every 60 s; the long query's snapshot and delete requests (6 over its 6
    batches at 2 partitions: 0.5 per partition and batch) come with every batch."""
    recorder = results.Recorder()
    for partitions in PLAN["partitions"]:
        _run(recorder, partitions, 1, "point", 2, lambda b, p=partitions: p)
    point = len(recorder.rows["runs"]) - 1
    long = _run(recorder, 2, 1, "long", 6, lambda b: 2, base=1000)
    calls, events = [], []
    for p in range(200):  # one round: each directory listed twice, 0.1 s apart
        for at in (0.2, 0.3):
            calls.append({"start": T0 + at + p / 10_000, "end": T0 + at + p / 10_000 + 0.00005, "method": "list",
                          "thread": "state-store-maintenance-task", "key": f"p{point}/state/0/{p}"})
            events.append(event(at + p / 10_000, "LIST", f"p{point}/state/0/{p}/"))
    recorder.add_requests(point, events, [])
    recorder.add_maintenance(point, calls)
    files = [(1000.2 + b, f"p{long}/state/0/{b % 2}/{b}.delta") for b in range(6)]  # between batches
    recorder.add_requests(long, [event(at, "DELETE", key) for at, key in files], [])
    recorder.add_maintenance(long, [{"start": T0 + at - 0.001, "end": T0 + at + 0.001, "method": "delete",
                                     "thread": "state-store-maintenance-task", "key": key} for at, key in files])
    scale_record = recorder.results({"plan": PLAN, "store": "test", "experiment": "scale",
                                     "maintenance_interval": "2s"})
    assert metrics.maintenance_rates(scale_record, "conditional") == (2.0, 0.5)
    month = cost.maintenance_per_month(2.0, 0.5, 200, 10.0)
    assert month == 200 * (2.0 * 43_200 + 0.5 * 259_200)  # 43,200 rounds and 259,200 batches in 30 days


def test_a_fit_needs_two_points(record):
    one = results.Results(record.environment, {**record.tables, "scale": record.scale.iloc[:1]})
    with pytest.raises(KeyError, match="1 point"):
        metrics.scale_fit(one, "partitions", "conditional", "requests")


def test_a_constant_figure_has_a_slope_of_exactly_zero():
    """Not the solver's rounding, whose sign differs between machines and would flip a page's text."""
    assert metrics.linear_fit([100, 200, 400, 800], [35.0] * 4) == (35.0, 0.0, 1.0)
    assert metrics.linear_fit([1, 2, 3], [1.0, 2.0, 3.0])[1] == pytest.approx(1.0)
