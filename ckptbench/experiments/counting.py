"""What counting S3 requests inside the JVM (``ckptbench.harness.jvm_requests``) costs a checkpoint.

Two measurements, both in ``experiment(settings)``:

- Spark's walCommit (writing ``offsets/N``, timed by Spark in the JVM) with counting on and off,
  in one SparkSession, on the store directly (no metering proxy: where the JVM count is meant to
  serve). Counting is switched batch by batch inside each query, in a random order within blocks
  of two batches (``_Alternate``; in the driver JVM, which in local mode makes every request, as
  each batch's progress is posted; a trigger of ``trigger_s`` leaves a quiet machine's query idle
  between batches, so the switch lands there), so that drift in a shared machine's load (it can
  move walCommit's p50 by a factor of 2 between runs) reaches both arms alike: whole runs
  alternated would measure that drift, not a handler that costs about a microsecond a request
  (measured: docs/findings/jvm-counting.md). A batch that runs longer than its trigger leaves the
  next no quiet gap, and the switch lands inside it: each switch is recorded with when it was asked
  for and when the JVM had made it (``counting_switches``), and a batch whose window a switch
  overlaps joins neither arm. Of the others, which arm a batch was in is read from the data:
  counted if the JVM recorded all of its ``offsets/`` requests (at least as many as the query's
  unswitched batches usually make), not counted if none, else left out.
  ``overhead_ms``: the counted batches' mean walCommit less the others', each arm's slowest and
  fastest ``TRIM`` left out, every query pooled; ``overhead_pct`` that in percent of the uncounted
  batches' walCommit p50, ``overhead_interval`` a bootstrap interval of it. Means, not a ratio of
  the arms' medians: Spark reports walCommit in whole milliseconds, so for a walCommit of a few
  milliseconds (conditional's) the medians can only differ in steps of 20% or more; a mean over
  hundreds of batches resolves less than a step.
- The handler alone (``MeterCost.java``, its own JVM, no store): nanoseconds per HTTP attempt
  counted, and with counting off. Times walCommit's own requests (those in ``offsets/`` of a
  counted batch), it bounds from above what counting adds to walCommit, without the machine's
  noise (``bound_pct``): the handler runs on the thread that makes the request, so only
  walCommit's own requests lengthen it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import subprocess
import time

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StreamingQueryListener

import ckpt_impls
from ckpt_impls import jars
from ckptbench import config, metrics, progress
from ckptbench.harness import jvm_requests, querylab, stores, workloads
from ckptbench.record import disk, results, schema

#: The strategies measured: the most requests per walCommit (rename: a temp file, its COPY and
#: DELETE, S3A's existence checks) and the fewest (conditional: one PUT), the two ends.
STRATEGIES = ("rename", "conditional")
#: Queries per strategy, by run size (each of the plan's warm-up batches and at least
#: ``MIN_BATCHES`` measured ones). Full's 20 x 100 batches give each arm ~1,000: about what
#: rename needs for a 90% interval of +-2% of its p50, conditional about half (estimated from a
#: quick run: docs/findings/jvm-counting.md).
QUERIES = {"smallest": 1, "quick": 1, "full": 20}
#: Fraction of each arm's batches cut from either end before its mean (``metrics.trimmed_mean``):
#: one GC pause or slow request in an arm would move its mean by more than the 2% sought.
TRIM = 0.1
#: Enough measured batches per query that both arms have some, even in the smallest run.
MIN_BATCHES = 10
#: Batches each arm needs at least: where a loaded machine's batches outran their trigger and the
#: switches landed inside them, leaving an arm fewer, queries are added, up to ``EXTRA_QUERIES``.
MIN_ARM = 5
EXTRA_QUERIES = 4
KEYS = 100
#: Trigger intervals in seconds, per strategy, long enough that a batch ends well before the next
#: trigger, so that the switch lands between batches. Each is above the strategy's stateful batch
#: p99 on Ceph RGW (measured: docs/findings/jvm-counting.md); shorter intervals fit more batches
#: into a run. Other strategies: ``TRIGGER_S``. A store or machine where the JVM warm-up's batches
#: run longer gets ``SPACING`` times its last (``trigger_s``); a batch that still runs into the
#: next trigger is found by the switches' times and joins neither arm.
TRIGGERS_S = {"conditional": 0.5}
TRIGGER_S = 1.0
SPACING = 2.0
#: The longest trigger ``trigger_s`` sets: a warm-up slowed by a busy machine must not stretch
#: every batch of the run; batches that outrun it are left out by the switches' times.
LONGEST_TRIGGER_S = 5.0
#: The JVM warm-up's batches at least: its first starts the state, and ``trigger_s`` reads its last.
WARMUP_BATCHES = 3


class _SpacedLab(querylab.QueryLab):
    """``querylab.QueryLab`` whose stateful queries trigger every ``trigger_s`` of their strategy."""

    def start(self, workload: str, base: str, keys: int, options: dict | None = None):
        if workload != "stateful" or options:
            raise ValueError(f"only the stateful workload in Spark's own settings here, not {workload!r} with "
                             f"query options {options}")
        return workloads.stateful(self.spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys, digest=True,
                                  trigger=self.trigger)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: Seconds between triggers, per strategy, where ``trigger_s`` set one.
        self.spaced: dict[str, float] = {}

    def run(self, recorder, strategy: str, *args, **kwargs) -> None:
        self.trigger = f"{self.spaced.get(strategy, TRIGGERS_S.get(strategy, TRIGGER_S)):.1f} seconds"
        super().run(recorder, strategy, *args, **kwargs)


def trigger_s(strategy: str, warmup: pd.DataFrame) -> float:
    """``strategy``'s trigger interval: ``TRIGGERS_S``'s, or ``SPACING`` times the last of the JVM
    warm-up's batches (``warmup``, rows of ``batches``), the warmest, where that is longer, up to
    ``LONGEST_TRIGGER_S``."""
    last = warmup.sort_values("batch_id").triggerExecution.iloc[-1] / 1000 if len(warmup) else 0.0
    spaced = min(round(SPACING * last, 1), LONGEST_TRIGGER_S) if pd.notna(last) else 0.0
    return max(TRIGGERS_S.get(strategy, TRIGGER_S), spaced)


class _Alternate(StreamingQueryListener):
    """Switches counting on or off at random as each batch's progress is posted (Spark's listener
    bus calls it back as the batch ends, sooner than polling the query would): in blocks of two
    batches, one of each arm in a random order (seeded), so the arms stay balanced. At random
    rather than in turn, so that nothing periodic in the batches (their parity, the switch
    landing one batch late) lines up with one arm."""

    def __init__(self, meter: jvm_requests.JvmRequests, seed: int = 0) -> None:
        self.meter, self.rng, self.block = meter, random.Random(seed), []
        #: Rows of the ``counting_switches`` table, one per change of counting.
        self.switches: list[dict] = []
        self.on: bool | None = None

    def set(self, on: bool) -> None:
        if on == self.on:
            return
        before = time.time()
        self.meter.set_enabled(on)
        self.switches.append({"before": before, "after": time.time(), "on": bool(on)})
        self.on = on

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        if not self.block:
            self.block = self.rng.sample([True, False], 2)
        self.set(self.block.pop())

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


@dataclasses.dataclass
class Overhead:
    """``record``: the queries (JVM-counted requests of the counted batches only); ``handler``:
    ``MeterCost``'s ``on_ns``/``off_ns`` per attempt."""

    record: results.Results
    handler: dict[str, float]
    #: ``batches`` per strategy, classified once: every figure below reads them, several times.
    _batches: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                          compare=False)

    def batches(self, strategy: str) -> pd.DataFrame:
        """The measured batches of ``strategy``'s queries with their arm: ``on``, ``off`` or
        ``mixed`` (a switch overlapped the batch's window, or the JVM recorded only part of its
        ``offsets/`` requests), and ``wal_commit_requests``: the query's usual count of ``offsets/``
        requests a batch no switch overlapped (``_usual``)."""
        if strategy not in self._batches:
            self._batches[strategy] = self._classified(strategy)
        return self._batches[strategy]

    def _classified(self, strategy: str) -> pd.DataFrame:
        out = []
        for run_id in self.record.runs[(self.record.runs.strategy == strategy) & self.record.runs.error.isna()].run:
            run = results.Run(self.record, int(run_id), "jvm")
            offsets = run.requests[run.requests.area == "offsets"].groupby("batch_id").size()
            batches = run.batches.copy()
            counted = offsets.reindex(batches.batch_id, fill_value=0).to_numpy()
            switched = _switched(batches, self.record.counting_switches)
            usual = _usual(counted[~switched])
            batches["arm"] = np.where(switched | ((counted > 0) & (counted < usual)), "mixed",
                                      np.where(counted == 0, "off", "on"))
            batches["wal_commit_requests"] = usual
            out.append(batches)
        columns = [*schema.TABLES["batches"], "arm", "wal_commit_requests"]
        return pd.concat(out) if out else pd.DataFrame(columns=columns)

    def wal_commits(self, strategy: str, arm: str) -> np.ndarray:
        frame = self.batches(strategy)
        return frame[frame.arm == arm].walCommit.to_numpy(dtype=float)

    def p50(self, strategy: str, arm: str) -> float:
        """walCommit p50 over the batches of one arm, every query pooled."""
        return metrics.median(self.wal_commits(strategy, arm))

    def count(self, strategy: str, arm: str) -> int:
        return len(self.wal_commits(strategy, arm))

    def overhead_ms(self, strategy: str) -> float:
        """What counting adds to walCommit: the counted batches' trimmed mean less the others'."""
        return _added_ms(self.wal_commits(strategy, "on"), self.wal_commits(strategy, "off"))

    def overhead_pct(self, strategy: str) -> float:
        """``overhead_ms`` in percent of walCommit's p50 not counting."""
        return 100 * self.overhead_ms(strategy) / self.p50(strategy, "off")

    def overhead_interval(self, strategy: str, level: float = 90, resamples: int = 2000) -> tuple[float, float]:
        """A bootstrap interval of ``overhead_pct`` (batches resampled within each arm)."""
        on, off = self.wal_commits(strategy, "on"), self.wal_commits(strategy, "off")
        if not len(on) or not len(off):
            return float("nan"), float("nan")
        rng = np.random.default_rng(0)
        added = [_added_ms(rng.choice(on, len(on)), rng.choice(off, len(off))) for _ in range(resamples)]
        low, high = np.percentile(added, [(100 - level) / 2, (100 + level) / 2])
        p50 = self.p50(strategy, "off")
        return 100 * low / p50, 100 * high / p50

    def wal_commit_requests(self, strategy: str) -> float:
        """walCommit's own JVM-counted requests (``offsets/``) per counted batch."""
        frame = self.batches(strategy)
        return metrics.mean(frame[frame.arm == "on"].wal_commit_requests)

    def bound_pct(self, strategy: str) -> float:
        """The handler's cost per attempt times walCommit's requests, in percent of the uncounted
        batches' walCommit p50: an upper bound on what counting adds to walCommit."""
        added_ms = self.handler["on_ns"] * self.wal_commit_requests(strategy) / 1e6
        return 100 * added_ms / self.p50(strategy, "off")


