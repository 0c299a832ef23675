"""The metering proxy: S3 calls through it against real stores (moto and Ceph RGW, from the
session's lab), the HTTP/1.1 relay (chunked bodies, 100-continue, keep-alive,
pipelining, aborted and unreachable connections) against those stores and, where the wire
itself must be seen, a raw-socket upstream; and the pure classifiers."""

from __future__ import annotations

import http.client
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from infra.faults import Fault
from infra.net import free_port
from infra.proxy import MeteringProxy
from infra.proxy_process import ProxyProcess
from infra.s3ops import AREAS, OPS, Event, area_of, classify, split_path

BUCKET = "proxy-test"
#: The lab's stores the S3 tests run against: an emulator and a real store.
STORES = ("embedded", "ceph")


@pytest.fixture(scope="module", params=STORES)
def proxy_store(request, suite_stores):
    s = suite_stores.get(request.param)
    s.create_bucket(BUCKET)
    return s


@pytest.fixture(scope="module", params=[MeteringProxy, ProxyProcess], ids=["in-process", "child-process"])
def proxy(proxy_store, request):
    proxy_store.empty_bucket(BUCKET)  # each kind of proxy starts from the same empty bucket
    with request.param(proxy_store.endpoint) as p:
        yield p


@pytest.fixture(scope="module")
def s3(proxy_store, proxy):
    """A boto3 client that talks to the store only through the proxy."""
    return _client(proxy.endpoint, proxy_store)


def _client(endpoint, store=None, **config):
    creds = store.credentials if store else None
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=creds.access_key if creds else "AKIDEXAMPLE",
        aws_secret_access_key=creds.secret_key if creds else "secret",
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}, **config),  # no retries
    )


def _ops(events):
    return [(e.op, e.area, e.status) for e in events]


# -- S3 calls through the proxy against moto ---------------------------------------

def test_put_get_head_list(s3, proxy):
    mark = proxy.mark()
    s3.put_object(Bucket=BUCKET, Key="ck/offsets/0", Body=b"o" * 1000)
    assert s3.get_object(Bucket=BUCKET, Key="ck/offsets/0")["Body"].read() == b"o" * 1000
    assert s3.head_object(Bucket=BUCKET, Key="ck/offsets/0")["ContentLength"] == 1000
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="ck/offsets/")
    assert [o["Key"] for o in listed["Contents"]] == ["ck/offsets/0"]

    events = proxy.events_since(mark)
    assert _ops(events) == [
        ("PUT", "offsets", 200), ("GET", "offsets", 200),
        ("HEAD", "offsets", 200), ("LIST", "offsets", 200),
    ]
    put, get, head, listing = events
    assert (put.method, put.bucket, put.key) == ("PUT", BUCKET, "ck/offsets/0")
    assert listing.key == "ck/offsets/"  # a LIST is about its prefix
    assert (put.bytes_in, put.bytes_out) == (1000, 0)
    assert (get.bytes_in, get.bytes_out) == (0, 1000)
    assert head.bytes_out == 0
    assert all(e.start <= e.end for e in events)


def test_copy_and_deletes(s3, proxy):
    s3.put_object(Bucket=BUCKET, Key="ck/state/0/1/.1.delta.tmp", Body=b"d" * 10)
    s3.put_object(Bucket=BUCKET, Key="out/part-0.parquet", Body=b"p")
    s3.put_object(Bucket=BUCKET, Key="out/_spark_metadata/0", Body=b"v1")
    mark = proxy.mark()
    s3.copy_object(Bucket=BUCKET, Key="ck/state/0/1/1.delta",
                   CopySource={"Bucket": BUCKET, "Key": "ck/state/0/1/.1.delta.tmp"})
    s3.delete_object(Bucket=BUCKET, Key="ck/state/0/1/.1.delta.tmp")
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [
        {"Key": "out/_spark_metadata/0"}, {"Key": "out/part-0.parquet"}]})

    events = proxy.events_since(mark)
    assert _ops(events) == [
        ("COPY", "state", 200), ("DELETE", "state", 204), ("BULK_DELETE", "_spark_metadata", 200),
    ]
    assert events[2].key == "out/_spark_metadata/0"  # a bulk DELETE is about its first key
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert "ck/state/0/1/1.delta" in keys
    assert not keys & {"ck/state/0/1/.1.delta.tmp", "out/_spark_metadata/0", "out/part-0.parquet"}


