"""End to end: real streaming queries checkpointing through each strategy to the benchmarks' default
store, and through Spark's default to every store (``strategies_on_the_default_store``).

A stateful query and a parquet file sink, checkpoint and output on ``s3a://``: at least
10 batches, stop, restart; the query resumes at the next batch, its state survives, and
the sink's output read back through Spark holds every input row exactly once.
What each strategy leaves under the checkpoint is recorded with boto3.
"""

from __future__ import annotations

import pytest

import ckpt_impls
from ckptbench.harness import workloads
from helpers import LEFTOVERS, CheckpointFiles, bucket_of

BATCHES = 10

pytestmark = pytest.mark.strategies_on_the_default_store


def committed_batches(spark, strategy: str, store, checkpoint_key: str) -> list[int]:
    """The batch ids in commits/, read through the strategy's own manager."""
    files = CheckpointFiles(spark, strategy, store, checkpoint_key)
    return sorted(int(name) for name in files.names("commits", "[0-9]*"))


def run_and_restart(spark, start_query, strategy: str, store, checkpoint_key: str) -> None:
    """Run ``BATCHES`` batches, stop, restart for 2 more: the restarted query's first batch is the
    one after the last committed, by the commits log as it stood at the restart.

    No read shows it exactly: ``stop()`` can interrupt a commit file's PUT that the store still
    completes after a read right after the stop (commits/ may list up to N after the stop, the
    restart resume at N + 2, and commits/N+1 be there by then). So the batch before the first
    resumed one must be committed when the test ends, and must be the last one committed after the
    stop or the one after it."""
    query = start_query()
    try:
        workloads.await_batches(query, BATCHES)
    finally:
        query.stop()
    after_stop = committed_batches(spark, strategy, store, checkpoint_key)
    query = start_query()
    try:
        first_after_restart = workloads.await_batches(query, 2)[0]["batchId"]
    finally:
        query.stop()
    assert first_after_restart - 1 in committed_batches(spark, strategy, store, checkpoint_key), \
        f"resumed at {first_after_restart}, but batch {first_after_restart - 1} was never committed"
    assert first_after_restart - 1 in (after_stop[-1], after_stop[-1] + 1), (after_stop[-1], first_after_restart)


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

    run_and_restart(spark, start, strategy, store, key)
    # State restored: the counts cover every row from 0 up to the largest value seen.
    total = spark.table(table).agg({"rows": "sum", "max_value": "max"}).first()
    assert total[0] == total[1] + 1
    record_leftovers(request, store, bucket, key, strategy)


@pytest.mark.parametrize("strategy", ["rename"], indirect=True)
@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_a_restart_that_runs_a_committed_batch_again_is_caught(spark, strategy, store, prefix):
    """``run_and_restart``'s check on a checkpoint broken between the stop and the restart: its last
    commit file deleted, so the restarted query runs that batch again."""
    ckpt_impls.use(spark, strategy)
    bucket, key = bucket_of(store), f"{prefix}/stateful/checkpoint"
    started = []

    def start():
        if started:  # the restart, after the test's read of the commits log
            last = committed_batches(spark, strategy, store, key)[-1]
            store.client().delete_object(Bucket=bucket, Key=f"{key}/commits/{last}")
        started.append(True)
        return workloads.stateful(spark, f"s3a://{bucket}/{key}")

    with pytest.raises(AssertionError) as caught:
        run_and_restart(spark, start, strategy, store, key)
    assert "never committed" not in str(caught.value)  # the batch ran again: the second check


def test_file_sink_output_is_exactly_once(request, spark, strategy, store, prefix):
    ckpt_impls.use(spark, strategy)
    bucket = bucket_of(store)
    key, output = f"{prefix}/filesink/checkpoint", f"s3a://{bucket}/{prefix}/filesink/output"

    def start():
        return workloads.file_sink(spark, f"s3a://{bucket}/{key}", output, compact_interval=5)

    run_and_restart(spark, start, strategy, store, key)
    stats = spark.read.parquet(output).selectExpr(
        "count(*) AS n", "count(DISTINCT value) AS distinct_n", "min(value) AS lo", "max(value) AS hi").first()
    assert stats.n > 0
    assert stats.n == stats.distinct_n, "some rows were written twice"
    assert (stats.lo, stats.hi + 1) == (0, stats.n), "some rows are missing"
    record_leftovers(request, store, bucket, key, strategy)
