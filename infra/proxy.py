"""A metering HTTP proxy in front of any S3-compatible store.

Clients (S3A's AWS SDK, boto3) use ``MeteringProxy(upstream).endpoint`` as their
S3 endpoint with path-style addressing; the proxy relays each request to the
store and records one ``Event`` per request: what S3 operation it was (``op``),
which part of a Structured Streaming checkpoint or sink it touched (``area``),
its status, timing and payload bytes.

Guarantees:

* Requests are forwarded unchanged: the request head goes upstream byte for byte
  (method, target, every header including the client's ``Host``, which SigV4 and
  SigV2 sign) and so does the body, with its framing (``Content-Length`` or
  ``Transfer-Encoding: chunked``). Responses, interim ones included, are relayed
  unchanged, with one exception below. Signatures therefore stay valid. (An
  injected fault breaks this on purpose, for the requests it matches: see
  ``infra.faults``.)
* Every request whose head arrives is counted, even if it then fails: the proxy's
  own 502 (store unreachable) is recorded with status 502, and a request cut
  short by a dropped connection with status 0.

``Expect: 100-continue`` (the AWS Java SDK v1 sends it on every PUT, boto3 on
PUTs with a body): the proxy answers ``100 Continue`` to the client itself at
once, forwards the head unchanged (``Expect`` included, as it may be signed) and
streams the body straight on; the store's own ``100 Continue`` is then dropped,
as the client already had one. So a PUT never waits for the SDK's
100-continue timeout, whether or not the store answers 100. Cost: a store that
rejects a request early (say a 403 or a 412 before reading the body) still gets
the body; if it closes the connection instead of draining it, the proxy drains
the client's body, relays the response if it can still read it, else a 502.

Connections: HTTP/1.1 keep-alive on both sides, one thread (from a pool) and
one persistent upstream connection per client connection (checked for a close
by the store before reuse; a bodiless request that meets a stale connection is
retried once on a fresh one). TCP_NODELAY on both sockets. Limits: path-style
addressing only (the first path segment is the bucket), plain-HTTP upstream
only, and the store must accept whatever ``Host`` the client used (Ceph RGW,
MinIO and moto do; AWS S3 does not).

Each exchange is one pass through ``_Session._exchange``: read the head, classify,
forward, relay, record; ``FaultRules.decide`` (``infra.faults``) is asked there,
once per request, before anything is forwarded.

Measured overhead (medians; a 2-vCPU VM shared with other jobs; the proxy in its
own process, as the lab runs it, see ``infra.proxy_process``; direct and proxied
requests interleaved one by one)::

    moto, boto3, 300 x put_object(1 KiB) and 300 x head_object, 6 runs:
        PUT   direct 5.0-5.6 ms   proxied 5.6-6.3 ms   +0.57-0.69 ms
        HEAD  direct 4.6-5.1 ms   proxied 5.1-5.7 ms   +0.49-0.59 ms
    keep-alive HTTP server answering after 2 ms, raw-socket client, 500 HEADs x 3:
        direct 2.18-2.23 ms       proxied 2.33-2.39 ms +0.15-0.20 ms
    proxy CPU time per request (1 KiB PUT, from /proc/<pid>/stat): 30-40 us

moto's server (werkzeug) sends ``Connection: close`` on every response, so each
proxied request costs two TCP connections and an accept instead of one
connection: that, not the proxy's work, is most of the difference against moto.
On Ceph RGW the suite's own figure (``benchmarks/floor.py``, in the README) applies. Measured
with throwaway scripts (not kept): ``python -c "from infra.proxy import
MeteringProxy; ..."`` in a child process in front of ``EmbeddedStore`` (or of a
20-line socket server that sleeps 2 ms per request), and in the parent a direct
and a proxied client (boto3, or raw sockets for the 2 ms server) timing each
call with ``time.perf_counter()``.
"""

from __future__ import annotations

import dataclasses
import queue
import select
import socket
import threading
import time
from typing import Callable, Mapping
from urllib.parse import urlsplit

