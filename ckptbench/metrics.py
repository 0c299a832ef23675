"""Every number derived from a results record (``ckptbench.results``), each defined once.

``measure``, ``report`` and the asv ``track_*`` methods all call these, so a figure means the
same wherever it is shown. The choices made here, for all of them:

- Warm-up batches are left out of every figure but the warm-up's own (``results.Run`` decides).
- Percentiles are numpy's linear interpolation between the closest ranks.
- Requests per batch are a mean over the measured batches, zeros included, so the occasional
  batch that does more (a compaction) counts in the cost; a store's time per batch is a median,
  so one slow batch does not move it.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

import ckpt_impls
from infra.s3ops import AREAS, through_manager

from . import cost
from .results import Results, Run, RunFailed

#: Areas written through the checkpoint manager: all but the data files.
MANAGED = tuple(a for a in AREAS if a != "data")


def or_none(metric, *args) -> float | None:
    """``metric(*args)``, or None where its run failed (the tables say why)."""
    try:
        return metric(*args)
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
    requests = _select(run.requests, controlled=controlled)
    billable = requests[~requests.status.between(500, 599)]
    counts = billable.groupby(["batch_id", "op"]).size().unstack(fill_value=0)
    counts = counts.reindex(run.batches.batch_id, fill_value=0)
    return {op: float(counts[op].mean()) for op in counts.columns}


def requests_outside_batches(run: Run) -> float:
    """Requests that started between batches (state store maintenance, say), per measured batch."""
    return len(run.outside) / len(run.batches) if len(run.batches) else float("nan")


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


# -- the store on its own -------------------------------------------------------------------

#: The clocks a request of the store alone is timed by, preferred first: the metering proxy's (store
#: side), else the client's (a store with no proxy: https, AWS S3).
TIMED_ROUTES = ("proxy", "client")


def samples(results: Results, experiment: str, op: str, route: str | None = None,
            size: int | None = None) -> pd.Series:
    """The milliseconds of ``experiment``'s ``op`` samples timed on ``route`` (by default the first
    of ``TIMED_ROUTES`` the record has for the experiment)."""
    frame = results.samples
    frame = frame[(frame.experiment == experiment) & (frame.op == op)
                  & (frame.route == (route or timed_by(results, experiment)))]
    if size is not None:
        frame = frame[frame["size"] == size]
    return frame.sort_values("seq").ms


def timed_by(results: Results, experiment: str) -> str:
    """The clock ``experiment``'s samples were timed by: the first of ``TIMED_ROUTES`` the record has."""
    routes = set(results.samples.route[results.samples.experiment == experiment])
    return next((route for route in TIMED_ROUTES if route in routes), TIMED_ROUTES[0])


def floor_percentile(results: Results, op: str, q: float) -> float:
    """The store's own latency for a 1 KiB request of ``op``, as the metering proxy timed it (the
    client, on a store with no proxy: ``samples``)."""
    return percentile(samples(results, "floor", op), q)


#: The route of the floor as Spark's own S3 client makes it, in the driver JVM (``runs.client_floor``).
JVM_ROUTE = "jvm"


def client_floor_percentile(results: Results, op: str, q: float) -> float:
    """A 1 KiB request of ``op`` as Spark's own S3 client makes it in the driver JVM, after the
    store sat idle (``runs.client_floor``: the client's work and the path to the store included).
    NaN in a record without it."""
    return percentile(samples(results, "floor", op, JVM_ROUTE), q)


def put_floor_ms(results: Results) -> float:
    """The floor of a checkpoint file's PUT: ``client_floor_percentile``'s PUT p50, made as walCommit's
    PUT is made, so a strategy can reach it; no client reaches the store-side time of
    ``floor_percentile``."""
    return client_floor_percentile(results, "PUT", 50)


def proxy_added_ms(results: Results, op: str) -> float:
    """What the metering proxy adds to a request: the median of paired differences, proxied minus
    direct, both timed by the client."""
    proxied, direct = (samples(results, "overhead", op, route).to_numpy() for route in ("proxied", "direct"))
    return median(proxied - direct)


def proxy_added_pct_of_put(results: Results, op: str) -> float:
    """``proxy_added_ms`` as a percentage of the direct 1 KiB PUT's median."""
    return 100 * proxy_added_ms(results, op) / median(samples(results, "overhead", "PUT", "direct"))


#: The samples of COPY against size: measured on the store, and through the metering proxy's
#: ``aws-projection`` profile (``runs.projected_copy_samples``): a projection to AWS S3, never a
#: measurement of it.
COPY, PROJECTED_COPY = "copy", "copy-aws-projection"


