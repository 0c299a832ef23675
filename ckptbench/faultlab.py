"""The failure lab: how often a streaming query dies under each fault profile, per strategy.

For each seed x workload x fault profile x strategy, one query (the stateful workload, and the
file sink where the plan has it) runs on a fresh prefix for ``batches`` batches while the
metering proxy injects the profile's faults (``infra.faults.PROFILES``). A run ends
``completed`` (all its batches), ``died`` (the query stopped with an exception: Spark's first
line is kept, and the first line of its innermost cause, which says what the store did) or
``stalled`` (its batches did not come within the time limit). A query that
died or stalled is restarted from its checkpoint with the faults off, for
``recovery_batches`` batches: ``recovered`` says whether it resumed. For the file sink the
output is then read back through Spark (which trusts ``_spark_metadata``): ``exactly_once``
says whether it holds every row of whole batches once, none twice and no batch in part.

Recorded (``ckptbench.results``): a ``runs`` row per query (its ``error``), its ``fault_runs``
row (profile, seed, batches asked and done, outcome, cause, recovered, exactly_once, seconds), its
progress reports (``batches``), every request under its prefix (``requests``, while the faults
were in force and during the recovery) and every fault injected into them (``injections``).
``ckptbench.metrics`` derives the rates: query deaths per run, failed batches per batch
asked, retried requests and injected faults per run.

The store's faults are emulated by the proxy in front of a real store; ``aws-projection`` is a
projection to AWS S3, not a measurement of it.

What pre-2020 S3 consistency does to each strategy (2026-11-24, Ceph RGW 16.2 on memstore behind
the metering proxy, Spark 4.3.0 ``local[2]``, hadoop-aws 3.3.1; ``python -m ckptbench faultlab
--store ceph --profiles eventual,eventual-lists,eventual-reads --seeds 3 --batches 8``; every
outcome was the same in all three seeds; window 5 s):

* ``rename`` dies under ``eventual`` before its first batch, as Qubole reported: a
  FileNotFoundException on the temp file of the query's metadata file
  (``checkpoint/.metadata.<uuid>.tmp``). The request log and the JVM's stack say why: S3A's
  ``create()`` of the temp file probes it first (HEAD, 404); Hadoop's ``FileContext.rename`` then
  checks its source (``AbstractFileSystem.renameInternal`` -> ``getFileLinkStatus`` -> S3A
  ``getFileStatus``: a HEAD, then a LIST of ``<temp>/``), and that HEAD meets the 404 the create's
  probe left behind. S3A's own rename, and its COPY, is never reached. So the HEAD decides it:
  with only reads stale (``eventual-reads``) rename dies the same way. With only listings stale
  (``eventual-lists``) it dies as well, at the first ``offsets/`` write: ``FileContext.create()``
  of the temp file checks its parent (Spark does not ask it to create parents) with
  ``getFileStatus(checkpoint/offsets)`` = HEAD (no such key) + LIST ``offsets/``, which does not
  yet list the new directory marker.
* ``direct`` survives all three in the stateful workload: its S3A ``create()`` meets the same
  stale 404s and writes anyway, and it neither lists nor reads back what it just wrote.
* ``conditional`` dies under the listing half (``eventual``, ``eventual-lists``): its
  ``exists()`` is a LIST, the new ``state/0/0/_metadata/schema`` is not listed yet, Spark writes
  the schema again and the store refuses the second create (412 -> FileAlreadyExistsException).
  It survives the reads half.
* ``manifest`` survives all three in the stateful workload, but under the reads half a run of 8
  batches takes ~31 s instead of ~3 s: its reads of the manifest records it just wrote meet
  cached 404s (~21,000 GETs and HEADs per run) until the window has passed.
* The file sink dies under ``eventual`` and ``eventual-reads`` whatever the strategy: its task
  commit (``ManifestFileCommitProtocol.commitTask``) calls ``getFileStatus`` on each data file it
  has just written, whose key S3A's ``create()`` had probed: outside the checkpoint manager. Under
  ``eventual-lists`` it dies with ``rename`` and ``direct`` (a directory probed by LIST:
  ``checkpoint/offsets``, ``output/_spark_metadata``) and, given 10 batches (``--size full``),
  with ``conditional`` at batch 9, the first compaction of ``_spark_metadata``, which lists the
  log's batch files and finds the new ones missing (``BATCH_METADATA_NOT_FOUND``); ``manifest``,
  whose listings come from its manifest, survives.
* Every query that died resumed when restarted with the faults off, and no file sink's output
  broke exactly-once.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

import ckpt_impls
from infra.faults import PROFILES

from . import progress, results, runs, workloads


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    profiles: tuple[str, ...]
    workloads: tuple[str, ...]
    batches: int  # asked of each query while the faults are in force
    seeds: tuple[int, ...]  # one run of each strategy x workload x profile per seed
    keys: int  # state keys of the stateful workload (each batch updates all of them)
    recovery_batches: int = 2  # asked of a query restarted, faults off, after it died or stalled


#: ``quick`` is what ``make bench`` runs: the profiles that a strategy's commit protocol could
#: notice (the others are retried away by the AWS SDK below S3A, as ``full`` measures).
PLANS = {
    "smallest": FaultPlan(("none", "eventual"), ("stateful",), 3, (0,), 100),
    "quick": FaultPlan(("lost-response", "eventual"), ("stateful", "file_sink"), 8, (0,), 1_000),
    "full": FaultPlan(tuple(PROFILES), ("stateful", "file_sink"), 10, (0, 1), 1_000),
}
OUTCOMES = ("completed", "died", "stalled")
#: The session's settings for the lab: a query stopped in the middle of a store's retries gives up
#: after a minute instead of waiting for them forever.
SPARK_CONF = {"spark.sql.streaming.stopTimeout": "60000"}


def batch_limit(batches: int) -> float:
    """Seconds a query gets for ``batches`` batches before it counts as stalled: generous, as
    injected latency and the SDK's back-off on injected errors slow every batch."""
    return 180 + 30 * batches


