"""The store taken away: the ``Outage`` rule seen by boto3 through the metering proxy in front of moto
and Ceph RGW (every request in its window reset, on old and new connections, none after it), Ceph's
gateway killed and started again on the same port with its objects, and the fault lab's outage
times on a fixed record. A real fault-lab run under an outage is in ``test_faultlab.py``.

Timing bounds are loose and one-sided (a window lasts at least its seconds); the assertions are on
what was reset, in which order, and what the store holds."""

from __future__ import annotations

import math
import re
import socket
import uuid

import botocore.exceptions
import pytest
import test_fault_profiles as fault_profiles

import infra
from helpers import ckptbench, one_error_line, skip_unless_ci
from infra.ceph import CephStore
from infra.faults import PROFILES, Injection, Outage
from infra.metered import MeteredStore

# The outage rule is one more of the proxy's fault rules: the same stores, bucket, client settings and
# proxy fixtures as theirs (module attributes, so that pytest finds the fixtures here too).
BUCKET, CUT, NO_RETRIES = fault_profiles.BUCKET, fault_profiles.CUT, fault_profiles.NO_RETRIES
profile_store, metered_store, proxy = fault_profiles.profile_store, fault_profiles.metered_store, fault_profiles.proxy


def _passes(call) -> bool:
    try:
        call()
        return True
    except CUT:
        return False


def test_outage_resets_every_request_in_its_window_then_lets_them_pass(profile_store, metered_store, proxy):
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    s3 = metered_store.client(retries=NO_RETRIES)
    seconds = 1.5
    proxy.inject(Outage(seconds, after=2))
    assert _passes(lambda: s3.head_bucket(Bucket=BUCKET)) and _passes(lambda: s3.head_bucket(Bucket=BUCKET))
    # The third request opens the window: it and a PUT on a new connection are reset.
    assert not _passes(lambda: s3.head_bucket(Bucket=BUCKET))
    fresh = metered_store.client(retries=NO_RETRIES)
    assert not _passes(lambda: fresh.put_object(Bucket=BUCKET, Key=f"{prefix}/in-window", Body=b"x"))
    while not _passes(lambda: s3.head_bucket(Bucket=BUCKET)):
        pass  # reset until the window closes
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/after", Body=b"y")
    assert _passes(lambda: fresh.head_bucket(Bucket=BUCKET))
    assert profile_store.list_keys(BUCKET, prefix + "/") == [f"{prefix}/after"]  # the store never saw the reset PUT

    statuses = [e.status for e in proxy.events()]
    resets = statuses.index(200, 2) - 2  # the run of resets after the first two requests
    assert statuses[:2] == [200, 200] and resets >= 2 and set(statuses[2:2 + resets]) == {0}
    assert set(statuses[2 + resets:]) == {200}
    injections = proxy.injections()
    assert [i.fault for i in injections] == ["outage"] * resets
    events = proxy.events()
    # At least its seconds, one-sided (slack: a head arrives a moment before its decision).
    assert events[2 + resets].start - events[2].start >= seconds - 0.25


def test_outage_refuses_a_window_without_length():
    with pytest.raises(ValueError, match="seconds > 0"):
        Outage(0)
    with pytest.raises(ValueError, match="after >= 0"):
        Outage(5, after=-1)


def test_outage_profiles_say_what_they_take_away():
    outages = {name: p.outage for name, p in PROFILES.items() if p.outage is not None}
    assert {"outage-5s", "outage-30s", "outage-150s", "gateway-restart"} <= set(outages)
    assert outages["outage-5s"].seconds == 5 and not outages["outage-5s"].restart
    [rule] = PROFILES["outage-30s"](0)
    assert isinstance(rule, Outage) and rule.seconds == 30 and rule.after == 0
    assert outages["gateway-restart"].restart and PROFILES["gateway-restart"](0) == []


def test_a_gateway_restart_is_the_fault_labs_alone(profile_store):
    """No proxy can restart a gateway: a whole run under gateway-restart is refused, in one line."""
    with pytest.raises(ValueError, match="only the fault lab"):
        MeteredStore(profile_store, "gateway-restart")
    line = one_error_line(ckptbench("measure", "--fault-profile", "gateway-restart"))
    assert "fault profile gateway-restart restarts the store's gateway" in line


# -- a gateway killed and started again (outages.RESTARTABLE) -----------------------------------------

@pytest.fixture(scope="module", params=[pytest.param("ceph", marks=pytest.mark.ceph), "seaweedfs"])
def restartable(request):
    """A store of ``outages.RESTARTABLE`` of its own (the shared one's gateway stays up); Ceph's
    keeps its objects on disk (bluestore)."""
    cls = infra.store_class(request.param)
    reason = cls.unavailable_reason()
    if reason is not None:
        skip_unless_ci(reason)
    with (CephStore("bluestore") if cls is CephStore else cls()) as store:
        yield store


def test_every_restartable_store_is_tested_here():
    from ckptbench.experiments import outages

    assert set(outages.RESTARTABLE) == {"ceph", "seaweedfs"}


