"""The store on its own, as ``make bench`` records it, against real servers: COPY against size measured
and projected to AWS S3 (the metering proxy's ``aws-projection`` profile), and the store probe, recorded
through the results model and read back as the report and the recommendation read them."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

import ckpt_impls
from ckptbench import config, metrics
from ckptbench.experiments import store_alone
from ckptbench.record import disk, results, schema
from ckptbench.report import page
from infra.metered import MeteredStore

KiB, MiB = 1024, 1024 * 1024
PLAN = dataclasses.replace(config.PLANS["smallest"], copy_sizes=(KiB, MiB), copy_samples=2)


@pytest.fixture(params=["embedded", "ceph"])
def proxied(suite_stores, request):
    """``(store behind a metering proxy of its own, a fresh bucket)``."""
    store = suite_stores.get(request.param)
    bucket = f"alone-{store.name}-{uuid.uuid4().hex[:8]}"
    store.create_bucket(bucket)
    with MeteredStore(store) as metered:
        yield metered, bucket
    store.empty_bucket(bucket)
    store.client().delete_bucket(Bucket=bucket)


def test_copy_is_projected_only_in_its_own_part_and_the_probe_is_recorded(proxied, tmp_path):
    store, bucket = proxied
    recorder = results.Recorder()
    store.proxy.reset()
    store_alone.record_store_alone(recorder, store, bucket, PLAN, parts=("copy",))
    assert store.proxy.injections() == []  # measured: nothing held
    said = store_alone.record_store_alone(recorder, store, bucket, PLAN, parts=("projected copy", "probe"))
    held = [i for i in store.proxy.injections() if i.fault == "copy-throughput"]
    assert {i.op for i in held} == {"COPY"} and len(held) == PLAN.copy_samples * len(PLAN.copy_sizes)
    assert store.proxy.fault_profile == "none"  # the store's own profile again
    assert said["probe"]["cleanup"] == "removed" and said["probe"]["prefix"].startswith("ckptbench-probe/")

    record = disk.read(disk.write(recorder.results({"schema_version": schema.SCHEMA_VERSION, "store": store.name,
                                                       "experiment": "store", **said}), tmp_path / "store"))
    assert metrics.copy_sizes(record) == metrics.copy_sizes(record, metrics.PROJECTED_COPY) == [KiB, MiB]
    # The profile holds a COPY of 1 MiB to 8 MB/s at least: a floor it sets, not a speed.
    assert metrics.copy_percentile(record, "COPY", MiB, 0, metrics.PROJECTED_COPY) >= MiB / 8e6 * 1000
    assert list(record.capabilities.capability) == list(ckpt_impls.CAPABILITIES)
    failed = record.capabilities[~record.capabilities.ok].set_index("capability").detail.to_dict()
    if failed and store.racy_conditional_put:
        # moto's race, when the probe's 20 races catch it (a few runs in 100), and nothing else: the
        # strategies that need exclusive creates are then refused for this store, the others not.
        assert list(failed) == ["exclusive_create"] and "both writers won" in failed["exclusive_create"], failed
        needs = {name for name, s in ckpt_impls.STRATEGIES.items()
                 if "exclusive_create" in {n.capability for n in s.requires}}
        assert {name for name, why in page.runnable(record).items() if why} == needs \
            == {"conditional", "s3a-conditional", "manifest"}
    else:
        assert not failed, record.capabilities
        assert page.runnable(record) == dict.fromkeys(ckpt_impls.STRATEGIES)
