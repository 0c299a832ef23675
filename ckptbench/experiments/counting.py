"""What counting S3 requests inside the JVM (``ckptbench.harness.jvm_requests``) costs a checkpoint.

Two measurements, both in ``experiment(settings)``:

- Spark's walCommit (writing ``offsets/N``, timed by Spark in the JVM) with counting on and off,
  in one SparkSession, on the store directly (no metering proxy: where the JVM count is meant to
  serve). Counting is switched batch by batch inside each query, in a random order within blocks
  of two batches (``_Alternate``; in the driver JVM, which in local mode makes every request, as
  each batch's progress is posted; a trigger of ``TRIGGERS`` leaves a quiet machine's query idle
  between batches, so the switch lands there), so that drift in a shared machine's load (it can
  move walCommit's p50 by a factor of 2 between runs) reaches both arms alike: whole runs
  alternated would measure that drift, not a handler that costs about a microsecond a request
  (measured: docs/findings/jvm-counting.md). Which arm a batch was in is read from the data, not from the
  switch's timing: counted if the JVM recorded all of its ``offsets/`` requests (at least as many
  as the query's batches usually make), not counted if none, else (switched during its walCommit)
  left out.
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
import json
import random
import subprocess

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
QUERIES = {"smallest": 1, "quick": 6, "full": 20}
#: Fraction of each arm's batches cut from either end before its mean (``metrics.trimmed_mean``):
#: one GC pause or slow request in an arm would move its mean by more than the 2% sought.
TRIM = 0.1
#: Enough measured batches per query that both arms have some, even in the smallest run.
MIN_BATCHES = 10
KEYS = 100
#: Trigger intervals, per strategy, long enough that a batch ends well before the next trigger, so
#: that the switch lands between batches: a batch that ends after it would join the arm by its
#: timing, not at random. Each interval is above the strategy's stateful batch p99 on Ceph RGW
#: (measured: docs/findings/jvm-counting.md); shorter intervals fit more batches into a run.
#: Other strategies: ``TRIGGER``.
TRIGGERS = {"conditional": "0.5 seconds"}
TRIGGER = "1 second"


class _SpacedLab(querylab.QueryLab):
    """``querylab.QueryLab`` whose stateful queries trigger every ``TRIGGERS[strategy]``."""

    def start(self, workload: str, base: str, keys: int, options: dict | None = None):
        if workload != "stateful" or options:
            raise ValueError(f"only the stateful workload in Spark's own settings here, not {workload!r} with "
                             f"query options {options}")
        return workloads.stateful(self.spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys, digest=True,
                                  trigger=self.trigger)

    def run(self, recorder, strategy: str, *args, **kwargs) -> None:
        self.trigger = TRIGGERS.get(strategy, TRIGGER)
        super().run(recorder, strategy, *args, **kwargs)


class _Alternate(StreamingQueryListener):
    """Switches counting on or off at random as each batch's progress is posted (Spark's listener
    bus calls it back as the batch ends, sooner than polling the query would): in blocks of two
    batches, one of each arm in a random order (seeded), so the arms stay balanced. At random
    rather than in turn, so that nothing periodic in the batches (their parity, the switch
    landing one batch late) lines up with one arm."""

    def __init__(self, meter: jvm_requests.JvmRequests, seed: int = 0) -> None:
        self.meter, self.rng, self.block = meter, random.Random(seed), []

    def set(self, on: bool) -> None:
        self.meter.set_enabled(on)

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
        ``mixed`` (counting switched during its walCommit), and ``wal_commit_requests``: the
        query's usual count of ``offsets/`` requests a batch (``_usual``)."""
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
            usual = _usual(counted)
            batches["arm"] = np.where(counted == 0, "off", np.where(counted >= usual, "on", "mixed"))
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
            per_query = plan.warmup + batches
            bar = progress.Recorder("JVM counting overhead",
                                    len(strategies) * (plan.jvm_warmup + queries * per_query), "batch")
            alternate = _Alternate(meter)
            try:
                for strategy in strategies:
                    bar.set_postfix_str(f"{strategy}: JVM warm-up")
                    lab.run(None, strategy, "stateful", KEYS, 0, plan.jvm_warmup, bar)
                    lab.spark.streams.addListener(alternate)
                    for i in range(queries):
                        bar.set_postfix_str(f"{strategy}: query {i + 1}/{queries}")
                        alternate.set(i % 2 == 0)
                        lab.run(recorder, strategy, "stateful", KEYS, plan.warmup, batches, bar)
                    lab.spark.streams.removeListener(alternate)
            finally:
                meter.set_enabled(True)
            env = results.environment(store, "jvm_counting", settings.size, dataclasses.asdict(plan),
                                      spark=lab.spark, **base.where, queries=queries)
    record = disk.save(recorder.results(env), settings)
    return Overhead(record, handler_cost())


experiment.timeout = 3 * 3600