def test_multipart_upload(s3, proxy):
    key = "out/part-1.parquet"
    parts = [b"a" * (5 * 1024 * 1024), b"b"]
    mark = proxy.mark()
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etags = [
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=n, Body=body)["ETag"]
        for n, body in enumerate(parts, 1)
    ]
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]})

    events = proxy.events_since(mark)
    assert _ops(events) == [("MPU_INIT", "data", 200), ("MPU_PART", "data", 200),
                            ("MPU_PART", "data", 200), ("MPU_COMPLETE", "data", 200)]
    assert [e.bytes_in for e in events[1:3]] == [5 * 1024 * 1024, 1]
    assert s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == 5 * 1024 * 1024 + 1


def test_aborted_multipart_upload(s3, proxy):
    key = "ck/sources/0/0"
    mark = proxy.mark()
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 100)
    s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)
    pending = s3.list_multipart_uploads(Bucket=BUCKET, Prefix="ck/sources/").get("Uploads", [])

    assert pending == []
    assert _ops(proxy.events_since(mark)) == [
        ("MPU_INIT", "sources", 200), ("MPU_PART", "sources", 200),
        ("MPU_ABORT", "sources", 204), ("LIST", "sources", 200),
    ]


def test_conditional_put_fails_with_412(s3, proxy):
    key = "ck/commits/0"
    mark = proxy.mark()
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"second", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    # The connection is still good after the rejected PUT, and the first write stands.
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"first"
    assert _ops(proxy.events_since(mark)) == [
        ("PUT", "commits", 200), ("PUT", "commits", 412), ("GET", "commits", 200)]


def test_checkpoint_metadata_and_bucket_calls(proxy_store, s3, proxy):
    mark = proxy.mark()
    s3.put_object(Bucket=BUCKET, Key="ck/metadata", Body=b'{"id":"x"}')
    s3.head_bucket(Bucket=BUCKET)
    s3.create_bucket(Bucket="proxy-test-other")
    s3.delete_bucket(Bucket="proxy-test-other")
    assert _ops(proxy.events_since(mark)) == [
        ("PUT", "metadata", 200), ("HEAD", "data", 200), ("BUCKET", "data", 200),
        ("BUCKET", "data", 204)]


def test_snapshots_marks_and_reset(s3, proxy):
    proxy.reset()
    assert proxy.events() == []
    s3.put_object(Bucket=BUCKET, Key="ck/offsets/1", Body=b"x" * 1000)
    mark = proxy.mark()
    s3.put_object(Bucket=BUCKET, Key="out/part-2.parquet", Body=b"y" * 24)
    s3.get_object(Bucket=BUCKET, Key="ck/offsets/1")["Body"].read()

    events = proxy.events()
    assert len(events) == 3 and proxy.events_since(mark) == events[1:]
    assert [(e.op, e.key, e.bytes_in, e.bytes_out) for e in events] == [
        ("PUT", "ck/offsets/1", 1000, 0), ("PUT", "out/part-2.parquet", 24, 0), ("GET", "ck/offsets/1", 0, 1000)]
    proxy.reset()
    assert proxy.events() == [] and proxy.events_since(mark) == []


def test_injected_faults(proxy_store, s3, proxy):
    """Rules injected into the proxy (pickled to it, for the child process): an answer instead
    of forwarding, for ``times`` requests; a header dropped; cleared."""
    key = "ck/commits/fault"
    mark = proxy.mark()
    proxy.inject(Fault("PUT", status=503, times=1))
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"first")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert err.value.response["Error"]["Code"] == "SlowDown"  # the S3 XML error body, parsed by botocore
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=key).get("KeyCount") == 0  # never reached the store
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"first", IfNoneMatch="*")  # times=1: used up
    # SigV4 signs If-None-Match, SigV2 does not (S3A's S3SignerType on RGW): a dropped header
    # leaves a SigV2 signature valid.
    sigv2 = _client(proxy.endpoint, proxy_store, signature_version="s3")
    proxy.inject(Fault("PUT", drop_header="if-none-match"))
    try:
        sigv2.put_object(Bucket=BUCKET, Key=key, Body=b"second", IfNoneMatch="*")  # the store never saw the condition
    finally:
        proxy.clear_faults()
    with pytest.raises(ClientError) as err:
        sigv2.put_object(Bucket=BUCKET, Key=key, Body=b"third", IfNoneMatch="*")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"second"
    assert _ops(proxy.events_since(mark)) == [
        ("PUT", "commits", 503), ("LIST", "commits", 200), ("PUT", "commits", 200),
        ("PUT", "commits", 200), ("PUT", "commits", 412), ("GET", "commits", 200)]


