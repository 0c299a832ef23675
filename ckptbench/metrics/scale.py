"""The scale axes' figures (``ckptbench.experiments.scale``): points and fits against shuffle
partitions, stateful operators and batch count, state store maintenance, driver memory."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from ckptbench.metrics import cost
from ckptbench.metrics.requests import billable_requests_by_op, kib_sent_per_batch, requests_per_batch
from ckptbench.metrics.stats import duration_percentile, linear_fit, state_commit_percentile
from ckptbench.record.results import Results, Run, RunFailed

# -- the scale axes (ckptbench.experiments.scale) -------------------------------------------

#: What one step along each axis is: the fitted slopes are per this many units of it.
AXIS_STEP = {"partitions": (1, "partition"), "operators": (1, "operator"), "batches": (1000, "1,000 batches")}
#: The checkpoint areas a stateful query writes every batch.
STATEFUL_AREAS = ("offsets", "commits", "state")

#: The per-batch figures along the scale axes: name -> (the figure of a run, its unit).
SCALE_FIGURES = {
    "requests": (requests_per_batch, "requests"),
    **{f"requests_{area}": (lambda run, area=area: requests_per_batch(run, areas=[area]), "requests")
       for area in STATEFUL_AREAS},
    "kib": (kib_sent_per_batch, "KiB"),
    **{f"{key}_p{q}": (lambda run, name=name, q=q: duration_percentile(run, name, q), "ms")
       for key, name in (("wal_commit", "walCommit"), ("commit_offsets", "commitOffsets")) for q in (50, 95)},
    **{f"state_commit_p{q}": (lambda run, q=q: state_commit_percentile(run, q), "ms") for q in (50, 95)},
}


def _scale_run(results: Results, run: int) -> Run:
    row = results.runs.set_index("run").loc[run]
    if isinstance(row.error, str):
        raise RunFailed(f"{row.strategy} at scale run {run} failed: {row.error}")
    # A batch's own requests (``Run.requests``): the experiment's maintenance runs every 2 s, so with
    # it in, a point's figure would depend on how many rounds fell in its few batches (a slow
    # strategy's long batches meet more), not on the strategy (measured: docs/findings/scale.md).
    return Run(results, run)


def _scale_rows(results: Results, strategy: str) -> pd.DataFrame:
    """The ``scale`` rows of ``strategy``'s runs."""
    scale = results.scale.merge(results.runs[["run", "strategy"]], on="run")
    return scale[scale.strategy == strategy]


def scale_axes_run(results: Results) -> tuple[str, ...]:
    """The axes of ``AXIS_STEP`` the scale record's plan ran (``--axes`` may leave some out)."""
    plan = results.environment["plan"]
    ran = {"partitions": plan["partitions"], "operators": plan["operators"], "batches": plan["long_batches"]}
    return tuple(axis for axis in AXIS_STEP if ran[axis])


def scale_points(results: Results, axis: str, strategy: str) -> list[tuple[float, Run]]:
    """The measured points of ``axis`` for ``strategy``, in order: (x, its run).

    ``partitions`` and ``operators``: one query per point, x the partitions (at one operator) or
    the operators (at ``operators_partitions``). ``batches``: the long query cut into its plan's
    ``windows`` windows of consecutive measured batches, x the batches done at a window's middle,
    each window a ``Run`` of its batches only. Raises ``RunFailed`` if a run failed, ``KeyError``
    if there is none."""
    plan = results.environment["plan"]
    scale = _scale_rows(results, strategy)
    if axis == "partitions":
        rows = scale[(scale.kind == "point") & (scale.operators == 1)].sort_values("partitions")
        return [(float(r.partitions), _scale_run(results, int(r.run))) for r in rows.itertuples()]
    if axis == "operators":
        rows = scale[(scale.kind == "point") & (scale.partitions == plan["operators_partitions"])]
        rows = rows.sort_values("operators")
        return [(float(r.operators), _scale_run(results, int(r.run))) for r in rows.itertuples()]
    if axis != "batches":
        raise KeyError(f"no scale axis {axis!r}; axes: {', '.join(AXIS_STEP)}")
    rows = scale[scale.kind == "long"]
    if rows.empty:
        raise KeyError(f"no long scale run of {strategy}")
    run = _scale_run(results, int(rows.run.iloc[-1]))
    ids = run.batches.batch_id.to_numpy()
    windows = [chunk for chunk in np.array_split(ids, plan["windows"]) if len(chunk)]
    return [(float((chunk[0] + chunk[-1]) / 2 - ids[0] + 1),
             dataclasses.replace(run, window=(int(chunk[0]), int(chunk[-1])))) for chunk in windows]


