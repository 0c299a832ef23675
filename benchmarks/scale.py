"""How cost grows along the scale axes (``ckptbench.experiments.scale`` says how each is run): shuffle
partitions, stateful operators and batch count, per strategy. Per point: requests per batch (a
batch's own, all and by checkpoint area), bytes per batch, Spark's walCommit / commitOffsets /
state commit p50 and p95; per strategy: the fitted slopes, the memory of a long query, which must
stay bounded, and the state store maintenance's requests beside the batches.
"""

from ckptbench import metrics
from ckptbench.experiments import scale

from . import common

AXES = scale.AXES[common.SETTINGS.size]


class _PerPoint(common.Tracks):
    """Per batch at one point of ``axis``: a batch's own requests (all, and in each area a stateful
    query writes), KiB sent, and Spark's commit times (``metrics.SCALE_FIGURES``); the state store's
    maintenance beside them is ``ScaleMaintenance``'s. Not a benchmark itself (its
    name starts with ``_``); each axis's class below sets ``axis`` and the parameters."""

    axis = ""
    setup_cache = staticmethod(common.scale_axes)
    timeout = common.scale_axes.timeout

    def _at(self, results, strategy, at, figure):
        return dict(metrics.scale_values(results, self.axis, strategy, figure))[float(at)]

    def track_requests(self, results, strategy, at):
        return self._at(results, strategy, at, "requests")

    def track_requests_offsets(self, results, strategy, at):
        return self._at(results, strategy, at, "requests_offsets")

    def track_requests_commits(self, results, strategy, at):
        return self._at(results, strategy, at, "requests_commits")

    def track_requests_state(self, results, strategy, at):
        return self._at(results, strategy, at, "requests_state")

    def track_kib_sent(self, results, strategy, at):
        return self._at(results, strategy, at, "kib")

    def track_wal_commit_p50(self, results, strategy, at):
        return self._at(results, strategy, at, "wal_commit_p50")

    def track_wal_commit_p95(self, results, strategy, at):
        return self._at(results, strategy, at, "wal_commit_p95")

    def track_commit_offsets_p50(self, results, strategy, at):
        return self._at(results, strategy, at, "commit_offsets_p50")

    def track_commit_offsets_p95(self, results, strategy, at):
        return self._at(results, strategy, at, "commit_offsets_p95")

    def track_state_commit_p50(self, results, strategy, at):
        return self._at(results, strategy, at, "state_commit_p50")

    def track_state_commit_p95(self, results, strategy, at):
        return self._at(results, strategy, at, "state_commit_p95")

    track_requests.unit = track_requests_offsets.unit = track_requests_commits.unit = "requests"
    track_requests_state.unit = "requests"
    track_kib_sent.unit = "KiB"
    track_wal_commit_p50.unit = track_wal_commit_p95.unit = "ms"
    track_commit_offsets_p50.unit = track_commit_offsets_p95.unit = "ms"
    track_state_commit_p50.unit = track_state_commit_p95.unit = "ms"


class ScaleByPartitions(_PerPoint):
    """Per batch at each shuffle partition count (one stateful operator)."""

    axis = "partitions"
    params = [common.STRATEGIES, list(AXES.partitions)]
    param_names = ["strategy", "partitions"]


class ScaleByOperators(_PerPoint):
    """Per batch with one and with two stateful operators (at the axes' ``operators_partitions``)."""

    axis = "operators"
    params = [common.STRATEGIES, list(AXES.operators)]
    param_names = ["strategy", "operators"]


class ScaleSlopes(common.Tracks):
    """Least-squares slopes along each axis (``metrics.scale_fit``): what one more partition, one
    more operator or 1,000 more batches adds to a batch's requests and commit times."""

    params = [common.STRATEGIES]
    param_names = ["strategy"]
    setup_cache = staticmethod(common.scale_axes)
    timeout = common.scale_axes.timeout

    def track_requests_per_partition(self, results, strategy):
        return metrics.scale_fit(results, "partitions", strategy, "requests")[1]

    def track_state_commit_ms_per_partition(self, results, strategy):
        return metrics.scale_fit(results, "partitions", strategy, "state_commit_p50")[1]

    def track_wal_commit_ms_per_partition(self, results, strategy):
        return metrics.scale_fit(results, "partitions", strategy, "wal_commit_p50")[1]

    def track_requests_per_operator(self, results, strategy):
        return metrics.scale_fit(results, "operators", strategy, "requests")[1]

    def track_requests_per_1000_batches(self, results, strategy):
        return metrics.scale_fit(results, "batches", strategy, "requests")[1]

    def track_state_commit_ms_per_1000_batches(self, results, strategy):
        return metrics.scale_fit(results, "batches", strategy, "state_commit_p50")[1]

    track_requests_per_partition.unit = "requests per partition"
    track_state_commit_ms_per_partition.unit = track_wal_commit_ms_per_partition.unit = "ms per partition"
    track_requests_per_operator.unit = "requests per operator"
    track_requests_per_1000_batches.unit = "requests per 1,000 batches"
    track_state_commit_ms_per_1000_batches.unit = "ms per 1,000 batches"


class ScaleMemory(common.Tracks):
    """Peak memory over the long query (the batch-count axis), and how fast it grows: a driver or a
    manager whose memory grows with the batches would run out in a long-lived job."""

    params = [common.STRATEGIES]
    param_names = ["strategy"]
    setup_cache = staticmethod(common.scale_axes)
    timeout = common.scale_axes.timeout

    def track_driver_peak_rss(self, results, strategy):
        """The driver JVM's peak resident set over the long query's measured batches (VmHWM)."""
        return float(metrics.scale_points(results, "batches", strategy)[0][1].info.peak_rss_mib)

    def track_driver_heap_peak(self, results, strategy):
        return metrics.heap_peak_mib(results, strategy)

    def track_driver_heap_growth(self, results, strategy):
        return metrics.heap_growth_mib(results, strategy)

    def track_manager_peak(self, results, strategy):
        return metrics.manager_kib_peak(results, strategy)

    def track_manager_objects_growth(self, results, strategy):
        return metrics.manager_objects_growth(results, strategy)

    track_driver_peak_rss.unit = track_driver_heap_peak.unit = "MiB"
    track_driver_heap_growth.unit = "MiB per 1,000 batches"
    track_manager_peak.unit = "KiB"
    track_manager_objects_growth.unit = "objects per 1,000 batches"


class ScaleMaintenance(common.Tracks):
    """The state store maintenance, left out of the per-batch figures (``metrics.maintenance_rates``,
    what a projection multiplies): its listings per state partition and round over every scale run
    of the strategy, and its snapshots and deletes past retention per state partition and batch
    over the long query."""

    params = [common.STRATEGIES]
    param_names = ["strategy"]
    setup_cache = staticmethod(common.scale_axes)
    timeout = common.scale_axes.timeout

    def track_listings(self, results, strategy):
        return metrics.maintenance_rates(results, strategy)[0]

    def track_snapshots_and_deletes(self, results, strategy):
        return metrics.maintenance_rates(results, strategy)[1]

    track_listings.unit = "requests per partition and round"
    track_snapshots_and_deletes.unit = "requests per partition and batch"

