"""Every local store, started for real and checked over real HTTP with boto3 (no stubs).

The S3 features the checkpoint managers rely on: PUT/GET/HEAD/LIST v2/COPY/
DELETE, empty objects, multipart (complete and abort), the 412 of a second
``If-None-Match: *`` PUT, and that ``empty_bucket`` leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import infra.ceph
import infra.seaweedfs
from helpers import skip_unless_ci
from infra.ceph import CephStore
from infra.net import free_port, proc_stat
from infra.seaweedfs import SeaweedfsStore
from infra.store import Credentials, StoreUnavailable

MIB = 1 << 20


@pytest.fixture
def ceph(suite_stores):
    """Skips (or, under CI, fails) like the shared store fixture when Ceph cannot run here."""
    suite_stores.get("ceph")


@pytest.fixture
def bucket(store):
    name = f"ckptbench-{uuid.uuid4().hex[:12]}"
    store.create_bucket(name)
    yield name
    store.empty_bucket(name)
    store.client().delete_bucket(Bucket=name)


def _status(err: ClientError) -> int:
    return err.response["ResponseMetadata"]["HTTPStatusCode"]


def _exists(s3, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as err:
        if _status(err) == 404:
            return False
        raise


def test_put_get_head_list_copy_delete(store, bucket):
    s3 = store.client()
    for key in ("a/1", "a/2", "b/3", "top"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())

    assert s3.get_object(Bucket=bucket, Key="a/1")["Body"].read() == b"a/1"
    assert s3.head_object(Bucket=bucket, Key="b/3")["ContentLength"] == 3

    listing = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in listing["CommonPrefixes"]] == ["a/", "b/"]
    assert [o["Key"] for o in listing["Contents"]] == ["top"]
    under_a = s3.list_objects_v2(Bucket=bucket, Prefix="a/")
    assert [o["Key"] for o in under_a["Contents"]] == ["a/1", "a/2"]

    s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "a/2"})
    assert s3.get_object(Bucket=bucket, Key="copied")["Body"].read() == b"a/2"

    s3.delete_object(Bucket=bucket, Key="a/1")
    assert not _exists(s3, bucket, "a/1")
    assert _exists(s3, bucket, "a/2")


def test_empty_object(store, bucket):
    s3 = store.client()
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert s3.head_object(Bucket=bucket, Key="empty")["ContentLength"] == 0
    assert s3.get_object(Bucket=bucket, Key="empty")["Body"].read() == b""


def test_multipart_complete_and_abort(store, bucket):
    s3 = store.client()
    first, second = b"x" * (5 * MIB), b"y"
    up = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    parts = []
    for n, body in ((1, first), (2, second)):
        etag = s3.upload_part(Bucket=bucket, Key="big", UploadId=up, PartNumber=n, Body=body)["ETag"]
        parts.append({"PartNumber": n, "ETag": etag})
    s3.complete_multipart_upload(
        Bucket=bucket, Key="big", UploadId=up, MultipartUpload={"Parts": parts}
    )
    assert s3.head_object(Bucket=bucket, Key="big")["ContentLength"] == 5 * MIB + 1
    tail = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={5 * MIB - 1}-")["Body"].read()
    assert tail == b"xy"

    up = s3.create_multipart_upload(Bucket=bucket, Key="aborted")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="aborted", UploadId=up, PartNumber=1, Body=first)
    s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=up)
    assert not _exists(s3, bucket, "aborted")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_second_conditional_put_fails_with_412(store, bucket):
    s3 = store.client()
    s3.put_object(Bucket=bucket, Key="once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="once", Body=b"second", IfNoneMatch="*")
    assert _status(caught.value) == 412
    assert s3.get_object(Bucket=bucket, Key="once")["Body"].read() == b"first"


def test_empty_bucket_leaves_nothing(store, bucket):
    s3 = store.client()
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"ckpt/{i}", Body=b"x")
    s3.put_object(Bucket=bucket, Key="other/keep", Body=b"x")
    s3.create_multipart_upload(Bucket=bucket, Key="ckpt/pending")

    store.empty_bucket(bucket, prefix="ckpt/")
    assert store.list_keys(bucket) == ["other/keep"]
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []

    store.empty_bucket(bucket)
    assert store.list_keys(bucket) == []


def test_wrong_credentials_are_rejected(store, bucket):
    if store.name == "embedded":
        pytest.skip("embedded: moto accepts any key pair, so there is nothing to reject")
    right = store.credentials
    for wrong in (Credentials(right.access_key, right.secret_key[::-1]), Credentials.generate()):
        s3 = boto3.client(
            "s3",
            endpoint_url=store.endpoint,
            region_name=store.region,
            aws_access_key_id=wrong.access_key,
            aws_secret_access_key=wrong.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        with pytest.raises(ClientError) as caught:
            s3.put_object(Bucket=bucket, Key="intruder", Body=b"x")
        assert _status(caught.value) == 403
    assert not _exists(store.client(), bucket, "intruder")


def _orphaned_servers(name: str) -> dict:
    """Start store ``name`` in a child process, check its servers run, kill the child outright
    (no stop(), no atexit) and give its servers 15 s to end. Returns their ``pids`` and, for
    Ceph, the ``dir`` of its logs ("" otherwise)."""
    script = ("import json, sys, time, infra; s = infra.store_class(sys.argv[1])().start(); "
              "print(json.dumps({'pids': [p.pid for p in s.processes], 'dir': str(getattr(s, 'log_dir', '') or '')}),"
              " flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", script, name], stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(parent.stdout.readline())
        assert all(_running(pid) for pid in started["pids"])
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while any(_running(pid) for pid in started["pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return started


def test_servers_end_with_a_killed_parent(store):
    started = _orphaned_servers(store.name)
    try:
        if not started["pids"]:
            pytest.skip(f"{store.name} runs no server process here")
        assert not [pid for pid in started["pids"] if _running(pid)], "servers outlived their parent"
    finally:
        for pid in filter(_running, started["pids"]):  # a failure must not leak a server either
            os.kill(pid, signal.SIGKILL)
        if started["dir"]:  # Ceph's temp directory: nobody was left to remove it
            shutil.rmtree(Path(started["dir"]).parent, ignore_errors=True)


@pytest.mark.ceph
def test_ceph_start_removes_what_a_killed_run_left(ceph):
    root = Path(_orphaned_servers("ceph")["dir"]).parent
    assert root.exists()  # nobody was left to remove it
    try:
        with CephStore() as running:
            assert not root.exists()
            # and the next start leaves a running cluster's directory alone
            with CephStore():
                assert running.log_dir.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed parent's children are reaped by whoever adopts them)."""
    stat = proc_stat(pid)
    return stat is not None and stat[1] != "Z"


