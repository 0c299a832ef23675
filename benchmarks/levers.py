"""Spark's own checkpoint levers beside the strategies (``ckptbench.experiments.levers``): every
configuration (a strategy with Spark's defaults or with levers: ``config.presets_for``) of each job
the run size measures (``common.LEVER_SHAPES``), side by side.

Per job x configuration x strategy: commit latency and batch time (Spark's own clocks, p50 over
the measured batches), the driver JVM's CPU per batch (its tasks' too on a local master), every
billable request per batch (``metrics.billable_requests_all_by_op``: those between batches too,
since async progress tracking and the state store move requests out of the batch), and whether
Spark refused the configuration. A refused configuration has no latency or
requests (NaN: asv shows n/a) and ``track_refused`` 1. A configuration the job is not offered
(changelog on a stateless job, say: asv's parameters are one fixed grid), or the run does not
measure (``common.LEVER_CHOSEN``), is NaN in every track, ``track_refused`` included. A run that
failed for another reason raises (``RunFailed``), as everywhere in the suite: asv marks it failed.
"""

import math

from ckptbench import config, metrics
from ckptbench.record import results as results_model

from . import common

SHAPES = {shape.name: shape for shape in common.LEVER_SHAPES}


def offered(shape, preset):
    """The run measures job ``shape`` in configuration ``preset``."""
    chosen = common.LEVER_CHOSEN
    return preset in config.presets_for(SHAPES[shape]) and (chosen is None or preset in chosen)


def _run(results, shape, preset, strategy):
    """The run of ``strategy`` in configuration ``preset`` of job ``shape``; None where the job is
    not offered it or Spark refused it."""
    if not offered(shape, preset):
        return None
    try:
        return results.run(strategy, shape, keys=SHAPES[shape].keys, preset=preset)
    except results_model.Refused:
        return None


class Levers:
    """One value per job x configuration x strategy; NaN where Spark refused the configuration or
    the job is not offered it."""

    params = [list(SHAPES), common.LEVER_PRESETS, common.LEVER_STRATEGIES]
    param_names = ["shape", "preset", "strategy"]
    setup_cache = staticmethod(common.levers)

    def track_commit_p50(self, results, shape, preset, strategy):
        """walCommit + commitOffsets, each a p50 over the measured batches (as the decision ranks)."""
        run = _run(results, shape, preset, strategy)
        if run is None:
            return math.nan
        return (metrics.duration_percentile(run, "walCommit", 50)
                + metrics.duration_percentile(run, "commitOffsets", 50))

    def track_batch_p50(self, results, shape, preset, strategy):
        """The whole batch (triggerExecution), p50."""
        run = _run(results, shape, preset, strategy)
        return math.nan if run is None else metrics.duration_percentile(run, "triggerExecution", 50)

    def track_cpu_per_batch(self, results, shape, preset, strategy):
        """CPU the driver's JVM spent per measured batch, its tasks' too on a local master: the price
        of more task slots per core beside the batch time they save."""
        run = _run(results, shape, preset, strategy)
        return math.nan if run is None else metrics.cpu_ms_per_batch([run])

    def track_requests_per_batch(self, results, shape, preset, strategy):
        """Every billable request per measured batch, whoever made it and whenever it started while
        the batches ran."""
        run = _run(results, shape, preset, strategy)
        return math.nan if run is None else sum(metrics.billable_requests_all_by_op(run).values())

    def track_refused(self, results, shape, preset, strategy):
        """1 where Spark refused the configuration for the job (or lacks one of its levers), else 0."""
        if not offered(shape, preset):
            return math.nan
        return 1.0 if _run(results, shape, preset, strategy) is None else 0.0

    track_commit_p50.unit = track_batch_p50.unit = track_cpu_per_batch.unit = "ms"
    track_requests_per_batch.unit = "requests per batch"
    track_refused.unit = "refused"
