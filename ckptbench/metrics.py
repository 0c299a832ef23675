"""Numbers from a run: percentiles, and proxy events attributed to micro-batches."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def batch_window(progress: dict) -> tuple[float, float]:
    """The wall-clock span (epoch seconds) of one batch, from its progress report."""
    start = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + progress["durationMs"]["triggerExecution"] / 1000.0


def requests_by_batch(events, progresses: list[dict], by: str = "op") -> list[Counter]:
    """For each batch, a Counter of the proxy events that started inside its window, by op or area.

    Progress timestamps have millisecond resolution; the windows of back-to-back batches
    do not overlap, so each request is counted once.
    """
    windows = [batch_window(p) for p in progresses]
    counts = [Counter() for _ in progresses]
    for event in events:
        for i, (start, end) in enumerate(windows):
            if start - 0.001 <= event.start <= end + 0.001:
                counts[i][getattr(event, by)] += 1
                break
    return counts


def duration_stats(progresses: list[dict], name: str) -> dict[str, float]:
    """p50/p95 of one of Spark's ``durationMs`` entries (walCommit, commitOffsets, ...)."""
    values = [p["durationMs"].get(name) for p in progresses if name in p["durationMs"]]
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}
