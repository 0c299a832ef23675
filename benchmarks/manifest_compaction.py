"""Compaction as history grows: the ``manifest`` strategy's compacts against Spark's own
``_spark_metadata`` log, for histories of two lengths (``ckptbench.experiments.histories`` says how they are
driven and timed). The manifest's compact should stay flat in history; Spark's grows with it.
"""

from ckptbench import metrics
from ckptbench.experiments import histories

from . import common

SHAPE = histories.SHAPES[common.SETTINGS.size]


class ManifestCompaction(common.Tracks):
    """The manifest's compaction at the end of a history of ``batches`` batches."""

    params = [list(SHAPE.batches)]
    param_names = ["batches"]
    setup_cache = staticmethod(common.history)
    timeout = common.history.timeout

    def track_compaction_ms(self, results, batches):
        return metrics.history_tail_ms(results, batches, "manifest")

    def track_compact_kib(self, results, batches):
        return metrics.history_last(results, batches, "manifest", "bytes") / 1024

    def track_live_entries(self, results, batches):
        return metrics.history_last(results, batches, "manifest", "entries")

    def track_pending_garbage(self, results, batches):
        """Staged objects the last compact still lists as garbage (within the cleanup delay)."""
        return metrics.history_last(results, batches, "manifest", "garbage_staged")

    track_compaction_ms.unit = "ms"
    track_compact_kib.unit = "KiB"
    track_live_entries.unit = "entries"
    track_pending_garbage.unit = "objects"


class SparkMetadataCompaction(common.Tracks):
    """Spark's FileStreamSinkLog at the end of a history of ``batches`` batches, one file each."""

    params = [list(SHAPE.batches)]
    param_names = ["batches"]
    setup_cache = staticmethod(common.history)
    timeout = common.history.timeout

    def track_compaction_ms(self, results, batches):
        return metrics.history_tail_ms(results, batches, "spark")

    def track_compact_kib(self, results, batches):
        return metrics.history_last(results, batches, "spark", "bytes") / 1024

    def track_entries(self, results, batches):
        return metrics.history_last(results, batches, "spark", "entries")

    track_compaction_ms.unit = "ms"
    track_compact_kib.unit = "KiB"
    track_entries.unit = "entries"