def test_a_killed_gateway_comes_back_on_its_port_with_its_objects(restartable):
    store = restartable
    store.create_bucket(BUCKET)
    store.client().put_object(Bucket=BUCKET, Key="before", Body=b"kept")
    endpoint, port, running = store.endpoint, int(store.endpoint.rsplit(":", 1)[1]), len(store.processes)
    with MeteredStore(store) as metered:
        s3 = metered.client(retries=NO_RETRIES)
        store.kill_gateway()
        assert len(store.processes) == running - 1
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with pytest.raises(botocore.exceptions.ClientError) as raised:  # the proxy cannot reach it: 502
            s3.head_object(Bucket=BUCKET, Key="before")
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 502
        store.start_gateway()
        assert store.endpoint == endpoint and len(store.processes) == running
        # Through the same proxy, which reconnects, and directly: the object written before.
        assert s3.get_object(Bucket=BUCKET, Key="before")["Body"].read() == b"kept"
    assert store.client().get_object(Bucket=BUCKET, Key="before")["Body"].read() == b"kept"
    with pytest.raises(RuntimeError, match="was killed"):
        store.start_gateway()  # one gateway at a time


# -- the times a run records ----------------------------------------------------------------------

def _progress(batch: int, at: float, ms: float = 100.0) -> dict:
    from datetime import datetime, timezone
    stamp = datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"batchId": batch, "timestamp": stamp, "durationMs": {"triggerExecution": ms}}


def test_outage_times_from_the_rule_and_the_batches():
    from ckptbench.experiments import outages

    window = outages.Window(PROFILES["outage-5s"].outage)
    t0 = 1_800_000_000.0
    opened = [Injection(t0 + 0.5, "PUT", "b", "k", "outage"), Injection(t0 + 1.0, "GET", "b", "k", "outage"),
              Injection(t0 + 0.2, "PUT", "b", "k", "lost-response")]
    # Batches ending before the window's end (t0 + 5.5) do not count; the first one ending after does.
    done = [_progress(0, t0 - 1), _progress(1, t0 + 3.0, ms=2600), _progress(2, t0 + 6.0), _progress(3, t0 + 9.0)]
    rode = outages.times(window, opened, done, died_at=None)
    assert rode["outage_s"] == 5 and math.isnan(rode["died_after_s"])
    assert rode["resumed_after_s"] == pytest.approx(5.1, abs=0.01)  # batch 1: t0 + 5.6, from t0 + 0.5
    died = outages.times(window, opened, done[:1], died_at=t0 + 2.5)
    assert died["died_after_s"] == pytest.approx(2.0) and math.isnan(died["resumed_after_s"])
    assert all(math.isnan(v) for v in outages.times(window, [], done, None).values())  # no outage began
    assert all(math.isnan(v) for v in outages.times(None, opened, done, None).values())


@pytest.mark.spark
def test_a_manager_whose_store_never_answers_fails_naming_the_store_and_how_long(spark):
    """conditional's own S3 calls (``S3ObjectStore``, manifest's too) at a port nobody listens on,
    S3A's retry policy cut to one retry: one IOException naming the store and the seconds it was tried,
    not the SDK's bare connection error."""
    from py4j.protocol import Py4JJavaError

    from ckptbench.experiments.contract import CheckpointFiles
    from infra.net import free_port

    endpoint, bucket = f"http://127.0.0.1:{free_port()}", f"nowhere-{uuid.uuid4().hex[:8]}"
    given = {"endpoint": endpoint, "path.style.access": "true", "endpoint.region": "us-east-1",
             "access.key": "nobody", "secret.key": "nothing", "retry.limit": "1", "retry.interval": "10ms",
             "attempts.maximum": "1"}
    settings = {f"fs.s3a.bucket.{bucket}.{key}": value for key, value in given.items()}
    with pytest.raises(Py4JJavaError) as failed:
        CheckpointFiles(spark, "conditional", None, "ckpt", bucket, settings).write("offsets/0", b"v1")
    said = str(failed.value)
    assert re.search(rf"s3a://{bucket}/\S+: the store at {re.escape(endpoint)}/{bucket} did not answer for "
                     r"\d+\.\d s \(S3A's retry policy: fs\.s3a\.retry\.limit 1, fs\.s3a\.attempts\.maximum 1\)",
                     said), said


def test_a_gateway_whose_server_died_says_what_the_server_logged():
    """The one line a failed gateway start gives names the process that exited and its last log line."""
    if infra.store_class("seaweedfs").unavailable_reason() is not None:
        skip_unless_ci(infra.store_class("seaweedfs").unavailable_reason())
    with infra.store_class("seaweedfs")() as store:
        store.kill_gateway()
        store._server.kill()
        store._server.wait()
        with pytest.raises(infra.StoreUnavailable) as raised:
            store.start_gateway(timeout=10)
    said = str(raised.value)
    assert "weed server exited -9" in said and "weed server last logged: " in said, said
    assert "weed server last logged: nothing" not in said, said
