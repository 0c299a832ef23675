"""What the strategies do when the store misbehaves, made to misbehave by the metering proxy.

- ``direct`` without abort closes and deletes on cancel; if the delete never succeeds it
  fails loudly after its configured attempts instead of leaving the file visible.
- ``conditional`` refuses to start against a store that ignores ``If-None-Match: *``.
- ``Rendezvous`` holds the first write of a key until a second write of that key comes, over
  real HTTP through a proxy in its child process (so the rule crossed a pickle).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from py4j.protocol import Py4JJavaError

from ckpt_impls import jars
from helpers import CheckpointFiles, bucket_of, fresh_bucket_behind_proxy
from infra.faults import Fault, Rendezvous
from infra.metered import MeteredStore


@pytest.fixture
def fresh_metered(spark, store):
    """``store`` behind a fresh metering proxy, on a bucket of its own that the session can reach."""
    with fresh_bucket_behind_proxy(spark, store, "faults") as (m, bucket):
        yield m, bucket


def test_direct_cancel_without_abort_closes_then_deletes(spark, fresh_metered):
    store, bucket = fresh_metered
    files = CheckpointFiles(spark, "direct", store, "ck", bucket, {"ckptbench.direct.cancel.abort": "false"})
    mark = store.proxy.mark()
    files.create("offsets/0", False, b"partial").cancel()
    ops = [e.op for e in store.proxy.events_since(mark) if e.key == "ck/offsets/0"]
    assert "PUT" in ops and ops.index("DELETE") > ops.index("PUT"), ops
    assert store.inner.list_keys(bucket, "ck/offsets/0") == []


def test_direct_cancel_fails_loudly_when_the_delete_never_succeeds(spark, fresh_metered):
    store, bucket = fresh_metered
    files = CheckpointFiles(spark, "direct", store, "ck", bucket, {
        "ckptbench.direct.cancel.abort": "false",
        "ckptbench.direct.cancel.delete.attempts": 3,
        "ckptbench.direct.cancel.delete.initialDelayMs": 10,
    })
    out = files.create("offsets/0", False, b"partial")
    store.proxy.inject(Fault("DELETE", status=403))
    store.proxy.inject(Fault("BULK_DELETE", status=403))
    mark = store.proxy.mark()
    with pytest.raises(Py4JJavaError) as raised:
        out.cancel()
    message = str(raised.value.java_exception.getMessage())
    assert "Failed to delete cancelled checkpoint file" in message and "after 3 attempts" in message
    deletes = [e for e in store.proxy.events_since(mark) if e.op == "DELETE" and e.key == "ck/offsets/0"]
    assert len(deletes) >= 3


def test_conditional_refuses_a_store_that_ignores_if_none_match(spark, fresh_metered):
    store, bucket = fresh_metered
    if store.inner.name != "embedded" and jars.aws_sdk() == "v2":
        # SDK v2's SigV4 signs If-None-Match: dropped on the way, the store refuses the signature
        # (403) rather than ignoring the header; moto checks no signature, so it stands in.
        pytest.skip("a store that checks signatures cannot be made to ignore a signed header")
    store.proxy.inject(Fault("PUT", drop_header="If-None-Match"))
    with pytest.raises(Py4JJavaError) as raised:
        CheckpointFiles(spark, "conditional", store, "ck", bucket)
    assert "ignores 'If-None-Match: *'" in str(raised.value)
    store.proxy.clear_faults()
    CheckpointFiles(spark, "conditional", store, "ck", bucket)  # an honest store: it starts


@pytest.fixture
def proxied(suite_stores):
    """The embedded store (moto server) behind a metering proxy of its own, and its bucket."""
    store = suite_stores.get("embedded")
    with MeteredStore(store) as m:
        yield m, bucket_of(store)


def _timed_put(client, bucket: str, key: str, body: bytes, done: dict) -> threading.Thread:
    def put():
        client.put_object(Bucket=bucket, Key=key, Body=body)
        done[body] = time.monotonic()

    thread = threading.Thread(target=put)
    thread.start()
    return thread


def test_a_rendezvous_holds_the_first_write_until_the_second_comes(proxied):
    store, bucket = proxied
    prefix = f"rv-{uuid.uuid4().hex[:8]}"
    store.proxy.inject(Rendezvous(rf"{prefix}/offsets/[0-9]+", timeout_s=30))
    first, second = store.client(), store.client()
    done: dict[bytes, float] = {}
    thread = _timed_put(first, bucket, f"{prefix}/offsets/0", b"first", done)
    time.sleep(1.5)
    # Not matched (a rename's temp file) or another key: not held.
    first.put_object(Bucket=bucket, Key=f"{prefix}/offsets/.0.3f2a.tmp", Body=b"temp")
    assert done == {}, "the first write went on without its pair"
    arrived = time.monotonic()
    _timed_put(second, bucket, f"{prefix}/offsets/0", b"second", done).join(30)
    thread.join(30)
    assert set(done) == {b"first", b"second"} and done[b"first"] >= arrived
    assert done[b"first"] - arrived < 10  # released by the second, not by the timeout
    faults = [(i.key, i.fault) for i in store.proxy.injections() if i.key.startswith(prefix)]
    assert faults == [(f"{prefix}/offsets/0", "rendezvous")]
    # The key met once: a third write passes unheld.
    began = time.monotonic()
    first.put_object(Bucket=bucket, Key=f"{prefix}/offsets/0", Body=b"third")
    assert time.monotonic() - began < 5


def test_a_lone_write_goes_on_after_the_timeout_and_other_keys_never_pair(proxied):
    store, bucket = proxied
    prefix = f"rv-{uuid.uuid4().hex[:8]}"
    store.proxy.inject(Rendezvous(rf"{prefix}/commits/[0-9]+", timeout_s=2))
    began, done = time.monotonic(), {}
    threads = [_timed_put(store.client(), bucket, f"{prefix}/commits/{n}", str(n).encode(), done) for n in (0, 1)]
    for thread in threads:
        thread.join(30)
    assert all(done[str(n).encode()] - began >= 2 for n in (0, 1)), "a write went on before the timeout"
    faults = sorted((i.key, i.fault) for i in store.proxy.injections() if i.key.startswith(prefix))
    assert faults == [(f"{prefix}/commits/0", "rendezvous-timeout"), (f"{prefix}/commits/1", "rendezvous-timeout")]
    assert sorted(store.inner.list_keys(bucket, prefix)) == [f"{prefix}/commits/0", f"{prefix}/commits/1"]


def test_a_released_rendezvous_sends_the_held_write_on_alone_and_holds_no_more(proxied):
    """Clearing the proxy's faults releases a rendezvous: the held write goes on at once, recorded
    ``rendezvous-released`` (not the ``rendezvous-timeout`` of a wait run out, nor a meeting)."""
    store, bucket = proxied
    prefix = f"rv-{uuid.uuid4().hex[:8]}"
    store.proxy.inject(Rendezvous(rf"{prefix}/offsets/[0-9]+", timeout_s=600))
    done: dict[bytes, float] = {}
    client = store.client()
    thread = _timed_put(client, bucket, f"{prefix}/offsets/0", b"alone", done)
    thread.join(3)
    assert done == {}, "the write went on before its pair or the release"
    store.proxy.clear_faults()
    thread.join(120)
    assert b"alone" in done
    faults = [(i.key, i.fault) for i in store.proxy.injections() if i.key.startswith(prefix)]
    assert faults == [(f"{prefix}/offsets/0", "rendezvous-released")]
    assert client.get_object(Bucket=bucket, Key=f"{prefix}/offsets/0")["Body"].read() == b"alone"


def test_a_rendezvous_takes_only_writes():
    with pytest.raises(ValueError, match="ops must be writes"):
        Rendezvous("k", 1, ops=("PUT", "GET"))
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        Rendezvous("k", 0)
