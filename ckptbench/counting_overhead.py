"""What counting S3 requests inside the JVM (``ckptbench.jvm_requests``) costs a checkpoint.

Two measurements, both in ``experiment(settings)``:

- Spark's walCommit (writing ``offsets/N``, timed by Spark in the JVM) with counting on and off,
  in one SparkSession, on the store directly (no metering proxy: where the JVM count is meant to
  serve). Counting is switched batch by batch inside each query, in a random order within blocks
  of two batches (``_Alternate``; in the driver JVM, which in local mode makes every request, as
  each batch's progress is posted; a trigger of ``TRIGGER`` leaves a quiet machine's query idle
  between batches, so the switch lands there), so that drift in a shared machine's load, which
  moved walCommit's p50 by a factor of 2 between runs here, reaches both arms alike. A first
  design, alternating whole runs, measured +17% for rename and -5% for conditional on Ceph RGW:
  noise (the first run of each pair was also slower, by ~11 ms) against a handler that costs
  about a microsecond a request. Which arm a batch was in is read from the data, not from the
  switch's timing: counted if the JVM recorded all of its ``offsets/`` requests (as many as any
  batch of the query), not counted if none, else (switched during its walCommit) left out.
  ``overhead_pct``: walCommit p50 of the counted batches over that of the others, every query
  pooled, minus 1, in percent; ``overhead_interval`` a bootstrap interval of it.
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

from . import jvm_requests, metrics, progress, results, runs, workloads

#: The strategies measured: the most requests per walCommit (rename: a temp file, its COPY and
#: DELETE, S3A's existence checks) and the fewest (conditional: one PUT), the two ends.
STRATEGIES = ("rename", "conditional")
#: Queries per strategy, by run size (each of the plan's warm-up batches and at least
#: ``MIN_BATCHES`` measured ones).
QUERIES = {"smallest": 2, "quick": 6, "full": 8}
#: Enough measured batches per query that both arms have some, even in the smallest run.
MIN_BATCHES = 10
KEYS = 100
#: Long enough that a batch ends well before the next trigger: the switch lands between batches.
TRIGGER = "1 second"


class _SpacedLab(runs.Lab):
    """``runs.Lab`` whose stateful queries trigger every ``TRIGGER``."""

    def start(self, workload: str, base: str, keys: int):
        if workload != "stateful":
            raise ValueError(f"only the stateful workload here, not {workload!r}")
        return workloads.stateful(self.spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys, digest=True,
                                  trigger=TRIGGER)


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

    def batches(self, strategy: str) -> pd.DataFrame:
        """The measured batches of ``strategy``'s queries with their arm: ``on``, ``off`` or
        ``mixed`` (counting switched during its walCommit)."""
        out = []
        for run_id in self.record.runs[(self.record.runs.strategy == strategy) & self.record.runs.error.isna()].run:
            run = results.Run(self.record, int(run_id), "jvm")
            offsets = run.requests[run.requests.area == "offsets"].groupby("batch_id").size()
            batches = run.batches.copy()
            counted = offsets.reindex(batches.batch_id, fill_value=0).to_numpy()
            full = counted.max() if len(counted) else 0
            batches["arm"] = np.where(counted == 0, "off", np.where(counted == full, "on", "mixed"))
            out.append(batches)
        return pd.concat(out) if out else pd.DataFrame(columns=[*results.TABLES["batches"], "arm"])

    def wal_commits(self, strategy: str, arm: str) -> np.ndarray:
        frame = self.batches(strategy)
        return frame[frame.arm == arm].walCommit.to_numpy(dtype=float)

    def p50(self, strategy: str, arm: str) -> float:
        """walCommit p50 over the batches of one arm, every query pooled."""
        return metrics.median(self.wal_commits(strategy, arm))

    def count(self, strategy: str, arm: str) -> int:
        return len(self.wal_commits(strategy, arm))

    def overhead_pct(self, strategy: str) -> float:
        """walCommit p50 counting over p50 not counting, minus 1, in percent."""
        return 100 * (self.p50(strategy, "on") / self.p50(strategy, "off") - 1)

    def overhead_interval(self, strategy: str, level: float = 90, resamples: int = 2000) -> tuple[float, float]:
        """A bootstrap interval of ``overhead_pct`` (batches resampled within each arm)."""
        on, off = self.wal_commits(strategy, "on"), self.wal_commits(strategy, "off")
        if not len(on) or not len(off):
            return float("nan"), float("nan")
        rng = np.random.default_rng(0)
        ratios = [np.median(rng.choice(on, len(on))) / np.median(rng.choice(off, len(off))) for _ in range(resamples)]
        low, high = np.percentile(ratios, [(100 - level) / 2, (100 + level) / 2])
        return 100 * (low - 1), 100 * (high - 1)

    def wal_commit_requests(self, strategy: str) -> float:
        """JVM-counted requests in ``offsets/`` per counted batch: walCommit's own."""
        frame = self.batches(strategy)
        counted = frame[frame.arm == "on"]
        requests = self.record.requests
        requests = requests[(requests.source == "jvm") & (requests.area == "offsets")]
        per_batch = requests.groupby(["run", "batch_id"]).size()
        return metrics.mean([per_batch.get((r, b), 0) for r, b in zip(counted.run, counted.batch_id, strict=True)])

    def bound_pct(self, strategy: str) -> float:
        """The handler's cost per attempt times walCommit's requests, in percent of the uncounted
        batches' walCommit p50: an upper bound on what counting adds to walCommit."""
        added_ms = self.handler["on_ns"] * self.wal_commit_requests(strategy) / 1e6
        return 100 * added_ms / self.p50(strategy, "off")


def handler_cost(attempts: int = 300_000) -> dict[str, float]:
    """``MeterCost``'s nanoseconds per attempt, counting on and off, in a JVM of its own."""
    classpath = ":".join(str(p) for p in jars.spark_jars())
    out = subprocess.run(["java", "-cp", classpath, "ckptbench.metering.MeterCost", str(attempts)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def experiment(settings: runs.Settings, strategies=STRATEGIES, queries: int | None = None) -> Overhead:
    """Both measurements on ``settings``' store; the queries' record is written to ``settings.raw``
    as experiment ``jvm_counting``."""
    plan = settings.plan
    queries = queries or QUERIES[settings.size]
    recorder = results.Recorder()
    with runs.started_store(settings) as (metered, bucket):
        store = getattr(metered, "inner", metered)  # straight to the store: a proxy would add its latency to both arms
        with runs.lab(store, bucket, plan, strategies[0]) as base:
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
    record = runs.save(recorder.results(env), settings)
    return Overhead(record, handler_cost())


experiment.timeout = 3 * 3600
