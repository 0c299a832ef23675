"""The fault lab: how often a streaming query dies under each fault profile, per strategy.

For each seed x workload x fault profile x strategy, one query (of ``config.FAULT_WORKLOADS``:
stateless to a noop sink, stateful, to a file sink; those the plan has) runs on a fresh prefix
for ``batches`` batches while the metering proxy injects the profile's faults
(``infra.faults.PROFILES``). A run ends ``completed`` (all its batches), ``died`` (the query
stopped with an exception: Spark's first line is kept, and the first line of its innermost
cause, which says what the store did) or ``stalled`` (its batches did not come within the time
limit). A query that died or stalled is restarted from its checkpoint with the faults off, for
``recovery_batches`` batches: ``recovered`` says whether it resumed. For the file sink the
output is then read back through Spark (which trusts ``_spark_metadata``): ``exactly_once``
says whether it holds every row of whole batches once, none twice and no batch in part.

Under an outage profile (``outage-*``: every request reset by the proxy for some seconds;
``gateway-restart``: Ceph's radosgw SIGKILLed and started again, on ``ceph`` only, skipped
elsewhere, saying so) the query starts with no faults and the store goes away once it has done
``FaultPlan.outage_after`` batches (``ckptbench.experiments.outages``); the run also records how
long the store was away and the seconds from then to the query's death or to its first batch
after the store was back.

Recorded (``ckptbench.record``): a ``runs`` row per query (its ``error``), its ``fault_runs``
row (profile, seed, batches asked and done, outcome, cause, recovered, exactly_once, seconds, and
under an outage outage_s, died_after_s, resumed_after_s), its
progress reports (``batches``), every request under its prefix (``requests``, while the faults
were in force and during the recovery) and every fault injected into them (``injections``).
``ckptbench.metrics`` derives the rates: query deaths per run, failed batches per batch
asked, retried requests and injected faults per run.

The store's faults are emulated by the proxy in front of a real store; ``aws-projection`` is a
projection to AWS S3, not a measurement of it.

What pre-2020 S3 consistency (the ``eventual*`` profiles) does to each strategy, and which
requests decide it, is a finding of this lab, not a contract (measured:
docs/findings/fault-lab.md).
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import ckpt_impls
from ckptbench import config, progress
from ckptbench.harness import querylab, stores, workloads
from ckptbench.record import disk, results
from infra.faults import PROFILES

from . import outages


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    profiles: tuple[str, ...]
    workloads: tuple[str, ...]
    batches: int  # asked of each query while the faults are in force
    seeds: tuple[int, ...]  # one run of each strategy x workload x profile per seed
    keys: int  # state keys of the stateful workload (each batch updates all of them)
    recovery_batches: int = 2  # asked of a query restarted, faults off, after it died or stalled
    outage_after: int = 2  # batches a query does before an outage profile takes the store away

    def lead(self) -> int:
        """Batches done before an outage begins: ``outage_after``, leaving at least one after it."""
        return max(0, min(self.outage_after, self.batches - 1))


#: ``quick`` is what ``make bench`` runs: the profiles a strategy's commit protocol could notice (a
#: lost response to a conditional write, a LIST that lags) and the shortest store outage, on the
#: stateful workload (every job's outcome where a job has no runs of its own); ``full`` every
#: profile, the 30 s outage the candidate tables show by name (``decide.OUTAGE_SHOWN``, else the
#: longest measured), the gateway restart and the outage beyond S3A's retry budget among them, on
#: every workload: a query that rides an outage out spends it, and the retries' back-off after it,
#: in every such run.
PLANS = {
    "smallest": FaultPlan(("none", "eventual", "outage-5s"), ("stateful",), 3, (0,), 100, outage_after=1),
    "quick": FaultPlan(("lost-response", "eventual", "outage-5s"), ("stateful",), 3, (0,), 1_000, outage_after=1),
    "full": FaultPlan(tuple(PROFILES), config.FAULT_WORKLOADS, 10, (0, 1), 1_000),
}
OUTCOMES = ("completed", "died", "stalled")
#: The session's settings for the lab: a query stopped in the middle of a store's retries gives up
#: after a minute instead of waiting for them forever; a task is tried as often as on a cluster
#: (``harness.spark.local_with_retries``), since a fault that ends a task's store retries would
#: otherwise end the query under a local master, where a cluster runs the task again.
SPARK_CONF = {"spark.sql.streaming.stopTimeout": "60000", "spark.task.maxFailures": config.TASK_MAX_FAILURES}


def batch_limit(batches: int) -> float:
    """Seconds a query gets for ``batches`` batches before it counts as stalled: generous, as
    injected latency and the SDK's back-off on injected errors slow every batch."""
    return 180 + 30 * batches


