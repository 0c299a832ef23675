"""The metering proxy's counts for a micro-batch match what each strategy's own logic implies.

A stateful query checkpoints through each strategy to each store behind a metering proxy (the
suite's ``measure.observe``); in each measured batch, the requests on the checkpoint files
(offsets/, commits/ and the state store's files) say how each file was made visible:

- ``rename``: every file is a PUT of a temp object, a COPY of it onto the file's key and a
  DELETE of the temp: one COPY per PUT.
- ``direct`` and ``conditional``: a PUT straight to the file's key; no COPY anywhere.
- ``manifest``: offsets and commits are never stored under their own keys: PUTs go under the
  directory's ``_manifest/``; no COPY anywhere.
"""

from __future__ import annotations

import pytest

import ckpt_impls
from ckptbench import measure, metrics, workloads
from conftest import TEMP_FILE, bucket_of
from infra.metered import MeteredStore

WARMUP, BATCHES = 1, 3
FILE_AREAS = ("offsets", "commits", "state")


@pytest.fixture(scope="module")
def metered(spark):
    """``get(store)``: the store behind a metering proxy, on a bucket of its own that the
    session reaches through the proxy."""
    started: dict[str, tuple[MeteredStore, str]] = {}

    def get(store) -> tuple[MeteredStore, str]:
        if store.name not in started:
            bucket = f"{bucket_of(store)}-metered"
            store.create_bucket(bucket)
            proxied = MeteredStore(store).start()
            ckpt_impls.attach(spark, proxied, bucket)
            started[store.name] = proxied, bucket
        return started[store.name]

    yield get
    for proxied, _ in started.values():
        proxied.stop()


def batch_requests(spark, metered, strategy, store, prefix) -> tuple[str, list[tuple[int, list]]]:
    """The checkpoint's key and, for each measured batch, its id and its requests."""
    proxied, bucket = metered(store)
    checkpoint = f"{prefix}/checkpoint"
    run = measure.observe(spark, proxied, strategy, prefix + "/",
                          lambda: workloads.stateful(spark, f"s3a://{bucket}/{checkpoint}"), BATCHES, WARMUP)
    per_batch, _ = metrics.events_by_batch(run.events, run.measured)
    return checkpoint, [(p["batchId"], events) for p, events in zip(run.measured, per_batch)]


def test_requests_per_batch_follow_the_strategy(spark, metered, strategy, store, prefix):
    checkpoint, batches = batch_requests(spark, metered, strategy, store, prefix)
    assert len(batches) == BATCHES
    for batch, events in batches:
        ok = [e for e in events if 200 <= e.status < 300]
        puts = [e.key for e in ok if e.op == "PUT" and e.area in FILE_AREAS]
        copies = [e.key for e in ok if e.op == "COPY"]
        logs = {f"{checkpoint}/offsets/{batch}", f"{checkpoint}/commits/{batch}"}
        seen = f"batch {batch}: PUT {puts}, COPY {copies}"
        if strategy == "rename":
            assert puts and all(TEMP_FILE.search(k) for k in puts), seen
            assert len(copies) == len(puts) and logs <= set(copies), seen
            assert not any(TEMP_FILE.search(k) for k in copies), seen
            deleted = {e.key for e in ok if e.op == "DELETE"}
            assert set(puts) <= deleted, f"{seen}, DELETE {sorted(deleted)}"
        elif strategy == "manifest":
            assert not copies, seen
            log_puts = [e.key for e in ok if e.op == "PUT" and e.area in ("offsets", "commits")]
            assert log_puts and all("/_manifest/" in k for k in log_puts), seen
        else:
            assert not copies, seen
            assert logs <= set(puts), seen
            assert not any(TEMP_FILE.search(k) for k in puts), seen
