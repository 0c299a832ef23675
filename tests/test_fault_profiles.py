"""Each fault rule does what it says, seen by boto3 through the metering proxy (in its child
process, as the lab runs it) in front of moto and of Ceph RGW; the named profiles build, are
selected by name and refuse a bad one."""

from __future__ import annotations

import math
import os
import pickle
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import botocore.exceptions
import pytest

from infra.faults import (
    PROFILES,
    Answer,
    Chance,
    CopyThroughput,
    Eventual,
    Kill,
    Latency,
    LoseResponse,
    Reset,
    Throttle,
    UnknownProfile,
)
from infra.metered import MeteredStore

STORES = ("embedded", "ceph")
BUCKET = "fault-profiles"
NO_RETRIES = {"total_max_attempts": 1, "mode": "standard"}
#: What botocore raises when the connection is cut (reset, or closed before an answer).
CUT = (botocore.exceptions.ConnectionError, botocore.exceptions.ConnectionClosedError)


@pytest.fixture(scope="module", params=STORES)
def profile_store(request, suite_stores):
    s = suite_stores.get(request.param)
    s.create_bucket(BUCKET)
    return s


@pytest.fixture(scope="module")
def metered_store(profile_store):
    with MeteredStore(profile_store) as m:
        yield m


@pytest.fixture
def proxy(metered_store):
    """The proxy, with no rules and no events when the test starts."""
    metered_store.proxy.clear_faults()
    metered_store.proxy.reset()
    yield metered_store.proxy
    metered_store.proxy.clear_faults()


@pytest.fixture
def s3(metered_store):
    """boto3 through the proxy, without retries: each call is one request."""
    return metered_store.client(retries=NO_RETRIES)


@pytest.fixture
def prefix() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def status_of(call) -> int:
    try:
        call()
    except botocore.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]
    return 200


def listed(s3, prefix: str, **kwargs) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, **kwargs).get("Contents", [])]


# -- latency -------------------------------------------------------------------------------------

def test_fixed_latency_delays_only_its_ops(proxy, s3, prefix):
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"x")
    proxy.inject(Latency(0.080, ops=("HEAD",)))
    for _ in range(5):
        s3.head_object(Bucket=BUCKET, Key=f"{prefix}/k")
        s3.get_object(Bucket=BUCKET, Key=f"{prefix}/k")["Body"].read()
    events = proxy.events()
    heads = [e.duration for e in events if e.op == "HEAD"]
    assert len(heads) == len([e for e in events if e.op == "GET"]) == 5
    assert min(heads) >= 0.080, heads  # the proxy's clock: the delay, then the store
    # What the proxy held each request for, as it says, rather than the time a loaded machine took.
    assert [(i.op, i.fault, i.seconds) for i in proxy.injections()] == [("HEAD", "latency", 0.080)] * 5


def _tail(metered_store, key: str, seed: int, n: int) -> tuple[list[float], list[float]]:
    """``n`` HEADs of ``key`` under a long-tailed latency seeded with ``seed``: each one's duration
    at the proxy and the delay the proxy held it for."""
    proxy = metered_store.proxy
    proxy.clear_faults()
    proxy.inject(Latency(0.010, 0.300, ops=("HEAD",), seed=seed))
    mark, held = proxy.mark(), len(proxy.injections())
    s3 = metered_store.client(retries=NO_RETRIES)
    for _ in range(n):
        s3.head_object(Bucket=BUCKET, Key=key)
    durations = [e.duration for e in proxy.events_since(mark) if e.op == "HEAD"]
    return durations, [i.seconds for i in proxy.injections()[held:] if i.op == "HEAD"]


def test_long_tailed_latency_has_its_percentiles_and_repeats_with_its_seed(metered_store, proxy, s3, prefix):
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"x")
    durations, delays = _tail(metered_store, f"{prefix}/k", seed=11, n=300)
    draws = Latency(0.010, 0.300, seed=11)
    expected = [draws.sample() for _ in range(300)]
    # Each request was held for its own draw, in order: the seed decides them.
    assert delays == expected
    assert all(d >= e for d, e in zip(durations, delays, strict=True))  # the draw, then the store
    assert 0.008 <= statistics.median(delays) <= 0.012
    p99 = sorted(delays)[int(0.99 * len(delays)) - 1]
    assert 0.120 <= p99 <= 0.800, p99  # 300 draws: the 99th percentile is loose, their order is not
    assert _tail(metered_store, f"{prefix}/k", seed=11, n=60)[1] == expected[:60]
    assert _tail(metered_store, f"{prefix}/k", seed=12, n=60)[1] != expected[:60]