@pytest.mark.parametrize("args, problem", [
    (("PUTT",), "op must be one of"),
    (("PUT",), "exactly one of status and drop_header"),
    (("PUT", 503, "If-None-Match"), "exactly one of status and drop_header"),
    (("PUT", 100), "final HTTP status"),
])
def test_fault_rejects_a_rule_that_would_never_act(args, problem):
    with pytest.raises(ValueError, match=problem):
        Fault(*args)


# -- the proxy in a child process ---------------------------------------------------

def test_child_process_rejects_a_bad_upstream_in_the_caller():
    with pytest.raises(ValueError, match="http://host:port"):
        ProxyProcess("https://example.com")


def test_child_process_ends_with_its_parent(proxy_store):
    """A parent killed outright (no stop(), no atexit) leaves no proxy process behind."""
    parent = subprocess.Popen(
        [sys.executable, "-c", ("import sys, time; from infra.proxy_process import ProxyProcess; "
                                f"p = ProxyProcess({proxy_store.endpoint!r}).start(); print(p._child.pid, flush=True); "
                                "time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    os.kill(child, 0)  # running
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"proxy process {child} outlived its parent")


def test_child_process_stop_and_calls_after_it(proxy_store):
    proxy = ProxyProcess(proxy_store.endpoint).start()
    child = proxy._child
    proxy.stop()
    assert child.returncode == 0
    with pytest.raises(RuntimeError, match="not running"):
        proxy.mark()
    proxy.stop()  # twice is fine


# -- byte-exact forwarding, against a raw-socket upstream --------------------------

class RawUpstream:
    """A one-thread HTTP 'store' that records the raw bytes of each request and answers
    each with ``response``; it knows just enough framing to find where a request ends."""

    def __init__(self, response: bytes, send_continue=False, close_after_response=False):
        self.response = response
        self.send_continue = send_continue
        self.close_after_response = close_after_response
        self.requests: list[bytes] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self):
        self._listener.close()

    def _serve(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                buf = b""
                while True:
                    request, buf = self._read_request(conn, buf)
                    if request is None:
                        break
                    self.requests.append(request)
                    conn.sendall(self.response)
                    if self.close_after_response:
                        break

    def _read_request(self, conn, buf):
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None, b""
            buf += data
        head_len = buf.index(b"\r\n\r\n") + 4
        head = buf[:head_len].lower()
        if self.send_continue and b"expect: 100-continue" in head:
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if b"transfer-encoding: chunked" in head:  # ends at the last chunk and its trailers
            while b"\r\n0\r\n" not in buf[head_len - 2:] or not buf.endswith(b"\r\n\r\n"):
                buf += conn.recv(65536)
            return buf, b""
        length = 0
        for line in head.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(buf) < head_len + length:
            buf += conn.recv(65536)
        return buf[:head_len + length], buf[head_len + length:]


def _recv_until(sock, count_or_marker):
    data = b""
    while (len(data) < count_or_marker if isinstance(count_or_marker, int)
           else count_or_marker not in data):
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data


@pytest.fixture
def raw_client():
    socks = []

    def connect(endpoint):
        host, port = endpoint.removeprefix("http://").split(":")
        sock = socket.create_connection((host, int(port)), timeout=10)
        socks.append(sock)
        return sock

    yield connect
    for s in socks:
        s.close()


OK_CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Odd:  spaced \r\n\r\n"
              b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n")


def test_request_and_response_forwarded_unchanged(raw_client):
    """Everything arrives byte for byte as sent: the request (header names in their case and
    order, ``Host`` where the client put it, values with their spaces, the chunked body with its
    chunk extensions and trailers) and the response likewise. Two requests on one client
    connection use one upstream connection."""
    upstream = RawUpstream(OK_CHUNKED)
    request = (b"PUT /bkt/ck/offsets/7?x-id=PutObject HTTP/1.1\r\n"
               b"x-AMZ-Date:   20240101T000000Z\r\nHost: example.invalid:1234\r\n"
               b"Authorization: AWS4-HMAC-SHA256 Credential=a/b, SignedHeaders=host;x-amz-date, "
               b"Signature=00\r\nTransfer-Encoding: chunked\r\nx-amz-meta-Two: a\r\nx-amz-meta-two: b\r\n\r\n"
               b"3;sig=abc\r\nabc\r\n4\r\ndefg\r\n0\r\nX-Checksum: 1\r\n\r\n")
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        responses = []
        for _ in range(2):
            sock.sendall(request)
            responses.append(_recv_until(sock, b"X-Trailer: t\r\n\r\n"))
        sock.close()
        proxy.stop()
        events = proxy.events()
    upstream.close()
    assert upstream.connections == 1
    assert upstream.requests == [request, request]
    assert responses == [OK_CHUNKED, OK_CHUNKED]
    assert [(e.op, e.area, e.key, e.status, e.bytes_in, e.bytes_out) for e in events] == [
        ("PUT", "offsets", "ck/offsets/7", 200, 7, 5)] * 2


def test_boto3_host_header_and_signature_reach_upstream_unchanged():
    upstream = RawUpstream(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    with MeteringProxy(upstream.endpoint) as proxy:
        _client(proxy.endpoint).head_object(Bucket="bkt", Key="out/part-0.parquet")
        assert _ops(proxy.events()) == [("HEAD", "data", 200)]
    upstream.close()
    (request,) = upstream.requests
    head = request.decode().split("\r\n")
    assert head[0] == "HEAD /bkt/out/part-0.parquet HTTP/1.1"
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in head[1:] if line)}
    assert headers["host"] == proxy.endpoint.removeprefix("http://")
    assert "SignedHeaders=host;" in headers["authorization"]


@pytest.mark.parametrize("store_sends_continue", [False, True])
def test_expect_100_continue_answered_once_by_the_proxy(raw_client, store_sends_continue):
    final = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    upstream = RawUpstream(final, send_continue=store_sends_continue)
    head = (b"PUT /bkt/k HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
            b"Content-Length: 4\r\n\r\n")
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        sock.sendall(head)
        # The client hears 100 Continue from the proxy before it sends any body...
        assert _recv_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"body")
        # ...and exactly once: the store's own interim 100 (if any) is not relayed.
        assert _recv_until(sock, len(final)) == final
        sock.sendall(b"GET /bkt/k HTTP/1.1\r\nHost: h\r\n\r\n")
        assert _recv_until(sock, len(final)) == final
    upstream.close()
    assert upstream.requests == [head + b"body", b"GET /bkt/k HTTP/1.1\r\nHost: h\r\n\r\n"]