def run_one(lab: querylab.QueryLab, recorder: results.Recorder, strategy: str, workload: str, profile: str, seed: int,
            plan: FaultPlan, bar=None) -> int:
    """One query of ``workload`` checkpointing with ``strategy`` under ``profile``, recorded in
    ``recorder``; returns its run number."""
    proxy, spark = lab.store.proxy, lab.spark
    prefix = f"{lab.store.run_prefix}faults/{strategy}-{workload}-{profile}-{seed}-{uuid.uuid4().hex[:8]}"
    base = f"s3a://{lab.bucket}/{prefix}"
    run = recorder.add_run(strategy, workload, plan.keys, prefix)
    if bar:
        bar.set_postfix_str(f"{strategy} x {workload} under {profile}")
    ckpt_impls.use(spark, strategy)
    proxy.reset()  # the run's injections alone; marks stay valid
    mark, began = proxy.mark(), time.time()
    outage = outages.of(profile)
    if outage is None:
        proxy.use_profile(profile, seed)
    try:  # an outage profile goes in force after the lead batches (outages.take_away)
        done, outcome, error, cause, died_at, window = _drive(lab, workload, base, plan.keys, plan.batches, bar,
                                                              (profile, seed, plan.lead()) if outage else None)
    finally:
        proxy.use_profile("none")
    seconds = time.time() - began
    every = [i for i in proxy.injections() if i.start >= began]
    times = outages.times(window, every, done, died_at)
    injections = [i for i in every if i.key.startswith(prefix + "/")]
    recovered = None
    if outcome != "completed":
        _, recovery, *_ = _drive(lab, workload, base, plan.keys, plan.recovery_batches)
        recovered = recovery == "completed"
    exactly_once = _exactly_once(spark, f"{base}/output") if workload == "file_sink" else None
    events = [e for e in proxy.events_since(mark) if e.key.startswith(prefix + "/")]
    lab.store.inner.empty_bucket(lab.bucket, prefix + "/")  # an in-memory store would fill up
    if error:
        recorder.fail_run(run, error)
    recorder.add_fault_run(run, profile=profile, seed=seed, batches=plan.batches, batches_done=len(done),
                           outcome=outcome, cause=cause, recovered=recovered, exactly_once=exactly_once,
                           seconds=seconds, **times)
    recorder.add_batches(run, "measured", done)
    recorder.add_requests(run, events, done)
    recorder.add_injections(run, injections)
    return run


def _drive(lab: querylab.QueryLab, workload: str, base: str, keys: int, batches: int, bar=None,
           outage: tuple[str, int, int] | None = None) -> tuple[list[dict], str, str, str, float | None, object]:
    """Start ``workload`` on ``base`` and wait for ``batches`` batches: (the progress of the batches
    done, outcome, error: Spark's first line, or why it stalled, or "", the innermost cause of a
    death, when the death was seen (``time.time()``, None: no death) and the outage's
    ``outages.Window``, None if none began). ``outage``: (profile, seed, lead): take the store away
    under that outage profile once ``lead`` batches are done."""
    on_batch = bar.update if bar else None
    try:
        query = lab.start(workload, base, keys)
    except Exception as e:  # the checkpoint could not even be set up
        if bar:
            bar.update(batches)
        java = getattr(e, "java_exception", None)
        return [], "died", first_line(e), innermost(java) if java is not None else first_line(e), time.time(), None
    outcome, error, cause, died_at, window = "completed", "", "", None, None
    try:
        if outage is None:
            workloads.await_batches(query, batches, batch_limit(batches), on_batch)
        else:
            profile, seed, lead = outage
            workloads.await_batches(query, lead, batch_limit(lead), on_batch)
            window = outages.take_away(lab, profile, seed, query)
            workloads.await_batches(query, batches - lead, batch_limit(batches - lead) + window.outage.seconds,
                                    on_batch)
    except workloads.QueryFailed as e:
        outcome, error = ("died" if query.exception() is not None else "stalled"), str(e)
        died_at = time.time() if outcome == "died" else None
        if outcome == "died":
            # PySpark's copy of the exception has lost its causes; the JVM's has them.
            cause = innermost(query._jsq.exception().get())
    finally:
        done = sorted(query.recentProgress, key=lambda p: p["batchId"])[:batches]
        try:
            query.stop()
        except Exception as e:  # a stop that times out (spark.sql.streaming.stopTimeout) leaves it running
            if not error:
                outcome, error = "stalled", f"could not stop: {first_line(e)}"
    if bar and len(done) < batches:
        bar.update(batches - len(done))  # the bar counts batches asked, done or not
    return done, outcome, error, cause, died_at, window


