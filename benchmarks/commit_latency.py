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


class CommitLatency(common.Tracks):
    """Spark's walCommit and commitOffsets in milliseconds, p50 and p95 over the measured batches."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_wal_commit_p50(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "walCommit", 50)

    def track_wal_commit_p95(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "walCommit", 95)

    def track_commit_offsets_p50(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "commitOffsets", 50)

    def track_commit_offsets_p95(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "commitOffsets", 95)

    def track_wal_commit_in_store_puts(self, results, strategy, workload):
        """walCommit p50 as a multiple of the store's own 1 KiB PUT p50 (proxy-timed)."""
        return metrics.wal_commit_in_store_puts(results, results.run(strategy, workload))

    track_wal_commit_p50.unit = track_wal_commit_p95.unit = "ms"
    track_commit_offsets_p50.unit = track_commit_offsets_p95.unit = "ms"
    track_wal_commit_in_store_puts.unit = "x store PUT"


class JvmTimed(common.Tracks):
    """The checkpoint files' commit as the JVM timed it, sub-millisecond (``metrics.file_commit_ms_per_batch``:
    each file from ``createAtomic`` to its stream's close, a batch's own files summed), median per
    measured batch, by file kind (``offsets`` is walCommit's file, ``commits`` commitOffsets') or over
    ``all`` (state files and a sink's log too). Beside Spark's whole-millisecond figures above, which
    stay the user-facing ones; timed in local mode only (NaN elsewhere)."""

    params = [common.STRATEGIES, common.WORKLOADS, ["offsets", "commits", "all"]]
    param_names = ["strategy", "workload", "kind"]
    setup_cache = staticmethod(common.streaming)

    def track_ms_per_batch_p50(self, results, strategy, workload, kind):
        kinds = None if kind == "all" else [kind]
        return metrics.median(metrics.file_commit_ms_per_batch(results.run(strategy, workload), kinds))

    track_ms_per_batch_p50.unit = "ms"


class StoreSide(common.Tracks):
    """The store's side of each commit, by checkpoint area (offsets/ is walCommit's, commits/ is
    commitOffsets'): the proxy-timed milliseconds per batch of every request there, and the
    per-call latency of the manager's PUTs (for rename, the temp file's; its COPY and DELETE
    count in the per-batch total)."""

    params = [common.STRATEGIES, common.WORKLOADS, ["offsets", "commits"]]
    param_names = ["strategy", "workload", "area"]
    setup_cache = staticmethod(common.streaming)

    def track_store_ms_per_batch(self, results, strategy, workload, area):
        return metrics.store_ms_per_batch(results.run(strategy, workload), areas=[area])

    def track_put_p50(self, results, strategy, workload, area):
        return metrics.put_latency_percentile(results.run(strategy, workload), area, 50)

    track_store_ms_per_batch.unit = track_put_p50.unit = "ms"


class WarmUp(common.Tracks):
    """The warm-up batches, left out of every other figure: the first batches of each query pay
    for JIT compilation, class loading and new connections."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_wal_commit_p50(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "walCommit", 50, warmup=True)

    def track_commit_offsets_p50(self, results, strategy, workload):
        return metrics.duration_percentile(results.run(strategy, workload), "commitOffsets", 50, warmup=True)

    def track_batch_p50(self, results, strategy, workload):
        """Whole batch (triggerExecution)."""
        return metrics.duration_percentile(results.run(strategy, workload), "triggerExecution", 50, warmup=True)

    track_wal_commit_p50.unit = track_commit_offsets_p50.unit = track_batch_p50.unit = "ms"


class Overhead(common.Tracks):
    """Whose time a commit is: Spark's own share (its p50 through the benchmark floor, a manager
    keeping files in the JVM's memory with no store: ``ckpt_impls.FLOOR``), and the strategy's
    overhead beyond that share and one PUT round trip (a 1 KiB PUT's p50 as Spark's own S3 client
    makes it, same run: ``metrics.put_floor_ms``), in ms and as a fraction of the PUT. The
    overhead's floor is 0."""

    params = [common.STRATEGIES, common.WORKLOADS, ["walCommit", "commitOffsets"]]
    param_names = ["strategy", "workload", "commit"]
    setup_cache = staticmethod(common.streaming)

    def track_spark_share_ms(self, results, strategy, workload, commit):
        return metrics.spark_share_ms(results, workload, commit)

    def track_overhead_ms(self, results, strategy, workload, commit):
        return metrics.strategy_overhead_ms(results, results.run(strategy, workload), commit)

    def track_overhead_of_put(self, results, strategy, workload, commit):
        return metrics.strategy_overhead_of_put(results, results.run(strategy, workload), commit)

    track_spark_share_ms.unit = track_overhead_ms.unit = "ms"
    track_overhead_of_put.unit = "x PUT"