def test_pipelined_chunked_requests_each_end_where_their_framing_says(raw_client):
    """Requests sent back to back in one packet, chunked bodies among them whose data holds a
    blank line (where a chunked message could end, but this one does not): each reaches the
    store whole and alone, byte for byte, and each answer comes back in order."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    upstream = RawUpstream(ok)
    chunked = (b"PUT /bkt/ck/commits/%d HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"6;e=1\r\na\r\n\r\nb\r\n0\r\n\r\n")
    requests = [chunked % 1, chunked % 2, b"GET /bkt/ck/commits/2 HTTP/1.1\r\nHost: h\r\n\r\n"]
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        sock.sendall(b"".join(requests))
        assert _recv_until(sock, 3 * len(ok)) == 3 * ok
        events = _events_after(proxy, 0, 3)
    upstream.close()
    assert upstream.requests == requests
    assert [(e.op, e.key, e.bytes_in, e.bytes_out) for e in events] == [
        ("PUT", "ck/commits/1", 6, 2), ("PUT", "ck/commits/2", 6, 2), ("GET", "ck/commits/2", 0, 2)]


@pytest.mark.parametrize("who", ["client", "store", "HTTP/1.0 client"])
def test_connection_close_ends_the_client_connection_after_the_response(raw_client, who):
    """``Connection: close`` from either side, or a client speaking HTTP/1.0 (its request goes
    on as HTTP/1.0): the response is relayed whole, then the proxy closes the client connection
    (llhttp forgets the header once a message is complete, so the proxy must have asked it
    before)."""
    close = b"Connection: close\r\n"
    response = b"HTTP/1.1 200 OK\r\n" + (close if who == "store" else b"") + b"Content-Length: 0\r\n\r\n"
    request = (b"HEAD /bkt/k HTTP/1.%d\r\nHost: h\r\n%s\r\n"
               % (who != "HTTP/1.0 client", close if who == "client" else b""))
    upstream = RawUpstream(response)
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        sock.sendall(request)
        assert _recv_until(sock, len(response)) == response
        assert sock.recv(1) == b""  # closed
    upstream.close()
    assert upstream.requests == [request]


def test_response_delimited_by_close_is_relayed_then_closed(raw_client):
    """A response with neither Content-Length nor chunked framing ends when the store closes:
    relayed unchanged, counted, and the client connection closed after it."""
    response = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"
    upstream = RawUpstream(response, close_after_response=True)
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        sock.sendall(b"GET /bkt/k HTTP/1.1\r\nHost: h\r\n\r\n")
        received = b""
        while data := sock.recv(65536):
            received += data
        (event,) = _events_after(proxy, 0, 1)
    upstream.close()
    assert received == response
    assert (event.status, event.bytes_out) == (200, len(b"until the end"))


def test_store_closing_idle_connections_is_invisible(raw_client):
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    upstream = RawUpstream(ok, close_after_response=True)
    with MeteringProxy(upstream.endpoint) as proxy:
        sock = raw_client(proxy.endpoint)
        for _ in range(3):
            sock.sendall(b"GET /bkt/k HTTP/1.1\r\nHost: h\r\n\r\n")
            assert _recv_until(sock, len(ok)) == ok
        assert [e.status for e in proxy.events()] == [200, 200, 200]
    upstream.close()
    assert upstream.connections == 3


@pytest.mark.parametrize("proxy_class", [MeteringProxy, ProxyProcess], ids=["in-process", "child-process"])
def test_unreachable_store_gives_502_and_is_counted(raw_client, proxy_class):
    with proxy_class(f"http://127.0.0.1:{free_port()}") as proxy:
        sock = raw_client(proxy.endpoint)
        sock.sendall(b"DELETE /bkt/ck/offsets/3 HTTP/1.1\r\nHost: h\r\n\r\n")
        assert _recv_until(sock, b"\r\n").startswith(b"HTTP/1.1 502 ")
        # A PUT with a body: 100 Continue at once, the body read off the client, then the 502.
        sock = raw_client(proxy.endpoint)
        sock.sendall(b"PUT /bkt/ck/commits/3 HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
                     b"Content-Length: 5\r\n\r\n")
        assert _recv_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"12345")
        response = _recv_until(sock, b"(http://127.0.0.1:")
        assert response.startswith(b"HTTP/1.1 502 ") and b"Connection: close" in response
        events = _events_after(proxy, 0, 2)
    assert [(e.op, e.area, e.status, e.bytes_in) for e in events] == [
        ("DELETE", "offsets", 502, 0), ("PUT", "commits", 502, 5)]


# -- the relay against real stores (raw HTTP, SigV4-signed for the store) ---------------

def _signed(proxy_store, endpoint, method, path, body=b"", headers=()):
    """The head of an HTTP/1.1 request to the proxy at ``endpoint``, SigV4-signed with the
    store's credentials (over ``Host`` and the body's SHA-256); ``headers`` are added and
    signed. Content-Length is added unless ``headers`` frame the body otherwise."""
    request = AWSRequest(method=method, url=endpoint + path, data=body, headers=dict(headers))
    creds = BotoCredentials(proxy_store.credentials.access_key, proxy_store.credentials.secret_key)
    S3SigV4Auth(creds, "s3", proxy_store.region).add_auth(request)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {endpoint.removeprefix('http://')}"]
    lines += [f"{k}: {v}" for k, v in request.headers.items()]
    if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers) and body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(rfile, method="GET"):
    """``(status, {lower-case name: value}, body)`` of the next response on ``rfile``."""
    status = int(rfile.readline().split(b" ", 2)[1])
    headers = {}
    while (line := rfile.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if method == "HEAD" else int(headers.get("content-length", 0))
    return status, headers, rfile.read(length)


def _events_after(proxy, mark, count, timeout=10):
    """The first ``count`` events after ``mark``, waiting for them to be recorded."""
    deadline = time.monotonic() + timeout
    while len(events := proxy.events_since(mark)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return events


class CountingProxy(MeteringProxy):
    """A ``MeteringProxy`` that counts the connections it opens to the store."""

    upstream_connections = 0

    def _connect_upstream(self):
        self.upstream_connections += 1
        return super()._connect_upstream()


def test_chunked_upload_counted_by_its_payload(proxy_store, proxy):
    """A ``Transfer-Encoding: chunked`` PUT goes through whole, and ``bytes_in`` is its
    payload, not the bytes of its chunk framing. Ceph RGW 16 refuses a chunked S3 PUT
    (411, it wants a length); moto stores it."""
    body = bytes(range(256)) * 12
    host, port = proxy.endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    mark = proxy.mark()
    head = _signed(proxy_store, proxy.endpoint, "PUT", f"/{BUCKET}/ck/offsets/chunked", body,
                   [("Transfer-Encoding", "chunked")])
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if line)
    conn.request("PUT", f"/{BUCKET}/ck/offsets/chunked", body=iter([body[:1000], body[1000:2000], body[2000:]]),
                 headers=headers, encode_chunked=True)
    response = conn.getresponse()
    response.read()
    conn.close()
    expected = 411 if proxy_store.name == "ceph" else 200
    (event,) = _events_after(proxy, mark, 1)
    assert (event.op, event.area, event.status, event.bytes_in) == ("PUT", "offsets", expected, len(body))
    assert response.status == expected
    if expected == 200:
        stored = proxy_store.client().get_object(Bucket=BUCKET, Key="ck/offsets/chunked")["Body"].read()
        assert stored == body


def test_expect_100_continue_put_does_not_wait(proxy_store, proxy, raw_client):
    """The client hears ``100 Continue`` once, at once, then the store's answer."""
    body = b"c" * 2048
    head = _signed(proxy_store, proxy.endpoint, "PUT", f"/{BUCKET}/ck/commits/expect", body,
                   [("Expect", "100-continue")])
    sock = raw_client(proxy.endpoint)
    mark = proxy.mark()
    t0 = time.perf_counter()
    sock.sendall(head)
    sock.settimeout(2)  # botocore waits 1 s for a 100 before it sends the body anyway
    assert _recv_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert time.perf_counter() - t0 < 1
    sock.sendall(body)
    status, _, _ = _read_response(sock.makefile("rb"))
    assert status == 200  # not a second 100 Continue: the store's own was dropped
    (event,) = _events_after(proxy, mark, 1)
    assert (event.op, event.status, event.bytes_in) == ("PUT", 200, len(body))
    assert proxy_store.client().get_object(Bucket=BUCKET, Key="ck/commits/expect")["Body"].read() == body


