"""What the strategies do when the store misbehaves, made to misbehave by the metering proxy.

- ``direct`` without abort closes and deletes on cancel; if the delete never succeeds it
  fails loudly after its configured attempts instead of leaving the file visible.
- ``conditional`` refuses to start against a store that ignores ``If-None-Match: *``.
"""

from __future__ import annotations

import uuid

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from conftest import CheckpointFiles
from infra.faults import Fault
from infra.metered import MeteredStore


@pytest.fixture
def metered(spark, store):
    """``store`` behind a fresh metering proxy, on a bucket of its own that the session can reach."""
    bucket = f"ckptbench-{store.name}-faults-{uuid.uuid4().hex[:6]}"
    store.create_bucket(bucket)
    with MeteredStore(store) as m:
        ckpt_impls.attach(spark, m, bucket)
        yield m, bucket


def test_direct_cancel_without_abort_closes_then_deletes(spark, metered):
    store, bucket = metered
    files = CheckpointFiles(spark, "direct", store, "ck", bucket, {"ckptbench.direct.cancel.abort": "false"})
    mark = store.proxy.mark()
    files.create("offsets/0", False, b"partial").cancel()
    ops = [e.op for e in store.proxy.events_since(mark) if e.key == "ck/offsets/0"]
    assert "PUT" in ops and ops.index("DELETE") > ops.index("PUT"), ops
    assert store.inner.list_keys(bucket, "ck/offsets/0") == []


def test_direct_cancel_fails_loudly_when_the_delete_never_succeeds(spark, metered):
    store, bucket = metered
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


def test_conditional_refuses_a_store_that_ignores_if_none_match(spark, metered):
    store, bucket = metered
    store.proxy.inject(Fault("PUT", drop_header="If-None-Match"))
    with pytest.raises(Py4JJavaError) as raised:
        CheckpointFiles(spark, "conditional", store, "ck", bucket)
    assert "ignores 'If-None-Match: *'" in str(raised.value)
    store.proxy.clear_faults()
    CheckpointFiles(spark, "conditional", store, "ck", bucket)  # an honest store: it starts
