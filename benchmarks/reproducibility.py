"""Reproducibility: whether the recommendation for a job is the same on two independent halves of
one commit's measurement (``decide.halves``: each configuration's first half of repeats against
the rest, ``config.Plan.repeats`` queries run in mirrored rounds). 0 is stable; 1 means the data
of one half named another configuration than the other's, which noise decided.

One figure per job, decided on one experiment's record: the streaming experiment's jobs
(``config.job_of`` of each workload) and the levers experiment's shapes (``common.LEVER_SHAPES``).
The report decides a job measured by both on their runs together (``decide.per_job``); each record
alone is what asv caches per class. Without the crash lab and the probe, as latency and cost alone
decide between configurations that are all safe.
"""

from ckptbench import config, decide

from . import common


def _changed(results, job):
    first, second = decide.halves([results], job)
    return 0.0 if first.recommended == second.recommended else 1.0


class StreamingJobs(common.Tracks):
    """The streaming experiment's jobs: 1 where the two halves recommend different configurations."""

    params = [list(dict.fromkeys(config.job_of(w, common.PLAN.keys[0])[0] for w in common.WORKLOADS))]
    param_names = ["job"]
    setup_cache = staticmethod(common.streaming)

    def track_recommendation_changed(self, results, job):
        return _changed(results, job)

    track_recommendation_changed.unit = "changed"


class LeverJobs(common.Tracks):
    """The levers experiment's jobs: 1 where the two halves recommend different configurations."""

    params = [[shape.name for shape in common.LEVER_SHAPES]]
    param_names = ["job"]
    setup_cache = staticmethod(common.levers)

    def track_recommendation_changed(self, results, job):
        return _changed(results, job)

    track_recommendation_changed.unit = "changed"
