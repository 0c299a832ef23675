"""The levers experiment: configurations (a checkpoint strategy and Spark's own levers,
``config.presets_for``) measured side by side on jobs a user describes (``config.Shape``).

Each configuration runs as a streaming query of the job's shape (``QueryLab.run``), its commit latency,
batch time and requests recorded like any strategy's. Where Spark refuses a configuration for the
job (async progress tracking with state, format v2 on the HDFS-backed store, a sink async progress
does not support) or lacks a lever, the run is recorded as refused with Spark's reason: a result.

Staged (``python -m ckptbench recommend``): Spark's default strategy (``config.SPARK_DEFAULT``)
in every configuration first, then every other strategy in Spark's defaults and in the
``STAGE_TWO`` cheapest configurations Spark did not refuse. What was not measured is named in
the record's environment (``not_measured``) with why. Levers act mostly on requests no strategy
makes and strategies on those they make, so the cheapest levers found with one strategy are the
ones worth crossing with the others; a configuration outside them is not measured, not ranked.
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
from ckptbench import metrics, progress
from ckptbench.config import DEFAULT_PRESET, SPARK_DEFAULT, Plan, Settings, Shape, presets_for
from ckptbench.harness.querylab import checkpoint_settings, lab
from ckptbench.harness.stores import started_store
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.record.disk import save

#: How many configurations besides Spark's defaults a staged run crosses with every strategy.
STAGE_TWO = 2
#: The jobs ``make bench`` measures: a stateless one and a stateful one on each state store.
BENCH_SHAPES = (Shape("stateless"), Shape("stateful", "hdfs"), Shape("stateful", "rocksdb"))


def _stage_two(record: results.Results, shape: Shape, strategy: str) -> tuple[list[str], dict[str, str]]:
    """The configurations every strategy runs in after stage one (Spark's defaults and the
    ``STAGE_TWO`` others ``strategy`` ran cheapest in: every request counted,
    ``metrics.billable_requests_all_by_op``), and why each other one is not crossed."""
    dollars, why = {}, {}
    for preset in presets_for(shape)[1:]:
        try:
            run = record.run(strategy, shape.name, keys=shape.keys, preset=preset)
        except results.Refused:
            why[preset] = "Spark refused it"
            continue
        except (results.RunFailed, KeyError) as e:
            why[preset] = f"its run with {strategy} failed ({str(e)[:120]})"
            continue
        dollars[preset] = cost.per_month(cost.dollars(metrics.billable_requests_all_by_op(run)), shape.trigger_s)
    crossed = sorted(dollars, key=lambda p: (dollars[p], p.count("+")))[:STAGE_TWO]
    for preset in dollars.keys() - set(crossed):
        dearer = round(dollars[preset], 2) > round(dollars[crossed[-1]], 2)
        why[preset] = (f"with {strategy} it cost ${dollars[preset]:,.2f} a month (a projection), "
                       + ("more than " if dearer else "no less than, with as many levers or more, ")
                       + " and ".join(f"{p} (${dollars[p]:,.2f})" for p in crossed))
    return [DEFAULT_PRESET, *crossed], why


def levers(settings: Settings, shapes: tuple[Shape, ...] = BENCH_SHAPES, strategies: list[str] | None = None,
           plan: Plan | None = None, staged: bool = False, experiment: str = "levers") -> results.Results:
    """Every configuration of every shape (``staged``: as the module says), each a query of
    ``plan``'s warm-up and measured batches after an untimed query per shape has warmed the JVM;
    written to ``settings.raw`` as ``experiment`` and returned."""
    plan = plan or settings.plan
    strategies = strategies or list(ckpt_impls.STRATEGIES)
    first = SPARK_DEFAULT[0] if SPARK_DEFAULT[0] in strategies else strategies[0]
    recorder = results.Recorder()
    not_measured: dict[str, dict[str, str]] = {}
    with started_store(settings) as (store, bucket), lab(store, bucket, plan, first, master=settings.master) as bench:
        per_query = plan.warmup + plan.batches
        stage_one = [(shape, preset, s) for shape in shapes for preset in presets_for(shape)
                     for s in ([first] if staged else strategies)]
        expected = len(shapes) * plan.jvm_warmup + per_query * (
            len(stage_one) + (len(shapes) * (len(strategies) - 1) * (1 + STAGE_TWO) if staged else 0))
        bar = progress.Recorder("configurations", expected, "batch")
        for shape in shapes:  # JIT, class loading, the state store's first use: untimed
            bench.run(None, first, shape, shape.keys, 0, plan.jvm_warmup, bar)
        for shape, preset, strategy in stage_one:
            bench.run(recorder, strategy, shape, shape.keys, plan.warmup, plan.batches, bar, preset=preset)
        if staged:
            so_far = recorder.results({"plan": dataclasses.asdict(plan)})
            for shape in shapes:
                crossed, not_measured[shape.name] = _stage_two(so_far, shape, first)
                for preset in crossed:
                    for strategy in strategies:
                        if strategy != first:
                            bench.run(recorder, strategy, shape, shape.keys, plan.warmup, plan.batches, bar,
                                      preset=preset)
        env = results.environment(store, experiment, settings.size, dataclasses.asdict(plan), spark=bench.spark,
                                  **bench.where, checkpoint_settings=checkpoint_settings(bench.spark),
                                  shapes=[dataclasses.asdict(s) | {"name": s.name} for s in shapes],
                                  staged=staged, not_measured=not_measured)
    return save(recorder.results(env), settings)


levers.timeout = 3 * 3600  # a full plan over every shape; a stuck query fails sooner, in await_batches
