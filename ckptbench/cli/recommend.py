"""``python -m ckptbench recommend``: which configuration (a checkpoint manager and Spark's own
checkpoint levers) one streaming job should run on the user's own store, from the smallest set of
measurements that decides it, made there and then.

In order, each shown as a progress bar on stderr:

1. the store probe (``experiments.probe``, through ``store_alone``): which strategies the store can
   run; the others are not measured and are named with the probe's reason;
2. the race (``experiments.race``, as the crash lab's ``Lab.race`` runs it) of the strategies the
   store can run, ``RACE_ROUNDS`` rounds per file kind the job writes (``race_kinds``): the
   decision's rule 2 (refusing a second writer) comes from it alone. It needs the metering proxy,
   so on a store the proxy cannot front (https, AWS S3) it is not run and the output says so;
3. the staged levers experiment for the job's one shape (``experiments.levers``, ``staged=True``):
   Spark's default manager in every configuration of levers, then every strategy in Spark's
   defaults and the two cheapest configurations;
4. ``crash_check``: crash cycles (``crashlab.Lab.series``) of the two leading configurations,
   whose exactly-once result the final decision reads (its rule 1).

The probe and the race share one store and one SparkSession; the levers experiment starts a store
of its own (it owns its store and session), and so does the crash check, each on the named bucket
when one is named; the sessions share one JVM. A crash check that fails leaves the measurements
standing: the output says the check is missing, and the decision that exactly-once under crashes
was not measured.

What is written: the one record (the levers runs, ``races``, ``capabilities``, ``cycles`` and
``crash_series``, and what the command was asked under ``environment["recommend"]``) and the page
(``report.recommendation``) in ``--out``, only once everything has run. Bad input ends before any
store starts (a missing bucket: once the store is up, before anything runs on it), in one line
and exit status 2, with nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import tempfile
import time
import uuid
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from ckptbench import config, decide, progress
from ckptbench.cli.common import UsageError, parse_names, results_root
from ckptbench.record import results, schema

#: Rounds of the race per strategy x file kind: few, since one round with two winners settles
#: "not refused", and every round met with one winner is what "refused" takes.
RACE_ROUNDS = 3
#: Crash cycles ``crash_check`` gives each of the two leading configurations, at two of the crash
#: lab's points in turn: a cycle costs a driver's restart and a check of the output (tens of
#: seconds on 2 cores), on top of the series' first start and its check at rest.
CRASH_CYCLES = 2
#: How many times ``crash_check`` runs at most: when the check puts the leaders out, the two that
#: lead then are checked in turn, so the configuration recommended has been crash-checked.
CRASH_ROUNDS = 3
#: The measured batches per configuration by default, after ``WARMUP`` warm-up batches: enough
#: for a p50, few enough that the command ends within minutes.
BATCHES = 10
WARMUP = 2


def add_parser(sub) -> None:
    """Register ``recommend`` on the app's subcommands (``sub``, argparse's)."""
    r = sub.add_parser("recommend", help="measure the configurations of one streaming job on your store and say "
                                         "which to run, with the flags to run it (docs/recommend.md)")
    r.add_argument("--store", required=True, help=f"one of: {', '.join(infra.STORES)}")
    r.add_argument("--bucket", help="an existing bucket (needed for s3, endpoint and an external MinIO); a store "
                                    "this command starts gets a fresh one. Only keys under ckptbench-runs/<run>/ "
                                    "are written, and removed at the end")
    r.add_argument("--workload", required=True, help="stateless or stateful (an aggregation over --state-keys keys)")
    r.add_argument("--provider", help="the state store of a stateful job: hdfs (default) or rocksdb")
    r.add_argument("--partitions", type=int, required=True, help="shuffle partitions (a state file each per batch)")
    r.add_argument("--trigger", required=True, help="the job's trigger interval, such as 10s, 500ms or 2m: money "
                                                    "per month is at one batch per interval")
    r.add_argument("--state-keys", type=int, help="keys of a stateful job's state, each updated every batch "
                                                  "(default 1000)")
    r.add_argument("--sink", default="noop", help=f"one of: {', '.join(config.SINKS)} (default noop)")
    r.add_argument("--batches", type=int, default=BATCHES,
                   help=f"measured batches per configuration, after {WARMUP} warm-up (default {BATCHES})")
    r.add_argument("--out", help="where the record and its page go (default results/recommend/<store>-<job>/)")
    r.add_argument("--strategies", help=argparse.SUPPRESS)  # tests: fewer candidates
    r.add_argument("--crash-cycles", type=int, default=CRASH_CYCLES, help=argparse.SUPPRESS)  # tests: 0 skips it
    r.set_defaults(run=cmd_recommend)


def shape_of(args) -> config.Shape:
    """The job ``args`` describe; UsageError in one line for a value out of range or an option
    that does not apply to the job."""
    if args.workload == "stateless":
        for option, value in (("--provider", args.provider), ("--state-keys", args.state_keys)):
            if value is not None:
                raise UsageError(f"{option} applies to a stateful job (its state store), not a stateless one: "
                                 f"leave it out or pass --workload stateful")
    try:
        return config.Shape(args.workload, args.provider or "hdfs", args.partitions, config.parse_trigger(args.trigger),
                            1_000 if args.state_keys is None else args.state_keys, args.sink)
    except ValueError as e:
        raise UsageError(str(e)) from None


def race_kinds(shape: config.Shape) -> tuple[str, ...]:
    """The checkpoint files the job writes, as the race names them (``race.KINDS``)."""
    return ("offsets", "commits", *(("state",) if shape.stateful else ()),
            *(("_spark_metadata",) if shape.sink == "file" else ()))


def plan_of(shape: config.Shape, batches: int) -> config.Plan:
    """The levers experiment's plan: ``WARMUP`` then ``batches`` batches per configuration, after
    one untimed batch that warms the JVM."""
    return dataclasses.replace(config.PLANS["smallest"], jvm_warmup=1, warmup=WARMUP, batches=batches,
                               keys=(shape.keys,), sweep=())


def _fresh_store(name: str) -> bool:
    """Whether ``--store name`` is a store this command starts, with a fresh bucket of its own."""
    from infra.minio import ENDPOINT_ENV

    return infra.store_class(name).owns_buckets and not (name == "minio" and os.environ.get(ENDPOINT_ENV))


def _checked(args) -> tuple[config.Shape, list[str], Path]:
    """The job, the strategies to measure (Spark's default first) and the output directory, or
    UsageError: everything that can be said wrong before a store starts."""
    parse_names(args.store, infra.STORES, "store")
    shape = shape_of(args)
    if not 3 <= args.batches <= 1000:
        raise UsageError(f"--batches must be 3 to 1000 (a p50 of fewer says little), not {args.batches}")
    if args.crash_cycles < 0:
        raise UsageError(f"--crash-cycles must be 0 (no crash check) or more, not {args.crash_cycles}")
    if args.bucket and _fresh_store(args.store):
        raise UsageError(f"--store {args.store} starts a store of its own with a fresh bucket: leave out --bucket "
                         "(it names an existing bucket on a store you run: s3, endpoint or an external minio)")
    reason = infra.store_class(args.store).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy") if args.strategies \
        else list(ckpt_impls.STRATEGIES)
    default = config.SPARK_DEFAULT[0]
    strategies = [default, *(s for s in strategies if s != default)]
    out = Path(args.out) if args.out else results_root() / "recommend" / f"{args.store}-{shape.name}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: name a directory (it is made if missing)")
    return shape, strategies, out


def probe_and_race(settings: config.Settings, shape: config.Shape, strategies: list[str]) -> tuple[dict, dict]:
    """The store probe, then the race of the strategies it found the store can run, on one store:
    (the record's ``capabilities`` and ``races`` rows, what the environment says of them)."""
    from ckptbench.experiments import race
    from ckptbench.experiments.store_alone import record_store_alone
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session
    from ckptbench.metrics import verdicts

    recorder, said = results.Recorder(), {}
    with stores.started_store(settings) as (store, bucket):
        inner = getattr(store, "inner", store)
        said.update(store=settings.store, bucket=bucket, endpoint=inner.endpoint, fresh=_fresh_store(settings.store))
        bar = progress.Recorder("store probe", 1, "probe")
        said.update(record_store_alone(recorder, store, bucket, config.PLANS["smallest"], parts=("probe",), bar=bar))
        found = verdicts({row["capability"]: {"ok": row["ok"], "detail": row["detail"]}
                          for row in recorder.rows["capabilities"]})
        said["skipped"] = {s: "the store cannot run it (the probe): " + "; ".join(found[s]["reasons"])
                           for s in strategies if s != config.SPARK_DEFAULT[0] and not found[s]["can_run"]}
        runnable = [s for s in strategies if found[s]["can_run"]]
        kinds = race_kinds(shape)
        said["race"] = {"kinds": list(kinds), "rounds": RACE_ROUNDS, "strategies": runnable}
        if getattr(store, "proxy", None) is None:
            said["race_note"] = (f"the race was not run: it needs the metering proxy, which cannot front "
                                 f"{inner.endpoint or 'AWS S3'} (https or AWS S3)")
            return recorder, said
        if not runnable:
            return recorder, said
        bar = progress.Recorder("race", len(runnable) * len(kinds) * RACE_ROUNDS, "round")
        spark = session(runnable[0] if runnable else strategies[0], {bucket: inner})
        try:
            for strategy in runnable:  # as ckptbench.experiments.crashlab.lab.Lab.race runs it
                prefix = f"{store.run_prefix}crash/race-{strategy}-{uuid.uuid4().hex[:8]}"
                rows = race.race(spark, store, bucket, prefix, strategy, kinds, RACE_ROUNDS,
                                 say=lambda line: (bar.set_postfix_str(line[:60]), bar.update()))
                recorder.rows["races"].extend(rows)
                inner.empty_bucket(bucket, prefix + "/")
        finally:
            spark.stop()
    return recorder, said


def crash_workload(shape: config.Shape) -> str:
    """The crash lab's workload (``crashlab.WORKLOADS``) closest to the job: its kind and, for a
    stateless job, a sink async progress tracking takes (foreach) unless the job writes files;
    the crash lab's own sinks, since a noop sink leaves no output to check exactly-once on."""
    if shape.stateful:
        return "stateful"
    return "stateless" if shape.sink == "file" else "stateless-foreach"


def crash_check(settings: config.Settings, shape: config.Shape, leaders: list[decide.Candidate],
                cycles: int = CRASH_CYCLES, first_series: int = 0) -> dict[str, list[dict]]:
    """Exactly-once under crashes of ``leaders`` (the two configurations leading after the race and
    the levers experiment), for rule 1 of the decision: each configuration, its manager with its
    Spark levers and the job's state store, runs as the crash lab's driver of the job's kind
    (``crash_workload``), killed with ``kill -9`` at the crash lab's points and restarted,
    ``cycles`` times on a fresh checkpoint (``crashlab.Lab.series``), series numbered from
    ``first_series``; the rows its output lost or
    duplicated put it out (``decide``, through ``report.page.safety``). Returns the rows of the
    record's ``cycles`` and ``crash_series``. Needs the metering proxy, as the crash lab does.

    Runs on a store of its own, with a session in the JVM the levers experiment used: its cached
    S3A filesystems are closed first, since on a store started afresh the same bucket name is at
    another endpoint, and the lab reads the output through the session."""
    from ckptbench.experiments.crashlab.lab import Lab
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session

    recorder = results.Recorder()
    with stores.started_store(settings, needs_proxy="the crash check") as (store, bucket):
        spark = session(leaders[0].strategy, {bucket: store.inner})
        try:
            spark._jvm.org.apache.hadoop.fs.FileSystem.closeAll()
            bar = progress.Recorder("crash check", cycles * len(leaders), "cycle")
            with Lab(spark, store, bucket, recorder, say=lambda line: None) as lab:
                for c in leaders:
                    lab.series(c.strategy, crash_workload(shape), cycles, bar=bar, preset=c.preset,
                               provider=shape.provider if shape.stateful else None)
        finally:
            spark.stop()
    for name in ("cycles", "crash_series"):  # numbered after the series of earlier rounds
        for row in recorder.rows[name]:
            row["series"] += first_series
    return {name: recorder.rows[name] for name in ("cycles", "crash_series")}


def _deploy_plan(said: dict, strategy: str) -> dict:
    """deploy's plan (``ckptbench.deploy.plan``) for ``strategy`` on the measured store's endpoint
    and bucket: the same flags ``python -m ckptbench deploy`` prints, no keys."""
    from ckptbench import deploy

    target = deploy.Target(infra.store_class(said["store"]), said["endpoint"] or "")
    return deploy.plan(strategy, target, said["bucket"])


def _combined(record: results.Results, said: dict, rows: dict[str, list[dict]]) -> results.Results:
    """The levers experiment's record with ``rows`` (the probe's checks, the race's rounds, the
    crash check's cycles and series) as its tables and ``said`` as ``environment["recommend"]``."""
    tables = {**record.tables, **{name: schema.frame(name, found) for name, found in rows.items() if found}}
    return results.Results({**record.environment, "recommend": said}, tables)


def _leaders(decision: decide.Decision) -> list[decide.Candidate]:
    """The chosen configuration and the runner-up, those there are."""
    return [c for c in (decision.chosen, decide.runner_up(decision)) if c is not None]


def cmd_recommend(args) -> None:
    from ckptbench.experiments import levers
    from ckptbench.report import recommendation

    shape, strategies, out = _checked(args)
    jars.spark_jars()  # a missing jar is said before any store starts
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ckptbench-recommend-") as raw, progress.shown_for(os.environ):
        settings = config.Settings(args.store, "recommend", args.bucket, Path(raw))
        recorder, said = probe_and_race(settings, shape, strategies)
        measured = [s for s in strategies if s not in said["skipped"]]
        said.update(shape={**dataclasses.asdict(shape), "name": shape.name}, trigger=args.trigger,
                    trigger_s=shape.trigger_s, strategies=measured)
        seconds = {"probe and race": time.monotonic() - began}
        record = levers.levers(settings, (shape,), measured, plan_of(shape, args.batches), staged=True,
                               experiment="recommend")
        seconds["levers"] = time.monotonic() - began - sum(seconds.values())
        record = _combined(record, said, recorder.rows)
        leaders = _leaders(recommendation.decision_of(record))
        if not leaders or args.crash_cycles == 0 or said.get("race_note"):
            said["crash_note"] = "exactly-once under crashes was not checked: " + (
                "no configuration leads" if not leaders else "--crash-cycles is 0" if args.crash_cycles == 0
                else "the crash check needs the metering proxy too")
        else:
            crashed: dict[str, list[dict]] = {"cycles": [], "crash_series": []}
            checked: set[tuple[str, str]] = set()
            try:
                # Leaders the check puts out make way for others: check those too, up to CRASH_ROUNDS.
                for _ in range(CRASH_ROUNDS):
                    leaders = [c for c in leaders if (c.strategy, c.preset) not in checked]
                    if not leaders:
                        break
                    found = crash_check(settings, shape, leaders, args.crash_cycles, first_series=len(
                        crashed["crash_series"]))
                    for name in crashed:
                        crashed[name] += found[name]
                    checked |= {(c.strategy, c.preset) for c in leaders}
                    record = _combined(record, said, {**recorder.rows, **crashed})
                    leaders = _leaders(recommendation.decision_of(record))
            except Exception as e:  # the measurements so far stand; the output says the check is missing
                said["crash_note"] = f"the crash check failed: {' '.join(str(e).split())[:300]}"
            seconds["crash check"] = time.monotonic() - began - sum(seconds.values())
    decision = recommendation.decision_of(record)
    if decision.chosen is not None:
        said["deploy"] = _deploy_plan(said, decision.chosen.strategy)
    said["seconds"] = {**{k: round(v, 1) for k, v in seconds.items()}, "total": round(time.monotonic() - began, 1)}
    print("\n" + recommendation.text(record, decision))
    record.write(out)  # an earlier record there is replaced, nothing else in the directory
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    written = recommendation.write(out, record, decision, created)
    took = ", ".join(f"{k} {v / 60:.1f}" for k, v in said["seconds"].items())
    print(f"\nrecord: {out}; page: {written} (minutes: {took})")
