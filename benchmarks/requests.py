"""Requests per batch: every S3 request a batch made, by operation and by checkpoint area, a mean
over the measured batches (``ckptbench.metrics`` says why). A request is a batch's by the file it
touches, not by when it came (``ckptbench.record.attribution``), so these are the same in every run
of one commit on one store.

An area is where the key lies: ``offsets``, ``commits``, ``state``, ``sources``, ``metadata``
in the checkpoint, ``_spark_metadata`` (the file sink's log) and ``data`` (everything else:
the sink's files, the file source's input). Requests no batch made (state store maintenance's,
those between batches) are counted apart: ``Requests.track_outside_batches``,
``track_timing_driven_per_batch`` and ``track_timing_driven_spread`` (``ckptbench.metrics.drift``
shows them apart too).
"""

from ckptbench import metrics
from infra.s3ops import AREAS, OPS

from . import common


class RequestsByOp(common.Tracks):
    """Requests per batch of one S3 operation, all areas together."""

    params = [common.STRATEGIES, common.WORKLOADS, list(OPS)]
    param_names = ["strategy", "workload", "op"]
    setup_cache = staticmethod(common.streaming)

    def track_per_batch(self, results, strategy, workload, op):
        return metrics.requests_per_batch(results.run(strategy, workload), ops=[op])

    track_per_batch.unit = "requests"


class RequestsByArea(common.Tracks):
    """Requests and request payload per batch in one checkpoint area, all operations together."""

    params = [common.STRATEGIES, common.WORKLOADS, list(AREAS)]
    param_names = ["strategy", "workload", "area"]
    setup_cache = staticmethod(common.streaming)

    def track_per_batch(self, results, strategy, workload, area):
        return metrics.requests_per_batch(results.run(strategy, workload), areas=[area])

    def track_kib_sent_per_batch(self, results, strategy, workload, area):
        return metrics.kib_sent_per_batch(results.run(strategy, workload), areas=[area])

    track_per_batch.unit = "requests"
    track_kib_sent_per_batch.unit = "KiB"


class StrategyShare(common.Tracks):
    """Which of a batch's requests the strategy makes at all: those through Spark's
    CheckpointFileManager. The others are the same whatever the strategy: the sink's data files
    and the RocksDB state store's SST and log files, which it uploads with the FileSystem
    (``infra.s3ops.through_manager`` says how they are told apart, and how that was measured)."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_share(self, results, strategy, workload):
        return 100 * metrics.strategy_share(results.run(strategy, workload))

    def track_strategy_requests_per_batch(self, results, strategy, workload):
        return metrics.requests_per_batch(results.run(strategy, workload), controlled=True)

    def track_other_requests_per_batch(self, results, strategy, workload):
        return metrics.requests_per_batch(results.run(strategy, workload), controlled=False)

    def track_other_kib_sent_per_batch(self, results, strategy, workload):
        return metrics.kib_sent_per_batch(results.run(strategy, workload), controlled=False)

    track_share.unit = "%"
    track_strategy_requests_per_batch.unit = track_other_requests_per_batch.unit = "requests"
    track_other_kib_sent_per_batch.unit = "KiB"


class Requests(common.Tracks):
    """All requests per batch, and the rename's signature in the manager's areas: a rename on S3
    is a COPY and a DELETE after the temp file's PUT, so ``rename`` shows 1 COPY and 1 DELETE
    per PUT there and the others none (deletes also come from purging batches older than
    ``minBatchesToRetain``, 100)."""

    params = [common.STRATEGIES, common.WORKLOADS]
    param_names = ["strategy", "workload"]
    setup_cache = staticmethod(common.streaming)

    def track_total_per_batch(self, results, strategy, workload):
        return metrics.requests_per_batch(results.run(strategy, workload))

    def track_copies_per_put(self, results, strategy, workload):
        return metrics.per_put(results.run(strategy, workload), "COPY")

    def track_deletes_per_put(self, results, strategy, workload):
        return metrics.per_put(results.run(strategy, workload), "DELETE")

    def track_outside_batches(self, results, strategy, workload):
        """Requests no batch made (maintenance's, between batches, the query's start), per measured batch."""
        return metrics.requests_outside_batches(results.run(strategy, workload))

    def track_timing_driven_per_batch(self, results, strategy, workload):
        """Requests no batch made that landed while the measured batches ran, per measured batch."""
        return metrics.timing_driven_per_batch(results.run(strategy, workload))

    def track_timing_driven_spread(self, results, strategy, workload):
        """The most less the fewest of those in one measured batch, over every run of the configuration."""
        _, fewest, most = metrics.timing_driven_spread(results.runs_of(strategy, workload))
        return most - fewest

    def track_kib_sent_per_batch(self, results, strategy, workload):
        """Request payload bytes per batch, all areas (checkpoint files and data)."""
        return metrics.kib_sent_per_batch(results.run(strategy, workload))

    def track_per_checkpoint_file(self, results, strategy, workload):
        """The strategy's requests per checkpoint file Spark wrote through the manager (counted by the
        benchmark floor's manager): 1 is one round trip per file."""
        return metrics.requests_per_checkpoint_file(results, results.run(strategy, workload))

    track_total_per_batch.unit = track_outside_batches.unit = "requests"
    track_timing_driven_per_batch.unit = track_timing_driven_spread.unit = "requests"
    track_per_checkpoint_file.unit = "requests per checkpoint file"
    track_copies_per_put.unit = track_deletes_per_put.unit = "per PUT"
    track_kib_sent_per_batch.unit = "KiB"


class CheckpointFiles(common.Tracks):
    """Checkpoint files Spark writes per batch, whatever the strategy: counted by the benchmark
    floor's in-memory manager, the denominator of ``Requests.track_per_checkpoint_file``."""

    params = [common.WORKLOADS]
    param_names = ["workload"]
    setup_cache = staticmethod(common.streaming)

    def track_per_batch(self, results, workload):
        return metrics.checkpoint_files_per_batch(results, workload)

    track_per_batch.unit = "files"
