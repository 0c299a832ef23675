"""The recommend experiment (``python -m ckptbench recommend``): the smallest set of measurements
that decides which configuration (a checkpoint manager and Spark's own checkpoint levers) one
streaming job (``config.Shape``) should run on one store, made there and then.

In order, each shown as a progress bar on stderr:

1. the store probe (``experiments.probe``, through ``store_alone``): which strategies the store can
   run; the others are not measured and are named with the probe's reason;
2. the race (``experiments.race``, as the crash lab's ``CrashLab.race`` runs it) of the strategies the
   store can run, ``RACE_ROUNDS`` rounds per file kind the job writes (``race_kinds``): the
   decision's rule 2 (refusing a second writer) comes from it alone. It needs the metering proxy,
   so on a store the proxy cannot front (https, AWS S3) it is not run and the record says so;
3. the staged levers experiment for the job's one shape (``experiments.levers``, ``staged=True``):
   Spark's default manager in every configuration of levers, then every strategy in Spark's
   defaults and the two cheapest configurations, each configuration in ``REPEATS`` queries, at the
   job's partitions or, for a job of more than ``RANKED_AT``, at that many;
4. the crash check (``experiments.crash_check.check_leaders``): crash cycles
   (``crashlab.CrashLab.series``) of the two leading configurations at those partitions, whose
   exactly-once result the decision reads (its rule 1);
5. for a job of more than ``RANKED_AT`` partitions, its ``finalists`` (picked once the crash check
   has put out any leader that broke exactly-once) at its own count (``levers.final_stage``),
   where the decision is made, with the projection of every configuration's requests to that
   count checked on them (``projection_check``).

Which configurations lead is the decision's to say, and the decision is a layer above the
experiments: ``recommend`` takes it as a callable (``leaders``, passed in by the CLI) of the
record so far and the job (its name; by default the job asked about); the crash check asks it
after the levers experiment and again after each check, and checks the leaders it names that were
not checked yet, up to ``crash_check.CRASH_ROUNDS`` times, so that the configuration recommended has
been crash-checked.

The probe and the race share one store and one SparkSession; the levers experiment starts a store
of its own (it owns its store and session), and so do the crash check and the final stage, each
on the named bucket when one is named; the sessions share one JVM. A crash check that fails leaves the measurements
standing: the record says the check is missing (``crash_note``), and the decision that
exactly-once under crashes was not measured.

The record returned: the levers runs, ``races``, ``capabilities``, ``cycles`` and
``crash_series``, and what was asked and found under ``environment["recommend"]`` (a dict the
caller may add to before writing it, such as the deploy plan of the configuration chosen).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import ckpt_impls
import infra
from ckptbench import config, progress

# The record, the harness and the experiments are imported where used: the CLI reads this module's
# defaults to build its parser, and every command would otherwise pay for pandas and pyspark.
if TYPE_CHECKING:
    from ckptbench.experiments import crash_check
    from ckptbench.record import results

#: Rounds of the race per strategy x file kind: few, since one round with two winners settles
#: "not refused", and every round met with one winner is what "refused" takes.
RACE_ROUNDS = 3
#: Crash cycles the crash check (``experiments.crash_check``) gives each leading configuration, at
#: two of the crash lab's points in turn: a cycle costs a driver's restart and a check of the output
#: (tens of seconds on 2 cores), on top of the series' first start and its check at rest.
CRASH_CYCLES = 2
#: The measured batches per configuration by default, after ``WARMUP`` warm-up batches in each of
#: its queries: enough for a median with an interval, few enough that the command ends within minutes.
#: One warm-up: a query's first batch carries its start and the state store's first load of every
#: partition, and the batches after it run as long as the measured ones, at 8 partitions and at
#: hundreds (docs/findings/production-scale.md); each further one costs a batch per query, seconds
#: with Spark's default at hundreds of partitions.
BATCHES = 10
WARMUP = 1
#: Independent queries per configuration by default, run in mirrored rounds (``config.interleaved``)
#: so that drift on a shared machine reaches every configuration alike. ``BATCHES`` are split over
#: them, not multiplied: the decision pools every measured batch of every repeat, so the measured
#: total stays one query's, and the command's time grows only by each further query's start and
#: ``WARMUP`` batches. That keeps ``recommend`` of a job at 8 partitions within the 15 minutes on
#: 2 cores it promises; two is the fewest that balances drift and gives the reproducibility check
#: two halves to compare.
REPEATS = 2


#: The most shuffle partitions every configuration is measured at. A job with more is ranked at this
#: many (stages one and two of the levers experiment, then the crash check), and only Spark's default,
#: the configurations leading there and the first of them at more task slots per core (``finalists``)
#: are measured at the job's own count, where its decision is made: a batch's state files, and so its
#: time and requests, grow with the partitions, and every configuration at 200 would not end within
#: the command's 15 minutes on 2 cores. What the configurations left at this count would request at
#: the job's is a projection (``metrics.projected_requests_per_batch``), checked on every finalist.
RANKED_AT = 8
#: Task slots per core the first finalist is also measured at (``config.SLOTS_PER_CORE``).
FINAL_SLOTS = (2, 4)
#: The share of ``batches`` Spark's default configuration measures at the job's own partitions, when
#: ranked at fewer (at least one per query): there it is measured for the comparison with the
#: recommended one and for the projection check, it is not recommended where the crash check ran
#: another (it does not run Spark's default), and each of its batches costs seconds at hundreds of
#: partitions. Its figures there carry the wider intervals fewer batches give.
BASELINE_SHARE = 0.5


def ranked_shape(shape: config.Shape, ranked_at: int = RANKED_AT) -> config.Shape:
    """The job ``shape`` at the partitions its configurations are ranked at: its own, up to ``ranked_at``."""
    return shape if shape.partitions <= ranked_at else dataclasses.replace(shape, partitions=ranked_at)


def finalists(leading: list[crash_check.Leader]) -> tuple[list[tuple[str, str]], set[str]]:
    """(preset, strategy) measured at the job's own partitions: Spark's default configuration, the
    ``leading`` ones, and the first of them at each of ``FINAL_SLOTS`` task slots per core; and the
    presets the benchmark floor runs in there: the first's, at each task slots (a floor in Spark's
    defaults, where RocksDB uploads a full snapshot a batch, would take as long as Spark's default
    itself, and the time the command has is spent on those the answer is about)."""
    picked = [config.SPARK_DEFAULT[::-1], *((c.preset, c.strategy) for c in leading)]
    floors = set()
    if leading:
        first = [(config.at_slots(leading[0].preset, n), leading[0].strategy) for n in (1, *FINAL_SLOTS)]
        picked += first
        floors = {preset for preset, _ in first}
    return list(dict.fromkeys(picked)), floors


def projection_check(record: results.Results, ranked: config.Shape, shape: config.Shape) -> dict:
    """Each configuration ranked at ``ranked``'s partitions, its requests per batch projected to
    ``shape``'s (``metrics.projected_requests_per_batch``) and, where it was measured there too,
    as measured: what ``environment["recommend"]["projection"]`` holds."""
    import numpy as np

    from ckptbench import metrics

    rows = []
    runs = record.runs[(record.runs.workload == ranked.name) & ~record.runs.refused.astype(bool)]
    for strategy, preset in dict.fromkeys(zip(runs.strategy, runs.preset, strict=True)):
        if strategy == ckpt_impls.FLOOR.name:
            continue
        at = record.runs_of(strategy, ranked.name, ranked.keys, preset)
        there = record.runs_of(strategy, shape.name, shape.keys, preset)
        if not at:
            continue
        rows.append({"strategy": strategy, "preset": preset,
                     "projected": metrics.projected_requests_per_batch(at, ranked.partitions, shape.partitions),
                     "measured": float(np.mean([metrics.requests_per_batch(r) for r in there])) if there else None})
    return {"from_partitions": ranked.partitions, "to_partitions": shape.partitions, "configurations": rows}


def race_kinds(shape: config.Shape) -> tuple[str, ...]:
    """The checkpoint files the job writes, as the race names them (``race.KINDS``)."""
    return ("offsets", "commits", *(("state",) if shape.stateful else ()),
            *(("_spark_metadata",) if shape.sink == "file" else ()))


def plan_of(shape: config.Shape, batches: int, repeats: int = REPEATS) -> config.Plan:
    """The levers experiment's plan: ``batches`` measured batches per configuration, split over
    ``repeats`` queries each of ``WARMUP`` warm-up batches first, after one untimed batch that warms
    the JVM."""
    return dataclasses.replace(config.PLANS["smallest"], jvm_warmup=1, warmup=WARMUP, batches=batches,
                               keys=(shape.keys,), sweep=(), repeats=repeats)


def fresh_store(name: str) -> bool:
    """Whether store ``name`` is one the experiment starts, with a fresh bucket of its own."""
    from infra.minio import ENDPOINT_ENV

    return infra.store_class(name).owns_buckets and not (name == "minio" and os.environ.get(ENDPOINT_ENV))


def probe_and_race(settings: config.Settings, shape: config.Shape, strategies: list[str]
                   ) -> tuple[results.Recorder, dict]:
    """The store probe, then the race of the strategies it found the store can run, on one store:
    (a recorder holding the ``capabilities`` and ``races`` rows, what the environment says of them)."""
    from ckptbench.experiments import race
    from ckptbench.experiments.store_alone import record_store_alone
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session
    from ckptbench.metrics import verdicts
    from ckptbench.record import results

    recorder, said = results.Recorder(), {}
    with stores.started_store(settings) as (store, bucket):
        inner = getattr(store, "inner", store)
        said.update(store=settings.store, bucket=bucket, endpoint=inner.endpoint, fresh=fresh_store(settings.store))
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
            for strategy in runnable:  # as ckptbench.experiments.crashlab.lab.CrashLab.race runs it
                prefix = f"{store.run_prefix}crash/race-{strategy}-{uuid.uuid4().hex[:8]}"
                rows = race.race(spark, store, bucket, prefix, strategy, kinds, RACE_ROUNDS,
                                 say=lambda line: (bar.set_postfix_str(line[:60]), bar.update()))
                recorder.rows["races"].extend(rows)
                inner.empty_bucket(bucket, prefix + "/")
        finally:
            spark.stop()
    return recorder, said


def combined(record: results.Results, said: dict, rows: dict[str, list[dict]]) -> results.Results:
    """The levers experiment's record with ``rows`` (the probe's checks, the race's rounds, the
    crash check's cycles and series) as its tables and ``said`` as ``environment["recommend"]``."""
    from ckptbench.record import results, schema

    tables = {**record.tables, **{name: schema.frame(name, found) for name, found in rows.items() if found}}
    return results.Results({**record.environment, "recommend": said}, tables)