#: A state partition's directory in a key: ``.../state/<operator>/<partition>``.
PARTITION_DIRECTORY = re.compile(r"^(.*/state/\d+/\d+)(?:/|$)")


def maintenance_rounds(run: Run) -> int:
    """The rounds of state store maintenance over ``run``, summed over its state partitions: every
    round lists each partition's directory, so the bursts of ``list`` calls on one directory, a
    burst ending where the next comes more than half the record's ``maintenance_interval`` later."""
    calls = run.results.rows_of("maintenance", run.run)
    calls = calls[calls.method == "list"]
    if calls.empty:
        return 0
    gap = cost.parse_interval(run.results.environment["maintenance_interval"]) / 2
    directories = calls.key.str.extract(PARTITION_DIRECTORY, expand=False)
    return int(sum(1 + int((starts.sort_values().diff() > gap).sum())
                   for _, starts in calls.start.groupby(directories)))


def _state_partitions(run: Run) -> int:
    """The state partitions of a scale run: shuffle partitions x stateful operators."""
    row = run.results.scale.set_index("run").loc[run.run]
    return int(row.partitions * row.operators)


def maintenance_listings_per_partition_round(run: Run) -> float:
    """Requests the state store maintenance's listings (``list`` calls: S3A's LIST and HEAD of a
    partition's directory, a manifest's GETs of its records) made, per state partition and
    maintenance round (``maintenance_rounds``), over the whole run, between batches too: what comes
    with every round, whatever the batches. NaN where no maintenance call was logged (on a cluster
    it runs on the executors)."""
    requests, rounds = _listings(run)
    return requests / rounds if rounds else float("nan")


def _listings(run: Run) -> tuple[int, int]:
    """(requests the maintenance's listings made, ``maintenance_rounds``) over ``run``."""
    return int((run.maintenance_requests.call == "list").sum()), maintenance_rounds(run)


def maintenance_files_per_partition_batch(run: Run) -> float:
    """Requests the state store maintenance's other calls made (a snapshot written every
    ``minDeltasForSnapshot`` versions, the files past ``minBatchesToRetain`` deleted), per state
    partition and batch of the whole run (warm-up too): what comes with the batches. A point's few
    batches stay under the retention, so only the long query's purge shows the deletes. NaN where
    no maintenance call was logged."""
    if run.results.rows_of("maintenance", run.run).empty:
        return float("nan")
    made = run.maintenance_requests
    return int((made.call != "list").sum()) / (len(run.all_batches) * _state_partitions(run))


def scale_values(results: Results, axis: str, strategy: str, figure: str) -> list[tuple[float, float]]:
    """(x, ``SCALE_FIGURES[figure]`` of the point) along ``axis``."""
    metric = SCALE_FIGURES[figure][0]
    return [(x, metric(run)) for x, run in scale_points(results, axis, strategy)]


def scale_fit(results: Results, axis: str, strategy: str, figure: str) -> tuple[float, float, float]:
    """Least squares of ``figure`` against ``axis``: (intercept, slope per ``AXIS_STEP`` of the axis,
    r squared). Requests per partition, ms per partition, requests per 1,000 batches..."""
    step = AXIS_STEP[axis][0]
    points = scale_values(results, axis, strategy, figure)
    if len(points) < 2:
        raise KeyError(f"no fit of {figure} against {axis} for {strategy}: {len(points)} point(s) recorded")
    return linear_fit([x / step for x, _ in points], [y for _, y in points])


def projected_requests_per_batch(runs: list[Run], partitions: int, to: int) -> float:
    """A batch's own requests at ``to`` shuffle partitions, projected from ``runs`` (repeats of one
    configuration) at ``partitions``: the state area's (a state file per partition each batch) times
    ``to / partitions``, the rest (offsets/, commits/, a sink's) as measured. A projection: whoever
    shows it labels it one, and ``recommend`` checks it against the configurations it measures at ``to``."""
    own = np.mean([requests_per_batch(run) for run in runs])
    state = np.mean([requests_per_batch(run, areas=["state"]) for run in runs])
    return float(own + np.nan_to_num(state) * (to / partitions - 1))