def figures(overhead: Overhead, strategies) -> list[dict]:
    """``overhead``'s figures per strategy as plain numbers, for ``report.tables.counting_table``:
    batches counted and not, walCommit p50 of each arm, the overhead in ms and in percent of p50
    with its 90% interval, and the bound."""
    out = []
    for strategy in strategies:
        low, high = overhead.overhead_interval(strategy)
        out.append({"strategy": strategy, "counted": overhead.count(strategy, "on"),
                    "not_counted": overhead.count(strategy, "off"), "p50_counted": overhead.p50(strategy, "on"),
                    "p50_not": overhead.p50(strategy, "off"), "overhead_ms": overhead.overhead_ms(strategy),
                    "overhead_pct": overhead.overhead_pct(strategy), "low_pct": low, "high_pct": high,
                    "bound_pct": overhead.bound_pct(strategy)})
    return out


def _usual(counted: np.ndarray) -> int:
    """walCommit's own ``offsets/`` requests: the count most batches that recorded any have. Not
    the most: past ``spark.sql.streaming.minBatchesToRetain`` (100) batches Spark also deletes an
    old ``offsets/`` file each batch, and a full run's queries reach it: "as many as any batch"
    would take most counted batches for mixed ones (measured: docs/findings/jvm-counting.md)."""
    nonzero = counted[counted > 0]
    return int(np.bincount(nonzero).argmax()) if len(nonzero) else 0


