"""What every benchmark module shares: the run's settings and the four experiments asv caches.

The settings come from the environment (``ckptbench.config.Settings``: store, size, bucket, raw
results directory), which ``python -m ckptbench bench`` sets from its options. The store is not
an asv parameter but an asv machine (``<host>-<store>-spark<version>``): asv publishes a parameterised result
only for the parameter values of the latest discovery, so runs on two stores under one
parameter would hide each other.

Starting Spark costs ~10 s and asv runs every benchmark, for every parameter combination, in a
process of its own. So each experiment (streaming, the store alone, log histories, the failure
lab, the scale axes) runs once, in ``setup_cache``: asv keys it by the module
and line that define the function, so every class that sets
``setup_cache = staticmethod(common.streaming)`` reads the same pickled record of one run per
``asv run``. Benchmarks are ``track_*`` over those records (``ckptbench.metrics``), never
``time_*``: asv would time py4j and Spark's scheduling, not the checkpoint.
"""

from __future__ import annotations

import ckpt_impls
from ckpt_impls import jars
from ckptbench import config
from ckptbench.experiments import crashlab, faultlab, histories, scale
from ckptbench.experiments import store_alone as store_alone_experiment
from ckptbench.experiments import streaming as streaming_experiment

SETTINGS = config.Settings.from_env()
PLAN = SETTINGS.plan
STRATEGIES = list(ckpt_impls.STRATEGIES)
WORKLOADS = list(config.workloads_for(PLAN, jars.spark_version()))  # those this Spark has
CRASH_PLAN = crashlab.PLANS[SETTINGS.size]
TWO_WRITER_STRATEGIES = sorted({s for s, *_ in CRASH_PLAN.two_writer_runs(STRATEGIES)}, key=STRATEGIES.index)


def streaming():
    return streaming_experiment.streaming(SETTINGS)


def store_alone():
    return store_alone_experiment.store_alone(SETTINGS)


def history():
    return histories.history(SETTINGS)


def crashes():
    return crashlab.crashes(SETTINGS)


def fault_lab():
    return faultlab.faultlab(SETTINGS)


def scale_axes():
    return scale.scale(SETTINGS)


streaming.timeout = streaming_experiment.streaming.timeout
store_alone.timeout = store_alone_experiment.store_alone.timeout
history.timeout = histories.history.timeout
crashes.timeout = crashlab.crashes.timeout
fault_lab.timeout = faultlab.faultlab.timeout
scale_axes.timeout = scale.scale.timeout
