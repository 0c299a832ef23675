"""The fault lab's figures (``ckptbench.experiments.faultlab``): deaths, failed batches,
retries and injected faults per run, exactly-once violations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ckptbench.record.results import Results

from .stats import Interval, difference_interval, outlives_interval

# -- the fault lab (ckptbench.experiments.faultlab) -------------------------------------------

def fault_runs(results: Results, strategy: str, profile: str, workload: str | None = None) -> pd.DataFrame:
    """The fault lab's runs of ``strategy`` under fault profile ``profile`` (of ``workload``, or
    of every workload), one row each: the ``runs`` columns joined with the ``fault_runs`` ones."""
    runs = results.runs.merge(results.fault_runs, on="run")
    match = runs[(runs.strategy == strategy) & (runs.profile == profile)]
    if workload is not None:
        match = match[match.workload == workload]
    if match.empty:
        raise KeyError(f"no fault-lab run of {strategy} under {profile}" + (f" x {workload}" if workload else ""))
    return match


def death_rate(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Query deaths per run: the share of runs whose query stopped with an exception."""
    runs = fault_runs(results, strategy, profile, workload)
    return float((runs.outcome == "died").mean())


def failed_batch_rate(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Failed batches per batch asked: the batches the runs asked for and did not get (their query
    died or stalled first), over all the batches asked."""
    runs = fault_runs(results, strategy, profile, workload)
    return float((runs.batches - runs.batches_done).sum() / runs.batches.sum())


def retried(requests: pd.DataFrame) -> pd.Series:
    """For each request (in ``requests``' order), whether it retries another: the previous request
    of its run with the same method and key failed with no answer (status 0: a reset, a lost
    response) or a 5xx (an injected error, a throttle)."""
    ordered = requests.sort_values("start")
    previous = ordered.groupby(["run", "method", "key"]).status.shift()
    retry = previous.notna() & ((previous == 0) | (previous >= 500))
    return retry.reindex(requests.index)


def retried_per_run(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Retried requests (``retried``) per run, a mean over the runs: under faults and, for a run
    whose query died or stalled, its recovery. Per run, not per batch: a run that died at once
    has no batch to divide by."""
    runs = fault_runs(results, strategy, profile, workload)
    requests = results.requests[results.requests.run.isin(runs.run)]
    return float(retried(requests).sum() / len(runs))


def injected_per_run(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Faults the metering proxy injected per run, a mean over the runs (every label counts: a
    request both delayed and answered 503 counts twice)."""
    runs = fault_runs(results, strategy, profile, workload)
    return float(results.injections.run.isin(runs.run).sum() / len(runs))


def exactly_once_violations(results: Results, strategy: str, profile: str) -> int:
    """File-sink runs whose output did not hold every row of whole batches exactly once."""
    runs = fault_runs(results, strategy, profile, "file_sink")
    return int((runs.exactly_once == False).sum())  # noqa: E712 (NA, not asked, is neither)


# -- store outages (the fault lab's outage profiles, ckptbench.experiments.outages) ------------

def outage_runs(results: Results, strategy: str, profile: str, workload: str | None = None) -> pd.DataFrame:
    """``fault_runs`` of an outage profile whose outage began (``outage_s`` recorded)."""
    runs = fault_runs(results, strategy, profile, workload)
    return runs[pd.to_numeric(runs.outage_s, errors="coerce").notna()]


def rode_out_rate(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Runs whose query completed every batch asked through the outage, per run that met one
    (NaN: none did)."""
    runs = outage_runs(results, strategy, profile, workload)
    return float((runs.outcome == "completed").mean()) if len(runs) else float("nan")


def _median(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.median()) if len(values) else float("nan")


def time_to_death(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Seconds from the outage's start to the query's death, the median over the runs whose query
    died (NaN: none died)."""
    runs = outage_runs(results, strategy, profile, workload)
    return _median(runs[runs.outcome == "died"].died_after_s)


def time_to_resume(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Seconds from the outage's start to the end of the query's first batch after the store was
    back, the median over the runs whose query rode it out (NaN: none did)."""
    return _median(outage_runs(results, strategy, profile, workload).resumed_after_s)


def time_to_outcome(results: Results, strategy: str, profile: str, workload: str | None = None) -> float:
    """Seconds from the outage's start to the query's death or, if it rode the outage out, to the
    end of its first batch after the store was back: the median over the runs that did either
    (NaN: every run stalled)."""
    runs = outage_runs(results, strategy, profile, workload)
    died = pd.to_numeric(runs.died_after_s, errors="coerce")
    return _median(died.fillna(pd.to_numeric(runs.resumed_after_s, errors="coerce")))


def seconds_lived(results: Results, strategy: str, profile: str, workload: str | None = None) -> np.ndarray:
    """Per run that met the outage, the seconds from its start to the query's death; infinite for a
    query that did not die (it rode the outage out or stalled), however long the outage was."""
    runs = outage_runs(results, strategy, profile, workload)
    died = pd.to_numeric(runs.died_after_s, errors="coerce").to_numpy(dtype=float)
    return np.where(runs.outcome.to_numpy() == "died", died, np.inf)


@dataclasses.dataclass(frozen=True)
class Beside:
    """One strategy's runs under an outage beside another's (``beside``)."""

    lived: np.ndarray  # ``seconds_lived`` of the strategy's runs
    other_lived: np.ndarray  # and of the other's
    did_not_die: Interval  # the share of its runs that did not die less the other's (a difference of means)
    outlives: Interval  # the chance that one of its runs outlives one of the other's (``outlives_interval``)

    @property
    def worse(self) -> bool:
        """The runs show its queries dying more often than the other's or, where they died as often,
        sooner: the whole interval on that side; never from one run of either (no interval)."""
        if self.outlives.low != self.outlives.low:
            return False
        if self.did_not_die.excludes_zero:
            return self.did_not_die.value < 0
        return self.outlives.high < 0.5


def beside(results: Results, strategy: str, other: str, profile: str, workload: str | None = None) -> Beside:
    """``strategy``'s runs under the outage beside ``other``'s, each with its bootstrap interval:
    how much more often its queries did not die (a whole interval below zero: they died more
    often), and the chance that one of its runs outlives one of the other's, ties (such as two that
    never died) counting half (a whole interval below 0.5: they died sooner); an interval holding
    the even value, the runs cannot tell them apart."""
    lived, other_lived = (seconds_lived(results, s, profile, workload) for s in (strategy, other))
    return Beside(lived, other_lived,
                  difference_interval(np.isinf(lived).astype(float), np.isinf(other_lived).astype(float),
                                      statistic=np.mean),
                  outlives_interval(lived, other_lived))


def worse_than(results: Results, strategy: str, other: str, profile: str, workload: str | None = None) -> bool:
    """``beside(...).worse``: ``strategy``'s runs under the outage died more often or sooner than
    ``other``'s; False for ``other`` itself, and where ``other`` never met the outage."""
    try:
        met = strategy != other and len(outage_runs(results, other, profile, workload)) > 0
    except KeyError:  # ``other`` not run under it
        return False
    return met and beside(results, strategy, other, profile, workload).worse
