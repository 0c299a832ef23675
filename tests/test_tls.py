"""HTTPS and a user's bucket: Ceph RGW over TLS with a self-signed certificate made at start
(``infra.CephTlsStore``), reached as a user reaches theirs.

- boto3 trusts it through its certificate only; Spark's JVMs through the truststore made at start.
- ``bench --store endpoint`` and ``--store s3`` (sent to it with ``AWS_ENDPOINT_URL_S3``) run
  through the harness with no metering proxy, requests counted inside Spark's JVMs; bad input
  (no credentials, no bucket, an untrusted certificate) fails in one line before Spark starts.
- The bucket is the user's: foreign objects survive a whole run and its clean-up; a run killed
  midway leaves only its own prefix, which ``clean`` (or the next run) removes, and never a
  running one's.
- The keys stay off every command line while Spark runs over HTTPS (``test_secrets``' check).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import botocore.exceptions
import pytest

import infra
from ckptbench.harness import stores
from ckptbench.record import disk
from helpers import TEST_JVM_OPTS, ckptbench, command_lines, leaks, one_error_line

ROOT = Path(__file__).resolve().parent.parent
#: Objects a user keeps in their bucket, some named to tempt a careless prefix match or clean-up.
FOREIGN = {
    "theirs/part-0000.parquet": b"a user's data",
    "ckptbench-runs-notes.txt": b"beside the runs' root, not under it",
    "ckptbench-runs/their-own-dir/x": b"under the runs' root, but no run's: no owner object",
    f"ckptbench-runs/20200101T000000-{'0' * 8}/x": b"a run id's shape, but no owner object",
}

#: Every test here runs against the HTTPS Ceph RGW, whose truststore keytool (a JVM) makes.
pytestmark = [pytest.mark.ceph, pytest.mark.spark]


@pytest.fixture(scope="module")
def tls():
    reason = infra.CephTlsStore.unavailable_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"Ceph RGW must run in CI but cannot: {reason}")
        pytest.skip(reason)
    with infra.CephTlsStore() as store:
        yield store


@pytest.fixture
def users_bucket(tls):
    """A bucket holding ``FOREIGN``, as a user's would; ckptbench did not create it."""
    bucket = f"users-{uuid.uuid4().hex[:8]}"
    tls.create_bucket(bucket)
    for key, body in FOREIGN.items():
        tls.client().put_object(Bucket=bucket, Key=key, Body=body)
    yield bucket
    tls.empty_bucket(bucket)
    tls.client().delete_bucket(Bucket=bucket)


def user_env(tls, store: str, **extra) -> dict[str, str]:
    """The environment a user would run ``store`` (s3 or endpoint) with, at the TLS store."""
    env = {"AWS_ACCESS_KEY_ID": tls.credentials.access_key, "AWS_SECRET_ACCESS_KEY": tls.credentials.secret_key,
           "AWS_CA_BUNDLE": str(tls.ca_bundle), "CKPT_STORE": store}
    env["AWS_ENDPOINT_URL_S3" if store == "s3" else "CKPT_S3_ENDPOINT"] = tls.endpoint
    return {**env, **extra}


def untouched(tls, bucket: str) -> None:
    """Every foreign object is there with its content."""
    s3 = tls.client()
    assert {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in FOREIGN} == FOREIGN


def the_runs(tls, bucket: str) -> set[str]:
    """The keys in ``bucket`` that are not the user's."""
    return set(tls.list_keys(bucket)) - set(FOREIGN)


# -- boto3 -----------------------------------------------------------------------------------

def test_boto3_trusts_the_store_through_its_certificate_only(tls, users_bucket):
    s3 = tls.client()
    s3.put_object(Bucket=users_bucket, Key="tls/k", Body=b"over https")
    assert s3.get_object(Bucket=users_bucket, Key="tls/k")["Body"].read() == b"over https"
    s3.put_object(Bucket=users_bucket, Key="tls/empty", Body=b"")  # an empty PUT (RGW and aws-chunked)
    with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
        s3.put_object(Bucket=users_bucket, Key="tls/k", Body=b"second", IfNoneMatch="*")
    assert tls.endpoint.startswith("https://") and not tls.meterable
    untrusting = boto3.client("s3", endpoint_url=tls.endpoint, region_name=tls.region,
                              aws_access_key_id=tls.credentials.access_key,
                              aws_secret_access_key=tls.credentials.secret_key)
    with pytest.raises(botocore.exceptions.SSLError):  # the system's CAs do not vouch for it
        untrusting.head_bucket(Bucket=users_bucket)


