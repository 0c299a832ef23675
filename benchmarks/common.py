"""What every benchmark module shares: the run's settings and the experiments asv caches.

The settings come from the environment (``ckptbench.config.Settings``: store, size, bucket, raw
results directory), which ``python -m ckptbench bench`` sets from its options. The store is not
an asv parameter but an asv machine (``<host>-<store>-spark<version>``): asv publishes a parameterised result
only for the parameter values of the latest discovery, so runs on two stores under one
parameter would hide each other.

Starting Spark costs ~10 s and asv runs every benchmark, for every parameter combination, in a
process of its own. So each experiment (streaming, the store alone, log histories, the crash lab,
the fault lab, the scale axes, Spark's checkpoint levers) runs once, in ``setup_cache``: asv keys it by the module
and line that define the function, so every class that sets
``setup_cache = staticmethod(common.streaming)`` reads the same pickled record of one run per
``asv run``. Benchmarks are ``track_*`` over those records (``ckptbench.metrics``), never
``time_*``: asv would time py4j and Spark's scheduling, not the checkpoint.

asv's version of a benchmark (which decides whether its stored results still count) hashes the
source of its method and of its ``setup_cache`` function, not the module's name: renaming one of
the functions here or editing its body restarts the history of every benchmark that uses it
(docs/regression-tracking.md).
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
from ckpt_impls import jars
from ckptbench import config
from ckptbench.experiments import crashlab, faultlab, histories, scale
from ckptbench.experiments import levers as levers_experiment
from ckptbench.experiments import store_alone as store_alone_experiment
from ckptbench.experiments import streaming as streaming_experiment

SETTINGS = config.Settings.from_env()
PLAN = SETTINGS.plan
STRATEGIES = SETTINGS.measured_strategies
WORKLOADS = list(config.workloads_for(PLAN, jars.spark_version()))  # those this Spark has
CRASH_PLAN = crashlab.PLANS[SETTINGS.size]
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
# full (their refusals and async progress's measured run are tests/test_levers.py's). quick and
# full: every job of ``BENCH_SHAPES`` and every strategy, more batches a configuration, though fewer
# than the streaming experiment's: each strategy runs the plan's repeats of a query per
# configuration of every job (15 over ``BENCH_SHAPES``).
LEVER_SHAPES = (levers_experiment.BENCH_SHAPES if SETTINGS.size != "smallest" else
                tuple(s for s in levers_experiment.BENCH_SHAPES if s.provider == "rocksdb"))
LEVER_CHOSEN = (None if SETTINGS.size != "smallest" else
                ("default", "async-progress", "changelog", "format-v2", "no-checksum",
                 "changelog+format-v2+no-checksum"))
LEVER_STRATEGIES = (STRATEGIES if SETTINGS.size != "smallest" else
                    [s for s in STRATEGIES if s in ("rename", "conditional") or ckpt_impls.get(s).jars])
#: asv's parameters are fixed lists: every configuration offered to any job of ``BENCH_SHAPES`` (a job
#: not offered one gives NaN for it), the first offered first.
LEVER_PRESETS = list(dict.fromkeys(p for shape in levers_experiment.BENCH_SHAPES for p in config.presets_for(shape)))
LEVER_PLAN = {"smallest": PLAN,
              "quick": dataclasses.replace(PLAN, jvm_warmup=2, warmup=2, batches=8),
              "full": dataclasses.replace(PLAN, jvm_warmup=5, warmup=3, batches=40)}[SETTINGS.size]


def attributed(record):
    """``record`` with its requests attributed (``Results.causes``) before asv pickles it: a pickle
    keeps that (``results.KEPT_IN_PICKLE``), so each benchmark's process does not work it out again."""
    record.causes()
    return record


def streaming():
    return attributed(streaming_experiment.streaming(SETTINGS))


def store_alone():
    return store_alone_experiment.store_alone(SETTINGS)


def history():
    return attributed(histories.history(SETTINGS))


def crashes():
    return crashlab.crashes(SETTINGS)


def fault_lab():
    return faultlab.faultlab(SETTINGS)


def scale_axes():
    return attributed(scale.scale(SETTINGS))


def levers():
    return attributed(levers_experiment.levers(SETTINGS, LEVER_SHAPES, LEVER_STRATEGIES, plan=LEVER_PLAN,
                                               presets=LEVER_CHOSEN))


streaming.timeout = streaming_experiment.streaming.timeout
store_alone.timeout = store_alone_experiment.store_alone.timeout
history.timeout = histories.history.timeout
crashes.timeout = crashlab.crashes.timeout
fault_lab.timeout = faultlab.faultlab.timeout
scale_axes.timeout = scale.scale.timeout
levers.timeout = levers_experiment.levers.timeout