def copy_sizes(results: Results, experiment: str = COPY) -> list[int]:
    return sorted(int(s) for s in results.samples[results.samples.experiment == experiment]["size"].unique())


def copy_percentile(results: Results, op: str, size: int, q: float, experiment: str = COPY) -> float:
    return percentile(samples(results, experiment, op, size=size), q)


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares ``y = intercept + slope * x``: (intercept, slope, r squared)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    spread = float(((y - y.mean()) ** 2).sum())
    return float(intercept), float(slope), 1 - float((residual ** 2).sum()) / spread if spread else 1.0


#: A server-side COPY that moves the bytes costs, per byte, at least this share of what a
#: PUT of them costs (it reads and writes them where the PUT only writes). Ceph RGW's, which
#: shares the object's tail, measured 0.04 here; moto's, copying in memory, about 1.
COPY_MOVES_DATA = 0.1


def copy_fit(results: Results, experiment: str = COPY) -> dict:
    """Fit ``ms = base + per_mib * MiB`` to COPY and to PUT durations over all object sizes and
    say whether the COPY moves the data.

    ``mb_per_s`` (10^6 bytes/s) is only given when it does: for a store whose COPY time barely
    grows with size, a throughput would be a misleading line through noise.
    """
    copies = results.samples[results.samples.experiment == experiment]
    fits = {}
    for op in ("COPY", "PUT"):
        rows = copies[copies.op == op]
        fits[op] = linear_fit(rows["size"] / 2**20, rows.ms)
    (base, per_mib, r2), put_per_mib = fits["COPY"], fits["PUT"][1]
    share = per_mib / put_per_mib if put_per_mib > 0 else float("nan")
    moves = share >= COPY_MOVES_DATA
    return {"base_ms": base, "ms_per_mib": per_mib, "r2": r2, "put_ms_per_mib": put_per_mib,
            "share_of_put": share, "moves_data": moves, "mb_per_s": _mb_per_s(per_mib) if moves else float("nan")}


def _mb_per_s(ms_per_mib: float) -> float:
    return 2**20 / 1e6 * 1000 / ms_per_mib if ms_per_mib > 0 else float("nan")


def projected_copy_mb_per_s(results: Results) -> float:
    """COPY's throughput fitted to the samples projected to AWS S3 (a projection): the
    ``aws-projection`` profile's cap, slowed a little by the store's own COPY. Fitted whatever a
    projected PUT does, whose per-MiB cost is the local store's."""
    return _mb_per_s(copy_fit(results, PROJECTED_COPY)["ms_per_mib"])


def wal_commit_in_store_puts(results: Results, run: Run) -> float:
    """walCommit p50 as a multiple of the store's own 1 KiB PUT p50 (proxy-timed, same record)."""
    return duration_percentile(run, "walCommit", 50) / floor_percentile(results, "PUT", 50)


# -- Spark's own share, and the strategy's ------------------------------------------------

def floor_run(results: Results, workload: str) -> Run:
    """The benchmark floor's run of ``workload`` (``ckpt_impls.FLOOR``: files in the JVM's memory,
    no store), its "requests" being the checkpoint files it published, one ``PUT`` each."""
    return results.run(ckpt_impls.FLOOR.name, workload, source="memory")


def has_floor(results: Results) -> bool:
    """Whether the record ran the benchmark floor: only in local mode, where its files, kept in the
    driver JVM's memory, are where the tasks run (not on a cluster, ``runs.streaming``)."""
    return ckpt_impls.FLOOR.name in set(results.runs.strategy)


def spark_share_ms(results: Results, workload: str, name: str = "walCommit") -> float:
    """Spark's own share of ``name`` (walCommit, commitOffsets): its p50 through the benchmark
    floor, where no store is involved; NaN where the record has no floor (``has_floor``)."""
    if not has_floor(results):
        return float("nan")
    return duration_percentile(floor_run(results, workload), name, 50)


def strategy_overhead_ms(results: Results, run: Run, name: str = "walCommit") -> float:
    """What a strategy adds to ``name`` beyond Spark's share and one PUT round trip: its p50, minus
    the floor's p50 (``spark_share_ms``), minus a 1 KiB PUT's p50 as Spark's own client makes it
    (``put_floor_ms``, same record). 0 is one PUT per checkpoint file made after the store sat idle,
    as the stateful workload's are; where Spark's own requests come just before the commit (the file
    source lists its input in latestOffset) the store is warm and the PUT faster, and a strategy
    at one PUT per file reads below 0."""
    return (duration_percentile(run, name, 50) - spark_share_ms(results, run.info.workload, name)
            - put_floor_ms(results))


