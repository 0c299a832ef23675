"""The crash lab's figures (``ckptbench.experiments.crashlab``): cycles, failed restarts, rows
duplicated or lost, recovery, leftovers, and the two-writer runs.

Each figure of the series and their cycles is of one configuration of Spark's levers (``preset``,
``crash_series.preset``): by default Spark's own (``config.DEFAULT_PRESET``), so that a series
in another configuration, or one Spark refused, never changes a strategy's own figures; a
cycle's is its series'."""

from __future__ import annotations

import pandas as pd

from ckptbench.config import DEFAULT_PRESET
from ckptbench.metrics.stats import median, percentile
from ckptbench.record.results import Results

# -- the crash lab (ckptbench.experiments.crashlab) -----------------------------------------

def _of(frame: pd.DataFrame, strategy: str, workload: str | None) -> pd.DataFrame:
    frame = frame[frame.strategy == strategy]
    return frame if workload is None else frame[frame.workload == workload]


def _presets(series: pd.DataFrame) -> pd.Series:
    """Each crash series' configuration (Spark's own where none was recorded)."""
    if "preset" not in series:
        return pd.Series(DEFAULT_PRESET, index=series.index, dtype=object)
    return series.preset.astype(object).where(series.preset.notna(), DEFAULT_PRESET)


def _series(results: Results, strategy: str, workload: str | None, preset: str) -> pd.DataFrame:
    frame = _of(results.crash_series, strategy, workload)
    return frame[_presets(frame) == preset]


def _cycles(results: Results, strategy: str, workload: str | None, preset: str) -> pd.DataFrame:
    frame = _of(results.cycles, strategy, workload)
    series = results.crash_series.drop_duplicates("series")
    of = frame.series.map(pd.Series(_presets(series).to_numpy(), index=series.series.to_numpy()))
    return frame[of.astype(object).where(of.notna(), DEFAULT_PRESET) == preset]


def crash_presets(results: Results, strategy: str) -> list[str]:
    """The configurations (``preset``) the crash lab ran series of ``strategy`` in, Spark's own first."""
    found = dict.fromkeys(_presets(_of(results.crash_series, strategy, None)))
    return sorted(found, key=lambda preset: preset != DEFAULT_PRESET)


def crash_cycles(results: Results, strategy: str, workload: str | None = None,
                 preset: str = DEFAULT_PRESET) -> float:
    """Kill/restart cycles run (of ``workload``, or all)."""
    return float(len(_cycles(results, strategy, workload, preset)))


def restart_failure_rate(results: Results, strategy: str, workload: str | None = None,
                         preset: str = DEFAULT_PRESET) -> float:
    """Share of cycles whose restarted query never committed a batch (it failed, or timed out)."""
    cycles = _cycles(results, strategy, workload, preset)
    return float((~cycles.restart_ok.astype(bool)).mean()) if len(cycles) else float("nan")


def _series_sum(results: Results, strategy: str, column: str, workload: str | None, preset: str) -> float:
    values = _series(results, strategy, workload, preset)[column].astype(float)
    values = values[values >= 0]  # -1: not applicable (a sink with no log to ask)
    return float(values.sum()) if len(values) else float("nan")


def duplicated_rows(results: Results, strategy: str, workload: str | None = None,
                    preset: str = DEFAULT_PRESET) -> float:
    """Rows in the output more than once, summed over the series, as the check at rest after each
    series' clean stop found them (output is append-only: a duplicate once seen stays)."""
    return _series_sum(results, strategy, "duplicates", workload, preset)


def lost_rows(results: Results, strategy: str, workload: str | None = None,
              preset: str = DEFAULT_PRESET) -> float:
    """Rows of committed batches missing from the output at the end of each series, summed."""
    return _series_sum(results, strategy, "lost", workload, preset)


def kills_inside_a_batch(results: Results, strategy: str, workload: str | None = None,
                         preset: str = DEFAULT_PRESET) -> float:
    """Cycles whose kill left ``offsets/N`` without ``commits/N`` (the restart re-runs batch N):
    the kills that test a replay, as opposed to those between batches."""
    cycles = _cycles(results, strategy, workload, preset)
    return float((cycles.offsets_at_kill.astype(float) > cycles.committed_at_kill.astype(float)).sum())


