"""What every benchmark module shares: the run's settings and the experiments asv caches.

The settings come from the environment (``ckptbench.config.Settings``: store, size, bucket, raw
results directory), which ``python -m ckptbench bench`` sets from its options. The store is not
an asv parameter but an asv machine (``<host>-<store>-spark<version>``): asv publishes a parameterised result
only for the parameter values of the latest discovery, so runs on two stores under one
parameter would hide each other.

Starting Spark costs ~10 s and asv runs every benchmark, for every parameter combination, in a
process of its own (forked from one that imported the suite). So each experiment (streaming, the
store alone, log histories, the crash lab, the fault lab, the scale axes, Spark's checkpoint levers)
runs once, in ``setup_cache`` (``cached``), which also works out there, from the one record, the
value of every track of every class that reads it, for every parameter combination (``values``): a
few thousand plain numbers. asv pickles those, and each benchmark's process looks its own up
(``Tracks``) instead of unpickling the record, tens of megabytes, and working its figure out again.
Benchmarks are ``track_*`` over the records (``ckptbench.metrics``), never ``time_*``: asv would time
py4j and Spark's scheduling, not the checkpoint.

asv's version of a benchmark (which decides whether its stored results still count) hashes the
source of its method and of its ``setup_cache`` function (``cached`` passes both on, as
``__wrapped__``), not the module's name: renaming one of the functions here or editing its body
restarts the history of every benchmark that uses it (docs/regression-tracking.md).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import os
import pkgutil
import sys
import traceback

import ckpt_impls
from ckpt_impls import jars
from ckptbench import config, progress
from ckptbench.experiments import crashlab, faultlab, histories, registry, scale
from ckptbench.experiments import levers as levers_experiment
from ckptbench.experiments import store_alone as store_alone_experiment
from ckptbench.experiments import streaming as streaming_experiment
from ckptbench.record import disk

SETTINGS = config.Settings.from_env()
PLAN = SETTINGS.plan
STRATEGIES = SETTINGS.measured_strategies
WORKLOADS = list(config.workloads_for(PLAN, jars.spark_version()))  # those this Spark has
CRASH_PLAN = crashlab.PLANS[SETTINGS.size]
#: The share of an untimed experiment this process runs: the whole, unless ``bench``'s first phase
#: split it over processes (``registry.Experiment.parts``).
PART = registry.part_of(os.environ)
TWO_WRITER_STRATEGIES = CRASH_PLAN.two_writer_strategies_of(STRATEGIES)

# Spark's checkpoint levers (``ckptbench.experiments.levers``): every configuration of each job, per
# strategy. The smallest size is the suite's check that every benchmark gives a number, run by
# `make test` beside the other tests, so it stays short: the RocksDB job alone, in Spark's defaults,
# each lever alone, all of them together and async progress, which Spark refuses it (every path of
# the experiment, a combination's and the refusal included, in 6 of its 9 configurations:
# ``LEVER_CHOSEN``), with Spark's default manager and ``conditional`` (a strategy of each kind:
# rename-based and one PUT) and any strategy from outside; the plan's batches and repeats (two
# queries of a configuration, each 1 warm-up and 2 measured batches: two is the fewest
# ``reproducibility`` can cut in halves). The stateless and HDFS-backed jobs are left to quick and
# full (their refusals and async progress's measured run are tests/test_levers.py's). quick: every
# job of ``BENCH_SHAPES`` and every strategy, staged as ``recommend`` stages (Spark's default
# strategy in every configuration, then every strategy in Spark's defaults and the one it ran
# cheapest in), task slots per core left to full. full: every configuration of every job with
# every strategy, more batches a configuration.
LEVER_SHAPES = (levers_experiment.BENCH_SHAPES if SETTINGS.size != "smallest" else
                tuple(s for s in levers_experiment.BENCH_SHAPES if s.provider == "rocksdb"))
LEVER_CHOSEN = {"smallest": ("default", "async-progress", "changelog", "format-v2", "no-checksum",
                             "changelog+format-v2+no-checksum"),
                "quick": tuple(dict.fromkeys(p for shape in LEVER_SHAPES for p in config.presets_for(shape)
                                             if config.slots_of(p) == 1)),
                "full": None}[SETTINGS.size]
LEVER_STRATEGIES = (STRATEGIES if SETTINGS.size != "smallest" else
                    [s for s in STRATEGIES if s in ("rename", "conditional") or ckpt_impls.get(s).jars])
LEVER_PLAN = {"smallest": PLAN, "quick": PLAN,
              "full": dataclasses.replace(PLAN, jvm_warmup=5, warmup=3, batches=40)}[SETTINGS.size]


class Values(dict):
    """Every track's value of one experiment's record, keyed by (module, class, track, parameter
    values): plain numbers, or ``Failed`` where working one out raised."""


@dataclasses.dataclass(frozen=True)
class Failed:
    """A track whose value raised when ``values`` worked it out: the traceback, raised again (as a
    ``RuntimeError``) in the benchmark's own process, where asv marks it failed and shows it."""

    trace: str