def strategy_overhead_of_put(results: Results, run: Run, name: str = "walCommit") -> float:
    """``strategy_overhead_ms`` as a fraction of that PUT's p50 (``put_floor_ms``)."""
    return strategy_overhead_ms(results, run, name) / put_floor_ms(results)


def checkpoint_files_per_batch(results: Results, workload: str) -> float:
    """Checkpoint files Spark writes or deletes per measured batch of ``workload`` (through the
    manager: offsets, commits, state, logs; past ``minBatchesToRetain`` each log's oldest file goes
    every batch), counted by the benchmark floor's manager; a mean, like requests, over the batches
    no state store maintenance call overlapped (a batch's own files: see
    ``requests_per_checkpoint_file``). NaN where the record has no floor (``has_floor``)."""
    if not has_floor(results):
        return float("nan")
    return requests_per_batch(dataclasses.replace(floor_run(results, workload), clear_of_maintenance=True),
                              ops=["PUT", "DELETE"])


def requests_per_checkpoint_file(results: Results, run: Run) -> float:
    """The strategy's requests per batch in the manager's areas over the checkpoint files per batch
    (``checkpoint_files_per_batch``, the files Spark publishes through the manager): 1.0 is one
    request per file. Only the requests the strategy makes (``strategy_controls``): RocksDB's SST
    uploads are neither its requests nor among those files.

    A batch's own, on both sides: the batches state store maintenance overlapped are left out
    (``Run.clear_of_maintenance``). Maintenance (a snapshot, a LIST of each partition's directory)
    runs on its own schedule, so it lands in a run's few batches or not by chance; with it in, one
    run's figure moves with that chance (conditional 1.00 to 1.03 in runs of 90 batches, its 5 s
    interval against 1 h, 2026-11-24). ``maintenance_batches_share`` says how many were left out."""
    own = dataclasses.replace(run, clear_of_maintenance=True)
    return (requests_per_batch(own, areas=MANAGED, controlled=True)
            / checkpoint_files_per_batch(results, run.info.workload))


def maintenance_batches_share(run: Run) -> float:
    """The share (0-1) of a run's measured batches that a state store maintenance call overlapped
    (0 where none was logged: see ``results.Run.clear_of_maintenance``)."""
    batches = run.batches
    return float(run.overlaps_maintenance(batches).mean()) if len(batches) else float("nan")


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


# -- crashes (ckptbench.crashlab) -----------------------------------------------------------

def _of(frame: pd.DataFrame, strategy: str, workload: str | None) -> pd.DataFrame:
    frame = frame[frame.strategy == strategy]
    return frame if workload is None else frame[frame.workload == workload]


def crash_cycles(results: Results, strategy: str, workload: str | None = None) -> float:
    """Kill/restart cycles run (of ``workload``, or all)."""
    return float(len(_of(results.cycles, strategy, workload)))


def restart_failure_rate(results: Results, strategy: str, workload: str | None = None) -> float:
    """Share of cycles whose restarted query never committed a batch (it failed, or timed out)."""
    cycles = _of(results.cycles, strategy, workload)
    return float((~cycles.restart_ok.astype(bool)).mean()) if len(cycles) else float("nan")


def _series_sum(results: Results, strategy: str, column: str, workload: str | None) -> float:
    values = _of(results.crash_series, strategy, workload)[column].astype(float)
    values = values[values >= 0]  # -1: not applicable (a sink with no log to ask)
    return float(values.sum()) if len(values) else float("nan")


def duplicated_rows(results: Results, strategy: str, workload: str | None = None) -> float:
    """Rows in the output more than once, summed over the series, as the check at rest after each
    series' clean stop found them (output is append-only: a duplicate once seen stays)."""
    return _series_sum(results, strategy, "duplicates", workload)


def lost_rows(results: Results, strategy: str, workload: str | None = None) -> float:
    """Rows of committed batches missing from the output at the end of each series, summed."""
    return _series_sum(results, strategy, "lost", workload)


def kills_inside_a_batch(results: Results, strategy: str, workload: str | None = None) -> float:
    """Cycles whose kill left ``offsets/N`` without ``commits/N`` (the restart re-runs batch N):
    the kills that test a replay, as opposed to those between batches."""
    cycles = _of(results.cycles, strategy, workload)
    return float((cycles.offsets_at_kill.astype(float) > cycles.committed_at_kill.astype(float)).sum())


