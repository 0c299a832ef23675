"""The crash check: exactly-once under crashes of the configurations the decision leads with, so
that nothing is recommended before the crash lab ran it in that configuration on that store.
``python -m ckptbench recommend`` runs it after its levers experiment (``experiments.recommend``)
and ``python -m ckptbench bench`` after the suite's (``check_jobs``), each on a store of its own.

Which configurations lead is the decision's to say, and the decision is a layer above the
experiments: the caller passes it in as a callable, and ``check_leaders`` asks it, checks the
leaders it names that were not crash-tested yet, and asks again, up to ``CRASH_ROUNDS`` times:
when a check puts the leaders out (a row lost or duplicated), the configurations leading then
are checked in turn, so that the configuration recommended has been crash-checked. Each check
is ``crashlab.CrashLab.series`` of the configuration (its manager, its Spark levers and the job's
state store), as the crash lab's driver of the job's kind (``crash_workload``), killed with
``kill -9`` at the crash lab's points and restarted; the rows its output lost or duplicated put
it out (``decide``'s rule 1). It needs the metering proxy, as the crash lab does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ckptbench import config, progress
from ckptbench.record import disk, results, schema

#: How many times ``check_leaders`` runs a check at most: when the check puts the leaders out,
#: those that lead then are checked in turn, so the configuration recommended has been crash-checked.
CRASH_ROUNDS = 3
#: The tables a check fills.
TABLES = ("cycles", "crash_series")


class Leader(Protocol):
    """A configuration the decision puts in the lead (``decide.Candidate`` is one)."""

    strategy: str
    preset: str
    crash_cycles: int  # the crash lab's cycles of it in this very configuration on this store (0: none)


#: The decision, as the crash check asks it: the configurations leading once the crash check's rows
#: so far (``{table: rows}``, ``TABLES``) are added to what it reads, best first (the chosen one and
#: the runner-up, those there are).
Leaders = Callable[[dict[str, list[dict]]], list[Leader]]


def crash_workload(shape: config.Shape) -> str:
    """The crash lab's workload (``crashlab.WORKLOADS``) closest to the job: its kind and, for a
    stateless job, a sink async progress tracking takes (foreach) unless the job writes files;
    the crash lab's own sinks, since a noop sink leaves no output to check exactly-once on."""
    if shape.stateful:
        return "stateful"
    return "stateless" if shape.sink == "file" else "stateless-foreach"


def crash_check(settings: config.Settings, shape: config.Shape, leaders: list[Leader],
                cycles: int, first_series: int = 0, env: dict | None = None) -> dict[str, list[dict]]:
    """Exactly-once under crashes of ``leaders``: each configuration, its manager with its Spark
    levers and the job's state store, runs as the crash lab's driver of the job's kind
    (``crash_workload``), killed at the crash lab's points and restarted, ``cycles`` times on a
    fresh checkpoint (``crashlab.CrashLab.series``), series numbered from ``first_series``. Returns
    the rows of the record's ``TABLES``; ``env``, where given, gets the store's and session's
    environment (``results.environment``). Needs the metering proxy, as the crash lab does.

    Runs on a store of its own, with a session in the JVM an earlier experiment of the process may
    have used (``harness.spark.session`` closes the filesystems it cached)."""
    from ckptbench.experiments.crashlab.lab import CrashLab
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session

    recorder = results.Recorder()
    with stores.started_store(settings, needs_proxy="the crash check") as (store, bucket):
        spark = session(leaders[0].strategy, {bucket: store.inner})
        try:
            if env is not None:
                env.update({**results.environment(store, config.CRASH_CHECK, settings.size, {"cycles": cycles},
                                                  spark=spark), **env})
            bar = progress.Recorder("crash check", cycles * len(leaders), "cycle")
            with CrashLab(spark, store, bucket, recorder, say=lambda line: None) as lab:
                for c in leaders:
                    lab.series(c.strategy, crash_workload(shape), cycles, bar=bar, preset=c.preset,
                               provider=shape.provider if shape.stateful else None)
        finally:
            spark.stop()
    for name in TABLES:  # numbered after the series of earlier rounds
        for row in recorder.rows[name]:
            row["series"] += first_series
    return {name: recorder.rows[name] for name in TABLES}


