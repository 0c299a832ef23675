"""The state store workloads: which of their requests the checkpoint strategy makes at all
(``infra.s3ops.through_manager``), checked against what a real run shows, and the checkpoint
settings each run records."""

from __future__ import annotations

import json
import uuid

import pytest

import ckpt_impls
from ckpt_impls import jars
from ckptbench import config, metrics
from ckptbench.harness import querylab
from ckptbench.harness.spark import settings_set
from ckptbench.record import results
from infra.s3ops import through_manager

STATE = "bench/p/checkpoint/state/0/1"


@pytest.mark.parametrize(("op", "key", "strategy_made_it"), [
    ("PUT", f"{STATE}/3.changelog", True),
    ("PUT", f"{STATE}/.3.changelog.0b1c.TID7.tmp", True),  # rename's temp file
    ("COPY", f"{STATE}/3.zip", True),
    ("PUT", f"{STATE}/3.delta.crc", True),
    ("GET", f"{STATE}/3.changelog", True),
    ("PUT", f"{STATE}/SSTs/000008-4e0c.sst", False),
    ("HEAD", f"{STATE}/SSTs/000008-4e0c.sst", False),
    ("LIST", f"{STATE}/SSTs/000008-4e0c.sst/", False),
    ("BULK_DELETE", f"{STATE}/SSTs/", False),  # S3A's parent-marker clean-up after an upload
    ("PUT", f"{STATE}/logs/000009-4e0c.log", False),
    ("GET", f"{STATE}/3.zip", False),  # RocksDB unzips with FileSystem.open
    ("PUT", "logs/job/checkpoint/state/0/1/3.delta", True),  # "logs" above the state directory
    ("PUT", "bench/p/output/part-00000.parquet", False),
    ("PUT", "bench/p/checkpoint/offsets/3", True),
])
def test_which_requests_the_strategy_makes(op, key, strategy_made_it):
    from infra.s3ops import area_of

    assert through_manager(op, area_of(key), key) is strategy_made_it


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["stateful_rocksdb", "stateful_rocksdb_changelog"])
def test_rename_shows_which_state_files_go_through_the_manager(spark, metered_stores, suite_stores, workload):
    """With ``rename``, every file the manager writes is a temp PUT then a COPY to its key; the
    FileSystem's uploads are PUT straight to theirs. The classification must agree with that for
    every state file the run wrote. Without changelog checkpointing each batch uploads SST files, so
    that run must show both kinds (one with no SST upload would check nothing); with it, SST files go
    up only when maintenance uploads a snapshot, which a short run may not reach, and which no
    batch's own requests count."""
    store, bucket = metered_stores(suite_stores.get("embedded"))
    recorder = results.Recorder()
    querylab.QueryLab(spark, store, bucket, config.PLANS["smallest"]).run(recorder, "rename", workload, 100, 1, 12)
    record = recorder.results({"plan": {"keys": [100]}})
    run = record.run("rename", workload, 100)
    settings = json.loads(run.info.settings)
    assert set(settings) == set(config.CHECKPOINT_SETTINGS) and settings[config.STATE_PROVIDER] == config.ROCKSDB
    has_checksums = tuple(map(int, jars.spark_version().split("."))) >= (4, 1)
    assert (settings[config.FILE_CHECKSUM] is None) is not has_checksums
    assert spark.conf.get(config.STATE_PROVIDER).endswith("HDFSBackedStateStoreProvider")  # restored after the run
    requests = record.requests[(record.requests.source == "proxy") & (record.requests.area == "state")]
    copied = set(requests[requests.op == "COPY"].key)
    put = {k for k in requests[requests.op == "PUT"].key if "/." not in k and not k.endswith("/")}  # not temps, markers
    written = copied | put
    assert copied, sorted(written)
    if workload == "stateful_rocksdb":  # SST files uploaded in each batch's commit, not in maintenance
        assert any("/SSTs/" in k for k in put), sorted(written)
        assert 0 < metrics.strategy_share(run) < 1
    else:  # uploaded with a snapshot's zip, on maintenance's schedule: never a batch's own
        # (record.attribution); a batch may still read an SST, where its store loads a version.
        uploads = ["PUT", "MPU_INIT", "MPU_PART", "MPU_COMPLETE"]
        assert metrics.requests_per_batch(run, ops=uploads, controlled=False) == 0, run.requests[
            ~metrics.strategy_controls(run.requests)][["batch_id", "op", "key"]].to_string()
    wrong = {k for k in written if through_manager("PUT", "state", k) != (k in copied)}
    assert not wrong, sorted(wrong)


def test_checksums_off_is_a_workload_only_where_spark_has_them():
    plan = config.PLANS["full"]
    assert "stateful_no_checksum" in config.workloads_for(plan, "4.3")
    assert "stateful_no_checksum" not in config.workloads_for(plan, "3.5")
    assert "stateful_rocksdb_changelog" in config.workloads_for(plan, "3.5")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [*ckpt_impls.STRATEGIES, ckpt_impls.FLOOR.name], indirect=True)
def test_rocksdb_state_is_reloaded_from_the_checkpoint_after_a_restart(spark, metered_stores, suite_stores, strategy):
    """A restarted query's tasks load their RocksDB state from the checkpoint (a new run is a new
    provider): ``<version>.zip``, which RocksDB unzips with ``FileSystem.open`` although it wrote
    it through the manager, and the SST files it names. Every strategy, and the benchmark's floor
    (whose RocksDB runs on Spark 3.5 failed on that read), must let them read it back, and the
    counts must go on from where they were. Without changelog checkpointing every batch writes a
    zip, so the reload must GET one (a run that reads none would check nothing)."""
    from ckptbench.harness import workloads

    store, bucket = metered_stores(suite_stores.get("embedded"))
    checkpoint = f"s3a://{bucket}/{strategy}-rocksdb-reload-{uuid.uuid4().hex[:8]}/checkpoint"
    table = f"rocksdb_reload_{strategy}".replace("-", "_")
    conf = config.WORKLOAD_CONF["stateful_rocksdb"]
    ckpt_impls.use(spark, strategy)

    def run(batches: int) -> list[dict]:
        with settings_set(spark, conf):
            query = workloads.stateful(spark, checkpoint, sink="memory", name=table)
        try:
            return workloads.await_batches(query, batches, 180)
        finally:
            query.stop()

    before = run(6)
    mark = store.proxy.mark()
    after = run(2)
    assert after[0]["batchId"] > before[-1]["batchId"]
    zips = [(e.key, e.status) for e in store.proxy.events_since(mark) if e.op == "GET" and e.key.endswith(".zip")]
    assert zips and all(200 <= status < 300 for _, status in zips), zips  # S3A reads in ranges: 206
    # State restored: the counts cover every row from 0 up to the largest value seen.
    total = spark.table(table).agg({"rows": "sum", "max_value": "max"}).first()
    assert total[0] == total[1] + 1