# -- errors at a rate ----------------------------------------------------------------------------

@pytest.mark.parametrize("status, code", [(503, "SlowDown"), (500, "InternalError")])
def test_error_rate_is_its_probability_with_a_fixed_seed(proxy, s3, prefix, status, code):
    n, p, seed = 400, 0.1, 5
    proxy.inject(Chance(Answer(status, code), p, ops=("PUT",), seed=seed))
    answers = [status_of(lambda i=i: s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{i}", Body=b"x"))
               for i in range(n)]
    draws = random.Random(seed)
    expected = [status if draws.random() < p else 200 for _ in range(n)]
    assert answers == expected  # the seed decides which requests fail
    failed = answers.count(status)
    assert abs(failed - n * p) <= 3 * math.sqrt(n * p * (1 - p)), failed
    stored = set(listed(s3, prefix + "/"))
    assert stored == {f"{prefix}/{i}" for i, a in enumerate(answers) if a == 200}  # failed ones never got there
    assert [i.fault for i in proxy.injections()].count(f"{status} {code}") == failed


def test_the_sdk_retries_an_injected_slowdown(metered_store, proxy, prefix):
    proxy.inject(Chance(Answer(503, "SlowDown"), 1.0, ops=("PUT",), times=2))
    s3 = metered_store.client(retries={"total_max_attempts": 4, "mode": "standard"})
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"x")
    assert [e.status for e in proxy.events() if e.op == "PUT"] == [503, 503, 200]


# -- connections reset -----------------------------------------------------------------------------

def test_reset_before_the_store_sees_the_request(profile_store, proxy, s3, prefix):
    proxy.inject(Chance(Reset(), 1.0, ops=("PUT",)))
    with pytest.raises(CUT):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"never")
    assert profile_store.list_keys(BUCKET, prefix + "/") == []  # asked of the store itself
    [event] = proxy.events()
    assert (event.op, event.status) == ("PUT", 0)
    assert [i.fault for i in proxy.injections()] == ["reset"]


def test_lost_response_the_store_applied_and_the_retry_meets_it(profile_store, metered_store, proxy, prefix):
    """The store applies the conditional PUT, the client's connection is reset instead of the
    answer; boto3 retries the PUT, which meets its own write: 412."""
    proxy.inject(Chance(LoseResponse(), 1.0, ops=("PUT",), times=1))
    s3 = metered_store.client(retries={"total_max_attempts": 3, "mode": "standard"})
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"ours", IfNoneMatch="*")
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert profile_store.client().get_object(Bucket=BUCKET, Key=f"{prefix}/k")["Body"].read() == b"ours"
    assert [(e.op, e.status) for e in proxy.events()] == [("PUT", 0), ("PUT", 412)]
    assert [i.fault for i in proxy.injections()] == ["lost-response"]


def test_lost_response_without_retries_is_an_error_the_client_sees(profile_store, proxy, s3, prefix):
    proxy.inject(Chance(LoseResponse(), 1.0, ops=("DELETE",)))
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/k", Body=b"x")
    with pytest.raises(CUT):
        s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/k")
    assert profile_store.list_keys(BUCKET, prefix + "/") == []  # deleted all the same


# -- throttling by prefix ----------------------------------------------------------------------------

