"""The streaming experiment: every strategy x workload as streaming queries, ``Plan.repeats`` of
them in mirrored rounds (and the benchmark floor x workload: Spark's own share, with no store), then
the state sweep (stateful queries with larger key counts), each query's first batches recorded as
warm-up after untimed queries have warmed the JVM. ``ckptbench.experiments.measure`` runs it with one workload, for
``python -m ckptbench measure``."""

from __future__ import annotations

import dataclasses

import ckpt_impls
from ckpt_impls import jars
from ckptbench import metrics, progress
from ckptbench.config import Plan, Settings, interleaved, workloads_for
from ckptbench.experiments.store_alone import client_floor, record_store_alone
from ckptbench.harness.querylab import checkpoint_settings, lab
from ckptbench.harness.stores import started_store
from ckptbench.record import results
from ckptbench.record.disk import save


def queries(plan: Plan, strategies: list[str]) -> list[tuple[str, str, int, int, int, int]]:
    """The measured queries of ``plan`` in the order they run, each (strategy, workload, keys,
    warm-up, measured batches, repeat): per workload, ``strategies`` (the floor among them) in
    ``plan.repeats`` mirrored rounds (``config.interleaved``) of ``plan.batches_per_query`` batches,
    so that drift in the machine's load spreads over the strategies compared with each other instead
    of landing on one of them; then the state sweep, one query per strategy and size (no decision
    reads it: ``record.jobs``), which the floor does not run."""
    measured = [(strategy, workload, plan.keys[0], plan.warmup, plan.batches_per_query, repeat)
                for workload in plan.workloads for repeat, strategy in interleaved(strategies, plan.repeats)]
    return measured + [(strategy, workload, keys, warmup, batches, 0)
                       for workload in plan.sweep_workloads
                       for keys, (warmup, batches) in zip(plan.keys[1:], plan.sweep, strict=True)
                       for strategy in strategies if strategy != ckpt_impls.FLOOR.name]


def streaming(settings: Settings, strategies: list[str] | None = None, plan: Plan | None = None,
              experiment: str = "streaming") -> results.Results:
    """The store's floor, then every streaming run: strategy x workload (and the benchmark floor,
    ``ckpt_impls.FLOOR``, x workload: Spark's own share, with no store), then the state sweep
    (strategy x larger key counts). ``plan`` defaults to the settings' size. Written to
    ``settings.raw`` as ``experiment`` and returned."""
    plan = plan or settings.plan
    plan = dataclasses.replace(plan, workloads=workloads_for(plan, jars.spark_version()))
    strategies = strategies or settings.measured_strategies
    # The floor keeps its files in the driver JVM's memory: only where executors share that JVM.
    floor = [ckpt_impls.FLOOR.name] if settings.master.startswith("local[") else []
    recorder = results.Recorder()
    with started_store(settings) as (store, bucket):
        record_store_alone(recorder, store, bucket, plan, parts=("floor",))
        with lab(store, bucket, plan, strategies[0], master=settings.master) as bench:
            for op, ms in client_floor(bench.spark, store, bucket, plan.floor_samples,
                                       plan.client_floor_warmup).items():
                recorder.add_samples("floor", op, ms, route=metrics.JVM_ROUTE)
            bench.jvm.reset()  # the floor's requests, counted in the JVM, are no run's
            measured = queries(plan, [*strategies, *floor])
            # JVM warm-up (JIT, class loading, each manager's first use), untimed: a query's own
            # warm-up batches do not cover it, and the first run measured would pay for it.
            jvm_warmup = [(strategies[0], w) for w in plan.workloads] + [(s, plan.workloads[0])
                                                                          for s in [*strategies[1:], *floor]]
            total = len(jvm_warmup) * plan.jvm_warmup + sum(w + b for *_, w, b, _ in measured)
            bar = progress.Recorder("streaming queries", total, "batch")
            for strategy, workload in jvm_warmup:
                bench.run(None, strategy, workload, plan.keys[0], 0, plan.jvm_warmup, bar)
            for *run, repeat in measured:
                bench.run(recorder, *run, bar=bar, repeat=repeat)
            env = results.environment(store, experiment, settings.size, dataclasses.asdict(plan),
                                      spark=bench.spark, **bench.where,
                                      checkpoint_settings=checkpoint_settings(bench.spark))
    return save(recorder.results(env), settings)


streaming.timeout = 4 * 3600  # the full run; a stuck query fails sooner, in await_batches