def cycles_not_exactly_once(results: Results, strategy: str, workload: str | None = None) -> float:
    """Cycles whose check after the restart found duplicated or lost rows or a partly visible batch."""
    cycles = _of(results.cycles, strategy, workload)
    bad = cycles[["duplicates", "lost", "partial"]].fillna(0).astype(int).sum(axis=1) > 0
    return float(bad.sum())


def recovery_percentile(results: Results, strategy: str, q: float, workload: str | None = None) -> float:
    """A percentile of the restarts' recovery time (ms): from just before the restarted query's
    ``start()`` (its SparkSession already up) to its first stored ``commits/N``."""
    cycles = _of(results.cycles, strategy, workload)
    return percentile(cycles[cycles.restart_ok.astype(bool)].recovery_ms, q)


def recovery_requests(results: Results, strategy: str, workload: str | None = None) -> float:
    """Median S3 requests a restart sent from the query's start to its first stored ``commits/N``."""
    cycles = _of(results.cycles, strategy, workload)
    return median(cycles[cycles.restart_ok.astype(bool)].recovery_requests.astype(float))


def jvm_start_percentile(results: Results, strategy: str, q: float, workload: str | None = None) -> float:
    """A percentile of a restarted driver's start, spawn to SparkSession up (ms), kept out of recovery."""
    return percentile(_of(results.cycles, strategy, workload).jvm_start_ms, q)


def cycle_seconds(results: Results, strategy: str, workload: str | None = None) -> float:
    """Median wall time of one crash cycle (watch, kill, restart, first commit, check), seconds."""
    return median(_of(results.cycles, strategy, workload).seconds)


#: What ``leftover_objects`` counts: Spark's rename temp files, sink data files the sink's log does
#: not list, multipart uploads never completed nor aborted.
LEFTOVER_KINDS = ("temp_objects", "orphan_files", "pending_uploads")


def leftover_objects(results: Results, strategy: str, kind: str, workload: str | None = None) -> float:
    """Objects of ``kind`` (``LEFTOVER_KINDS``) left under the checkpoints and outputs at the end,
    summed over the series."""
    if kind not in LEFTOVER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LEFTOVER_KINDS)}, not {kind!r}")
    return _series_sum(results, strategy, kind, workload)


def two_writer_run(results: Results, strategy: str, workload: str = "stateless",
                   head_start: int | None = None) -> pd.Series:
    """The (last) two-writer run of ``strategy`` x ``workload`` (with the second driver started
    after ``head_start`` batches, if given): its errors, checks and ``outcome``."""
    runs = _of(results.two_writers, strategy, workload)
    if head_start is not None:
        runs = runs[runs.head_start == head_start]
    if runs.empty:
        raise KeyError(f"no two-writer run of {strategy} x {workload} (head start {head_start})")
    return runs.iloc[-1]


def two_writer_outcome_is(results: Results, strategy: str, outcome: str, workload: str = "stateless",
                          head_start: int | None = None) -> float:
    """1.0 when the two-writer run's outcome is ``outcome`` (``crashlab.OUTCOMES``), else 0.0."""
    return float(two_writer_run(results, strategy, workload, head_start).outcome == outcome)


# -- the failure lab (ckptbench.faultlab) -----------------------------------------------------

def fault_runs(results: Results, strategy: str, profile: str, workload: str | None = None) -> pd.DataFrame:
    """The failure lab's runs of ``strategy`` under fault profile ``profile`` (of ``workload``, or
    of every workload), one row each: the ``runs`` columns joined with the ``fault_runs`` ones."""
    runs = results.runs.merge(results.fault_runs, on="run")
    match = runs[(runs.strategy == strategy) & (runs.profile == profile)]
    if workload is not None:
        match = match[match.workload == workload]
    if match.empty:
        raise KeyError(f"no failure-lab run of {strategy} under {profile}" + (f" x {workload}" if workload else ""))
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


# -- the scale axes (ckptbench.scale) -------------------------------------------------------

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
    # A batch's own requests: the experiment's maintenance runs every 2 s, so with it in, a point's
    # figure would depend on how many rounds fell in its few batches (a slow strategy's long batches
    # meet more); the CI run of 46ac010 saw 9 state requests a batch at 2 partitions, 8 at 8.
    return Run(results, run, own_requests_only=True)


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
    waiting out its cleanup delay (4,581 objects at most, 3,700-4,200 after). Over 10,000 batches
    on Ceph (`scale --size full --axes batches`, 2026-11-24) single readings came out 60-180 MiB
    above their neighbours; least squares over all of ``direct``'s readings gave 9.8 MiB per 1,000
    batches, most of it the harness's request log filling, drained since (``scale._Sampled``).
    Bounded is near zero here."""
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