def test_throttle_answers_slowdown_over_budget_per_prefix(proxy, s3, prefix):
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/a/k", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/b/k", Body=b"x")
    proxy.inject(Throttle(rate=2, burst=5, depth=2, ops=("HEAD",)))
    a = [status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/a/k")) for _ in range(10)]
    b = [status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/b/k")) for _ in range(5)]
    assert a[:5] == [200] * 5 and a[5:].count(503) >= 4, a  # ten in well under half a second
    assert b == [200] * 5, b  # another prefix has its own budget
    assert status_of(lambda: s3.get_object(Bucket=BUCKET, Key=f"{prefix}/a/k")) == 200  # not a HEAD
    time.sleep(1.1)  # two tokens back, at least (more if the requests above were slow), five at most
    again = [status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/a/k")) for _ in range(7)]
    assert again[:2] == [200, 200] and 503 in again, again
    assert {i.fault for i in proxy.injections()} == {"throttle"}


# -- eventual consistency ---------------------------------------------------------------------------

WINDOW = 1.5


def test_eventual_new_key_is_missing_from_listings_for_the_window(proxy, s3, prefix):
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/old", Body=b"x")
    time.sleep(0.2)
    proxy.inject(Eventual(WINDOW))
    assert listed(s3, prefix + "/") == [f"{prefix}/old"]  # seen before: listed
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/new", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/dir/new", Body=b"x")
    assert listed(s3, prefix + "/") == [f"{prefix}/old"]
    v1 = s3.list_objects(Bucket=BUCKET, Prefix=prefix + "/")
    assert [o["Key"] for o in v1.get("Contents", [])] == [f"{prefix}/old"]
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/", Delimiter="/")
    assert page["KeyCount"] == 1 and "CommonPrefixes" not in page  # dir/ holds only a new key
    assert s3.get_object(Bucket=BUCKET, Key=f"{prefix}/new")["Body"].read() == b"x"  # read-after-write
    time.sleep(WINDOW + 0.2)
    assert listed(s3, prefix + "/") == [f"{prefix}/dir/new", f"{prefix}/new", f"{prefix}/old"]
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/", Delimiter="/")
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == [f"{prefix}/dir/"]
    assert "stale-list" in {i.fault for i in proxy.injections()}


def test_eventual_key_probed_before_it_existed_reads_missing_for_the_window(proxy, s3, prefix):
    proxy.inject(Eventual(WINDOW))
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/probed")) == 404
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/probed", Body=b"late")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/fresh", Body=b"x")
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/probed")) == 404
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        s3.get_object(Bucket=BUCKET, Key=f"{prefix}/probed")
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/fresh")) == 200  # never probed
    time.sleep(WINDOW + 0.2)
    assert s3.get_object(Bucket=BUCKET, Key=f"{prefix}/probed")["Body"].read() == b"late"
    assert [i.fault for i in proxy.injections()] == ["stale-missing", "stale-missing"]


def test_eventual_deleted_key_is_still_listed_for_the_window(proxy, s3, prefix):
    proxy.inject(Eventual(WINDOW))
    for name in ("a", "b", "c", "sub/d"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=b"12345")
    time.sleep(WINDOW + 0.2)
    s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/a")
    # Quiet, as S3A sends it: the store's answer names no key it deleted.
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": f"{prefix}/b"}, {"Key": f"{prefix}/sub/d"}],
                                             "Quiet": True})
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    assert [(o["Key"], o["Size"]) for o in page["Contents"]] == [
        (f"{prefix}/{name}", 5) for name in ("a", "b", "c", "sub/d")]
    assert page["KeyCount"] == 4
    page = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/", Delimiter="/")
    assert [c["Prefix"] for c in page.get("CommonPrefixes", [])] == [f"{prefix}/sub/"]
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/a")) == 404  # only listings lag
    time.sleep(WINDOW + 0.2)
    assert listed(s3, prefix + "/") == [f"{prefix}/c"]


def test_eventual_overwritten_key_reads_stale_for_the_window(profile_store, proxy, s3, prefix):
    proxy.inject(Eventual(WINDOW))
    key = f"{prefix}/k"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"version one", Metadata={"v": "1"})
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"version two, longer", Metadata={"v": "2"})
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == b"version one" and got["Metadata"] == {"v": "1"}
    assert s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == len(b"version one")
    assert s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=8-10")["Body"].read() == b"one"
    assert profile_store.client().get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"version two, longer"
    time.sleep(WINDOW + 0.2)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"version two, longer"
    assert [i.fault for i in proxy.injections()] == ["stale-read"] * 3


def test_eventual_halves_make_only_their_half_stale(proxy, s3, prefix):
    proxy.inject(Eventual(WINDOW, reads=False))
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/lists/k")) == 404
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/lists/k", Body=b"x")
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/lists/k")) == 200  # reads are fresh
    assert listed(s3, f"{prefix}/lists/") == []  # listings lag
    proxy.clear_faults()
    proxy.inject(Eventual(WINDOW, lists=False))
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/reads/k")) == 404
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/reads/k", Body=b"x")
    assert status_of(lambda: s3.head_object(Bucket=BUCKET, Key=f"{prefix}/reads/k")) == 404  # reads lag
    assert listed(s3, f"{prefix}/reads/") == [f"{prefix}/reads/k"]  # listings are fresh
    assert [i.fault for i in proxy.injections()] == ["stale-list", "stale-missing"]