def run_one(lab: runs.Lab, recorder: results.Recorder, strategy: str, workload: str, profile: str, seed: int,
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
    proxy.use_profile(profile, seed)
    try:
        done, outcome, error, cause = _drive(lab, workload, base, plan.keys, plan.batches, bar)
    finally:
        proxy.use_profile("none")
    seconds = time.time() - began
    injections = [i for i in proxy.injections() if i.start >= began and i.key.startswith(prefix + "/")]
    recovered = None
    if outcome != "completed":
        _, recovery, _, _ = _drive(lab, workload, base, plan.keys, plan.recovery_batches)
        recovered = recovery == "completed"
    exactly_once = _exactly_once(spark, f"{base}/output") if workload == "file_sink" else None
    events = [e for e in proxy.events_since(mark) if e.key.startswith(prefix + "/")]
    lab.store.inner.empty_bucket(lab.bucket, prefix + "/")  # an in-memory store would fill up
    if error:
        recorder.fail_run(run, error)
    recorder.add_fault_run(run, profile=profile, seed=seed, batches=plan.batches, batches_done=len(done),
                           outcome=outcome, cause=cause, recovered=recovered, exactly_once=exactly_once,
                           seconds=seconds)
    recorder.add_batches(run, "measured", done)
    recorder.add_requests(run, events, done)
    recorder.add_injections(run, injections)
    return run


def _drive(lab: runs.Lab, workload: str, base: str, keys: int, batches: int,
           bar=None) -> tuple[list[dict], str, str, str]:
    """Start ``workload`` on ``base`` and wait for ``batches`` batches: (the progress of the batches
    done, outcome, error: Spark's first line, or why it stalled, or "", and the innermost cause of a
    death)."""
    on_batch = bar.update if bar else None
    try:
        query = lab.start(workload, base, keys)
    except Exception as e:  # the checkpoint could not even be set up
        if bar:
            bar.update(batches)
        java = getattr(e, "java_exception", None)
        return [], "died", first_line(e), innermost(java) if java is not None else first_line(e)
    outcome, error, cause = "completed", "", ""
    try:
        workloads.await_batches(query, batches, batch_limit(batches), on_batch)
    except workloads.QueryFailed as e:
        outcome, error = ("died" if query.exception() is not None else "stalled"), str(e)
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
    return done, outcome, error, cause


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
    ``runs.ROWS_PER_BATCH`` a batch, so that is 0..n-1 for a multiple n of the batch size."""
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
    return rows == distinct and smallest == 0 and largest == rows - 1 and rows % runs.ROWS_PER_BATCH == 0


def faultlab(settings: runs.Settings, plan: FaultPlan | None = None,
             strategies: list[str] | None = None) -> results.Results:
    """Every strategy x workload x fault profile x seed of ``plan`` (default: the settings' size),
    on the settings' store. Written to ``settings.raw`` as experiment ``faults`` and returned."""
    plan = plan or PLANS[settings.size]
    strategies = strategies or list(ckpt_impls.STRATEGIES)
    settings = dataclasses.replace(settings, fault_profile="none")  # each run sets its own
    recorder = results.Recorder()
    with runs.started_store(settings, needs_proxy="the failure lab") as (store, bucket), \
            runs.lab(store, bucket, runs.PLANS[settings.size], strategies[0], conf=SPARK_CONF) as lab:
        order = [(strategy, workload, profile, seed) for seed in plan.seeds for workload in plan.workloads
                 for profile in plan.profiles for strategy in strategies]
        bar = progress.Recorder("failure lab", len(order) * plan.batches, "batch")
        for strategy, workload, profile, seed in order:
            run_one(lab, recorder, strategy, workload, profile, seed, plan, bar)
        env = results.environment(store, "faults", settings.size, dataclasses.asdict(plan),
                                  spark=lab.spark, **lab.where,
                                  fault_profile="per run (fault_runs.profile)", fault_seed=list(plan.seeds),
                                  profiles={name: PROFILES[name].description for name in plan.profiles})
    return runs.save(recorder.results(env), settings)


faultlab.timeout = 4 * 3600


def summary(record: results.Results) -> list[dict]:
    """One row per workload x profile x strategy of a failure-lab record, in the order they ran:
    runs, deaths, stalls and the rates (``ckptbench.metrics``), and what the first run that did not
    complete died of (its innermost cause, else Spark's error or why it stalled)."""
    from . import metrics

    joined = record.runs.merge(record.fault_runs, on="run")
    out = []
    combinations = zip(joined.workload, joined.profile, joined.strategy, strict=True)
    for workload, profile, strategy in dict.fromkeys(combinations):
        runs_ = metrics.fault_runs(record, strategy, profile, workload)
        deaths = runs_[runs_.outcome != "completed"]
        causes = [cause or error for cause, error in zip(deaths.cause, deaths.error, strict=True) if cause or error]
        out.append({
            "workload": workload, "profile": profile, "strategy": strategy, "runs": len(runs_),
            "died": int((runs_.outcome == "died").sum()), "stalled": int((runs_.outcome == "stalled").sum()),
            "death_rate": metrics.death_rate(record, strategy, profile, workload),
            "failed_batch_rate": metrics.failed_batch_rate(record, strategy, profile, workload),
            "retried_per_run": metrics.retried_per_run(record, strategy, profile, workload),
            "injected_per_run": metrics.injected_per_run(record, strategy, profile, workload),
            "recovered": f"{int(runs_.recovered.sum())}/{int(runs_.recovered.notna().sum())}",
            "exactly_once_violations": (metrics.exactly_once_violations(record, strategy, profile)
                                        if workload == "file_sink" else None),
            "cause": causes[0] if causes else ""})
    return out


def eventual_findings(record: results.Results) -> list[str]:
    """What the ``eventual*`` profiles (pre-2020 S3 consistency, emulated) did in this record, in
    words: per workload x profile, which strategies failed (died or stalled) and of what (``summary``'s
    cause), which did not; then whether it reproduces the reference articles' failure, rename failing
    where direct, conditional and manifest do not, and if not, what differs."""
    rows = [r for r in summary(record) if r["profile"].startswith("eventual")]
    if not rows:
        return []
    out, failed = [], {}
    for workload, profile in dict.fromkeys((r["workload"], r["profile"]) for r in rows):
        group = [r for r in rows if (r["workload"], r["profile"]) == (workload, profile)]
        bad = [r for r in group if r["died"] or r["stalled"]]
        fine = [r["strategy"] for r in group if not (r["died"] or r["stalled"])]
        for r in bad:
            failed.setdefault(r["strategy"], []).append(f"{profile} x {workload}")
        died = "; ".join(f"{r['strategy']} in {r['died'] + r['stalled']} of {r['runs']} runs "
                         f"({r['cause'][:160] or 'no cause recorded'})" for r in bad)
        out.append(f"{profile} x {workload}: " + (f"failed: {died}" if bad else "no strategy failed")
                   + (f"; no failure: {', '.join(fine)}." if fine else "; every strategy failed."))
    others = sorted(set(failed) - {"rename"})
    if "rename" in failed and not others:
        verdict = ("So this run reproduces the reference articles' failure: rename fails under pre-2020 "
                   "consistency where direct, conditional and manifest do not.")
    elif "rename" in failed:
        where = "; ".join(f"{s}: " + ", ".join(failed[s]) for s in others)
        verdict = (f"rename fails as the reference articles describe, but this run does not show the others "
                   f"safe: {', '.join(others)} failed too ({where}), "
                   "for the causes above; only a strategy that failed nowhere survives pre-2020 consistency here.")
    else:
        verdict = ("rename did not fail in this run, so it does not reproduce the reference articles' failure"
                   + (f"; {', '.join(others)} failed (causes above)." if others else "."))
    return [*out, verdict]


HEADER = ["workload", "profile", "strategy", "runs", "died", "stalled", "failed batches", "retried / run",
          "injected / run", "recovered", "exactly-once violations", "first failure's root cause"]


def table_rows(record: results.Results) -> list[list[str]]:
    """``summary`` as text cells, in ``HEADER``'s order."""
    def fmt(value: float, spec: str) -> str:
        return "n/a" if value != value else format(value, spec)

    return [[r["workload"], r["profile"], r["strategy"], str(r["runs"]), str(r["died"]), str(r["stalled"]),
             f"{fmt(100 * r['failed_batch_rate'], '.0f')}%", fmt(r["retried_per_run"], ".1f"),
             fmt(r["injected_per_run"], ".1f"), r["recovered"] if r["recovered"] != "0/0" else "-",
             "-" if r["exactly_once_violations"] is None else str(r["exactly_once_violations"]),
             r["cause"][:200]] for r in summary(record)]


def table(record: results.Results) -> str:
    """A failure-lab record as a Markdown table, then what the eventual profiles did (``eventual_findings``)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table_rows(record)]
    findings = eventual_findings(record)
    return "\n".join(lines + (["", "Pre-2020 consistency (eventual profiles):", *findings] if findings else []))
