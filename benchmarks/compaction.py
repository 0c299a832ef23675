"""Compaction: every ``compactInterval`` batches (10, Spark's default; 2 in the smallest run) a
compacted log writes ``N.compact``, all of its entries so far, instead of a one-batch file.
Measured for the file sink's ``_spark_metadata`` (workload file_sink) and the file source's
``sources`` log in the checkpoint (workload file_source).

- batch time ratio: median triggerExecution of compaction batches over that of the others;
- the compact file's bytes: the largest upload to that log in its batch (the staged object,
  for strategies that stage); the whole series against batch count is plotted by the report;
- peak memory: resident set of the driver JVM (also the executor, in local mode) over the
  measured batches, Linux's VmHWM. Mostly the JVM's heap as it has grown so far (it varies
  by ~20% between runs): compaction at these sizes does not move it measurably.
"""

from ckptbench import config, metrics

from . import common


def _run(results, strategy, log):
    return results.run(strategy, config.LOGS[log])


class Compaction(common.Tracks):
    params = [common.STRATEGIES, list(config.LOGS)]
    param_names = ["strategy", "log"]
    setup_cache = staticmethod(common.streaming)

    def track_batch_time_ratio(self, results, strategy, log):
        return metrics.compaction_ratio(_run(results, strategy, log), common.PLAN.compact_interval)

    def track_last_compact_kib(self, results, strategy, log):
        return metrics.compacts(_run(results, strategy, log), log, common.PLAN.compact_interval)[-1][1] / 1024

    def track_compact_bytes_per_batch(self, results, strategy, log):
        """The last N.compact's bytes over N+1, the batches it covers: what each batch adds."""
        batch, size = metrics.compacts(_run(results, strategy, log), log, common.PLAN.compact_interval)[-1]
        return size / (batch + 1)

    def track_peak_rss_mib(self, results, strategy, log):
        return float(_run(results, strategy, log).info.peak_rss_mib)

    track_batch_time_ratio.unit = "x other batches"
    track_last_compact_kib.unit = "KiB"
    track_compact_bytes_per_batch.unit = "bytes"
    track_peak_rss_mib.unit = "MiB"
