"""The checkpoint files' commit time as the JVM timed it (the ``file_commits`` table): each file
from ``createAtomic`` to the end of its stream's ``close``, sub-millisecond, per file kind.

Spark's walCommit and commitOffsets (whole milliseconds) stay the user-facing figures; these sit
beside them at a resolution that can show a difference of a fraction of a millisecond. A batch's
figure is the sum over its own files: those its files' names give it (``file_commits.batch_id``),
less the ones state store maintenance wrote (a snapshot on its own schedule, logged in the
``maintenance`` table), whatever their outcome (a failed or cancelled write took its time too).
State files are written by the batch's tasks side by side, so with more than one state partition
the sum is time spent committing, not the batch's wall-clock wait. Logged in local mode only: a run
without a row (a cluster's, or a record before schema 11) has no figure (NaN), never zero."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckptbench.record.results import Run

from .stats import Interval, median_interval


def own_file_commits(run: Run) -> pd.DataFrame:
    """The run's timed files that belong to its measured batches (``Run.batches``) and that state
    store maintenance did not write."""
    commits = run.results.rows_of("file_commits", run.run)
    calls = run.results.rows_of("maintenance", run.run)
    maintenance = set(calls.key[calls.method == "createAtomic"])
    return commits[commits.batch_id.isin(run.batches.batch_id) & ~commits.key.isin(maintenance)]


def file_commit_ms_per_batch(run: Run, kinds: list[str] | None = None) -> pd.Series:
    """Per measured batch (indexed by ``batch_id``), the JVM-timed milliseconds its own checkpoint
    files of ``kinds`` (file kinds, ``file_commits.kind``; None: every kind) took to commit,
    summed; 0 for a batch that wrote none of them. Empty where the run timed no file at all."""
    if run.results.rows_of("file_commits", run.run).empty:
        return pd.Series(dtype=float)
    commits = own_file_commits(run)
    if kinds is not None:
        commits = commits[commits.kind.isin(kinds)]
    summed = commits.groupby("batch_id").ms.sum()
    return summed.reindex(run.batches.batch_id, fill_value=0.0).astype(float)


def file_commit_ms_interval(runs: list[Run], kinds: list[str] | None = None) -> Interval:
    """The median of ``file_commit_ms_per_batch`` over every measured batch of ``runs`` (repeats of
    one configuration, ``Results.runs_of``), pooled, and its bootstrap interval
    (``median_interval``); NaN where none of them timed a file."""
    per_batch = [file_commit_ms_per_batch(run, kinds).to_numpy(dtype=float) for run in runs]
    return median_interval(np.concatenate(per_batch or [np.array([])]))