# -- bad input: one line, before Spark -------------------------------------------------------

NO_AWS_CONFIG = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                 "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.mark.parametrize("store", ["s3", "endpoint"])
def test_no_credentials_fail_in_one_line(tls, users_bucket, store):
    line = one_error_line(ckptbench("bench", "--store", store, "--bucket", users_bucket,
                                    env={**user_env(tls, store), **NO_AWS_CONFIG},
                                    unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")))
    assert "AWS_ACCESS_KEY_ID" in line


@pytest.mark.parametrize("store", ["s3", "endpoint"])
def test_no_bucket_fails_in_one_line_and_creates_none(tls, store):
    before = {b["Name"] for b in tls.client().list_buckets()["Buckets"]}
    line = one_error_line(ckptbench("bench", "--store", store, env=user_env(tls, store), unset=("CKPT_BUCKET",)))
    assert "name an existing bucket" in line
    assert {b["Name"] for b in tls.client().list_buckets()["Buckets"]} == before


def test_an_untrusted_certificate_fails_in_one_line(tls, users_bucket):
    line = one_error_line(ckptbench("bench", "--store", "endpoint", "--bucket", users_bucket,
                                    env=user_env(tls, "endpoint"), unset=("AWS_CA_BUNDLE",)))
    assert "not trusted" in line and "AWS_CA_BUNDLE" in line


def test_what_needs_the_proxy_refuses_an_https_store_in_one_line(tls, users_bucket):
    line = one_error_line(ckptbench("bench", "--store", "s3", "--bucket", users_bucket, "--fault-profile", "reset",
                                    env=user_env(tls, "s3")))
    assert "needs the metering proxy" in line and tls.endpoint in line


# -- the harness with no proxy, Spark over HTTPS ---------------------------------------------

#: A child that runs a stateful query on ``--store s3`` through the harness (``querylab.QueryLab``), for as
#: long as it is let: killed midway by the test.
ENDLESS_RUN = """
import sys
from pathlib import Path
from ckptbench import config
from ckptbench.harness import querylab, stores
settings = config.Settings("s3", "smallest", sys.argv[1], Path(sys.argv[2]))
with stores.started_store(settings) as (store, bucket), \\
        querylab.lab(store, bucket, settings.plan, "conditional") as lab:
    print("prefix", store.run_prefix, flush=True)
    lab.run(None, "conditional", "stateful", 100, 0, 100_000)
"""


def wait_for(what: str, check, proc: subprocess.Popen, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        assert proc.poll() is None, f"the run ended before {what}: {proc.stdout.read()[-3000:]}"
        time.sleep(1)
    raise AssertionError(f"no {what} within {timeout} s")


@pytest.mark.spark
def test_a_killed_run_leaves_only_its_prefix_which_clean_removes(tls, users_bucket, tmp_path):
    env = {**os.environ, **user_env(tls, "s3"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", ENDLESS_RUN, users_bucket, str(tmp_path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        # A committed batch: Spark's JVM wrote over HTTPS through the s3 store's code path.
        commits = wait_for("committed batch", lambda: [k for k in the_runs(tls, users_bucket)
                                                       if "/checkpoint/commits/" in k], proc)
        [run] = {k[:len(stores.RUNS_ROOT) + 24] for k in commits}
        assert any("org.apache.spark.deploy.SparkSubmit" in line and "javax.net.ssl.trustStore=" in line
                   for line in command_lines()), "no Spark JVM with the store's truststore"
        assert not leaks([tls.credentials.secret_key]), "secret key on a command line"
        # clean leaves a running run alone
        cleaned = ckptbench("clean", "--store", "s3", "--bucket", users_bucket, env=env)
        assert cleaned.returncode == 0 and "0 ended run(s) removed" in cleaned.stdout, cleaned.stdout + cleaned.stderr
        assert [k for k in the_runs(tls, users_bucket) if k.startswith(run)]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, midway
        proc.wait(30)
    left = the_runs(tls, users_bucket)
    assert left and all(k.startswith(run) for k in left), left  # its prefix and owner object only
    untouched(tls, users_bucket)

    cleaned = ckptbench("clean", "--store", "s3", "--bucket", users_bucket, env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"removed {run}" in cleaned.stdout and "1 ended run(s) removed" in cleaned.stdout, cleaned.stdout
    assert the_runs(tls, users_bucket) == set()
    untouched(tls, users_bucket)


def stale_run(tls, bucket: str) -> str:
    """A run prefix as a killed run leaves it: objects and an owner object naming a process gone."""
    run_id = f"20261123T000000-{uuid.uuid4().hex[:8]}"
    owner = {"host": os.uname().nodename, "pid": _a_dead_pid(), "started": time.time()}
    s3 = tls.client()
    owner_key = f"{stores.RUNS_ROOT}{run_id}{stores.OWNER_SUFFIX}"
    s3.put_object(Bucket=bucket, Key=owner_key, Body=json.dumps(owner).encode())
    s3.put_object(Bucket=bucket, Key=f"{stores.RUNS_ROOT}{run_id}/bench/checkpoint/offsets/0", Body=b"v1")
    return f"{stores.RUNS_ROOT}{run_id}/"


def _a_dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.spark
def test_bench_on_an_https_endpoint_end_to_end(tls, users_bucket, tmp_path):
    stale_run(tls, users_bucket)
    out = tmp_path / "results"
    # HOME: asv keeps its machine file in ~/.asv-machine.json; the test's stays in tmp_path.
    env = {**os.environ, **user_env(tls, "endpoint"), "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "ckptbench", "bench", "--store", "endpoint", "--bucket",
                             users_bucket, "--size", "smallest", "--bench", "commit_latency.CommitLatency|floor.Floor",
                             "--strategies", "conditional", "--results", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_spark = False
    while proc.poll() is None:  # the keys stay off every command line while Spark runs over HTTPS
        lines = command_lines()
        seen_spark |= any("org.apache.spark.deploy.SparkSubmit" in line and "ckptbench-tls-" in line for line in lines)
        assert not leaks([tls.credentials.secret_key], lines), "secret key on a command line"
        time.sleep(1)
    output = proc.stdout.read()
    assert proc.returncode == 0, output[-5000:]
    assert seen_spark
    assert "no metering proxy can front it" in output

    record = disk.read(out / "raw" / "endpoint-streaming")
    env_json = json.loads((out / "raw" / "endpoint-streaming" / "environment.json").read_text())
    assert env_json["where"] == {"scheme": "https", "location": "local", "counted_by": ["jvm"]}
    assert env_json["spark_master"] == "local[2]" and env_json["executors"] == 0
    assert TEST_JVM_OPTS in env_json["jvm_flags"]  # the JIT setting it ran with (conftest), recorded
    assert set(record.requests.source) == {"jvm", "memory"}  # memory: the benchmark floor's files
    assert record.runs.error.isna().all(), record.runs.error
    puts = record.requests[(record.requests.source == "jvm") & (record.requests.op == "PUT")]
    assert len(puts)
    # The query's stop may interrupt a PUT in flight: that attempt has no answer (status 0) and
    # falls after the last batch; every answer is a 200.
    unanswered = puts[puts.status == 0]
    assert unanswered.batch_id.isna().all(), unanswered
    assert (puts[puts.status != 0].status == 200).all(), puts[puts.status != 200]
    alone = disk.read(out / "raw" / "endpoint-store")
    assert set(alone.samples.route) == {"client"}
    html = (out / "report" / "index.html").read_text()
    assert "https, local endpoint, requests counted by Spark JVMs" in html

    # The run, its clean-up and the removal of the stale run left the user's objects only.
    assert the_runs(tls, users_bucket) == set()
    untouched(tls, users_bucket)