def test_ceph_rejects_unknown_objectstore():
    with pytest.raises(ValueError, match="memstore, bluestore"):
        CephStore("filestore")


@pytest.mark.ceph
def test_ceph_restarts_as_a_fresh_cluster_and_stop_leaves_no_daemon(ceph):
    before = _ceph_children()
    first = CephStore().start()
    daemons, first_dir = first.processes, first.log_dir.parent
    assert len(daemons) == 3
    first.create_bucket("ckptbench-restart")
    first.client().put_object(Bucket="ckptbench-restart", Key="k", Body=b"old")
    first.stop()
    assert all(p.poll() is not None for p in daemons)
    assert _ceph_children() == before
    assert first.processes == ()
    assert not first_dir.exists()
    first.stop()  # idempotent

    second = first.start()  # the same object again: a second cluster in a new temp dir
    try:
        assert second.log_dir.parent != first_dir
        assert second.client().list_buckets()["Buckets"] == []
        second.create_bucket("ckptbench-restart")
        second.client().put_object(Bucket="ckptbench-restart", Key="k", Body=b"new")
        assert second.client().get_object(Bucket="ckptbench-restart", Key="k")["Body"].read() == b"new"
        daemons = second.processes
    finally:
        second.stop()
    assert all(p.poll() is not None for p in daemons)
    assert _ceph_children() == before


