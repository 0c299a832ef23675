"""Requests per batch: by operation, area and who controls them, bytes sent, store time; the
logs' compactions and histories."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckptbench.metrics import cost
from ckptbench.metrics.stats import mean, median, percentile
from ckptbench.record.attribution import WINDOW_SLACK_S
from ckptbench.record.results import Results, Run
from infra.s3ops import AREAS, through_manager

#: Areas written through the checkpoint manager: all but the data files.
MANAGED = tuple(a for a in AREAS if a != "data")


# -- requests -------------------------------------------------------------------------------

def strategy_controls(requests: pd.DataFrame) -> pd.Series:
    """Per request: whether the checkpoint strategy made it (``infra.s3ops.through_manager``)."""
    return pd.Series([through_manager(o, a, k) for o, a, k in zip(requests.op, requests.area, requests.key,
                                                                  strict=True)],
                     index=requests.index, dtype=bool)


def _select(requests: pd.DataFrame, ops=None, areas=None, controlled: bool | None = None) -> pd.DataFrame:
    """The requests of ``ops`` in ``areas`` that the strategy made (``controlled`` True), did not
    make (False), or either (None)."""
    if controlled is not None:
        requests = requests[strategy_controls(requests) == controlled]
    if ops is not None:
        requests = requests[requests.op.isin(list(ops))]
    if areas is not None:
        requests = requests[requests.area.isin(list(areas))]
    return requests


def _per_batch(run: Run, column: str | None, ops=None, areas=None, how: str = "sum",
               controlled: bool | None = None) -> pd.Series:
    """One value per measured batch (every batch, 0 where none matched): the count of the matching
    requests (``column`` None) or the sum of ``column``."""
    requests = _select(run.requests, ops, areas, controlled)
    grouped = requests.groupby("batch_id")
    values = grouped.size() if column is None else getattr(grouped[column], how)()
    return values.reindex(run.batches.batch_id, fill_value=0).astype(float)


def requests_per_batch(run: Run, ops=None, areas=None, controlled: bool | None = None) -> float:
    """Mean S3 requests per measured batch, of ``ops`` in ``areas`` (all when None); only those the
    strategy made (``controlled`` True) or only the others (False)."""
    return mean(_per_batch(run, None, ops, areas, controlled=controlled))


def strategy_share(run: Run) -> float:
    """The share (0-1) of a measured batch's requests the checkpoint strategy made, over all
    measured batches: the rest (data files, RocksDB's SST uploads) are the same whatever it is."""
    total = len(run.requests)
    return len(_select(run.requests, controlled=True)) / total if total else float("nan")


def requests_by_op(run: Run) -> dict[str, float]:
    """Mean requests per batch of each operation seen, most first."""
    by_op = {op: requests_per_batch(run, ops=[op]) for op in run.requests.op.unique()}
    return dict(sorted(by_op.items(), key=lambda kv: -kv[1]))


def billable_requests_by_op(run: Run, controlled: bool | None = None) -> dict[str, float]:
    """Mean requests per batch of each operation that AWS S3 would bill: all but 5xx answers (only
    the strategy's with ``controlled`` True, only the others' with False)."""
    counts = _billable_per_batch(run, controlled)
    return {op: float(counts[op].mean()) for op in counts.columns}


def _billable_per_batch(run: Run, controlled: bool | None) -> pd.DataFrame:
    """Billable requests (as ``billable_requests_by_op`` counts them) per measured batch (rows, every
    one) and operation (columns)."""
    requests = _select(run.requests, controlled=controlled)
    billable = requests[~requests.status.between(500, 599)]
    counts = billable.groupby(["batch_id", "op"]).size().unstack(fill_value=0)
    return counts.reindex(run.batches.batch_id, fill_value=0)


def pooled_by_op(runs: list[Run], by_op, **kwargs) -> dict[str, float]:
    """``by_op(run, **kwargs)`` (a mean per measured batch per operation, such as
    ``billable_requests_by_op``) over every run of ``runs`` (repeats of one configuration), each
    run weighted by its measured batches: the mean per batch of them all."""
    weights = [len(run.batches) for run in runs]
    total, pooled = sum(weights), {}
    for run, weight in zip(runs, weights, strict=True):
        for op, n in by_op(run, **kwargs).items():
            pooled[op] = pooled.get(op, 0.0) + n * weight / total
    return pooled


def dollars_per_batch(runs: list[Run], controlled: bool | None = None) -> np.ndarray:
    """The dollars (``cost.dollars``, a projection) of each measured batch's billable requests, over
    every run of ``runs`` (repeats of one configuration), pooled: the samples ``billable_requests_by_op``'s
    mean is taken over, priced, for an interval of that mean (``stats.mean_interval``)."""
    per_batch = []
    for run in runs:
        counts = _billable_per_batch(run, controlled)
        per_batch.append((counts * [cost.price_per_request(op) for op in counts.columns]).sum(axis=1)
                         .to_numpy(dtype=float))
    return np.concatenate(per_batch) if per_batch else np.array([])


def billable_requests_all_by_op(run: Run) -> dict[str, float]:
    """Mean billable requests per measured batch of each operation, every request counted: the
    batches' own and those that started between them while they ran (state store maintenance, async
    progress tracking's log writes), whoever made them: what a configuration of Spark's levers
    costs, where they move requests out of the batch or change those no strategy controls."""
    batches = run.batches
    if batches.empty:
        return {}
    start, end = batches.timestamp.min(), (batches.timestamp + batches.triggerExecution / 1000).max()
    between = run.outside[(run.outside.start >= start) & (run.outside.start <= end)]
    requests = pd.concat([run.requests, between])
    billable = requests[~requests.status.between(500, 599)]
    return {op: count / len(batches) for op, count in billable.op.value_counts().items()}


def requests_outside_batches(run: Run) -> float:
    """Requests no batch made (``Run.outside``: state store maintenance's, those between batches,
    the query's start), over the whole run, per measured batch."""
    return len(run.outside) / len(run.batches) if len(run.batches) else float("nan")


def timing_driven_by_batch(run: Run) -> pd.Series:
    """Per measured batch (every one, 0 where none), the requests no batch made (``Run.outside``:
    state store maintenance's, and those that started between batches) that started from its start
    to the next measured batch's start (the last: to its end). Where they land is timing, so these
    move from run to run; a batch's own figures leave them out."""
    batches = run.batches
    starts = batches.timestamp.to_numpy() - WINDOW_SLACK_S
    if not len(starts):
        return pd.Series(dtype=float)
    end = (batches.timestamp + batches.triggerExecution / 1000).max() + WINDOW_SLACK_S
    outside = run.outside
    landed = outside.start[(outside.start >= starts[0]) & (outside.start <= end)].to_numpy()
    counts = np.bincount(starts.searchsorted(landed, side="right") - 1, minlength=len(starts))
    return pd.Series(counts, index=batches.batch_id.to_numpy(), dtype=float)


def timing_driven_per_batch(run: Run) -> float:
    """Mean requests no batch made (``timing_driven_by_batch``) per measured batch."""
    return mean(timing_driven_by_batch(run))


def timing_driven_spread(runs: list[Run]) -> tuple[float, float, float]:
    """The mean, the fewest and the most requests no batch made (``timing_driven_by_batch``) in one
    measured batch, over every batch of every run of ``runs`` (repeats of one configuration): how
    far state store maintenance's schedule moves them; NaN where no batch was measured."""
    counts = np.concatenate([timing_driven_by_batch(run).to_numpy() for run in runs]) if runs else np.array([])
    if not len(counts):
        return float("nan"), float("nan"), float("nan")
    return float(counts.mean()), float(counts.min()), float(counts.max())


def per_put(run: Run, op: str, areas=MANAGED) -> float:
    """Requests of ``op`` per PUT in ``areas``: a rename on S3 is a COPY and a DELETE per PUT."""
    puts = len(_select(run.requests, ["PUT"], areas))
    return len(_select(run.requests, [op], areas)) / puts if puts else float("nan")


def store_ms_per_batch(run: Run, areas=None, ops=None) -> float:
    """Median over the measured batches of the store's time (summed per-request latency, as the
    metering proxy timed it) for the matching requests."""
    return median(_per_batch(run, "ms", ops, areas))


def kib_sent_per_batch(run: Run, areas=None, controlled: bool | None = None) -> float:
    """Mean request payload per measured batch, in KiB (``controlled`` as in ``requests_per_batch``)."""
    return mean(_per_batch(run, "bytes_in", areas=areas, controlled=controlled)) / 1024


def mib_sent_per_batch_median(run: Run, areas) -> float:
    """Median request payload per measured batch to ``areas``, in MiB: the state size a batch writes."""
    return median(_per_batch(run, "bytes_in", areas=areas)) / 2**20


def put_latency_percentile(run: Run, area: str, q: float) -> float:
    """A percentile of the single PUTs' store-side latency in ``area``."""
    return percentile(_select(run.requests, ["PUT"], [area]).ms, q)


def largest_upload(run: Run, area: str) -> pd.Series:
    """Per measured batch, the largest single upload to ``area`` in bytes (a PUT, or a multipart
    upload's parts summed): the file a batch writes whole, such as an ``N.compact``."""
    uploads = _select(run.requests, ["PUT", "MPU_PART"], [area]).groupby(["batch_id", "key"]).bytes_in.sum()
    largest = uploads.groupby(level="batch_id").max() if len(uploads) else pd.Series(dtype=float)
    return largest.reindex(run.batches.batch_id, fill_value=0).astype(float)


# -- compaction -----------------------------------------------------------------------------

def is_compaction_batch(batch_id: int, interval: int) -> bool:
    """Spark's CompactibleFileStreamLog rule: batch N writes ``N.compact`` when (N+1) % interval == 0."""
    return (batch_id + 1) % interval == 0


def compaction_ratio(run: Run, interval: int) -> float:
    """Median batch time (triggerExecution) of compaction batches over that of the others."""
    batches = run.batches
    compact = batches.batch_id.map(lambda b: is_compaction_batch(b, interval))
    if not compact.any() or compact.all():
        return float("nan")
    return median(batches.triggerExecution[compact]) / median(batches.triggerExecution[~compact])


def compacts(run: Run, log: str, interval: int) -> list[tuple[int, float]]:
    """(batch id, bytes of its ``N.compact``) for the measured compaction batches of ``log``."""
    largest = largest_upload(run, log)
    return [(int(b), float(size)) for b, size in largest.items() if is_compaction_batch(int(b), interval)]


# -- log histories (compaction against history length) -------------------------------------

def history_compactions(results: Results, batches: int, log: str) -> pd.DataFrame:
    frame = results.compactions
    frame = frame[(frame.history == batches) & (frame.log == log)].sort_values("batch")
    if frame.empty:
        raise RuntimeError(f"{log}: no compaction in a history of {batches} batches")
    return frame


def history_tail_ms(results: Results, batches: int, log: str) -> float:
    """Median store-side time of the last ``tail`` compactions: at the end of the history."""
    tail = results.environment["plan"]["tail"]
    return median(history_compactions(results, batches, log).ms.iloc[-tail:])


def history_last(results: Results, batches: int, log: str, field: str) -> float:
    """``field`` (``bytes``, ``entries``, ``garbage_staged``) of the history's last compaction."""
    return float(history_compactions(results, batches, log)[field].iloc[-1])
