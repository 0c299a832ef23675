"""End to end: real streaming queries checkpointing through each strategy to each store.

A stateful query and a parquet file sink, checkpoint and output on ``s3a://``: at least
10 batches, stop, restart; the query resumes at the next batch, its state survives, and
the sink's output read back through Spark holds every input row exactly once.
What each strategy leaves under the checkpoint is recorded with boto3.
"""

from __future__ import annotations

import ckpt_impls
from ckptbench import workloads
from conftest import LEFTOVERS, CheckpointFiles, bucket_of

BATCHES = 10


def committed_batches(spark, strategy: str, store, checkpoint_key: str) -> list[int]:
    """The batch ids in commits/, read through the strategy's own manager."""
    files = CheckpointFiles(spark, strategy, store, checkpoint_key)
    return sorted(int(name) for name in files.names("commits", "[0-9]*"))


def run_and_restart(spark, start_query, strategy: str, store, checkpoint_key: str) -> tuple[int, int]:
    """Run ``BATCHES`` batches, stop, restart for 2 more; return (last committed, first after restart)."""
    query = start_query()
    try:
        workloads.await_batches(query, BATCHES)
    finally:
        query.stop()
    last_committed = committed_batches(spark, strategy, store, checkpoint_key)[-1]
    query = start_query()
    try:
        resumed = workloads.await_batches(query, 2)
    finally:
        query.stop()
    return last_committed, resumed[0]["batchId"]


def record_leftovers(request, store, bucket: str, checkpoint_key: str, strategy: str) -> set[str]:
    temps = {k for k in store.list_keys(bucket, checkpoint_key + "/") if ckpt_impls.TEMP_FILE.search(k)}
    request.config.stash.setdefault(LEFTOVERS, {})[(strategy, store.name, request.node.originalname)] = len(temps)
    if not ckpt_impls.get(strategy).leaves_temp_files:
        assert not temps, f"{strategy} left temp objects: {sorted(temps)[:5]}"
    return temps


def test_stateful_query_resumes_with_its_state(request, spark, strategy, store, prefix):
    ckpt_impls.use(spark, strategy)
    bucket, key = bucket_of(store), f"{prefix}/stateful/checkpoint"
    table = f"counts_{prefix.replace('-', '_')}"

    def start():
        return workloads.stateful(spark, f"s3a://{bucket}/{key}", sink="memory", name=table)

    last_committed, first_after_restart = run_and_restart(spark, start, strategy, store, key)
    assert first_after_restart == last_committed + 1
    # State restored: the counts cover every row from 0 up to the largest value seen.
    total = spark.table(table).agg({"rows": "sum", "max_value": "max"}).first()
    assert total[0] == total[1] + 1
    record_leftovers(request, store, bucket, key, strategy)


def test_file_sink_output_is_exactly_once(request, spark, strategy, store, prefix):
    ckpt_impls.use(spark, strategy)
    bucket = bucket_of(store)
    key, output = f"{prefix}/filesink/checkpoint", f"s3a://{bucket}/{prefix}/filesink/output"

    def start():
        return workloads.file_sink(spark, f"s3a://{bucket}/{key}", output, compact_interval=5)

    last_committed, first_after_restart = run_and_restart(spark, start, strategy, store, key)
    assert first_after_restart == last_committed + 1
    stats = spark.read.parquet(output).selectExpr(
        "count(*) AS n", "count(DISTINCT value) AS distinct_n", "min(value) AS lo", "max(value) AS hi").first()
    assert stats.n > 0
    assert stats.n == stats.distinct_n, "some rows were written twice"
    assert (stats.lo, stats.hi + 1) == (0, stats.n), "some rows are missing"
    record_leftovers(request, store, bucket, key, strategy)