def test_early_refusal_of_an_expect_put_leaves_the_connection_usable(proxy_store, proxy, raw_client):
    """A store may answer an ``Expect: 100-continue`` PUT with a final status without reading
    its body (Ceph RGW does, for a bucket that does not exist, and keeps the connection); the
    proxy has already said 100 and sent the body on, so it must not reuse that upstream
    connection, or the store reads the body as the start of the next request."""
    body = b"e" * 300
    sock = raw_client(proxy.endpoint)
    mark = proxy.mark()
    for _ in range(2):
        sock.sendall(_signed(proxy_store, proxy.endpoint, "PUT", "/no-such-bucket-here/k", body,
                             [("Expect", "100-continue")]))
        assert _recv_until(sock, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, headers, _ = _read_response(sock.makefile("rb"))
        assert status == 404
        if headers.get("connection", "").lower() == "close":  # moto, after every response
            sock = raw_client(proxy.endpoint)
        sock.sendall(_signed(proxy_store, proxy.endpoint, "HEAD", f"/{BUCKET}"))
        status, headers, _ = _read_response(sock.makefile("rb"), "HEAD")
        assert status == 200
        if headers.get("connection", "").lower() == "close":
            sock = raw_client(proxy.endpoint)
    assert [(e.op, e.status) for e in _events_after(proxy, mark, 4)] == [("PUT", 404), ("HEAD", 200)] * 2


def test_boto3_file_like_put_sends_expect_and_is_not_delayed(proxy_store, s3, proxy):
    """boto3 sends ``Expect: 100-continue`` with a file-like body and would wait for a 100."""
    mark = proxy.mark()
    t0 = time.perf_counter()
    s3.put_object(Bucket=BUCKET, Key="ck/commits/filelike", Body=io.BytesIO(b"f" * 4096))
    assert time.perf_counter() - t0 < 1
    assert _ops(_events_after(proxy, mark, 1)) == [("PUT", "commits", 200)]


def test_keep_alive_one_upstream_connection_per_client_connection(proxy_store):
    """Twenty requests on one client connection: one upstream connection, when the store
    keeps it alive (Ceph RGW); the same for boto3's PUTs with ``Expect: 100-continue``. moto
    closes every connection after one response; the proxy passes that on, so there each
    request has a client and an upstream connection of its own."""
    with CountingProxy(proxy_store.endpoint) as proxy:
        host, port = proxy.endpoint.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        client_ports = set()
        for i in range(20):
            method, body = ("PUT", b"k" * i) if i % 2 == 0 else ("HEAD", b"")
            head = _signed(proxy_store, proxy.endpoint, method, f"/{BUCKET}/ck/offsets/ka{i // 2}", body)
            headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if line)
            conn.request(method, f"/{BUCKET}/ck/offsets/ka{i // 2}", body=body, headers=headers)
            client_ports.add(conn.sock.getsockname()[1])
            response = conn.getresponse()
            response.read()
            assert response.status == 200
        conn.close()
        events = _events_after(proxy, 0, 20)
        upstream_connections = proxy.upstream_connections
        # boto3 (one pooled connection) sends its PUTs with Expect: 100-continue.
        s3 = _client(proxy.endpoint, proxy_store, max_pool_connections=1)
        for i in range(10):
            s3.put_object(Bucket=BUCKET, Key=f"ck/offsets/ka{i}", Body=b"b" * i)
            s3.head_object(Bucket=BUCKET, Key=f"ck/offsets/ka{i}")
        boto3_events = _events_after(proxy, 20, 20)
        boto3_upstream_connections = proxy.upstream_connections - upstream_connections
    assert [(e.op, e.status) for e in events + boto3_events] == [("PUT", 200), ("HEAD", 200)] * 20
    expected = 20 if proxy_store.name == "embedded" else 1
    assert (len(client_ports), upstream_connections, boto3_upstream_connections) == (expected, expected, expected)