def cycles_not_exactly_once(results: Results, strategy: str, workload: str | None = None,
                            preset: str = DEFAULT_PRESET) -> float:
    """Cycles whose check after the restart found duplicated or lost rows or a partly visible batch."""
    cycles = _cycles(results, strategy, workload, preset)
    bad = cycles[["duplicates", "lost", "partial"]].fillna(0).astype(int).sum(axis=1) > 0
    return float(bad.sum())


def recovery_percentile(results: Results, strategy: str, q: float, workload: str | None = None,
                        preset: str = DEFAULT_PRESET) -> float:
    """A percentile of the restarts' recovery time (ms): from just before the restarted query's
    ``start()`` (its SparkSession already up) to its first stored ``commits/N``."""
    cycles = _cycles(results, strategy, workload, preset)
    return percentile(cycles[cycles.restart_ok.astype(bool)].recovery_ms, q)


def recovery_requests(results: Results, strategy: str, workload: str | None = None,
                      preset: str = DEFAULT_PRESET) -> float:
    """Median S3 requests a restart sent from the query's start to its first stored ``commits/N``."""
    cycles = _cycles(results, strategy, workload, preset)
    return median(cycles[cycles.restart_ok.astype(bool)].recovery_requests.astype(float))


def jvm_start_percentile(results: Results, strategy: str, q: float, workload: str | None = None,
                         preset: str = DEFAULT_PRESET) -> float:
    """A percentile of a restarted driver's start, spawn to SparkSession up (ms), kept out of recovery."""
    return percentile(_cycles(results, strategy, workload, preset).jvm_start_ms, q)


def cycle_seconds(results: Results, strategy: str, workload: str | None = None,
                  preset: str = DEFAULT_PRESET) -> float:
    """Median wall time of one crash cycle (watch, kill, restart, first commit, check), seconds."""
    return median(_cycles(results, strategy, workload, preset).seconds)


#: What ``leftover_objects`` counts: Spark's rename temp files, sink data files the sink's log does
#: not list, multipart uploads never completed nor aborted.
LEFTOVER_KINDS = ("temp_objects", "orphan_files", "pending_uploads")


def leftover_objects(results: Results, strategy: str, kind: str, workload: str | None = None,
                     preset: str = DEFAULT_PRESET) -> float:
    """Objects of ``kind`` (``LEFTOVER_KINDS``) left under the checkpoints and outputs at the end,
    summed over the series."""
    if kind not in LEFTOVER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LEFTOVER_KINDS)}, not {kind!r}")
    return _series_sum(results, strategy, kind, workload, preset)


def two_writer_run(results: Results, strategy: str, workload: str = "stateless",
                   head_start: int | None = None, race: str | None = None) -> pd.Series:
    """The (last) two-writer run of ``strategy`` x ``workload`` (with the second driver started
    after ``head_start`` batches, if given): its errors, checks and ``outcome``. ``race``: the
    run whose drivers were held at that file kind until both wrote it; None: a run without
    (the zombie)."""
    runs = _of(results.two_writers, strategy, workload)
    races = runs.race if "race" in runs else pd.Series(pd.NA, index=runs.index)
    runs = runs[races.isna()] if race is None else runs[races.eq(race).fillna(False).astype(bool)]
    if head_start is not None:
        runs = runs[runs.head_start == head_start]
    if runs.empty:
        raced = f", raced at {race}" if race else ""
        raise KeyError(f"no two-writer run of {strategy} x {workload} (head start {head_start}{raced})")
    return runs.iloc[-1]


def two_writer_outcome_is(results: Results, strategy: str, outcome: str, workload: str = "stateless",
                          head_start: int | None = None, race: str | None = None) -> float:
    """1.0 when the two-writer run's outcome is ``outcome`` (``crashlab.OUTCOMES``), else 0.0."""
    return float(two_writer_run(results, strategy, workload, head_start, race).outcome == outcome)
