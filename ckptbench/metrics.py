"""Numbers from a run: percentiles, and proxy events attributed to micro-batches."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict

import numpy as np


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def batch_window(progress: dict) -> tuple[float, float]:
    """The wall-clock span (epoch seconds) of one batch, from its progress report."""
    start = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + progress["durationMs"]["triggerExecution"] / 1000.0


def events_by_batch(events, progresses: list[dict]) -> tuple[list[list], list]:
    """Each batch's proxy events (those that started inside its window), and the events
    that started outside every window (background work such as state store maintenance).

    Progress timestamps have millisecond resolution; the windows of back-to-back batches
    do not overlap, so each request is counted once.
    """
    windows = [batch_window(p) for p in progresses]
    batches: list[list] = [[] for _ in progresses]
    outside = []
    for event in events:
        for i, (start, end) in enumerate(windows):
            if start - 0.001 <= event.start <= end + 0.001:
                batches[i].append(event)
                break
        else:
            outside.append(event)
    return batches, outside


def requests_by_batch(events, progresses: list[dict], by: str = "op") -> list[Counter]:
    """For each batch, a Counter of the proxy events that started inside its window, by op or area."""
    return [Counter(getattr(e, by) for e in batch) for batch in events_by_batch(events, progresses)[0]]


def batch_summary(events) -> dict:
    """One batch's requests, per checkpoint area: ``count[area][op]``, the store's time
    ``ms[area][op]`` (summed proxy durations), each PUT's duration ``put_ms[area]``, bytes
    sent ``bytes[area]`` and the largest single upload ``largest[area]`` (a PUT, or a
    multipart upload's parts summed) -- the file a batch writes whole, such as an ``N.compact``."""
    count: dict = defaultdict(Counter)
    ms: dict = defaultdict(lambda: defaultdict(float))
    put_ms: dict = defaultdict(list)
    sent: Counter = Counter()
    uploads: Counter = Counter()
    for e in events:
        count[e.area][e.op] += 1
        ms[e.area][e.op] += e.duration * 1000
        sent[e.area] += e.bytes_in
        if e.op == "PUT":
            put_ms[e.area].append(e.duration * 1000)
        if e.op in ("PUT", "MPU_PART"):
            uploads[(e.area, e.key)] += e.bytes_in
    largest: Counter = Counter()
    for (area, _), size in uploads.items():
        largest[area] = max(largest[area], size)
    return {"count": {a: dict(c) for a, c in count.items()}, "ms": {a: dict(m) for a, m in ms.items()},
            "put_ms": dict(put_ms), "bytes": dict(sent), "largest": dict(largest)}


def per_batch(summaries: list[dict], field: str, areas=None, ops=None) -> list[float]:
    """For each batch summary, ``field`` ("count" or "ms") summed over ``areas`` and ``ops``
    (all when None)."""
    out = []
    for s in summaries:
        total = 0.0
        for area, by_op in s[field].items():
            if areas is None or area in areas:
                total += sum(v for op, v in by_op.items() if ops is None or op in ops)
        out.append(total)
    return out


def is_compaction_batch(batch_id: int, interval: int) -> bool:
    """Spark's CompactibleFileStreamLog rule: batch N writes ``N.compact`` when (N+1) % interval == 0."""
    return (batch_id + 1) % interval == 0


def compaction_ratio(progresses: list[dict], interval: int) -> float:
    """Median batch time (triggerExecution) of compaction batches over that of the others."""
    compact, other = [], []
    for p in progresses:
        (compact if is_compaction_batch(p["batchId"], interval) else other).append(
            p["durationMs"]["triggerExecution"])
    return percentile(compact, 50) / percentile(other, 50) if compact and other else float("nan")


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares ``y = intercept + slope * x``: (intercept, slope, r squared)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    spread = float(((y - y.mean()) ** 2).sum())
    return float(intercept), float(slope), 1 - float((residual ** 2).sum()) / spread if spread else 1.0


def durations(progresses: list[dict], name: str) -> list[float]:
    """One of Spark's ``durationMs`` entries (walCommit, commitOffsets, triggerExecution, ...) per batch."""
    return [p["durationMs"][name] for p in progresses if name in p["durationMs"]]


def duration_stats(progresses: list[dict], name: str) -> dict[str, float]:
    """p50/p95 of one of Spark's ``durationMs`` entries."""
    values = durations(progresses, name)
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def state_commit_ms(progresses: list[dict]) -> list[float]:
    """Spark's state store commit time per batch (all stateful operators together). It writes the
    state files through the checkpoint manager: their upload and, for rename, the rename."""
    return [sum(op["commitTimeMs"] for op in p["stateOperators"]) for p in progresses if p.get("stateOperators")]


#: A server-side COPY that moves the bytes costs, per byte, at least this share of what a
#: PUT of them costs (it reads and writes them where the PUT only writes). Ceph RGW's, which
#: shares the object's tail, measured 0.04 here; moto's, copying in memory, about 1.
COPY_MOVES_DATA = 0.1


def copy_fit(samples: dict) -> dict:
    """Fit ``ms = base + per_mib * MiB`` to COPY and to PUT durations over all object sizes
    (``{size: {"COPY": [ms], "PUT": [ms]}}``) and say whether the COPY moves the data.

    ``mb_per_s`` (10^6 bytes/s) is only given when it does: for a store whose COPY time barely
    grows with size, a throughput would be a misleading line through noise.
    """
    fits = {}
    for op in ("COPY", "PUT"):
        x = [int(size) / 2**20 for size, ops in samples.items() for _ in ops[op]]
        y = [ms for ops in samples.values() for ms in ops[op]]
        fits[op] = linear_fit(x, y)
    (base, per_mib, r2), put_per_mib = fits["COPY"], fits["PUT"][1]
    share = per_mib / put_per_mib if put_per_mib > 0 else float("nan")
    moves = share >= COPY_MOVES_DATA
    return {"base_ms": base, "ms_per_mib": per_mib, "r2": r2, "put_ms_per_mib": put_per_mib,
            "share_of_put": share, "moves_data": moves,
            "mb_per_s": 2**20 / 1e6 * 1000 / per_mib if moves and per_mib > 0 else float("nan")}