def _switched(batches: pd.DataFrame, switches: pd.DataFrame) -> np.ndarray:
    """Whether a switch of counting (rows of ``counting_switches``, from its asking to the JVM having
    made it) overlapped each batch's window: its ``timestamp`` to the end of its ``triggerExecution``."""
    start = batches.timestamp.to_numpy(dtype=float)
    end = start + batches.triggerExecution.to_numpy(dtype=float) / 1000
    before, after = switches.before.to_numpy(dtype=float), switches.after.to_numpy(dtype=float)
    return ((before[None, :] <= end[:, None]) & (after[None, :] >= start[:, None])).any(axis=1)


def short(recorder: results.Recorder, switches: list[dict], strategy: str) -> bool:
    """Whether either arm of ``strategy``'s queries so far (``recorder``'s rows, and ``switches``,
    the rows of ``counting_switches`` so far) has fewer than ``MIN_ARM`` batches."""
    record = recorder.results({})
    record.tables["counting_switches"] = schema.frame("counting_switches", switches)
    so_far = Overhead(record, {})
    return min(so_far.count(strategy, "on"), so_far.count(strategy, "off")) < MIN_ARM


def _added_ms(on, off) -> float:
    return metrics.trimmed_mean(on, TRIM) - metrics.trimmed_mean(off, TRIM)


