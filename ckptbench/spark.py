"""Start a SparkSession wired to a checkpoint strategy and one or more stores."""

from __future__ import annotations

import ckpt_impls

# Spark settings that keep a 2-core machine measuring checkpoints rather than scheduling:
# two shuffle partitions (so a stateful batch writes two state files), no UI.
BASE_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}


def session(strategy: str, stores: dict, master: str = "local[2]", conf: dict | None = None):
    """A SparkSession using ``strategy``, reaching each ``{bucket: store}`` through S3A.

    S3A settings are per bucket name, so each store needs buckets of its own.
    ``conf`` adds or overrides Spark settings (e.g. for a real ``--master``).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("ckptbench")
    for key, value in {**BASE_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    for bucket, store in stores.items():
        builder = ckpt_impls.configure(builder, strategy, store, bucket)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for bucket, store in stores.items():
        ckpt_impls.set_credentials(spark, store, bucket)
    return spark
