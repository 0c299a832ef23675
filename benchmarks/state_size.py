"""The state sweep by area: requests and request payload per batch in each checkpoint area, and
the strategy's share of them, for each workload the sweep runs (the HDFS-backed state store and
RocksDB with changelog checkpointing) at each key count (keys per batch: every batch updates
every key). RocksDB's SST uploads are not the strategy's (``requests.StrategyShare``)."""

from ckptbench import metrics
from infra.s3ops import CHECKPOINT_AREAS

from . import common


class StateSizeByArea(common.Tracks):
    """Requests and KiB sent per batch in one area, against the state size."""

    params = [common.STRATEGIES, list(common.PLAN.sweep_workloads), list(common.PLAN.keys),
              ["_spark_metadata", *CHECKPOINT_AREAS]]
    param_names = ["strategy", "workload", "keys", "area"]
    setup_cache = staticmethod(common.streaming)

    def track_requests_per_batch(self, results, strategy, workload, keys, area):
        return metrics.requests_per_batch(results.run(strategy, workload, keys), areas=[area])

    def track_kib_sent_per_batch(self, results, strategy, workload, keys, area):
        return metrics.kib_sent_per_batch(results.run(strategy, workload, keys), areas=[area])

    track_requests_per_batch.unit = "requests"
    track_kib_sent_per_batch.unit = "KiB"


class StateSizeShare(common.Tracks):
    """The share of a batch's requests the strategy makes, against the state size."""

    params = [common.STRATEGIES, list(common.PLAN.sweep_workloads), list(common.PLAN.keys)]
    param_names = ["strategy", "workload", "keys"]
    setup_cache = staticmethod(common.streaming)

    def track_share(self, results, strategy, workload, keys):
        return 100 * metrics.strategy_share(results.run(strategy, workload, keys))

    track_share.unit = "%"