def _ceph_children() -> set[int]:
    """Pids of our child processes that are Ceph daemons (zombies too: not yet reaped).

    The module's ceph fixture may be running too, so tests compare before and after."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        stat = proc_stat(int(entry.name))
        if stat is not None and stat[2] == os.getpid() and stat[0] in ("ceph-mon", "ceph-osd", "radosgw"):
            found.add(int(entry.name))
    return found


@pytest.mark.ceph
def test_ceph_failed_start_stops_its_daemons_and_names_the_log(ceph, monkeypatch):
    # A budget used up before radosgw can answer: the start fails after all three daemons run.
    monkeypatch.setattr(infra.ceph, "_START_TIMEOUT", 0.05)
    store, before = CephStore(), _ceph_children()
    with pytest.raises(StoreUnavailable) as caught:
        store.start()
    message = str(caught.value)
    log = Path(re.findall(r"/\S+", message)[-1])
    try:
        assert "\n" not in message and message.startswith("ceph: ")
        assert log.exists()
        assert store.processes == () and _ceph_children() == before
        store.stop()  # safe after a failed start
    finally:
        shutil.rmtree(log.parent.parent if log.is_file() else log.parent, ignore_errors=True)


@pytest.mark.ceph
def test_ceph_command_failure_says_what_the_command_printed(suite_stores):
    # The reason is in the one-line error itself: a CI log shows it after the temp dir is gone.
    with pytest.raises(StoreUnavailable) as caught:
        suite_stores.get("ceph")._ceph("osd", "no-such-subcommand")
    message = str(caught.value)
    assert "\n" not in message
    assert "exited with" in message and "invalid command" in message and "commands.log" in message


@pytest.mark.ceph
def test_ceph_bluestore_keeps_objects_across_restart(ceph, tmp_path):
    data_dir = tmp_path / "ceph"
    with CephStore("bluestore", str(data_dir)) as ceph:
        ceph.create_bucket("ckptbench-durable")
        ceph.client().put_object(Bucket="ckptbench-durable", Key="k", Body=b"kept")
    assert data_dir.exists()
    with CephStore("bluestore", str(data_dir)) as ceph:
        assert ceph.client().get_object(Bucket="ckptbench-durable", Key="k")["Body"].read() == b"kept"


def test_seaweedfs_starts_on_fresh_ports_when_one_it_chose_was_taken(monkeypatch):
    """A port taken between ``free_port`` choosing it and ``weed`` binding it (another store starting
    beside this one) costs one more start, not the store; with no start left, the one line says so."""
    if SeaweedfsStore.unavailable_reason() is not None:
        skip_unless_ci(SeaweedfsStore.unavailable_reason())
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]

        def volume_port_taken():  # the ports are chosen in _SERVER_PORTS order
            chosen = iter([*(free_port() for _ in range(infra.seaweedfs._SERVER_PORTS.index("volume.port"))), taken])
            monkeypatch.setattr(infra.seaweedfs, "free_port", lambda: next(chosen, None) or free_port())

        volume_port_taken()
        with SeaweedfsStore() as store:
            assert taken not in store.ports.values()
            name = f"ckptbench-{uuid.uuid4().hex[:12]}"
            store.create_bucket(name)
            store.client().put_object(Bucket=name, Key="k", Body=b"v")
            assert store.client().get_object(Bucket=name, Key="k")["Body"].read() == b"v"

        volume_port_taken()
        monkeypatch.setattr(infra.seaweedfs, "PORT_ATTEMPTS", 1)
        store = SeaweedfsStore()
        with pytest.raises(StoreUnavailable) as caught:
            store.start()
    said = str(caught.value)
    assert "\n" not in said and f"127.0.0.1:{taken}: bind: address already in use" in said, said
    assert store.processes == ()