def test_pipelined_requests_answered_in_order(proxy_store, proxy, raw_client):
    """Three requests sent back to back before any answer: three answers, in order."""
    if proxy_store.name == "embedded":
        pytest.skip("moto closes every connection after one response: nothing to pipeline on")
    key = f"/{BUCKET}/ck/sources/pipelined"
    requests = [("PUT", b"p" * 100), ("HEAD", b""), ("GET", b"")]
    mark = proxy.mark()
    sock = raw_client(proxy.endpoint)
    sock.sendall(b"".join(_signed(proxy_store, proxy.endpoint, m, key, b) + b for m, b in requests))
    rfile = sock.makefile("rb")
    answers = [_read_response(rfile, m) for m, _ in requests]
    assert [(status, body) for status, _, body in answers] == [(200, b""), (200, b""), (200, b"p" * 100)]
    assert answers[1][1]["content-length"] == "100"
    events = _events_after(proxy, mark, 3)
    assert [(e.op, e.status, e.bytes_in, e.bytes_out) for e in events] == [
        ("PUT", 200, 100, 0), ("HEAD", 200, 0, 0), ("GET", 200, 0, 100)]


def test_aborted_upload_counted_with_status_0(proxy_store, proxy, raw_client):
    """A client that goes away inside its request body: counted, status 0; the store gets no
    object (the proxy drops its upstream connection too) and the proxy serves on."""
    body = b"a" * 1000
    key = "ck/offsets/aborted"
    sock = raw_client(proxy.endpoint)
    mark = proxy.mark()
    sock.sendall(_signed(proxy_store, proxy.endpoint, "PUT", f"/{BUCKET}/{key}", body) + body[:10])
    time.sleep(0.2)  # the head and the first bytes reach the store
    sock.close()
    (event,) = _events_after(proxy, mark, 1)
    assert (event.op, event.key, event.status, event.bytes_in, event.bytes_out) == ("PUT", key, 0, 10, 0)
    with pytest.raises(ClientError) as missing:
        proxy_store.client().head_object(Bucket=BUCKET, Key=key)
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert _client(proxy.endpoint, proxy_store).head_bucket(Bucket=BUCKET)["ResponseMetadata"]["HTTPStatusCode"] == 200


