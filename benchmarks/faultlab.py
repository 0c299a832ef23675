"""Failure rates under injected faults (the fault lab, ``ckptbench.experiments.faultlab``): for each
strategy and fault profile (``infra.faults.PROFILES``), queries run while the metering proxy
injects the profile's faults. Rates are over all the plan's runs of that strategy and profile
(every workload, every seed); ``quick`` runs the profiles a commit protocol can notice,
``full`` all of them with three seeds. ``aws-projection`` is a projection to AWS S3, not a
measurement of it.
"""

from ckptbench import metrics
from ckptbench.experiments import faultlab, outages

from . import common

PROFILES = [p for p in faultlab.PLANS[common.SETTINGS.size].profiles if outages.can_run(p, common.SETTINGS.store)]


class FaultRates(common.Tracks):
    """Per strategy x fault profile: how often the query died, how many batches were lost, and
    how much the store's clients retried and the proxy injected."""

    params = [common.STRATEGIES, PROFILES]
    param_names = ["strategy", "profile"]
    setup_cache = staticmethod(common.fault_lab)

    def track_death_rate(self, results, strategy, profile):
        """Runs whose query stopped with an exception, per run."""
        return metrics.death_rate(results, strategy, profile)

    def track_failed_batch_rate(self, results, strategy, profile):
        """Batches asked and not done (the query died or stalled first), per batch asked."""
        return metrics.failed_batch_rate(results, strategy, profile)

    def track_retried_per_run(self, results, strategy, profile):
        """Requests that repeated one answered with nothing or a 5xx, per run."""
        return metrics.retried_per_run(results, strategy, profile)

    def track_injected_per_run(self, results, strategy, profile):
        return metrics.injected_per_run(results, strategy, profile)

    track_death_rate.unit = "deaths per run"
    track_failed_batch_rate.unit = "per batch asked"
    track_retried_per_run.unit = "requests per run"
    track_injected_per_run.unit = "faults per run"
