"""PySpark Structured Streaming workloads whose checkpoints go to ``s3a://``.

Each builder returns a started ``StreamingQuery``; ``await_batches`` drives it for a
fixed number of micro-batches. Shared by the tests, the benchmarks and the CLI.
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ckptbench.config import RECENT_PROGRESS, ROWS_PER_BATCH, Shape

TRIGGER = "100 milliseconds"
TRIGGER_S = 0.1


def rate(spark, rows_per_second: int = 50, rows_per_batch: int | None = None, start_timestamp: int | None = None):
    """Spark's rate source: ``rows_per_second`` of wall-clock time, or, given ``rows_per_batch``,
    exactly that many rows in every micro-batch (``rate-micro-batch``), so each batch does the
    same work however long the one before it took. ``rate-micro-batch`` is replayable: batch N
    holds the values ``N * rows_per_batch`` to ``(N + 1) * rows_per_batch - 1``, with timestamps
    from ``start_timestamp`` (epoch ms), so a re-run batch has the same rows."""
    if rows_per_batch:
        reader = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
        if start_timestamp is not None:
            reader = reader.option("startTimestamp", start_timestamp)
        return reader.load()
    return spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()


def stateful(spark, checkpoint: str, keys: int = 5, rows_per_second: int = 50,
             sink: str = "noop", name: str | None = None, trigger: str = TRIGGER,
             rows_per_batch: int | None = None, digest: bool = False, operators: int = 1):
    """rate -> groupBy(value % keys) count/max: state store files grow with ``keys``.

    ``operators=2`` puts a ``dropDuplicates`` on the same key before the aggregation: a second
    stateful operator, with a state store of its own (every partition writes two files per batch),
    its state bounded by ``keys`` too.

    ``sink="memory"`` keeps the complete result in the driver as table ``name``.
    ``digest=True`` adds a 64-character hash to each key's state, so a state file holds
    ~35 bytes per key after LZ4 instead of ~5: tens of megabytes take 10^5 keys, not 10^6.
    """
    aggregates = [F.count("*").alias("rows"), F.max("value").alias("max_value")]
    if digest:
        aggregates.append(F.max(F.sha2(F.col("value").cast("string"), 256)).alias("digest"))
    if operators not in (1, 2):
        raise ValueError(f"operators must be 1 or 2, not {operators}")
    rows = rate(spark, rows_per_second, rows_per_batch).withColumn("key", F.col("value") % keys)
    if operators == 2:
        rows = rows.dropDuplicates(["key"])
    counts = rows.groupBy("key").agg(*aggregates)
    writer = counts.writeStream.format(sink).option("checkpointLocation", checkpoint)
    if sink == "memory":
        writer = writer.outputMode("complete").queryName(name)
    else:
        writer = writer.outputMode("update")
    return writer.trigger(processingTime=trigger).start()


def windowed(spark, checkpoint: str, keys: int, rows_per_batch: int, trigger: str = TRIGGER):
    """rate -> 10-second event-time windows per ``value % keys``, with a 10-second watermark ->
    noop sink, append mode: each batch advances event time by a second (``rate-micro-batch``), so
    the state holds about two windows of ``keys`` keys and drops one window every ten batches."""
    rows = rate(spark, rows_per_batch=rows_per_batch, start_timestamp=0).withWatermark("timestamp", "10 seconds")
    counts = rows.groupBy(F.window("timestamp", "10 seconds"), (F.col("value") % keys).alias("key")).count()
    return (counts.writeStream.format("noop").outputMode("append").option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger).start())


class _Discard:
    """The foreach sink's writer: takes every row and keeps none (``described``'s ``foreach``)."""

    def open(self, partition_id, epoch_id):
        return True

    def process(self, row):
        pass

    def close(self, error):
        pass


def described(spark, checkpoint: str, output: str, shape: Shape, options: dict | None = None,
              trigger: str = TRIGGER):
    """The job ``shape`` describes, started with query ``options`` (a lever's). Stateless:
    ``ROWS_PER_BATCH`` rows a batch, passed through. Stateful: an aggregation over ``shape.keys``
    keys, every key updated every batch (``stateful``'s, update mode); to a file sink, which takes
    appends only, a ``dropDuplicates`` on the key instead (its state holds the keys, not their
    aggregates). The sink: ``noop``, ``foreach`` (a Python writer that keeps nothing) or ``file``
    (parquet under ``output``, with its ``_spark_metadata`` log)."""
    rows = rate(spark, rows_per_batch=shape.keys if shape.stateful else ROWS_PER_BATCH)
    mode = "append"
    if shape.stateful and shape.sink == "file":
        rows = rows.withColumn("key", F.col("value") % shape.keys).dropDuplicates(["key"])
    elif shape.stateful:
        keyed = rows.withColumn("key", F.col("value") % shape.keys)
        rows = keyed.groupBy("key").agg(F.count("*").alias("rows"),
                                        F.max(F.sha2(F.col("value").cast("string"), 256)).alias("digest"))
        mode = "update"
    writer = rows.writeStream.outputMode(mode).option("checkpointLocation", checkpoint).options(**(options or {}))
    if shape.sink == "foreach":
        writer = writer.foreach(_Discard())
    elif shape.sink == "file":
        writer = writer.format("parquet").option("path", output)
    else:
        writer = writer.format("noop")
    return writer.trigger(processingTime=trigger).start()


def file_sink(spark, checkpoint: str, output: str, rows_per_second: int = 50,
              compact_interval: int = 10, trigger: str = TRIGGER, rows_per_batch: int | None = None):
    """rate -> parquet file sink on ``output``, with its ``_spark_metadata`` log."""
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(compact_interval))
    rows = rate(spark, rows_per_second, rows_per_batch)
    return (rows.select("value").writeStream.format("parquet")
            .option("checkpointLocation", checkpoint).option("path", output)
            .trigger(processingTime=trigger).start())


def replayable(spark, rows_per_batch: int, repeat_previous: bool = False, start_timestamp: int = 0):
    """A replayable ``value`` column (``rate-micro-batch``), the input of the crash lab's workloads.

    Batch N's values are ``N * rows_per_batch`` to ``(N + 1) * rows_per_batch - 1``. With
    ``repeat_previous`` (``rows_per_batch`` even, h = half of it), batch N's first half is h new
    values ``N * h`` to ``(N + 1) * h - 1`` and its second half repeats batch N-1's new values
    (batch 0's: ``-h`` to ``-1``, also new): a deduplication whose state was lost would emit them
    again. ``ckptbench.experiments.crashlab`` knows which batch each output value belongs to.
    """
    rows = rate(spark, rows_per_batch=rows_per_batch, start_timestamp=start_timestamp)
    if not repeat_previous:
        return rows.select("value")
    if rows_per_batch % 2:
        raise ValueError(f"repeat_previous needs an even rows_per_batch, not {rows_per_batch}")
    half = rows_per_batch // 2
    batch, index = F.floor(F.col("value") / rows_per_batch), F.col("value") % rows_per_batch
    key = F.when(index < half, batch * half + index).otherwise((batch - 1) * half + index - half)
    return rows.select(key.cast("long").alias("value"))


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


#: How many progress updates Spark keeps per query (``StreamingQuery.recentProgress``).


def await_batches(query, batches: int, timeout: float = 300, on_batch=None, poll: float = 0.1) -> list[dict]:
    """Wait until ``query`` has reported ``batches`` more progress events; return them.

    ``on_batch(n)`` is told of each ``n`` new batches (for a progress bar). Raises
    ``QueryFailed`` with Spark's own error if the query dies, or on timeout.

    Every ``poll`` seconds it asks for the last progress only (a few py4j calls). The whole list
    (``recentProgress``: a py4j call per batch Spark keeps) is read at the start, at the end, and
    when half of what Spark keeps (``RECENT_PROGRESS``) is new: read at every poll, its cost would
    grow with the batches and land on the driver while the batches it times run (on 2 cores).
    """
    session = SparkSession.getActiveSession()
    kept = int(session.conf.get(RECENT_PROGRESS, "100")) if session else 100
    deadline = time.monotonic() + timeout
    new: dict[int, dict] = {}
    # Batch ids grow: those after the newest already reported are this call's.
    read_at = start = max((p["batchId"] for p in query.recentProgress), default=-1)
    counted = 0
    while True:
        if query.exception() is not None:
            raise QueryFailed(str(query.exception()).splitlines()[0])
        last = query.lastProgress
        newest = last["batchId"] if last else start
        if newest - start >= batches or newest - read_at >= kept // 2:
            for progress in query.recentProgress:
                if progress["batchId"] > start:
                    new.setdefault(progress["batchId"], progress)
            read_at = newest
        ended = min(max(newest - start, len(new)), batches)
        if on_batch and ended > counted:
            on_batch(ended - counted)
            counted = ended
        if len(new) >= batches:
            return [new[b] for b in sorted(new)][:batches]
        if time.monotonic() > deadline:
            raise QueryFailed(f"only {max(newest - start, len(new))} of {batches} batches within {timeout:.0f}s")
        time.sleep(poll)