def _cells(cls) -> list[tuple]:
    """Every parameter combination of benchmark class ``cls``, as asv makes them: one parameter's
    values may be given as a plain list."""
    params = getattr(cls, "params", [])
    if params and not isinstance(params[0], (list, tuple)):
        params = [params]
    return list(itertools.product(*params))


def _track_names(cls) -> list[str]:
    """The names of benchmark class ``cls``'s tracks, inherited ones too, as asv finds them."""
    return [name for name in dir(cls) if name.startswith("track_")]


def _key(cls, track: str, cell: tuple) -> tuple:
    return cls.__module__, cls.__qualname__, track, tuple(cell)


def _looked_up(compute):
    """Track ``compute`` (a function of the class, a record and the parameter values) as asv calls
    it: with ``Values``, the value ``values`` worked out for this class and cell; with a record (a
    test's, a script's), worked out from it."""

    @functools.wraps(compute)
    def track(self, data, *cell):
        if not isinstance(data, Values):
            return compute(self, data, *cell)
        value = data[_key(type(self), compute.__name__, cell)]
        if isinstance(value, Failed):
            raise RuntimeError(f"{type(self).__qualname__}.{compute.__name__}{cell} failed:\n{value.trace}")
        return value

    track.looked_up = True
    return track


class Tracks:
    """The base of every benchmark class: its ``track_*`` methods are written as functions of the
    experiment's record, and asv's calls look their values up (``_looked_up``)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _track_names(cls):
            method = getattr(cls, name)
            if not getattr(method, "looked_up", False):
                setattr(cls, name, _looked_up(method))


def _suite() -> list[type]:
    """Every benchmark class of the suite, its modules imported first (a process asv started for one
    benchmark may have imported only that one's module)."""
    for module in pkgutil.iter_modules(sys.modules[__package__].__path__):
        importlib.import_module(f"{__package__}.{module.name}")
    found, todo = [], [Tracks]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return [cls for cls in found if not cls.__name__.startswith("_")]  # as asv: ``_``-named are no benchmarks


def values(setup, record) -> Values:
    """The value of every track, for every parameter combination, of each class of the suite whose
    ``setup_cache`` is ``setup``, worked out from ``record`` (``setup``'s experiment's)."""
    out = Values()
    for cls in _suite():
        if getattr(cls, "setup_cache", None) is not setup:
            continue
        benchmark = cls()
        for name in _track_names(cls):
            compute = getattr(cls, name).__wrapped__
            for cell in _cells(cls):
                try:
                    out[_key(cls, name, cell)] = compute(benchmark, record, *cell)
                except Exception:
                    out[_key(cls, name, cell)] = Failed(traceback.format_exc())
    return out


def setup_name(setup) -> str:
    """The name ``ckptbench.experiments.registry`` knows set-up function ``setup`` by (its
    ``Experiment.setup``): its own here, ``module.function`` in another module of the suite."""
    module = setup.__module__.rsplit(".", 1)[-1]
    return setup.__name__ if module == "common" else f"{module}.{setup.__name__}"


def listing() -> dict[str, list[str]]:
    """Each set-up function's benchmarks (``setup_name``), by asv's full name (module.Class.method):
    what ``bench`` plans its stages from."""
    out: dict[str, list[str]] = {}
    for cls in _suite():
        module = cls.__module__.rsplit(".", 1)[-1]
        out.setdefault(setup_name(cls.setup_cache), []).extend(
            f"{module}.{cls.__name__}.{name}" for name in _track_names(cls))
    return out


def cached(experiment):
    """asv's ``setup_cache`` of the classes that read ``experiment``'s record: run it once, as a stage
    of ``bench``'s plan (``progress.stage``), unless this bench run saved its record already
    (``disk.of_this_run``), and return their tracks' ``values`` (``experiment``'s ``timeout`` is asv's
    for it)."""

    @functools.wraps(experiment)
    def setup():
        name = setup_name(setup)
        record = disk.of_this_run(SETTINGS, registry.of_setup(name).name)
        if record is None:
            with progress.stage(name):
                record = experiment()
        return values(setup, record)

    return setup


@cached
def streaming():
    return streaming_experiment.streaming(SETTINGS)


@cached
def store_alone():
    return store_alone_experiment.store_alone(SETTINGS)


@cached
def history():
    return histories.history(SETTINGS)


@cached
def crashes():
    return crashlab.crashes(SETTINGS, plan=CRASH_PLAN.in_part(*PART))


@cached
def fault_lab():
    return faultlab.faultlab(SETTINGS, part=PART)


@cached
def scale_axes():
    return scale.scale(SETTINGS)


@cached
def levers():
    return levers_experiment.levers(SETTINGS, LEVER_SHAPES, LEVER_STRATEGIES, plan=LEVER_PLAN, presets=LEVER_CHOSEN,
                                    staged=SETTINGS.size == "quick", crossed=1)


streaming.timeout = streaming_experiment.streaming.timeout
store_alone.timeout = store_alone_experiment.store_alone.timeout
history.timeout = histories.history.timeout
crashes.timeout = crashlab.crashes.timeout
fault_lab.timeout = faultlab.faultlab.timeout
scale_axes.timeout = scale.scale.timeout
levers.timeout = levers_experiment.levers.timeout
