"""Shared fixtures: every store that can start here, and one SparkSession that reaches them all.

A SparkSession takes 6-12 s to start, so the whole run shares one; tests switch strategy on it
with ``ckpt_impls.use``. Under CI (CI=true, root, Debian) Ceph must run: its absence fails the
run instead of skipping it.
"""

from __future__ import annotations

import os
import uuid

import pytest

import ckpt_impls
import infra
from ckptbench.spark import session

TEST_STORES = ("embedded", "ceph", "minio")
#: (strategy, store, test) -> temp objects left under the checkpoint, filled by the streaming tests.
LEFTOVERS = pytest.StashKey[dict]()


def bucket_of(store) -> str:
    return f"ckptbench-{store.name}"


class Lab:
    def __init__(self) -> None:
        self.stores: dict[str, infra.ObjectStore] = {}
        self.reasons: dict[str, str] = {}
        for name in TEST_STORES:
            cls = infra.STORES[name]
            reason = cls.unavailable_reason()
            if reason is None:
                try:
                    store = cls().start()
                    store.create_bucket(bucket_of(store))
                    self.stores[name] = store
                    continue
                except infra.StoreUnavailable as e:
                    reason = str(e)
            self.reasons[name] = reason

    def get(self, name: str) -> infra.ObjectStore:
        if name not in self.stores:
            if name == "ceph" and os.environ.get("CI"):
                pytest.fail(f"Ceph RGW must run in CI but cannot: {self.reasons[name]}")
            pytest.skip(self.reasons[name])
        return self.stores[name]

    def stop(self) -> None:
        for store in self.stores.values():
            store.stop()


@pytest.fixture(scope="session")
def lab():
    lab = Lab()
    yield lab
    lab.stop()


@pytest.fixture(scope="session")
def spark(lab):
    spark = session("rename", {bucket_of(s): s for s in lab.stores.values()})
    yield spark
    spark.stop()


@pytest.fixture(params=TEST_STORES)
def store(request, lab):
    return lab.get(request.param)


@pytest.fixture(params=list(ckpt_impls.STRATEGIES))
def strategy(request) -> str:
    return request.param


@pytest.fixture
def prefix(strategy) -> str:
    """A fresh key prefix per test, so tests never see each other's objects."""
    return f"{strategy}-{uuid.uuid4().hex[:8]}"


def pytest_terminal_summary(terminalreporter, config):
    """What each strategy left under its checkpoints (temp objects), as the streaming tests found."""
    leftovers = config.stash.get(LEFTOVERS, {})
    if leftovers:
        terminalreporter.section("temp objects left under the checkpoint")
        for (strategy, store, test), count in sorted(leftovers.items()):
            terminalreporter.write_line(f"{strategy:<12} {store:<9} {test:<45} {count}")