# -- pure functions -------------------------------------------------------------------

@pytest.mark.parametrize("method, target, headers, op", [
    ("GET", "/b/ck/offsets/0", {}, "GET"),
    ("GET", "/b/k?versionId=3", {}, "GET"),
    ("HEAD", "/b/k", {}, "HEAD"),
    ("HEAD", "/b", {}, "HEAD"),
    ("GET", "/b?list-type=2&prefix=ck%2F&delimiter=%2F&max-keys=2", {}, "LIST"),
    ("GET", "/b/", {}, "LIST"),
    ("GET", "/b?uploads&prefix=x", {}, "LIST"),
    ("GET", "/b/k?uploadId=u", {}, "LIST"),
    ("GET", "/b?location", {}, "BUCKET"),
    ("PUT", "/b/k", {}, "PUT"),
    ("PUT", "/b/k", {"X-Amz-Copy-Source": "/b/j"}, "COPY"),
    ("PUT", "/b/k?partNumber=1&uploadId=u", {}, "MPU_PART"),
    ("PUT", "/b/k?partNumber=2&uploadId=u", {"x-amz-copy-source": "/b/j"}, "MPU_PART"),
    ("DELETE", "/b/k", {}, "DELETE"),
    ("DELETE", "/b/k?uploadId=u", {}, "MPU_ABORT"),
    ("POST", "/b?delete", {}, "BULK_DELETE"),
    ("POST", "/b?delete=", {}, "BULK_DELETE"),
    ("POST", "/b/k?uploads", {}, "MPU_INIT"),
    ("POST", "/b/k?uploadId=u", {}, "MPU_COMPLETE"),
    ("PUT", "/b", {}, "BUCKET"),
    ("DELETE", "/b", {}, "BUCKET"),
    ("PUT", "/b?versioning", {}, "BUCKET"),
    ("GET", "/", {}, "BUCKET"),
    ("POST", "/b/k?restore", {}, "OTHER"),
    ("OPTIONS", "/b/k", {}, "OTHER"),
])
def test_classify(method, target, headers, op):
    path, _, query = target.partition("?")
    assert classify(method, path, query, headers) == op
    assert op in OPS


def test_split_path_decodes_the_key():
    assert split_path("/b/out/a%20b%2Bc/%E2%82%AC") == ("b", "out/a b+c/\u20ac")
    assert split_path("/b") == ("b", "")
    assert split_path("/") == ("", "")


@pytest.mark.parametrize("key, area", [
    ("ck/offsets/0", "offsets"),
    ("ck/offsets/.0.tmp", "offsets"),
    ("ck/commits/12", "commits"),
    ("ck/state/0/1/1.delta", "state"),
    ("ck/state/0/1/2.snapshot", "state"),
    ("ck/sources/0/0", "sources"),
    ("ck/metadata", "metadata"),
    ("out/_spark_metadata/0", "_spark_metadata"),
    ("state/_spark_metadata/0", "_spark_metadata"),
    ("out/part-0.parquet", "data"),
    ("out/date=2024-01-01/part-0.parquet", "data"),
    ("out/offsets.csv", "data"),
    ("", "data"),
])
def test_area_of(key, area):
    assert area_of(key) == area
    assert area in AREAS


def test_event_duration():
    e = Event(1.0, 1.5, "GET", "GET", "data", "b", "k", 200, 0, 3)
    assert e.duration == 0.5