def projected_requests_by_op(results: Results, strategy: str, partitions: float) -> dict[str, float]:
    """Billable requests per batch of each operation at ``partitions`` shuffle partitions (one
    stateful operator): each operation's own linear fit over the partitions axis, evaluated there
    (never below zero). A projection: beyond the largest measured point it extrapolates."""
    points = scale_points(results, "partitions", strategy)
    counts = [billable_requests_by_op(run) for _, run in points]
    out = {}
    for op in sorted({op for c in counts for op in c}):
        intercept, slope, _ = linear_fit([x for x, _ in points], [c.get(op, 0.0) for c in counts])
        out[op] = max(0.0, intercept + slope * partitions)
    return out


def memory_readings(results: Results, strategy: str) -> pd.DataFrame:
    """The heap readings of ``strategy``'s long scale query, by batches done."""
    run = scale_points(results, "batches", strategy)[0][1].run
    memory = results.memory[results.memory.run == run].sort_values("batch")
    if memory.empty:
        raise KeyError(f"no heap reading in the long scale run of {strategy}")
    return memory


def heap_peak_mib(results: Results, strategy: str) -> float:
    """The largest driver heap in use after a full GC over the long query's readings, MiB."""
    return float(memory_readings(results, strategy).heap_mib.max())


def late_growth(memory: pd.DataFrame, column: str) -> float:
    """How ``column`` of the heap readings grows per 1,000 batches over the long query's second
    half: the Theil-Sen slope (the median of the slopes between every two readings, so one high
    reading does not tip it, as least squares lets it) over the readings from the middle batch on.

    The second half so that what fills up to a fixed bound early on does not read as growth:
    the SQL executions, jobs and stages Spark keeps a fixed number of, and so a manifest's garbage
    waiting out its cleanup delay. Single readings can come out tens of MiB above their
    neighbours, which least squares over all readings would take for growth; so would the
    harness's own request log filling, which ``scale._Sampled`` drains before each reading
    (measured: docs/findings/scale.md). Bounded memory reads near zero."""
    late = memory[memory.batch >= memory.batch.max() / 2]
    x, y = late.batch.to_numpy(dtype=float) / AXIS_STEP["batches"][0], late[column].to_numpy(dtype=float)
    slopes = [(y[j] - y[i]) / (x[j] - x[i]) for i in range(len(x)) for j in range(i + 1, len(x)) if x[j] != x[i]]
    if not slopes:
        raise KeyError(f"fewer than two heap readings in the long query's second half ({len(late)})")
    return float(np.median(slopes))


def heap_growth_mib(results: Results, strategy: str) -> float:
    """Driver heap in use after a full GC: its growth over the long query's second half, MiB per
    1,000 batches (``late_growth``)."""
    return late_growth(memory_readings(results, strategy), "heap_mib")


def manager_kib_peak(results: Results, strategy: str) -> float:
    """The largest shallow size of the checkpoint managers' own objects over the long query, KiB."""
    return float(memory_readings(results, strategy).manager_kib.max())


def manager_objects_growth(results: Results, strategy: str) -> float:
    """The checkpoint managers' live objects: growth per 1,000 batches over the long query's second
    half (``late_growth``: a manifest keeps superseded records until its cleanup delay has passed)."""
    return late_growth(memory_readings(results, strategy), "manager_objects")


def maintenance_rates(results: Results, strategy: str) -> tuple[float, float]:
    """What a projection of ``strategy``'s state store maintenance multiplies
    (``cost.maintenance_per_month``): listing requests per state partition and round over all its
    scale runs (a short point may end before a round), and file requests per state partition and
    batch over the long query, where the purge runs (NaN without one)."""
    counts = [_listings(_scale_run(results, int(run))) for run in _scale_rows(results, strategy).run]
    rounds = sum(r for _, r in counts)
    listings = sum(n for n, _ in counts) / rounds if rounds else float("nan")
    long_run = scale_points(results, "batches", strategy)[0][1] if "batches" in scale_axes_run(results) else None
    return listings, maintenance_files_per_partition_batch(long_run) if long_run else float("nan")
