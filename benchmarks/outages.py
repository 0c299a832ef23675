"""Store outages (the fault lab's outage profiles, ``ckptbench.experiments.outages``): for each
strategy and outage profile of the plan, queries whose store went away after their first batches,
for the profile's seconds (every request reset by the metering proxy), or whose gateway process was
killed and started again. Whether the query rode it out, how long it took to die or to finish a
batch after the store was back. Shares the fault lab's record with ``faultlab``.
"""

from ckptbench import metrics
from ckptbench.experiments import faultlab, outages

from . import common

PROFILES = [p for p in faultlab.PLANS[common.SETTINGS.size].profiles
            if outages.of(p) is not None and outages.can_run(p, common.SETTINGS.store)]


class StoreOutages(common.Tracks):
    """Per strategy x outage profile, over every workload and seed of the plan."""

    params = [common.STRATEGIES, PROFILES]
    param_names = ["strategy", "profile"]
    setup_cache = staticmethod(common.fault_lab)

    def track_rode_out_rate(self, results, strategy, profile):
        """Runs that completed every batch through the outage, per run that met one."""
        return metrics.rode_out_rate(results, strategy, profile)

    def track_time_to_outcome(self, results, strategy, profile):
        """Seconds from the outage's start to the query's death or, riding it out, to the end of its
        first batch after the store was back (median over the runs; the rate says which). One
        figure for both, so that every combination has a number whichever way its runs went."""
        return metrics.time_to_outcome(results, strategy, profile)

    track_rode_out_rate.unit = "rate (runs)"
    track_time_to_outcome.unit = "seconds"
