"""The recommendation: which strategy to run on a store, for a workload, and why.

Derived only from measured numbers (``ckptbench.metrics`` over the records) and, where they
were measured, the store's capabilities (the probe) and the crash lab's exactly-once results.
The rule, in order, so a reader can check every verdict by hand:

1. A strategy is out if the store cannot run it (the probe says why), if its run failed, or if
   the crash lab saw it lose or duplicate a row (exactly-once broken).
2. Among the rest, a strategy whose store refuses a second writer (two drivers on one
   checkpoint end with a clean error, not silent damage) comes before one that cannot tell.
   Where the two-writer test was not run, the strategy's own promise (``exclusive_create``) is
   used and the reasons say so.
3. Then the lowest commit latency (Spark's walCommit + commitOffsets, p50 over measured batches);
   within ``TIE`` of the fastest, the cheapest in requests (dollars per month at the trigger
   interval, a projection at AWS list prices) wins. Only the requests the strategy makes count
   (``metrics.strategy_controls``): a sink's data files and RocksDB's SST uploads are the same
   whatever the strategy, so they are shown beside it, never credited to it.

Each decision carries every candidate's numbers and the reason it was not chosen.
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
from ckptbench import metrics
from ckptbench.metrics import cost
from ckptbench.record import results

#: Commit latencies within this fraction of the fastest are a tie, settled by cost.
TIE = 0.10


@dataclasses.dataclass
class Candidate:
    strategy: str
    commit_p50_ms: float = float("nan")  # walCommit + commitOffsets, p50
    commit_p95_ms: float = float("nan")
    requests_per_batch: float = float("nan")  # billable, made by the strategy
    other_requests_per_batch: float = float("nan")  # billable, made whatever the strategy
    dollars_per_month: float = float("nan")  # a projection of requests_per_batch: see ckptbench.metrics.cost
    refuses_second_writer: bool | None = None
    second_writer_source: str = ""  # "measured" or "promised"
    out: str | None = None  # why it cannot be recommended
    note: str = ""  # why it was not chosen, when it could have been


@dataclasses.dataclass
class Decision:
    store: str
    workload: str
    recommended: str | None
    reasons: list[str]
    candidates: list[Candidate]


@dataclasses.dataclass
class Safety:
    """What the crash lab measured for one strategy on one store (None: not measured)."""

    cycles: int = 0
    duplicated: int = 0
    lost: int = 0
    two_writer: str | None = None  # "clean-error", "silent-damage", "both-ran-no-damage-seen"


def _candidate(record: results.Results, strategy: str, workload: str, trigger_s: float) -> Candidate:
    c = Candidate(strategy)
    try:
        run = record.run(strategy, workload)
    except results.RunFailed as e:
        c.out = f"its run failed ({e})"
        return c
    c.commit_p50_ms = (metrics.duration_percentile(run, "walCommit", 50)
                       + metrics.duration_percentile(run, "commitOffsets", 50))
    c.commit_p95_ms = (metrics.duration_percentile(run, "walCommit", 95)
                       + metrics.duration_percentile(run, "commitOffsets", 95))
    billable = metrics.billable_requests_by_op(run, controlled=True)
    c.requests_per_batch = sum(billable.values())
    c.other_requests_per_batch = sum(metrics.billable_requests_by_op(run, controlled=False).values())
    c.dollars_per_month = cost.per_month(cost.dollars(billable), trigger_s)
    return c


def decide(record: results.Results, workload: str, trigger_s: float = 10.0,
           safety: dict[str, Safety] | None = None, runnable: dict[str, str | None] | None = None) -> Decision:
    """The decision for ``workload`` on the store of ``record`` (a streaming record).

    ``safety``: the crash lab's findings per strategy; ``runnable``: the probe's verdict per
    strategy (None: can run; else why not). Either may be missing: the reasons then say what was
    not measured."""
    safety, runnable = safety or {}, runnable or {}
    candidates = [_candidate(record, s, workload, trigger_s) for s in record.strategies()
                  if workload in set(record.runs[record.runs.strategy == s].workload)]
    for c in candidates:
        if c.out:
            continue
        found = safety.get(c.strategy)
        if runnable.get(c.strategy):
            c.out = f"the store cannot run it: {runnable[c.strategy]}"
        elif found and (found.duplicated or found.lost):
            c.out = (f"it broke exactly-once in the crash lab: {found.duplicated} rows duplicated, "
                     f"{found.lost} lost in {found.cycles} crash cycles")
        if found and found.two_writer:
            c.refuses_second_writer, c.second_writer_source = found.two_writer == "clean-error", "measured"
        else:
            c.refuses_second_writer = ckpt_impls.get(c.strategy).exclusive_create
            c.second_writer_source = "promised"
    eligible = [c for c in candidates if c.out is None]
    reasons = []
    if not eligible:
        return Decision(record.environment["store"], workload, None,
                        ["no strategy can be recommended: every one is out (see the candidates)"], candidates)
    guarded = [c for c in eligible if c.refuses_second_writer]
    pool = guarded or eligible
    for c in eligible:
        if c not in pool:
            c.note = "a second writer on its checkpoint goes undetected"
    fastest = min(c.commit_p50_ms for c in pool)
    tied = [c for c in pool if c.commit_p50_ms <= fastest * (1 + TIE)]
    chosen = min(tied, key=lambda c: c.dollars_per_month)
    for c in pool:
        if c is chosen:
            continue
        if c in tied:
            c.note = (f"as fast (within {TIE:.0%}) but dearer: ${c.dollars_per_month:,.2f} against "
                      f"${chosen.dollars_per_month:,.2f} a month")
        else:
            c.note = f"slower: {c.commit_p50_ms:.0f} ms against {chosen.commit_p50_ms:.0f} ms per batch's commits"
    reasons.append(f"commits a batch in {chosen.commit_p50_ms:.0f} ms (p50; p95 {chosen.commit_p95_ms:.0f} ms), "
                   + ("the fastest" if len(tied) == 1 else f"within {TIE:.0%} of the fastest and the cheapest")
                   + (" of the strategies that refuse a second writer" if guarded else ""))
    reasons.append(f"{chosen.requests_per_batch:.1f} billable requests per batch through the strategy: "
                   f"${chosen.dollars_per_month:,.2f} a month at one batch every {trigger_s:g} s ({cost.LABEL})"
                   + (f"; {chosen.other_requests_per_batch:.1f} more per batch (data files, RocksDB's SST uploads) "
                      "are the same whatever the strategy" if chosen.other_requests_per_batch else ""))
    found = safety.get(chosen.strategy)
    if found and found.cycles:
        reasons.append(f"exactly-once held through {found.cycles} crash cycles (0 rows lost or duplicated)")
    else:
        reasons.append("exactly-once under crashes was not measured on this store")
    if chosen.refuses_second_writer:
        how = "measured: a second driver got a clean error" if chosen.second_writer_source == "measured" \
            else "promised by its design (If-None-Match: * creates); not measured on this store"
        reasons.append(f"a second writer is refused ({how})")
    else:
        reasons.append("no strategy here refuses a second writer: make sure only one query runs per checkpoint")
    if runnable:
        reasons.append("the store probe found everything it needs")
    else:
        reasons.append("the store was not probed")
    if record.environment.get("emulator"):
        reasons.insert(0, "measured on an emulator: its latencies say nothing about a real store (the request "
                          "counts and their cost carry over)")
    return Decision(record.environment["store"], workload, chosen.strategy, reasons, candidates)
