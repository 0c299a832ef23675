"""PySpark Structured Streaming workloads whose checkpoints go to ``s3a://``.

Each builder returns a started ``StreamingQuery``; ``await_batches`` drives it for a
fixed number of micro-batches. Shared by the tests, the benchmarks and the CLI.
"""

from __future__ import annotations

import time

from pyspark.sql import functions as F

TRIGGER = "100 milliseconds"


def rate(spark, rows_per_second: int = 50, rows_per_batch: int | None = None):
    """Spark's rate source: ``rows_per_second`` of wall-clock time, or, given ``rows_per_batch``,
    exactly that many rows in every micro-batch (``rate-micro-batch``), so each batch does the
    same work however long the one before it took."""
    if rows_per_batch:
        return spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch).load()
    return spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()


def stateful(spark, checkpoint: str, keys: int = 5, rows_per_second: int = 50,
             sink: str = "noop", name: str | None = None, trigger: str = TRIGGER,
             rows_per_batch: int | None = None, digest: bool = False):
    """rate -> groupBy(value % keys) count/max: state store files grow with ``keys``.

    ``sink="memory"`` keeps the complete result in the driver as table ``name``.
    ``digest=True`` adds a 64-character hash to each key's state, so a state file holds
    ~35 bytes per key after LZ4 instead of ~5: tens of megabytes take 10^5 keys, not 10^6.
    """
    aggregates = [F.count("*").alias("rows"), F.max("value").alias("max_value")]
    if digest:
        aggregates.append(F.max(F.sha2(F.col("value").cast("string"), 256)).alias("digest"))
    counts = (rate(spark, rows_per_second, rows_per_batch)
              .groupBy((F.col("value") % keys).alias("key")).agg(*aggregates))
    writer = counts.writeStream.format(sink).option("checkpointLocation", checkpoint)
    if sink == "memory":
        writer = writer.outputMode("complete").queryName(name)
    else:
        writer = writer.outputMode("update")
    return writer.trigger(processingTime=trigger).start()


def file_sink(spark, checkpoint: str, output: str, rows_per_second: int = 50,
              compact_interval: int = 10, trigger: str = TRIGGER, rows_per_batch: int | None = None):
    """rate -> parquet file sink on ``output``, with its ``_spark_metadata`` log."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(compact_interval))
    rows = rate(spark, rows_per_second, rows_per_batch)
    return (rows.select("value").writeStream.format("parquet")
            .option("checkpointLocation", checkpoint).option("path", output)
            .trigger(processingTime=trigger).start())


def seed_text_files(s3, bucket: str, prefix: str, files: int, lines: int = 1000) -> None:
    """Put ``files`` text objects of ``lines`` lines each under ``prefix`` (boto3 client ``s3``),
    the input ``file_source`` reads one per batch."""
    for i in range(files):
        body = "".join(f"{i * lines + j}\n" for j in range(lines)).encode()
        s3.put_object(Bucket=bucket, Key=f"{prefix}/part-{i:06d}.txt", Body=body)


def file_source(spark, checkpoint: str, source: str, output: str, compact_interval: int = 10,
                trigger: str = TRIGGER):
    """Text files under ``source``, one new file per batch -> parquet file sink on ``output``.

    Two compacted logs grow side by side: the source's ``sources/0`` in the checkpoint and
    the sink's ``_spark_metadata``, both compacting every ``compact_interval`` batches.
    Batches stop when the files run out, so seed at least as many as the batches awaited.
    """
    spark.conf.set("spark.sql.streaming.fileSource.log.compactInterval", str(compact_interval))
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(compact_interval))
    lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(source)
    return (lines.writeStream.format("parquet")
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
