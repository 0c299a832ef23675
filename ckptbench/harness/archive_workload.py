"""What the driver JVM that makes the drivers' class archive runs (``harness.jvm_archive.make``
starts ``python -m ckptbench.harness.archive_workload`` with the JVM option that writes it)."""

from __future__ import annotations


def main() -> None:
    """What the driver JVM that makes the archive runs: a session on the embedded store, a stateful
    query's batches checkpointed through S3A, a Parquet write there; the classes these load are the
    ones archived."""
    from ckptbench.harness.spark import session
    from infra.embedded import EmbeddedStore

    with EmbeddedStore() as store:
        store.create_bucket("archive")
        spark = session("rename", {"archive": store})
        rows = spark.readStream.format("rate").option("rowsPerSecond", 100).load()
        query = (rows.groupBy((rows.value % 10).alias("key")).count().writeStream.outputMode("update")
                 .format("noop").option("checkpointLocation", "s3a://archive/checkpoint")
                 .trigger(processingTime="1 second").start())
        while len(query.recentProgress) < 3:
            query.awaitTermination(0.5)
        query.stop()
        spark.range(100).write.parquet("s3a://archive/table")
        spark.stop()


if __name__ == "__main__":
    main()
