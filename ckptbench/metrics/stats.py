"""Statistics every metric uses: percentiles, means, Spark's whole-millisecond clocks, a linear fit,
and the intervals a comparison of two configurations rests on.

The intervals are ``scipy.stats.bootstrap``'s percentile intervals at ``CONFIDENCE``, with a fixed
seed (``SEED``) over the sorted values, so the same values give the same interval every time. Taken
from asv's comparison (``asv._stats.is_different``, ``asv_runner.statistics.quantile_ci``): a
difference is called only when the data show it, and two samples are otherwise the same; where
too few values are there to show anything (asv: a Mann-Whitney test that could not reach its
threshold; here: fewer than two values) nothing is called. Not taken: asv's test and its
binomial quantile intervals. One bootstrap gives both what a verdict shows (each median's
interval) and what it rests on (the interval of the difference of medians, clear where it
excludes zero), and the bootstrap of a mean serves the request counts alike."""

from __future__ import annotations

import dataclasses

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


def durations_percentile(runs: list[Run], name: str, q: float) -> float:
    """``duration_percentile`` over the measured batches of every run of ``runs`` (repeats of one
    configuration, ``Results.runs_of``), pooled."""
    return whole_ms_percentile(np.concatenate([run.batches[name].to_numpy(dtype=float) for run in runs]
                                              or [np.array([])]), q)


def cpu_ms_per_batch(runs: list[Run]) -> float:
    """CPU the driver's JVM spent per measured batch (``runs.cpu_s``: in local mode its tasks' too),
    every run of ``runs`` (repeats of one configuration) pooled: their CPU over their measured
    batches; NaN where a run's was not measured (off local mode, or an older record)."""
    batches = sum(len(run.batches) for run in runs)
    return 1000 * sum(_per_run(runs, "cpu_s")) / batches if batches else float("nan")


def others_cpu(runs: list[Run]) -> float:
    """The most of the machine's CPU (a share of every core's, 0 to 1) that processes other than the
    benchmark's took while any of ``runs`` was measured (``runs.others_cpu``); NaN where none of
    them was measured (an older record)."""
    return max((v for v in _per_run(runs, "others_cpu") if v == v), default=float("nan"))


def _per_run(runs: list[Run], column: str) -> list[float]:
    """Each of ``runs``' value of the ``runs`` table's ``column``, in order."""
    if not runs:
        return []
    table = runs[0].results.runs.set_index("run")[column]
    return [float(table.at[run.run]) for run in runs]


def state_commit_percentile(run: Run, q: float) -> float:
    """Spark's state store commit time per batch (all stateful operators together). It writes the
    state files through the checkpoint manager: their upload and, for rename, the rename."""
    return percentile(run.batches.state_commit_ms, q)


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares ``y = intercept + slope * x``: (intercept, slope, r squared). A constant ``y``
    has slope 0 and r squared 1 exactly: the solver's rounding would give a slope of about 1e-14 whose
    sign depends on the machine's linear algebra kernels."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if y.size and (y == y[0]).all():
        return float(y[0]), 0.0, 1.0
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    spread = float(((y - y.mean()) ** 2).sum())
    return float(intercept), float(slope), 1 - float((residual ** 2).sum()) / spread if spread else 1.0


# -- comparing two configurations -------------------------------------------------------------

#: The confidence level of every interval below.
CONFIDENCE = 0.95
#: Bootstrap resamples per interval.
RESAMPLES = 4000
#: The bootstrap's seed: fixed, so that the same values always give the same interval (and the
#: same record the same decision).
SEED = 20260


@dataclasses.dataclass(frozen=True)
class Interval:
    """A statistic of a sample and its ``CONFIDENCE`` interval (NaN ends: fewer than two values,
    nothing can be said of the statistic's spread)."""

    value: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the whole interval lies on one side of zero (never, with NaN ends)."""
        return self.low > 0 or self.high < 0

    def said(self, spec: str, before: str = "", after: str = "") -> str:
        """The value and its interval as verdicts and tables show them, each number formatted by
        ``spec`` between ``before`` and ``after``: "9.1 ms [8.7, 9.6]"."""
        if np.isnan(self.low):
            return f"{before}{self.value:{spec}}{after} [no interval: one batch]"
        return f"{before}{self.value:{spec}}{after} [{self.low:{spec}}, {self.high:{spec}}]"


def _bootstrap(samples: tuple, statistic) -> tuple[float, float]:
    """``scipy.stats.bootstrap``'s percentile interval of ``statistic`` over ``samples`` (each
    resampled on its own), each sorted first and resampled with the fixed ``SEED``: an interval
    that depends on the values alone, never on their order or on a random draw.

    scipy is imported here, not with the module: every process that reads a record imports this
    module (each CLI command, query and crash-lab driver, asv's benchmark processes), and
    ``scipy.stats`` costs more CPU to import than most of those spend on their own work."""
    if min(len(s) for s in samples) < 2:
        return float("nan"), float("nan")
    from scipy import stats as scipy_stats

    found = scipy_stats.bootstrap(tuple(np.sort(s) for s in samples), statistic, n_resamples=RESAMPLES,
                                  confidence_level=CONFIDENCE, method="percentile", vectorized=True,
                                  paired=False, rng=np.random.default_rng(SEED))
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def _clean(values) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[~np.isnan(values)]


def median_interval(values) -> Interval:
    """The median of ``values`` and its bootstrap interval."""
    values = _clean(values)
    return Interval(median(values), *_bootstrap((values,), lambda x, axis: np.median(x, axis=axis)))


def mean_interval(values) -> Interval:
    """The mean of ``values`` and its bootstrap interval: a point where every value is the same."""
    values = _clean(values)
    return Interval(mean(values), *_bootstrap((values,), lambda x, axis: np.mean(x, axis=axis)))


def difference_interval(a, b, statistic=np.median) -> Interval:
    """``statistic(a) - statistic(b)`` (the median by default; ``np.mean`` too) and its bootstrap
    interval, ``a`` and ``b`` resampled each on its own (independent measurements)."""
    a, b = _clean(a), _clean(b)
    value = float(statistic(a) - statistic(b)) if len(a) and len(b) else float("nan")
    return Interval(value, *_bootstrap((a, b), lambda x, y, axis: statistic(x, axis=axis) - statistic(y, axis=axis)))


def _outlives(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
    pairs = (x[..., :, None] > y[..., None, :]) + 0.5 * (x[..., :, None] == y[..., None, :])
    return pairs.mean(axis=(-2, -1))


def outlives_interval(a, b) -> Interval:
    """The chance that a value of ``a`` exceeds one of ``b``, ties counting half (Mann-Whitney's U
    over ``len(a) * len(b)``: 0.5 where neither tends higher), and its bootstrap interval. Ranks
    only, so infinite values (a run that never died) compare as the largest and equal each other."""
    a, b = _clean(a), _clean(b)
    value = float(_outlives(a, b)) if len(a) and len(b) else float("nan")
    return Interval(value, *_bootstrap((a, b), _outlives))


def commit_ms_per_batch(runs: list[Run]) -> np.ndarray:
    """Spark's walCommit + commitOffsets (whole milliseconds each) of every measured batch of
    ``runs`` (repeats of one configuration, ``Results.runs_of``), pooled: the samples a verdict
    on commit latency compares."""
    return np.concatenate([(run.batches.walCommit + run.batches.commitOffsets).to_numpy(dtype=float)
                           for run in runs] or [np.array([])])