from .faults import Answer, Fault, FaultRules, Forward, RequestInfo
from .s3ops import BULK_DELETE_CAPTURE, Event, area_of, describe, first_deleted_key

_BUF = 65536
_MAX_LINE = 65536
_MAX_HEADERS = 256
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def upstream_address(upstream: str) -> tuple[str, int]:
    """``(host, port)`` of a plain ``http://host[:port]`` URL; ValueError for anything else."""
    parts = urlsplit(upstream)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"upstream must be an http://host:port URL, not {upstream!r}")
    return parts.hostname, parts.port or 80


class MeteringProxy:
    """Forwards HTTP to ``upstream`` (e.g. ``"http://127.0.0.1:9000"``) and records an
    ``Event`` per request. ``start()`` serves on a free loopback port (``endpoint``)
    from background threads; ``stop()`` closes every connection. Thread-safe."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._upstream_addr = upstream_address(upstream)
        self.endpoint = ""
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._dropped = 0  # events removed by reset(), so marks stay valid across it
        self._sessions: set[_Session] = set()
        self._faults = FaultRules()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        # Worker threads outlive their connections: starting a thread per connection
        # cost ~0.3 ms a request against moto, which closes every connection after
        # one response.
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._handoff: queue.SimpleQueue[_Session | None] = queue.SimpleQueue()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> "MeteringProxy":
        # Port 0: the kernel picks a free port at bind time, so nothing can take it
        # in between, and the socket listens before start() returns.
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener = listener
        self.endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        self._acceptor = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        except OSError:
            pass
        listener.close()
        self._acceptor.join(5)
        with self._lock:
            sessions = list(self._sessions)
        for s in sessions:
            s.abort()
        for _ in self._workers:
            self._handoff.put(None)
        for w in self._workers:
            w.join(5)
        self._workers = []
        self._idle_workers = 0

    def __enter__(self) -> "MeteringProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- events ----------------------------------------------------------------

    def events(self) -> list[Event]:
        """A copy of every event recorded since start (or the last reset), in completion order."""
        with self._lock:
            return list(self._events)

    def mark(self) -> int:
        """A position in the event stream, for ``events_since``."""
        with self._lock:
            return self._dropped + len(self._events)

    def events_since(self, mark: int) -> list[Event]:
        """The events completed after ``mark()`` returned ``mark``."""
        with self._lock:
            return self._events[max(0, mark - self._dropped):]

    def inject(self, fault: Fault) -> None:
        """Apply ``fault`` to the requests that arrive from now on (see ``infra.faults``)."""
        self._faults.add(fault)

    def clear_faults(self) -> None:
        self._faults.clear()

    def reset(self) -> None:
        """Forget every event so far; earlier marks stay usable."""
        with self._lock:
            self._dropped += len(self._events)
            self._events = []

    def _record(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    # -- serving ---------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # stop() shut the listener
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = _Session(self, sock)
            with self._lock:
                self._sessions.add(session)
                spawn = self._idle_workers == 0
                if not spawn:
                    self._idle_workers -= 1
            if spawn:
                worker = threading.Thread(target=self._work, name="proxy-conn", daemon=True)
                self._workers.append(worker)
                worker.start()
            self._handoff.put(session)

    def _work(self) -> None:
        while (session := self._handoff.get()) is not None:
            session.serve()
            with self._lock:
                self._sessions.discard(session)
                self._idle_workers += 1

    def _connect_upstream(self) -> socket.socket:
        sock = socket.create_connection(self._upstream_addr, timeout=10)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


class _UpstreamFailed(Exception):
    """The store closed or broke the connection before a response head arrived."""


class _Session:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: MeteringProxy, sock: socket.socket) -> None:
        self.proxy = proxy
        self.client = sock
        self.crfile = sock.makefile("rb", buffering=_BUF)
        self.up: socket.socket | None = None
        self.urfile = None
        self.up_broken = False  # a send to the store failed during this exchange

    def abort(self) -> None:
        for sock in (self.client, self.up):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve(self) -> None:
        try:
            while True:
                head = _read_head(self.crfile)
                if head is None or not self._exchange(*head):
                    break
        except (OSError, ValueError):
            pass  # client gone or not speaking HTTP: drop the connection
        finally:
            self._close_upstream()
            self.crfile.close()
            self.client.close()

    def _exchange(self, head: bytes, request_line: str, headers: dict[str, str]) -> bool:
        """Forward one request and relay its response; True to keep the client connection."""
        start = time.time()
        method, target, version = request_line.split(" ", 2)
        op, bucket, key = describe(method, target, headers)
        capture = bytearray() if op == "BULK_DELETE" else None
        status = bytes_in = 0
        recorded = False

        def record(bytes_out: int) -> None:
            # Called just before the response's last bytes go out, so a client that
            # has its response finds the event already there.
            nonlocal recorded
            recorded = True
            subject = first_deleted_key(capture) if capture is not None else key
            self.proxy._record(Event(start, time.time(), method, op, area_of(subject), bucket, subject,
                                     status, bytes_in, bytes_out))

        def to_upstream(data) -> None:
            if capture is not None and len(capture) < BULK_DELETE_CAPTURE:
                capture.extend(data)
            self._send_upstream(data)

        action = self.proxy._faults.decide(RequestInfo(method, op, bucket, key, headers))
        if isinstance(action, Forward) and action.drop_header:
            head = _without_header(head, action.drop_header)
        try:
            expect = version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue"
            if expect:
                self.client.sendall(_CONTINUE)
            framing = _request_framing(headers)
            if isinstance(action, Answer):
                bytes_in = _relay_body(self.crfile, lambda data: None, framing, b"")
                status = action.status
                body = action.body(target.partition("?")[0])
                record(len(body))
                self.client.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\n"
                                    b"Content-Length: %d\r\n\r\n%s"
                                    % (status, action.reason.encode(), len(body), body))
                return framing != "close"
            reused = self._ensure_upstream()
            if reused is None:
                raise _UpstreamFailed("cannot connect to the store")
            body_len = _relay_body(self.crfile, to_upstream, framing, head)
            bytes_in = int(headers.get("x-amz-decoded-content-length", body_len))
            try:
                response = self._read_response(expect)
            except _UpstreamFailed:
                if not (reused and framing is None and not self.up_broken):
                    raise
                # The store dropped an idle connection as we reused it: once more, fresh.
                self._close_upstream()
                if self._ensure_upstream() is None:
                    raise
                self._send_upstream(head)
                response = self._read_response(expect)
            rhead, status_line, rheaders = response
            rversion, code = status_line.split(" ", 2)[:2]
            status = int(code)
            rframing = _response_framing(method, status, rheaders)
            _relay_body(self.urfile, self.client.sendall, rframing, rhead, record)
            keep = (
                _persistent(version, headers) and _persistent(rversion, rheaders)
                and rframing != "close" and not self.up_broken
            )
            if not keep:
                self._close_upstream()
            return keep
        except _UpstreamFailed as e:
            status = 502
            record(0)
            body = f"metering proxy: {e} ({self.proxy.upstream})\n".encode()
            self.client.sendall(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            return False
        finally:
            if not recorded:
                record(0)

    def _ensure_upstream(self) -> bool | None:
        """Have a usable upstream connection: True if reused, False if new, None if unreachable."""
        self.up_broken = False
        if self.up is not None:
            # Readable while idle means the store closed it (or sent junk): replace it.
            if not select.select([self.up], [], [], 0)[0]:
                return True
            self._close_upstream()
        try:
            self.up = self.proxy._connect_upstream()
        except OSError:
            return None
        self.urfile = self.up.makefile("rb", buffering=_BUF)
        return False

    def _send_upstream(self, data) -> None:
        # A failed send does not end the exchange: the client's body must still be
        # read off its connection, and the store may have answered before closing.
        if not self.up_broken:
            try:
                self.up.sendall(data)
            except OSError:
                self.up_broken = True

    def _read_response(self, answered_continue: bool) -> tuple[bytes, str, dict[str, str]]:
        """The final response head from the store; interim ones are relayed, except a
        100 Continue the proxy already gave the client itself."""
        while True:
            try:
                response = _read_head(self.urfile)
            except (OSError, ValueError) as e:
                raise _UpstreamFailed(f"no response from the store: {e}") from e
            if response is None:
                raise _UpstreamFailed("the store closed the connection")
            rhead, status_line, _ = response
            code = status_line.split(" ", 2)[1]
            if not code.startswith("1"):
                return response
            if not (code == "100" and answered_continue):
                self.client.sendall(rhead)

    def _close_upstream(self) -> None:
        if self.up is not None:
            self.urfile.close()
            self.up.close()
            self.up = self.urfile = None


# -- HTTP/1.1 framing -------------------------------------------------------------

def _without_header(head: bytes, name: str) -> bytes:
    prefix = name.lower().encode() + b":"
    return b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(prefix))


def _read_head(rfile) -> tuple[bytes, str, dict[str, str]] | None:
    """``(raw head, start line, {lower-case name: value})``, or None at EOF before a message."""
    line = rfile.readline(_MAX_LINE)
    while line in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore blank lines before a message
        line = rfile.readline(_MAX_LINE)
    if not line:
        return None
    lines = [line]
    headers: dict[str, str] = {}
    while True:
        line = rfile.readline(_MAX_LINE)
        if not line.endswith(b"\n") or len(lines) > _MAX_HEADERS:
            raise ValueError("truncated or oversized HTTP head")
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
        name, sep, value = line.partition(b":")
        if sep:
            name = name.strip().lower().decode("latin-1")
            value = value.strip().decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return b"".join(lines), lines[0].rstrip(b"\r\n").decode("latin-1"), headers


def _request_framing(headers: Mapping[str, str]) -> str | int | None:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked"
    length = int(headers.get("content-length", 0))
    return length or None


def _response_framing(method: str, status: int, headers: Mapping[str, str]) -> str | int | None:
    if method == "HEAD" or status in (204, 304):
        return None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked"
    if "content-length" in headers:
        return int(headers["content-length"]) or None
    return "close"


def _relay_body(rfile, send: Callable, framing: str | int | None, head: bytes,
                on_last: Callable[[int], None] = lambda total: None) -> int:
    """Send ``head`` and then the body framed by ``framing`` (a length, "chunked",
    "close" or None) from ``rfile``; the head goes out with the first body piece.
    ``on_last(payload length)`` runs just before the last send. Returns the payload length."""
    if framing is None:
        on_last(0)
        send(head)
        return 0
    if framing == "chunked":
        return _relay_chunked(rfile, send, head, on_last)
    total = 0
    pending = head
    while True:
        piece = rfile.read1(_BUF if framing == "close" else min(_BUF, framing - total))
        if not piece:
            if framing != "close":
                raise ConnectionError("connection closed inside a body")
            on_last(total)
            if pending:
                send(pending)
            return total
        total += len(piece)
        if total == framing:
            on_last(total)
        send(pending + piece if pending else piece)
        pending = b""
        if total == framing:
            return total


def _relay_chunked(rfile, send: Callable, head: bytes, on_last: Callable[[int], None]) -> int:
    total = 0
    pending = bytearray(head)
    while True:
        line = rfile.readline(_MAX_LINE)
        if not line.endswith(b"\n"):
            raise ConnectionError("bad chunk header")
        pending += line
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            break
        total += size
        left = size + 2  # the data and its CRLF
        while left:
            piece = rfile.read1(min(_BUF, left))
            if not piece:
                raise ConnectionError("connection closed inside a chunk")
            left -= len(piece)
            pending += piece
            send(pending)
            pending = bytearray()
    while True:  # trailer fields, then the blank line
        line = rfile.readline(_MAX_LINE)
        if not line.endswith(b"\n"):
            raise ConnectionError("bad chunked trailer")
        pending += line
        if line in (b"\r\n", b"\n"):
            break
    on_last(total)
    send(pending)
    return total


def _persistent(version: str, headers: Mapping[str, str]) -> bool:
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
