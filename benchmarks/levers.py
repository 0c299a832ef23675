"""Spark's own checkpoint levers beside the strategies (``ckptbench.experiments.levers``): every
configuration (a strategy with Spark's defaults or with levers: ``config.presets_for``) of each job
the run size measures (``common.LEVER_SHAPES``), side by side.

Per job x configuration x strategy: commit latency and batch time (Spark's own clocks, p50 over
the measured batches), the driver JVM's CPU per batch (its tasks' too on a local master), every
billable request per batch (``metrics.billable_requests_all_by_op``: those between batches too,
since async progress tracking and the state store move requests out of the batch), and whether
Spark refused the configuration. A refused configuration has no latency or
requests (NaN: asv shows n/a) and ``track_refused`` 1. A job and configuration are one parameter,
``job: configuration``, listing only those the run measures (``config.presets_for``, and
``common.LEVER_CHOSEN``): asv's parameters are one grid, and a job's own configurations would
otherwise leave a cell per configuration it is not offered (changelog on a stateless job, say) that
can hold no value. A run that failed for another reason raises (``RunFailed``), as everywhere in
the suite: asv marks it failed.
"""

import math

from ckptbench import config, metrics
from ckptbench.record import results as results_model

from . import common

SHAPES = {shape.name: shape for shape in common.LEVER_SHAPES}


#: Each job and configuration the run measures, as the one parameter ``job: configuration``.
CONFIGURATIONS = {f"{shape.name}: {preset}": (shape.name, preset) for shape in common.LEVER_SHAPES
                  for preset in config.presets_for(shape)
                  if common.LEVER_CHOSEN is None or preset in common.LEVER_CHOSEN}


#: ``_run``'s answer for a configuration a staged record (``levers(staged=True)``, the quick plan's)
#: did not measure with the strategy: stage two crosses only the cheapest of rename's with the others.
NOT_CROSSED = object()


def _run(results, configuration, strategy):
    """The run of ``strategy`` in ``configuration`` (a key of ``CONFIGURATIONS``); None where Spark
    refused it; ``NOT_CROSSED`` where a staged record did not measure it."""
    shape, preset = CONFIGURATIONS[configuration]
    try:
        return results.run(strategy, shape, keys=SHAPES[shape].keys, preset=preset)
    except results_model.Refused:
        return None
    except KeyError:
        if results.environment.get("staged"):
            return NOT_CROSSED
        raise


def _of_run(results, configuration, strategy, compute) -> float:
    """``compute(run)`` of ``_run``'s run; NaN where there is none (refused, or not crossed)."""
    run = _run(results, configuration, strategy)
    return math.nan if run is None or run is NOT_CROSSED else compute(run)


class Levers(common.Tracks):
    """One value per job's configuration x strategy; NaN where Spark refused the configuration, or a
    staged record did not cross it with the strategy."""

    params = [list(CONFIGURATIONS), common.LEVER_STRATEGIES]
    param_names = ["configuration", "strategy"]
    setup_cache = staticmethod(common.levers)

    def track_commit_p50(self, results, configuration, strategy):
        """walCommit + commitOffsets, each a p50 over the measured batches (as the decision ranks)."""
        return _of_run(results, configuration, strategy, lambda run: metrics.duration_percentile(
            run, "walCommit", 50) + metrics.duration_percentile(run, "commitOffsets", 50))

    def track_batch_p50(self, results, configuration, strategy):
        """The whole batch (triggerExecution), p50."""
        return _of_run(results, configuration, strategy,
                       lambda run: metrics.duration_percentile(run, "triggerExecution", 50))

    def track_cpu_per_batch(self, results, configuration, strategy):
        """CPU the driver's JVM spent per measured batch, its tasks' too on a local master: the price
        of more task slots per core beside the batch time they save."""
        return _of_run(results, configuration, strategy, lambda run: metrics.cpu_ms_per_batch([run]))

    def track_requests_per_batch(self, results, configuration, strategy):
        """Every billable request per measured batch, whoever made it and whenever it started while
        the batches ran."""
        return _of_run(results, configuration, strategy,
                       lambda run: sum(metrics.billable_requests_all_by_op(run).values()))

    def track_refused(self, results, configuration, strategy):
        """1 where Spark refused the configuration for the job (or lacks one of its levers), 0 where it
        ran, NaN where a staged record did not cross it with the strategy."""
        run = _run(results, configuration, strategy)
        return math.nan if run is NOT_CROSSED else 1.0 if run is None else 0.0

    track_commit_p50.unit = track_batch_p50.unit = track_cpu_per_batch.unit = "ms"
    track_requests_per_batch.unit = "requests per batch"
    track_refused.unit = "refused"
