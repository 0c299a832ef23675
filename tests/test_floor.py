"""The store's floor, both ways it is timed, against real servers through the metering proxy: boto3's
requests timed at the store (``store_alone.floor_samples``), and Spark's own S3 client in the driver JVM
(``store_alone.client_floor``), the floor a strategy's overhead is counted from. Each timed key's first
request comes after the store sat idle, as a checkpoint's PUT does; the warm-up keys' do not."""

from __future__ import annotations

import pytest

from ckptbench import config
from ckptbench.experiments import store_alone

PAUSE = 0.2  # well above any gap between unpaused keys, even on a loaded machine
WARMUP, SAMPLES = 3, 4


def idle_before_each_key(events) -> list[float]:
    """Seconds between each PUT's arrival and the end of the request before it (the first PUT left out)."""
    events = sorted(events, key=lambda e: e.start)
    return [e.start - max(p.end for p in events[:i]) for i, e in enumerate(events) if e.op == "PUT" and i]


@pytest.fixture
def proxied(metered):
    store, bucket = metered
    store.proxy.reset()
    return store, bucket


def test_sparks_own_client_makes_the_floors_requests_each_timed_key_after_a_pause(spark, proxied):
    store, bucket = proxied
    ms = store_alone.client_floor(spark, store, bucket, SAMPLES, WARMUP, pause=PAUSE)

    assert set(ms) == set(config.FLOOR_OPS)
    assert all(len(values) == SAMPLES and min(values) > 0 for values in ms.values()), ms
    events = store.proxy.events_since(0)
    # Through the proxy, each key's five requests and the untimed DELETE of its copy; nothing left.
    assert len(events) == 6 * (WARMUP + SAMPLES) and {e.status for e in events} <= {200, 204}, events
    assert all(e.key.startswith(f"{store.run_prefix}client-floor") for e in events if e.key)
    assert store.inner.list_keys(bucket, f"{store.run_prefix}client-floor") == []
    idle = idle_before_each_key(events)
    assert min(idle[WARMUP - 1:]) >= PAUSE and max(idle[:WARMUP - 1]) < PAUSE, idle
    # Timed in the JVM around each call: never under the store's own time for a request of its kind.
    for op in config.FLOOR_OPS:
        assert min(ms[op]) >= min(e.duration * 1000 for e in events if e.op == op), op


def test_botos_floor_times_each_key_after_a_pause(proxied):
    store, bucket = proxied
    route, ms = store_alone.floor_samples(store, bucket, SAMPLES, warmup=WARMUP, pause=PAUSE)

    assert route == "proxy" and all(len(values) == SAMPLES for values in ms.values()), ms
    idle = idle_before_each_key(store.proxy.events_since(0))
    assert len(idle) == WARMUP + SAMPLES - 1
    assert min(idle[WARMUP - 1:]) >= PAUSE and max(idle[:WARMUP - 1]) < PAUSE, idle
