"""The levers experiment: configurations (a checkpoint strategy and Spark's own levers,
``config.presets_for``) measured side by side on jobs a user describes (``config.Shape``).

Each configuration runs as a streaming query of the job's shape (``QueryLab.run``), its commit latency,
batch time and requests recorded like any strategy's. Where Spark refuses a configuration for the
job (async progress tracking with state, format v2 on the HDFS-backed store, a sink async progress
does not support) or lacks a lever, the run is recorded as refused with Spark's reason: a result.
Each configuration runs in ``Plan.repeats`` queries, in mirrored rounds (``config.interleaved``)
over the configurations of one shape, stage and session, so that a drift in the machine's load
reaches those alike; a drift between stage one and stage two (below) is not balanced so: a limit.
Task slots per core (``config.SLOTS_PER_CORE``) are fixed as a session starts, so the configurations
that set them run in a session of their own per value (``by_slots``), the sessions visited in mirrored
order too (``visits``), each session's runs recording its slots (``runs.task_slots``) and the CPU
they cost (``runs.cpu_s``).

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
from ckptbench.config import (
    DEFAULT_PRESET,
    SLOTS_PER_CORE,
    SPARK_DEFAULT,
    Plan,
    Settings,
    Shape,
    interleaved,
    local_threads,
    per_query,
    presets_for,
    slots_of,
    slots_preset,
    with_slots,
)
from ckptbench.harness.querylab import checkpoint_settings, lab
from ckptbench.harness.stores import started_store
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.record.disk import save

#: How many configurations besides Spark's defaults a staged run crosses with every strategy.
STAGE_TWO = 2
#: The jobs ``make bench`` measures: a stateless one and a stateful one on each state store.
BENCH_SHAPES = (Shape("stateless"), Shape("stateful", "hdfs"), Shape("stateful", "rocksdb"))


def _stage_two(record: results.Results, shape: Shape, strategy: str, crossed: int = STAGE_TWO,
               presets: tuple[str, ...] | None = None) -> tuple[list[str], dict[str, str]]:
    """The configurations every strategy runs in after stage one (Spark's defaults and the
    ``crossed`` others ``strategy`` ran cheapest in: every request counted over its repeats,
    ``metrics.billable_requests_all_by_op``), and why each other one is not crossed (of ``presets``
    alone where given: the others were not measured)."""
    dollars, why = {}, {}
    for preset in presets_for(shape)[1:]:
        if presets is not None and preset not in presets:
            why[preset] = "not measured in this plan"
            continue
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
    cheapest = sorted(dollars, key=lambda p: (dollars[p], p.count("+")))[:crossed]
    for preset in dollars.keys() - set(cheapest):
        dearer = round(dollars[preset], 2) > round(dollars[cheapest[-1]], 2)
        why[preset] = (f"with {strategy} it cost ${dollars[preset]:,.2f} a month (a projection), "
                       + ("more than " if dearer else "no less than, with as many levers or more, ")
                       + " and ".join(f"{p} (${dollars[p]:,.2f})" for p in cheapest))
    return [DEFAULT_PRESET, *cheapest], why


def stage_one(shapes: tuple[Shape, ...], strategies: list[str], staged: bool,
              presets: tuple[str, ...] | None = None, floor: bool = False) -> dict[Shape, list[tuple[str, str]]]:
    """Each shape's configurations (preset, strategy) measured first: every one (``staged``: Spark's
    default strategy, ``strategies[0]``, in every preset), of ``presets`` alone if given; ``floor``:
    with the benchmark floor (``with_floor``) in Spark's defaults and at each task slots per core
    alone (``config.slots_preset``), not in every lever's (that would double the stage)."""
    out = {}
    for shape in shapes:
        chosen = [(preset, s) for preset in presets_for(shape) if presets is None or preset in presets
                  for s in (strategies[:1] if staged else strategies)]
        pure = {slots_preset(slots_of(preset)) for preset, _ in chosen}
        out[shape] = with_floor(chosen, pure) if floor else chosen
    return out


def with_floor(configurations: list[tuple[str, str]], presets: set[str] | None = None) -> list[tuple[str, str]]:
    """``configurations`` (preset, strategy) and the benchmark floor (``ckpt_impls.FLOOR``: Spark's
    checkpoint files in the JVM's memory) in each of their presets (of ``presets`` alone if given):
    the same batch with those files free, which each configuration in that preset is read against
    (a lever changes what the state store does, so only the floor in the same levers compares)."""
    wanted = [p for p in dict.fromkeys(preset for preset, _ in configurations) if presets is None or p in presets]
    return [*configurations, *((preset, ckpt_impls.FLOOR.name) for preset in wanted)]


