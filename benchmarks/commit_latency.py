"""Commit latency: Spark's two checkpoint writes per batch, and the store's side of them.

``walCommit`` writes ``offsets/N`` before batch N runs, ``commitOffsets`` writes ``commits/N``
after the sink committed it; both are timed by Spark in the JVM (progress ``durationMs``), over
the measured batches. The store's side is the metering proxy's clock: from a request's head
arriving to its response relayed, for the requests in that checkpoint area. It leaves out S3A,
the AWS SDK and the JVM, so Spark's figure minus the store's is what the client side costs.
Warm-up batches are left out here and reported on their own (``WarmUp``).
"""

from ckptbench import metrics

from . import common


def _spark_ms(data, strategy, workload, name, q, warmup=False):
    run = common.run_of(data, strategy, workload)
    return metrics.percentile(metrics.durations(run["warmup" if warmup else "measured"], name), q)


class CommitLatency:
    """Spark's walCommit and commitOffsets in milliseconds, p50 and p95 over the measured batches."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_wal_commit_p50(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "walCommit", 50)

    def track_wal_commit_p95(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "walCommit", 95)

    def track_commit_offsets_p50(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "commitOffsets", 50)

    def track_commit_offsets_p95(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "commitOffsets", 95)

    def track_wal_commit_in_store_puts(self, data, strategy, workload):
        """walCommit p50 as a multiple of the store's own 1 KiB PUT p50 (proxy-timed)."""
        return _spark_ms(data, strategy, workload, "walCommit", 50) / data["floor"]["PUT"]

    track_wal_commit_p50.unit = track_wal_commit_p95.unit = "ms"
    track_commit_offsets_p50.unit = track_commit_offsets_p95.unit = "ms"
    track_wal_commit_in_store_puts.unit = "x store PUT"


class StoreSide:
    """The store's side of each commit, by checkpoint area (offsets/ is walCommit's, commits/ is
    commitOffsets'): the proxy-timed milliseconds per batch of every request there, and the
    per-call latency of the manager's PUTs (for rename, the temp file's; its COPY and DELETE
    count in the per-batch total)."""

    params = [common.STRATEGIES, common.WORKLOADS, ["offsets", "commits"]]
    param_names = ["strategy", "workload", "area"]
    setup_cache = staticmethod(common.streaming)

    def track_store_ms_per_batch(self, data, strategy, workload, area):
        batches = common.run_of(data, strategy, workload)["batches"]
        return common.median(metrics.per_batch(batches, "ms", areas=[area]))

    def track_put_p50(self, data, strategy, workload, area):
        batches = common.run_of(data, strategy, workload)["batches"]
        return metrics.percentile([ms for b in batches for ms in b["put_ms"].get(area, [])], 50)

    track_store_ms_per_batch.unit = track_put_p50.unit = "ms"


class WarmUp:
    """The warm-up batches, left out of every other figure: the first batches of each query pay
    for JIT compilation, class loading and new connections."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_wal_commit_p50(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "walCommit", 50, warmup=True)

    def track_commit_offsets_p50(self, data, strategy, workload):
        return _spark_ms(data, strategy, workload, "commitOffsets", 50, warmup=True)

    def track_batch_p50(self, data, strategy, workload):
        """Whole batch (triggerExecution)."""
        return _spark_ms(data, strategy, workload, "triggerExecution", 50, warmup=True)

    track_wal_commit_p50.unit = track_commit_offsets_p50.unit = track_batch_p50.unit = "ms"