def recommend(settings: config.Settings, shape: config.Shape, strategies: list[str],
              leaders: Callable[..., list[crash_check.Leader]],
              trigger: str, batches: int = BATCHES, crash_cycles: int = CRASH_CYCLES,
              repeats: int = REPEATS, ranked_at: int = RANKED_AT) -> results.Results:
    """The probe, race, staged levers, crash check and, for a job of more than ``ranked_at``
    partitions, final stage of ``shape`` on ``settings``' store (raw records under
    ``settings.raw``), ``strategies`` with Spark's default first; ``leaders`` is the decision (see
    the module's docstring), ``trigger`` the job's interval as the user wrote it (recorded),
    ``batches`` per configuration over ``repeats`` queries (``plan_of``), ``crash_cycles`` 0 skips
    the crash check. Returns the combined record;
    ``environment["recommend"]["seconds"]`` holds each stage's duration."""
    from ckptbench.experiments import crash_check, levers
    from ckptbench.record import results

    began = time.monotonic()
    recorder, said = probe_and_race(settings, shape, strategies)
    measured = [s for s in strategies if s not in said["skipped"]]
    ranked = ranked_shape(shape, ranked_at)
    final = ranked != shape  # its finalists at the job's own partitions, from the decision at ``ranked``'s
    said.update(shape={**dataclasses.asdict(shape), "name": shape.name}, trigger=trigger,
                trigger_s=shape.trigger_s, strategies=measured,
                ranked={**dataclasses.asdict(ranked), "name": ranked.name} if final else None)
    seconds = {"probe and race": time.monotonic() - began}
    # Ranked at fewer partitions, Spark's levers alone, no floor: task slots act on the job's own tasks
    # and the floor is read at the job's, so the final stage measures them there.
    presets = tuple(p for p in config.presets_for(ranked) if config.slots_of(p) == 1) if final else None
    runs = results.Recorder()
    plan = plan_of(shape, batches, repeats)
    record = levers.levers(settings, (ranked,), measured, plan, staged=True, experiment="recommend",
                           presets=presets, floor=not final, recorder=runs)
    seconds["levers"] = time.monotonic() - began - sum(seconds.values())
    crashed: dict[str, list[dict]] = {name: [] for name in crash_check.TABLES}
    leading = leaders(combined(record, said, recorder.rows), ranked.name)
    if not leading or crash_cycles == 0 or said.get("race_note"):
        said["crash_note"] = "exactly-once under crashes was not checked: " + (
            "no configuration leads" if not leading else "--crash-cycles is 0" if crash_cycles == 0
            else "the crash check needs the metering proxy too")
    else:  # before the finalists are picked: a leader the check puts out is not one of them
        try:
            crash_check.check_leaders(settings, ranked, lambda rows: leaders(combined(record, said, {
                **recorder.rows, **rows}), ranked.name), crash_cycles, crashed)
        except Exception as e:  # the measurements so far stand; the record says the check is missing
            said["crash_note"] = f"the crash check failed: {' '.join(str(e).split())[:300]}"
        seconds["crash check"] = time.monotonic() - began - sum(seconds.values())
    rows = {**recorder.rows, **crashed}
    if final:
        picked, floors = finalists(leaders(combined(record, said, rows), ranked.name))
        baseline = {config.SPARK_DEFAULT[::-1]: max(repeats, math.ceil(batches * BASELINE_SHARE))}
        record = levers.final_stage(settings, shape, picked, floors, plan, record, runs, fewer=baseline)
        said["projection"] = projection_check(record, ranked, shape)
        seconds[f"at {shape.partitions} partitions"] = time.monotonic() - began - sum(seconds.values())
    said["seconds"] = {**{k: round(v, 1) for k, v in seconds.items()}, "total": round(time.monotonic() - began, 1)}
    return combined(record, said, rows)
