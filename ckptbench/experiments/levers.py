"""The levers experiment: configurations (a checkpoint strategy and Spark's own levers,
``config.presets_for``) measured side by side on jobs a user describes (``config.Shape``).

Each configuration runs as a streaming query of the job's shape (``QueryLab.run``), its commit latency,
batch time and requests recorded like any strategy's. Where Spark refuses a configuration for the
job (async progress tracking with state, format v2 on the HDFS-backed store, a sink async progress
does not support) or lacks a lever, the run is recorded as refused with Spark's reason: a result.
Each configuration runs in ``Plan.repeats`` queries, in mirrored rounds (``config.interleaved``)
over the configurations of one shape and stage, so that a drift in the machine's load reaches
those alike; a drift between stage one and stage two (below) is not balanced so: a limit.

Staged (``python -m ckptbench recommend``): Spark's default strategy (``config.SPARK_DEFAULT``)
in every configuration first, then every other strategy in Spark's defaults and in the
``STAGE_TWO`` cheapest configurations Spark did not refuse. What was not measured is named in
the record's environment (``not_measured``) with why. Levers act mostly on requests no strategy
makes and strategies on those they make, so the cheapest levers found with one strategy are the
ones worth crossing with the others; a configuration outside them is not measured, not ranked.
"""

from __future__ import annotations

import dataclasses

from ckptbench import metrics, progress
from ckptbench.config import DEFAULT_PRESET, SPARK_DEFAULT, Plan, Settings, Shape, interleaved, presets_for
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
    ``STAGE_TWO`` others ``strategy`` ran cheapest in: every request counted over its repeats,
    ``metrics.billable_requests_all_by_op``), and why each other one is not crossed."""
    dollars, why = {}, {}
    for preset in presets_for(shape)[1:]:
        try:
            record.run(strategy, shape.name, keys=shape.keys, preset=preset)
        except results.Refused:
            why[preset] = "Spark refused it"
            continue
        except (results.RunFailed, KeyError) as e:
            why[preset] = f"its run with {strategy} failed ({str(e)[:120]})"
            continue
        repeats = record.runs_of(strategy, shape.name, keys=shape.keys, preset=preset)
        requests = metrics.pooled_by_op(repeats, metrics.billable_requests_all_by_op)
        dollars[preset] = cost.per_month(cost.dollars(requests), shape.trigger_s)
    crossed = sorted(dollars, key=lambda p: (dollars[p], p.count("+")))[:STAGE_TWO]
    for preset in dollars.keys() - set(crossed):
        dearer = round(dollars[preset], 2) > round(dollars[crossed[-1]], 2)
        why[preset] = (f"with {strategy} it cost ${dollars[preset]:,.2f} a month (a projection), "
                       + ("more than " if dearer else "no less than, with as many levers or more, ")
                       + " and ".join(f"{p} (${dollars[p]:,.2f})" for p in crossed))
    return [DEFAULT_PRESET, *crossed], why


def stage_one(shapes: tuple[Shape, ...], strategies: list[str], staged: bool,
              presets: tuple[str, ...] | None = None) -> dict[Shape, list[tuple[str, str]]]:
    """Each shape's configurations (preset, strategy) measured first: every one (``staged``: Spark's
    default strategy, ``strategies[0]``, in every preset), of ``presets`` alone if given."""
    return {shape: [(preset, s) for preset in presets_for(shape) if presets is None or preset in presets
                    for s in (strategies[:1] if staged else strategies)]
            for shape in shapes}


def _measure(bench, recorder: results.Recorder, shape: Shape, configurations: list[tuple[str, str]], plan: Plan,
             bar) -> None:
    """``configurations`` (preset, strategy) of ``shape``, ``plan.repeats`` queries of each in mirrored
    rounds (``config.interleaved``); a configuration Spark refused once is not run again (the
    refusal is the result, and the same every time)."""
    refused = set()
    for repeat, (preset, strategy) in interleaved(configurations, plan.repeats):
        if (preset, strategy) in refused:
            bar.update(plan.warmup + plan.batches_per_query)
            continue
        bench.run(recorder, strategy, shape, shape.keys, plan.warmup, plan.batches_per_query, bar, preset=preset,
                  repeat=repeat)
        if recorder.rows["runs"][-1]["refused"]:
            refused.add((preset, strategy))


def levers(settings: Settings, shapes: tuple[Shape, ...] = BENCH_SHAPES, strategies: list[str] | None = None,
           plan: Plan | None = None, staged: bool = False, experiment: str = "levers",
           presets: tuple[str, ...] | None = None) -> results.Results:
    """Every configuration of every shape (``staged``: as the module says; ``presets``: of those
    alone, where a shape is offered them), each ``plan.repeats``
    queries of ``plan``'s warm-up and ``plan.batches_per_query`` measured batches, in mirrored rounds
    per shape and stage, after an untimed query per shape has warmed the JVM; written to
    ``settings.raw`` as ``experiment`` and returned."""
    plan = plan or settings.plan
    strategies = strategies or settings.measured_strategies
    first = SPARK_DEFAULT[0] if SPARK_DEFAULT[0] in strategies else strategies[0]
    strategies = [first, *(s for s in strategies if s != first)]
    recorder = results.Recorder()
    not_measured: dict[str, dict[str, str]] = {}
    with started_store(settings) as (store, bucket), lab(store, bucket, plan, first, master=settings.master) as bench:
        per_configuration = plan.repeats * (plan.warmup + plan.batches_per_query)
        first_stage = stage_one(shapes, strategies, staged, presets)
        expected = len(shapes) * plan.jvm_warmup + per_configuration * (
            sum(map(len, first_stage.values()))
            + (len(shapes) * (len(strategies) - 1) * (1 + STAGE_TWO) if staged else 0))
        bar = progress.Recorder("configurations", expected, "batch")
        for shape in shapes:  # JIT, class loading, the state store's first use: untimed
            bench.run(None, first, shape, shape.keys, 0, plan.jvm_warmup, bar)
        for shape in shapes:
            _measure(bench, recorder, shape, first_stage[shape], plan, bar)
        if staged:
            so_far = recorder.results({"plan": dataclasses.asdict(plan)})
            for shape in shapes:
                crossed, not_measured[shape.name] = _stage_two(so_far, shape, first)
                _measure(bench, recorder, shape, [(preset, s) for preset in crossed for s in strategies[1:]], plan,
                         bar)
        env = results.environment(store, experiment, settings.size, dataclasses.asdict(plan), spark=bench.spark,
                                  **bench.where, checkpoint_settings=checkpoint_settings(bench.spark),
                                  shapes=[dataclasses.asdict(s) | {"name": s.name} for s in shapes],
                                  staged=staged, not_measured=not_measured, presets=presets)
    return save(recorder.results(env), settings)


levers.timeout = 3 * 3600  # a full plan over every shape; a stuck query fails sooner, in await_batches