def _measure(bench, recorder: results.Recorder, shape: Shape, configurations: list[tuple[str, str]], plan: Plan,
             bar, repeats: range, refused: set[tuple[str, str, str]], fewer: dict[tuple[str, str], int]) -> None:
    """The ``repeats`` of ``configurations`` (preset, strategy) of ``shape``, out of ``plan.repeats``
    queries of each in mirrored rounds (``config.interleaved``), each query measuring its share of
    ``plan.batches`` (of ``fewer``'s, for a configuration it names); a configuration Spark refused
    for this job once (``refused``: job, preset, strategy; added to here) is not run again (the
    refusal is the result, and the same every time). Spark refuses for a job, not for every job: a
    lever refused on one state store may run on another, so the job is part of the key."""
    for repeat, (preset, strategy) in interleaved(configurations, plan.repeats):
        if repeat not in repeats:
            continue
        batches = _per_query(plan, fewer, (preset, strategy))
        if (shape.name, preset, strategy) in refused:
            bar.update(plan.warmup + batches)
            continue
        bench.run(recorder, strategy, shape, shape.keys, plan.warmup, batches, bar, preset=preset, repeat=repeat)
        if recorder.rows["runs"][-1]["refused"]:
            refused.add((shape.name, preset, strategy))


def _per_query(plan: Plan, fewer: dict[tuple[str, str], int], configuration: tuple[str, str]) -> int:
    """Measured batches of each query of ``configuration``: its share of ``plan.batches``, or of the
    batches ``fewer`` gives it."""
    return per_query(fewer.get(configuration, plan.batches), plan.repeats)


def visits(slots: list[int], repeats: int) -> list[tuple[int, range]]:
    """The order the sessions of ``slots`` (task slots per core, ascending) run in, each visit with the
    repeats it measures: mirrored like the rounds in a session (``config.interleaved``), the first half
    of the repeats in ascending slots, the rest in descending, the last session's halves in one
    visit; so a drift in the machine or the store that is linear over the stage adds the same to
    every session's mean position, and a difference between task slots is not the order they ran in."""
    if len(slots) < 2 or repeats < 2:
        return [(n, range(repeats)) for n in slots]
    half = (repeats + 1) // 2
    return [*((n, range(half)) for n in slots[:-1]), (slots[-1], range(repeats)),
            *((n, range(half, repeats)) for n in reversed(slots[:-1]))]


def by_slots(configurations: dict[Shape, list[tuple[str, str]]], master: str
             ) -> dict[int, dict[Shape, list[tuple[str, str]]]]:
    """``configurations`` (per shape, (preset, strategy)) split by the task slots per core their
    session runs (``config.slots_of``), one slot first. On a master whose slots are not set here (a
    cluster's executors set theirs: ``config.with_slots``) every one goes to the one-slot session,
    whose lab records the others refused with why."""
    split: dict[int, dict[Shape, list[tuple[str, str]]]] = {}
    for shape, found in configurations.items():
        for preset, strategy in found:
            slots = slots_of(preset) if with_slots(master, slots_of(preset)) else 1
            split.setdefault(slots, {}).setdefault(shape, []).append((preset, strategy))
    return dict(sorted(split.items()))


def _warmups(split: dict[int, dict[Shape, list]], repeats: int) -> int:
    """The untimed queries ``_sessions`` runs for ``split``: one per shape per visit of a session."""
    return sum(len(split[slots]) for slots, _ in visits(list(split), repeats))


def _configurations(split: dict[int, dict[Shape, list]]) -> int:
    """The configurations ``_sessions`` measures for ``split``."""
    return sum(len(found) for group in split.values() for found in group.values())


def _sessions(settings: Settings, store, bucket: str, plan: Plan, first: str, recorder: results.Recorder,
              split: dict[int, dict[Shape, list[tuple[str, str]]]], bar,
              fewer: dict[tuple[str, str], int] | None = None) -> dict:
    """The configurations of ``split`` (``by_slots``) measured (``_measure``), a session (``lab``) per
    task slots per core and visit (``visits``), each warmed up first with an untimed query per shape
    it runs, in that shape's first configuration there, the configurations ``fewer`` names measuring
    that many batches; what the first session (the one-slot one, where there is one) says for the
    record's environment."""
    said: dict = {}
    refused: set[tuple[str, str, str]] = set()
    for slots, repeats in visits(list(split), plan.repeats):
        group = split[slots]
        with lab(store, bucket, plan, first, conf={SLOTS_PER_CORE: str(slots)}, master=settings.master) as bench:
            for shape, found in group.items():  # JIT, class loading, the state store's first use: untimed
                bench.run(None, found[0][1], shape, shape.keys, 0, plan.jvm_warmup, bar, preset=found[0][0])
            for shape, found in group.items():
                _measure(bench, recorder, shape, found, plan, bar, repeats, refused, fewer or {})
            said = said or {**results.session_said(bench.spark), **bench.where,
                            "checkpoint_settings": checkpoint_settings(bench.spark)}
    return said