def innermost(throwable) -> str:
    """The first line of the innermost cause of a JVM ``Throwable`` (through py4j)."""
    while throwable.getCause() is not None and throwable.getCause() != throwable:
        throwable = throwable.getCause()
    return str(throwable.toString()).splitlines()[0]


def first_line(error: Exception) -> str:
    """The line of ``error`` that says what went wrong (py4j's first line only names the call)."""
    lines = [line.strip(" :") for line in str(error).splitlines() if line.strip(" :")]
    return next((line for line in lines if not line.startswith("An error occurred while calling")), repr(error))


def _exactly_once(spark, output: str) -> bool:
    """The file sink's output, read through Spark (so through ``_spark_metadata``), holds every row
    of whole batches exactly once: ``rate-micro-batch`` numbers the rows 0, 1, ... across batches,
    ``config.ROWS_PER_BATCH`` a batch, so that is 0..n-1 for a multiple n of the batch size."""
    from pyspark.sql import functions as F

    try:
        rows, distinct, smallest, largest = spark.read.parquet(output).agg(
            F.count("value"), F.countDistinct("value"), F.min("value"), F.max("value")).first()
    except Exception as e:
        if "PATH_NOT_FOUND" in str(e) or "UNABLE_TO_INFER_SCHEMA" in str(e):
            return True  # nothing committed: nothing duplicated or lost
        raise
    if rows == 0:
        return True
    return rows == distinct and smallest == 0 and largest == rows - 1 and rows % config.ROWS_PER_BATCH == 0


def faultlab(settings: config.Settings, plan: FaultPlan | None = None,
             strategies: list[str] | None = None, part: tuple[int, int] = (1, 1)) -> results.Results:
    """Every strategy x workload x fault profile x seed of ``plan`` (default: the settings' size),
    on the settings' store; of ``part`` (K, N) of those runs, every N-th from the K-th. Written to
    ``settings.raw`` as experiment ``config.FAULTLAB`` (as part K of N) and returned."""
    plan = plan or PLANS[settings.size]
    strategies = strategies or settings.measured_strategies
    settings = dataclasses.replace(settings, fault_profile="none")  # each run sets its own
    recorder = results.Recorder()
    with stores.started_store(settings, needs_proxy="the fault lab") as (store, bucket), \
            querylab.lab(store, bucket, config.PLANS[settings.size], strategies[0], conf=SPARK_CONF) as lab:
        skipped = [p for p in plan.profiles if not outages.can_run(p, settings.store)]
        if skipped:
            print(f"fault lab: {', '.join(skipped)} skipped: {store.name} cannot restart its gateway (ceph can)")
        every = [(strategy, workload, profile, seed) for seed in plan.seeds for workload in plan.workloads
                 for profile in plan.profiles if profile not in skipped for strategy in strategies]
        order = every[part[0] - 1::part[1]]
        bar = progress.Recorder("fault lab", len(order) * plan.batches, "batch")
        for strategy, workload, profile, seed in order:
            run_one(lab, recorder, strategy, workload, profile, seed, plan, bar)
        env = results.environment(store, config.FAULTLAB, settings.size, dataclasses.asdict(plan),
                                  spark=lab.spark, **lab.where,
                                  fault_profile="per run (fault_runs.profile)", fault_seed=list(plan.seeds),
                                  profiles={name: PROFILES[name].description for name in plan.profiles})
    return disk.save(recorder.results(env), settings, part)


faultlab.timeout = 4 * 3600
