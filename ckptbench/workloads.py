"""PySpark Structured Streaming workloads whose checkpoints go to ``s3a://``.

Each builder returns a started ``StreamingQuery``; ``await_batches`` drives it for a
fixed number of micro-batches. Shared by the tests, the benchmarks and the CLI.
"""

from __future__ import annotations

import time

from pyspark.sql import functions as F

TRIGGER = "100 milliseconds"


def stateful(spark, checkpoint: str, keys: int = 5, rows_per_second: int = 50,
             sink: str = "noop", name: str | None = None, trigger: str = TRIGGER):
    """rate -> groupBy(value % keys) count/max: state store files grow with ``keys``.

    ``sink="memory"`` keeps the complete result in the driver as table ``name``.
    """
    counts = (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
              .groupBy((F.col("value") % keys).alias("key"))
              .agg(F.count("*").alias("rows"), F.max("value").alias("max_value")))
    writer = counts.writeStream.format(sink).option("checkpointLocation", checkpoint)
    if sink == "memory":
        writer = writer.outputMode("complete").queryName(name)
    else:
        writer = writer.outputMode("update")
    return writer.trigger(processingTime=trigger).start()


def file_sink(spark, checkpoint: str, output: str, rows_per_second: int = 50,
              compact_interval: int = 10, trigger: str = TRIGGER):
    """rate -> parquet file sink on ``output``, with its ``_spark_metadata`` log."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(compact_interval))
    rows = spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
    return (rows.select("value").writeStream.format("parquet")
            .option("checkpointLocation", checkpoint).option("path", output)
            .trigger(processingTime=trigger).start())


class QueryFailed(RuntimeError):
    pass


def await_batches(query, batches: int, timeout: float = 300, on_batch=None) -> list[dict]:
    """Wait until ``query`` has reported ``batches`` more progress events; return them.

    ``on_batch(n)`` is told of each ``n`` new batches (for a progress bar). Raises
    ``QueryFailed`` with Spark's own error if the query dies, or on timeout.
    """
    seen = {p["batchId"] for p in query.recentProgress}
    deadline = time.monotonic() + timeout
    new: dict[int, dict] = {}
    while len(new) < batches:
        if query.exception() is not None:
            raise QueryFailed(str(query.exception()).splitlines()[0])
        if time.monotonic() > deadline:
            raise QueryFailed(f"only {len(new)} of {batches} batches within {timeout:.0f}s")
        before = len(new)
        for progress in query.recentProgress:
            if progress["batchId"] not in seen:
                new.setdefault(progress["batchId"], progress)
        if on_batch and len(new) > before:
            on_batch(min(len(new), batches) - min(before, batches))
        time.sleep(0.05)
    return [new[b] for b in sorted(new)][:batches]