def levers(settings: Settings, shapes: tuple[Shape, ...] = BENCH_SHAPES, strategies: list[str] | None = None,
           plan: Plan | None = None, staged: bool = False, experiment: str = "levers",
           presets: tuple[str, ...] | None = None, floor: bool = True,
           recorder: results.Recorder | None = None, crossed: int = STAGE_TWO) -> results.Results:
    """Every configuration of every shape (``staged``: as the module says, ``crossed`` presets
    crossed in stage two; ``presets``: of those alone, where a shape is offered them), each ``plan.repeats``
    queries of ``plan``'s warm-up and ``plan.batches_per_query`` measured batches, in mirrored rounds
    per shape, stage and session (a session per task slots per core: ``by_slots``), after an untimed
    query per shape has warmed each session, with the benchmark floor (``stage_one``) unless
    ``floor`` is False (configurations ranked for a ``final_stage``, which has it); the rows go into
    ``recorder`` (a new one if None); the record is written to ``settings.raw`` as ``experiment``
    and returned."""
    plan = plan or settings.plan
    strategies = _first_is_sparks(strategies or settings.measured_strategies)
    first = strategies[0]
    recorder = recorder if recorder is not None else results.Recorder()
    not_measured: dict[str, dict[str, str]] = {}
    with started_store(settings) as (store, bucket):
        per_configuration = plan.repeats * (plan.warmup + plan.batches_per_query)
        # The floor keeps its files in the driver JVM's memory: only where the tasks run in that JVM.
        floor = floor and local_threads(settings.master) is not None
        first_stage = by_slots(stage_one(shapes, strategies, staged, presets, floor), settings.master)
        # Stage two's sessions beyond one are added to the bar once they are known.
        warmups = _warmups(first_stage, plan.repeats) + (len(shapes) if staged else 0)
        expected = plan.jvm_warmup * warmups + per_configuration * (
            _configurations(first_stage) + (len(shapes) * (len(strategies) - 1) * (1 + crossed) if staged else 0))
        bar = progress.Recorder("configurations", expected, "batch")
        said = _sessions(settings, store, bucket, plan, first, recorder, first_stage, bar)
        if staged:
            so_far = recorder.results({"plan": dataclasses.asdict(plan)})
            second = {}
            for shape in shapes:
                presets_crossed, not_measured[shape.name] = _stage_two(so_far, shape, first, crossed, presets)
                second[shape] = [(preset, s) for preset in presets_crossed for s in strategies[1:]]
            second_stage = by_slots(second, settings.master)
            bar.grow(plan.jvm_warmup * (_warmups(second_stage, plan.repeats) - len(shapes)))
            _sessions(settings, store, bucket, plan, first, recorder, second_stage, bar)
        env = results.environment(store, experiment, settings.size, dataclasses.asdict(plan),
                                  shapes=[dataclasses.asdict(s) | {"name": s.name} for s in shapes],
                                  staged=staged, not_measured=not_measured, presets=presets,
                                  crossed=crossed if staged else None)
    return save(recorder.results({**env, **said}), settings)


def final_stage(settings: Settings, shape: Shape, configurations: list[tuple[str, str]], floors: set[str],
                plan: Plan, before: results.Results, recorder: results.Recorder,
                fewer: dict[tuple[str, str], int] | None = None) -> results.Results:
    """A last stage after ``levers`` (its record ``before``, its rows in ``recorder``): ``shape`` in
    ``configurations`` (preset, strategy) and, on a local master, the floor in ``floors``' presets
    (``with_floor``), measured as ``levers`` measures (but those ``fewer`` names, in as many measured
    batches as it says), on a store of its own; the record of both,
    ``before``'s environment naming ``shape`` too, is written as ``before``'s experiment and
    returned."""
    first = _first_is_sparks([strategy for _, strategy in configurations])[0]
    floored = with_floor(configurations, floors) if local_threads(settings.master) is not None else configurations
    last = by_slots({shape: floored}, settings.master)
    fewer = fewer or {}
    batches = sum(plan.repeats * (plan.warmup + _per_query(plan, fewer, key)) for key in floored)
    bar = progress.Recorder(f"at {shape.partitions} partitions", plan.jvm_warmup * _warmups(last, plan.repeats)
                            + batches, "batch")
    with started_store(settings) as (store, bucket):
        _sessions(settings, store, bucket, plan, first, recorder, last, bar, fewer)
    env = before.environment
    return save(recorder.results({**env, "shapes": [*env["shapes"], dataclasses.asdict(shape) | {"name": shape.name}]}),
                settings)


def _first_is_sparks(strategies: list[str]) -> list[str]:
    """``strategies`` with Spark's default strategy first where it is one of them: the one each session
    starts with, and stage one runs in every configuration."""
    first = SPARK_DEFAULT[0] if SPARK_DEFAULT[0] in strategies else strategies[0]
    return list(dict.fromkeys([first, *strategies]))


levers.timeout = 3 * 3600  # a full plan over every shape; a stuck query fails sooner, in await_batches
