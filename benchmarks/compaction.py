"""Compaction: every ``compactInterval`` batches (10, Spark's default; 2 in the smallest run) a
compacted log writes ``N.compact``, all of its entries so far, instead of a one-batch file.
Measured for the file sink's ``_spark_metadata`` (workload file_sink) and the file source's
``sources`` log in the checkpoint (workload file_source).

- batch time ratio: median triggerExecution of compaction batches over that of the others;
- the compact file's bytes: the largest upload to that log in its batch (the staged object,
  for strategies that stage); the whole series against batch count is plotted in results/plots;
- peak memory: resident set of the driver JVM (also the executor, in local mode) over the
  measured batches, Linux's VmHWM. Mostly the JVM's heap as it has grown so far (it varies
  by ~20% between runs): compaction at these sizes does not move it measurably.
"""

from ckptbench import metrics

from . import common


def _interval(data):
    return data["plan"]["compact_interval"]


def compacts(data, strategy, log):
    """(batch id, bytes of its N.compact) for the measured compaction batches."""
    run = common.run_of(data, strategy, common.LOGS[log])
    return [(p["batchId"], b["largest"].get(log, 0)) for p, b in zip(run["measured"], run["batches"])
            if metrics.is_compaction_batch(p["batchId"], _interval(data))]


class Compaction:
    params = [common.STRATEGIES, list(common.LOGS)]
    param_names = ["strategy", "log"]
    setup_cache = staticmethod(common.streaming)

    def track_batch_time_ratio(self, data, strategy, log):
        run = common.run_of(data, strategy, common.LOGS[log])
        return metrics.compaction_ratio(run["measured"], _interval(data))

    def track_last_compact_kib(self, data, strategy, log):
        return compacts(data, strategy, log)[-1][1] / 1024

    def track_compact_bytes_per_batch(self, data, strategy, log):
        """The last N.compact's bytes over N+1, the batches it covers: what each batch adds."""
        batch, size = compacts(data, strategy, log)[-1]
        return size / (batch + 1)

    def track_peak_rss_mib(self, data, strategy, log):
        return common.run_of(data, strategy, common.LOGS[log])["peak_rss_mib"]

    track_batch_time_ratio.unit = "x other batches"
    track_last_compact_kib.unit = "KiB"
    track_compact_bytes_per_batch.unit = "bytes"
    track_peak_rss_mib.unit = "MiB"
