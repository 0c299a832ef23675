"""Rename cost. A rename on S3 is a server-side COPY and a DELETE, so its cost depends on what
the store's COPY does with the bytes:

- ``CopyTime``: COPY (one CopyObject request) and, for scale, PUT of the same object, 1 KiB to
  128 MiB of random bytes, p50 in milliseconds, timed by the metering proxy;
- ``CopyThroughput``: straight lines fitted through those: ms per MiB for COPY and PUT, their
  ratio, and the COPY's MB/s -- only where the COPY moves the data. Ceph RGW's COPY shares the
  object's tail instead (its per-MiB cost is a few percent of a PUT's), so no MB/s is fitted
  there (n/a) and the ratio says why; AWS S3 moves the bytes (6-10 MB/s in the zero-rename
  committer paper). An emulator's figures are its process's, not a store's;
- ``ProjectedCopyTime``: the same COPYs sent through the metering proxy's ``aws-projection``
  profile, which holds a COPY to 8 MB/s and gives every request AWS-like latency: a
  **projection** to AWS S3 (``infra.faults``), not a measurement of it;
- ``StateCheckpointCost``: what checkpointing the state costs per batch as the state grows,
  each batch rewriting every key: Spark's state store commit time (writing the delta files
  through the checkpoint manager, the rename included), the store's time for the requests in
  ``state/`` (proxy), and the bytes written there.
"""

from ckptbench import metrics

from . import common


class CopyTime(common.Tracks):
    params = [list(common.PLAN.copy_sizes)]
    param_names = ["bytes"]
    setup_cache = staticmethod(common.store_alone)

    def track_copy_ms(self, results, size):
        return metrics.copy_percentile(results, "COPY", size, 50)

    def track_put_ms(self, results, size):
        return metrics.copy_percentile(results, "PUT", size, 50)

    track_copy_ms.unit = track_put_ms.unit = "ms"


class CopyThroughput(common.Tracks):
    setup_cache = staticmethod(common.store_alone)

    def track_copy_ms_per_mib(self, results):
        return metrics.copy_fit(results)["ms_per_mib"]

    def track_put_ms_per_mib(self, results):
        return metrics.copy_fit(results)["put_ms_per_mib"]

    def track_copy_share_of_put(self, results):
        """COPY's per-MiB cost over PUT's: near 1 when COPY moves the bytes, near 0 when not."""
        return metrics.copy_fit(results)["share_of_put"]

    def track_copy_mb_per_s(self, results):
        """Fitted COPY throughput; n/a where the store's COPY does not move the data."""
        fit = metrics.copy_fit(results)
        if not fit["moves_data"]:
            print(f"{results.environment['store']}: COPY's per-MiB cost is {fit['share_of_put']:.0%} of a PUT's: "
                  "it does not move the bytes, so no throughput is fitted")
        return fit["mb_per_s"]

    track_copy_ms_per_mib.unit = track_put_ms_per_mib.unit = "ms/MiB"
    track_copy_share_of_put.unit = "ratio"
    track_copy_mb_per_s.unit = "MB/s"


class ProjectedCopyTime(common.Tracks):
    """A projection to AWS S3, not a measurement: COPY through the ``aws-projection`` profile."""

    params = [list(common.PLAN.copy_sizes)]
    param_names = ["bytes"]
    setup_cache = staticmethod(common.store_alone)

    def track_projected_copy_ms(self, results, size):
        return metrics.copy_percentile(results, "COPY", size, 50, metrics.PROJECTED_COPY)

    track_projected_copy_ms.unit = "ms"


class ProjectedCopyThroughput(common.Tracks):
    """A projection to AWS S3, not a measurement."""

    setup_cache = staticmethod(common.store_alone)

    def track_projected_copy_mb_per_s(self, results):
        return metrics.projected_copy_mb_per_s(results)

    track_projected_copy_mb_per_s.unit = "MB/s"


class StateCheckpointCost(common.Tracks):
    params = [common.STRATEGIES, list(common.PLAN.keys)]
    param_names = ["strategy", "keys"]
    setup_cache = staticmethod(common.streaming)

    def track_commit_ms(self, results, strategy, keys):
        """Spark's state store commit time per batch, p50."""
        return metrics.state_commit_percentile(results.run(strategy, "stateful", keys), 50)

    def track_store_ms(self, results, strategy, keys):
        """The store's time per batch for the requests in state/, p50 (proxy)."""
        return metrics.store_ms_per_batch(results.run(strategy, "stateful", keys), areas=["state"])

    def track_copy_ms(self, results, strategy, keys):
        """Of that, the COPY requests' (the rename's server-side copy), p50."""
        return metrics.store_ms_per_batch(results.run(strategy, "stateful", keys), areas=["state"], ops=["COPY"])

    def track_state_mib(self, results, strategy, keys):
        """Bytes sent to state/ per batch, p50: the state size each batch checkpoints."""
        return metrics.mib_sent_per_batch_median(results.run(strategy, "stateful", keys), areas=["state"])

    track_commit_ms.unit = track_store_ms.unit = track_copy_ms.unit = "ms"
    track_state_mib.unit = "MiB"