def handler_cost(attempts: int = 300_000) -> dict[str, float]:
    """``MeterCost``'s nanoseconds per attempt, counting on and off, in a JVM of its own."""
    classpath = ":".join(str(p) for p in jars.spark_jars())
    out = subprocess.run(["java", "-cp", classpath, "ckptbench.metering.MeterCost", str(attempts)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def experiment(settings: config.Settings, strategies=STRATEGIES, queries: int | None = None) -> Overhead:
    """Both measurements on ``settings``' store; the queries' record is written to ``settings.raw``
    as experiment ``jvm_counting``."""
    plan = settings.plan
    queries = queries or QUERIES[settings.size]
    recorder = results.Recorder()
    with stores.started_store(settings) as (metered, bucket):
        store = getattr(metered, "inner", metered)  # straight to the store: a proxy would add its latency to both arms
        with querylab.lab(store, bucket, plan, strategies[0]) as base:
            lab = _SpacedLab(base.spark, store, bucket, plan)
            meter = jvm_requests.of(lab.spark)
            if not meter.enabled:
                raise RuntimeError(f"JVM request counting is off in this session ({ckpt_impls.REQUESTS_ENABLED_CONF})")
            batches = max(plan.batches, MIN_BATCHES)
            per_query, jvm_warmup = plan.warmup + batches, max(plan.jvm_warmup, WARMUP_BATCHES)
            bar = progress.Recorder("JVM counting overhead", len(strategies) * (jvm_warmup + queries * per_query),
                                    "batch")
            alternate = _Alternate(meter)
            try:
                for strategy in strategies:
                    bar.set_postfix_str(f"{strategy}: JVM warm-up")
                    warmup = results.Recorder()
                    lab.run(warmup, strategy, "stateful", KEYS, 0, jvm_warmup, bar)
                    lab.spaced[strategy] = trigger_s(strategy, warmup.results({}).batches)
                    lab.spark.streams.addListener(alternate)
                    for i in itertools.count():
                        added = i >= queries
                        if added and (i == queries + EXTRA_QUERIES or not short(recorder, alternate.switches,
                                                                                 strategy)):
                            break
                        if added:
                            bar.grow(per_query)
                        bar.set_postfix_str(f"{strategy}: query {i + 1}, added: an arm had under {MIN_ARM} batches"
                                            if added else f"{strategy}: query {i + 1}/{queries}")
                        alternate.set(i % 2 == 0)
                        lab.run(recorder, strategy, "stateful", KEYS, plan.warmup, batches, bar)
                    lab.spark.streams.removeListener(alternate)
            finally:
                meter.set_enabled(True)
            recorder.add("counting_switches", alternate.switches)
            env = results.environment(store, "jvm_counting", settings.size, dataclasses.asdict(plan),
                                      spark=lab.spark, **base.where, queries=queries)
    record = disk.save(recorder.results(env), settings)
    return Overhead(record, handler_cost())


experiment.timeout = 3 * 3600