def to_check(leading: list[Leader], checked: set[tuple[str, str]]) -> list[Leader]:
    """Those of ``leading`` the crash lab has not run in their configuration on this store, nor this
    crash check (``checked``: (strategy, preset) pairs)."""
    return [c for c in leading if not c.crash_cycles and (c.strategy, c.preset) not in checked]


def check_leaders(settings: config.Settings, shape: config.Shape, leaders: Leaders, cycles: int,
                  crashed: dict[str, list[dict]], env: dict | None = None) -> None:
    """Ask ``leaders`` and crash-check those it names that are not crash-tested (``to_check``), up to
    ``CRASH_ROUNDS`` times (see the module's docstring), each check ``cycles`` cycles; the rows go
    into ``crashed`` (``{table: rows}``, ``TABLES``, series numbered after those already there) as
    each check ends, so a check that fails leaves the earlier ones' rows standing; ``env`` as
    ``crash_check`` takes it."""
    checked: set[tuple[str, str]] = set()
    for _ in range(CRASH_ROUNDS):
        leading = to_check(leaders(crashed), checked)
        if not leading:
            return
        found = crash_check(settings, shape, leading, cycles, first_series=len(crashed["crash_series"]), env=env)
        for name in TABLES:
            crashed[name] += found[name]
        checked |= {(c.strategy, c.preset) for c in leading}


def _said(series: dict) -> str:
    """A series of the check in a line: its configuration, cycles and rows duplicated and lost, or why it stopped."""
    label = config.configuration_label(series["strategy"], series.get("preset"))
    cycles = series["cycles"]
    return (f"{label}, {cycles} cycle{'' if cycles == 1 else 's'}, {series.get('duplicates')} rows duplicated, "
            f"{series.get('lost')} lost"
            + (f" ({series['error']})" if series.get("error") else ""))


#: The decision, as ``check_jobs`` asks it: the configurations leading for job ``name`` with the
#: crash check's rows so far, as ``Leaders``.
JobLeaders = Callable[[str, dict[str, list[dict]]], list[Leader]]


def check_jobs(settings: config.Settings, shapes: tuple[config.Shape, ...], leaders: JobLeaders, cycles: int,
               say=print) -> results.Results:
    """``check_leaders`` for each job of ``shapes`` in turn (the suite's levers experiment's), each
    leader ``cycles`` cycles, on ``settings``' store; written to ``settings.raw`` as the experiment
    ``config.CRASH_CHECK`` (``finished`` False where a check failed, ``error`` saying why) and
    returned. ``say``: a line per job, naming what was checked."""
    crashed: dict[str, list[dict]] = {name: [] for name in TABLES}
    # Where no check ran (every leader crash-tested already), the record says no more than this.
    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": config.CRASH_CHECK, "store": settings.store,
           "size": settings.size, "cycles": cycles, "rounds": CRASH_ROUNDS, "jobs": [s.name for s in shapes]}
    error = None
    for shape in shapes:
        before = len(crashed["crash_series"])
        try:
            check_leaders(settings, shape, lambda rows, job=shape.name: leaders(job, rows), cycles, crashed, env)
        except Exception as e:  # the checks so far stand; the record and the decision say what is missing
            error = f"the crash check of {shape.name} failed: {' '.join(str(e).split())[:300]}"
            say(error)
            break
        ran = crashed["crash_series"][before:]
        say(f"crash check, {shape.name}: " + ("; ".join(map(_said, ran)) if ran
                                              else "its leaders were crash-tested already"))
    record = results.Recorder()
    for name in TABLES:
        record.rows[name] += crashed[name]
    return disk.save(record.results({**env, "finished": error is None, "error": error}), settings)
