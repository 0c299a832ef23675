"""What counting S3 requests inside Spark's JVMs costs a checkpoint (``ckptbench.experiments.counting``).

walCommit with counting on and off in one SparkSession on the store directly (no metering proxy),
counting switched at random batch by batch inside each stateful query so that the machine's drift
reaches both arms alike; the target is an overhead (difference of the arms' trimmed means) under 2%
of walCommit's p50. And the handler on its
own, per HTTP attempt, which times the requests per batch bounds that overhead from above without
the machine's noise.
"""

from ckptbench.experiments import counting

from . import common


@common.cached
def overhead():
    return counting.experiment(common.SETTINGS)


overhead.timeout = counting.experiment.timeout


class JvmCountingOverhead(common.Tracks):
    params = [list(counting.STRATEGIES)]
    param_names = ["strategy"]
    setup_cache = staticmethod(overhead)

    def track_wal_commit_p50_counting(self, result, strategy):
        """walCommit p50 over the counted batches."""
        return result.p50(strategy, "on")

    def track_wal_commit_p50_not_counting(self, result, strategy):
        return result.p50(strategy, "off")

    def track_overhead_ms(self, result, strategy):
        """walCommit's trimmed mean counting less not counting."""
        return result.overhead_ms(strategy)

    def track_overhead_pct(self, result, strategy):
        """overhead_ms in % of walCommit's p50 not counting; the target is under 2."""
        return result.overhead_pct(strategy)

    def track_overhead_pct_low(self, result, strategy):
        """The low end of overhead_pct's 90% bootstrap interval."""
        return result.overhead_interval(strategy)[0]

    def track_overhead_pct_high(self, result, strategy):
        return result.overhead_interval(strategy)[1]

    def track_bound_pct(self, result, strategy):
        """Handler cost per attempt x walCommit's requests, in % of walCommit p50 (not counting)."""
        return result.bound_pct(strategy)

    def track_wal_commit_requests(self, result, strategy):
        """walCommit's own requests (offsets/) per counted batch: the bound's multiplier."""
        return result.wal_commit_requests(strategy)

    track_wal_commit_p50_counting.unit = track_wal_commit_p50_not_counting.unit = track_overhead_ms.unit = "ms"
    track_overhead_pct.unit = track_overhead_pct_low.unit = track_overhead_pct_high.unit = "%"
    track_bound_pct.unit = "%"
    track_wal_commit_requests.unit = "requests"


class JvmCountingHandler(common.Tracks):
    """The handler alone, per HTTP attempt (``MeterCost``): counting, and switched off."""

    setup_cache = staticmethod(overhead)

    def track_ns_per_attempt_counting(self, result):
        return result.handler["on_ns"]

    def track_ns_per_attempt_off(self, result):
        return result.handler["off_ns"]

    track_ns_per_attempt_counting.unit = track_ns_per_attempt_off.unit = "ns"
