"""Statistics every metric uses: percentiles, means, Spark's whole-millisecond clocks, a linear fit."""

from __future__ import annotations

import numpy as np

from ckptbench.record.results import Results, Run, RunFailed


def or_none(metric, *args, **kwargs) -> float | None:
    """``metric(*args, **kwargs)``, or None where its run failed (the tables say why)."""
    try:
        return metric(*args, **kwargs)
    except (RunFailed, RuntimeError, KeyError, IndexError, ZeroDivisionError):
        return None


def of_run(record: Results, strategy: str, workload: str, metric, *args, keys: int | None = None) -> float | None:
    """``metric(run, *args)`` for that run of the record, or None where it failed."""
    return or_none(lambda: metric(record.run(strategy, workload, keys), *args))


def percentile(values, q: float) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if len(values) else float("nan")


def median(values) -> float:
    return percentile(values, 50)


def mean(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.mean()) if len(values) else float("nan")


def trimmed_mean(values, cut: float) -> float:
    """The mean of ``values`` without the ``cut`` fraction of them at either end (sorted)."""
    values = np.sort(np.asarray(values, dtype=float))
    k = int(len(values) * cut)
    return mean(values[k:len(values) - k])


# -- Spark's own clocks ---------------------------------------------------------------------

def whole_ms_percentile(values, q: float) -> float:
    """A percentile of durations reported in whole milliseconds, read as the continuous durations
    they stand for: the values equal to ``v`` are spread evenly over ``v`` +- 0.5 ms (0 to 0.5 for
    0), then ``percentile`` as usual. Spark times walCommit as the difference of two millisecond
    clocks, so a duration d reads as floor(d) or floor(d) + 1, d on average: a commit of about 4 ms
    is a run of 3s, 4s and 5s, whose plain p50 jumps a whole millisecond (a quarter of a 4 ms
    commit) as one batch moves between 4 and 5. A value that stands alone stays itself."""
    values = np.asarray(values, dtype=float)
    values = np.sort(values[~np.isnan(values)])
    spread = values.copy()
    for v in np.unique(values):
        at = np.flatnonzero(values == v)
        low, high = max(v - 0.5, 0.0), v + 0.5
        spread[at] = low + (np.arange(len(at)) + 0.5) * (high - low) / len(at)
    return percentile(spread, q)


def duration_percentile(run: Run, name: str, q: float, warmup: bool = False) -> float:
    """A percentile of one of Spark's ``durationMs`` entries (walCommit, commitOffsets,
    triggerExecution, ...) over the measured batches, or over the warm-up's: whole milliseconds,
    read as ``whole_ms_percentile`` reads them."""
    return whole_ms_percentile((run.warmup if warmup else run.batches)[name], q)


def state_commit_percentile(run: Run, q: float) -> float:
    """Spark's state store commit time per batch (all stateful operators together). It writes the
    state files through the checkpoint manager: their upload and, for rename, the rename."""
    return percentile(run.batches.state_commit_ms, q)


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares ``y = intercept + slope * x``: (intercept, slope, r squared)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    spread = float(((y - y.mean()) ** 2).sum())
    return float(intercept), float(slope), 1 - float((residual ** 2).sum()) / spread if spread else 1.0