# -- COPY throughput ---------------------------------------------------------------------------------

def test_copy_throughput_cap_holds_a_copy_for_its_size(profile_store, metered_store, proxy, s3, prefix):
    rate = 4e6  # bytes a second
    proxy.inject(CopyThroughput(rate))
    sizes = (64 << 10, 1 << 20, 3 << 20)
    for size in sizes:
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{size}", Body=b"x" * size)
    # Written around the proxy: its size comes from the proxy's own HEAD, which is not counted.
    profile_store.client().put_object(Bucket=BUCKET, Key=f"{prefix}/direct", Body=b"y" * (2 << 20))
    mark = proxy.mark()
    for name in (*sizes, "direct"):
        s3.copy_object(Bucket=BUCKET, Key=f"{prefix}/{name}.copy",
                       CopySource={"Bucket": BUCKET, "Key": f"{prefix}/{name}"})
    copies = proxy.events_since(mark)
    assert [e.op for e in copies] == ["COPY"] * 4
    for event, size in zip(copies, (*sizes, 2 << 20), strict=True):
        assert size / rate <= event.duration <= size / rate + 0.25, (size, event.duration)
    assert [i.fault for i in proxy.injections()] == ["copy-throughput"] * 4


# -- killing a process group at one request -------------------------------------------------------------

_WRITER = """
import subprocess, sys, boto3
from botocore.config import Config
endpoint, access, secret, bucket, prefix = sys.argv[1:6]
subprocess.Popen(["sleep", "60"])  # a second process in the group: it must die too
print(open("/proc/self/stat").read().split()[4], flush=True)  # our process group
sys.stdin.readline()  # the kill rule is in force
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret,
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                                                         retries={"total_max_attempts": 1}))
for i in range(8):
    s3.put_object(Bucket=bucket, Key=f"{prefix}/k{i}", Body=b"x")
"""


@pytest.mark.parametrize("after_applied", [False, True])
def test_kill_takes_down_the_process_group_at_the_matching_request(profile_store, metered_store, proxy, prefix,
                                                                   after_applied):
    creds = metered_store.credentials
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, metered_store.endpoint, creds.access_key,
                               creds.secret_key, BUCKET, prefix], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    group = int(writer.stdout.readline())
    proxy.inject(Kill(writer.pid, after_applied, "PUT", key=r"/k4$"))
    writer.stdin.write("go\n")
    writer.stdin.flush()
    assert writer.wait(30) == -9
    assert _group_gone(group)  # sleep, in the same group, went too
    stored = sorted(profile_store.list_keys(BUCKET, prefix + "/"))
    assert stored == [f"{prefix}/k{i}" for i in range(5 if after_applied else 4)]
    assert [i.fault for i in proxy.injections()] == [
        "kill-after-applied" if after_applied else "kill-before-forwarding"]
    assert [e.status for e in proxy.events() if e.key == f"{prefix}/k4"] == [0]


def _group_gone(group: int, timeout: float = 5) -> bool:
    """No live process is left in ``group`` (a killed orphan may stay a zombie a moment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = []
        for pid in subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except FileNotFoundError:
                continue
            if stat.rpartition(")")[2].split()[0] != "Z":
                live.append(pid)
        if not live:
            return True
        time.sleep(0.1)
    return False


def test_kill_refuses_the_callers_own_group():
    with pytest.raises(ValueError, match="own group"):
        Kill(os.getpid(), False, "PUT")


# -- the profiles -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_builds_with_a_seed_and_travels_to_the_proxy(name, proxy):
    rules = PROFILES[name](3)
    assert PROFILES[name].description
    for rule in rules:
        proxy.inject(pickle.loads(pickle.dumps(rule)))
    proxy.use_profile(name, 3)


def test_an_unknown_profile_is_refused_naming_the_valid_ones(profile_store):
    with pytest.raises(UnknownProfile, match="valid fault profiles: none, latency-fixed"):
        MeteredStore(profile_store, "bogus")


def test_a_profile_given_at_start_is_in_force(profile_store, prefix):
    with MeteredStore(profile_store, "slowdown", seed=1) as m:
        s3 = m.client(retries=NO_RETRIES)
        answers = [status_of(lambda i=i: s3.head_bucket(Bucket=BUCKET)) for i in range(100)]
        assert 1 <= answers.count(503) <= 15
        assert "injecting fault profile slowdown (seed 1)" in m.describe()
