"""A metering HTTP proxy in front of any S3-compatible store.

Clients (S3A's AWS SDK, boto3) use ``MeteringProxy(upstream).endpoint`` as their
S3 endpoint with path-style addressing; the proxy relays each request to the
store and records one ``infra.s3ops.Event`` per request: what S3 operation it was
(``op``), which part of a Structured Streaming checkpoint or sink it touched
(``area``), its status, timing and payload bytes.

Guarantees:

* Requests are forwarded byte for byte as they arrived: request line, every header line
  (name, case, order, spacing, value) and the body with its framing (``Content-Length``, or
  ``Transfer-Encoding: chunked`` with its chunk extensions and trailers), HTTP/1.0 ones as
  HTTP/1.0. Responses, interim ones included, are relayed the same way, with one exception
  below. That is more than a signature needs (SigV4 and SigV2 sign the method, target, some
  headers' trimmed values and the payload, so they stay valid): the h11 relay this one replaced
  re-serialized what it parsed (``Host`` moved first, values trimmed, chunked bodies re-chunked
  without their extensions, an HTTP/1.0 message sent on as HTTP/1.1), and nothing of that is
  left. (An injected fault breaks this on purpose, for the requests it matches: see
  ``infra.faults``.)
* Every request whose head arrives is counted, even if it then fails: the proxy's
  own 502 (store unreachable) is recorded with status 502, and a request cut
  short by a dropped connection with status 0. (Pipelined requests still waiting
  their turn when the connection closes were never read, so never counted.)

The HTTP parser is ``httptools`` (bindings to llhttp, the C parser of Node.js), chosen by
measured cost per request (below): it parses a head in C and calls back only per header, where
h11 ran its whole state machine in Python per event. A fresh parser reads each message head
(request line or status, headers; it rejects what is not HTTP/1.x, a ``Content-Length`` beside
``Transfer-Encoding``, a repeated ``Content-Length``, a request whose last coding is not
chunked) and decides keep-alive (``Connection``, the HTTP version); it goes on to find where a
chunked body ends, chunk sizes, extensions and trailers included, and hands over its data for
counting. The bytes the proxy relays are always the ones it received, never the parser's output.

What the relay still does by hand, because httptools does not say it: where in the bytes fed a
message ended (so: a head ends at its first blank line; a ``Content-Length`` body after that
many bytes; a chunked body, which can only end right after a blank line, is fed to llhttp up to
each blank line in turn until llhttp says it is complete), and that a response answers a HEAD
(so it has no body, RFC 9112 6.3, whatever its head says). A head longer than 64 KiB ends the
connection. The proxy's own answers (a fault's, a 502) are a status line, a few headers and a
body, written out directly.

What the proxy does itself, because it is about proxying, not HTTP:

* ``Expect: 100-continue`` (the AWS Java SDK v1 sends it on every PUT, boto3 on
  PUTs with a body): the proxy answers ``100 Continue`` to the client itself as
  soon as the head arrives (unless body bytes already came with it), forwards the head
  unchanged (``Expect`` included, as it may be signed) and streams the body straight on;
  the store's own ``100 Continue`` is then dropped, as the client already had one. So a
  PUT never waits for the SDK's 100-continue timeout, whether or not the store answers 100.
  Cost: a store that rejects a request early (a 403 or a 404 before reading the body)
  still gets the body. Ceph RGW then neither reads it nor closes, so it would
  take that body for the start of the next request (405, then 400): the proxy
  does not reuse an upstream connection whose store answered an ``Expect``
  request with a final status and no ``100``. If the store closes instead, the
  proxy drains the client's body, relays the response if it can still read it,
  else a 502.
* Connections: one thread (from a pool) and one persistent upstream connection
  per client connection, checked for a close by the store before reuse (one
  non-blocking peek); a bodiless request that meets a stale connection is retried once on
  a fresh one. The client connection closes after a response when the request or the
  response says so (``Connection: close``, HTTP/1.0), or the response ends at the store's
  close. Pipelined requests are served one after the other. TCP_NODELAY on both sockets. A
  request goes to the store in one send once the client has sent all of it (or in 64 KiB
  pieces), a response to the client when the proxy is about to wait for more of it; the
  event is recorded before a response's last bytes go out, so a client that has its
  response finds its event already there.
* Counting: the S3 vocabulary is ``infra.s3ops``, classified from the parsed target and
  the one header it reads (``x-amz-copy-source``); ``bytes_in`` of an aws-chunked upload is
  its ``x-amz-decoded-content-length``, else the body's bytes without chunk framing.
* Faults: one hook per request, ``FaultRules.decide`` (``infra.faults``), asked
  once the head has arrived and before anything is forwarded, and the response-side hook
  an action may carry (``Forward.on_response``), called with the store's whole response
  before any of it is relayed. Each fault applied is kept as an ``Injection``. With no
  rules in force (profile ``none``) a request takes exactly the path it takes without
  the fault machinery, and its headers are never gathered into a mapping (a rule that
  reads ``RequestInfo.headers`` builds it on first use).

Limits: path-style addressing only (the first path segment is the bucket),
plain-HTTP upstream only, and the store must accept whatever ``Host`` the client
used (Ceph RGW, MinIO and moto do; AWS S3 does not).

Measured overhead (2026-11-23, 16:09-17:07 UTC; the project's 2-vCPU VM shared with other
engineers' Spark jobs: load average 3-40, mostly above 10, so every figure here is a loaded one; Ceph
RGW 16.2 on memstore as ``infra.CephStore`` runs it; the proxy in its own process). Method:
``ckptbench.runs.proxy_overhead``, 1 KiB PUTs then HEADs of the same keys with boto3, direct and
proxied in pairs; per run the median of the pairs' differences, as a share of the direct PUT's
median. "h11" is the relay this one replaced (92d2061, in a worktree of its own), run
alternately against the same kind of store.

``python -m ckptbench bench --store ceph --bench "ProxyOverhead|Floor" --results DIR`` (600
pairs a run; each run its own Ceph), alternating as the load allowed::

                 runs  load avg  direct PUT   added to a PUT (% of direct PUT)        added to a HEAD
    httptools    7     3-40      3.5-8.0 ms   0.63-0.92 ms (8.6-18.5%, median 15.0%)  0.50-0.75 ms
    h11          3     3-37      3.9-5.9 ms   0.58-0.79 ms (12.4-16.7%, median 15.1%) 0.48-0.81 ms

The same function against one Ceph, the two relays alternating (new, old, new, old; 300
pairs in the first two rounds, 600 in the next two), by::

    PYTHONPATH=. python -c "
    import statistics as s, sys, infra, infra.proxy_process as pp
    from pathlib import Path
    from infra.metered import MeteredStore
    from ckptbench.runs import proxy_overhead
    with infra.CephStore() as ceph:
        ceph.create_bucket('overhead')
        for tree in sys.argv[2:]:
            pp._ROOT = Path(tree)  # the proxy child imports infra from this tree
            with MeteredStore(ceph) as m:
                o = proxy_overhead(m, 'overhead', int(sys.argv[1]))
            put = s.median(o['PUT']['direct'])
            for op, d in o.items():
                added = s.median([p - q for p, q in zip(d['proxied'], d['direct'])])
                print(tree, op, f'added {added:.3f} ms = {100 * added / put:.1f}% of PUT')
    " 600 . ../old . ../old

                 rounds  load avg  added to a PUT (% of direct PUT)   added to a HEAD
    httptools    4       11-18     0.27-0.45 ms (7.1-12.6%)           0.18-0.26 ms
    h11          4       11-18     0.35-0.45 ms (8.8-10.9%)           0.28-0.35 ms

So under this load: a HEAD cost 0.05-0.14 ms less through this relay than through h11 in
every round of the script; a PUT's difference is inside the run-to-run spread; and the bench
runs, whose spread (0.3 ms) is as large as the whole overhead, show neither relay cheaper
than the other and do not show the 10% target met by either. (The Ceph PUT itself moved from
3.5 to 8 ms between runs; the floor part that runs before the overhead part in a bench run
changed nothing: 0.47-0.63 ms added to a PUT with it, 0.59-0.62 without, alternating.)
What the load most likely adds (not measured apart) is waiting: a proxied request wakes the
proxy twice (a PUT with ``Expect: 100-continue`` four times: 8,000 recv calls for 1,000 of each,
under cProfile), and at load average 10-40 on 2 cores a wake-up can wait for a CPU.
The lead's idle-machine comparison (load 0.6-2, the same method) had h11
at 16.7-17.8% and a 60-line httptools relay without metering or faults at 8.3%: a prototype.

This module on the idle machine (nothing else running; 2026-11-23 17:18-17:30 UTC, main at
2a52348), by the bench command above, one Ceph per run::

    load avg   direct PUT   added to a PUT (% of direct PUT)   added to a HEAD
    3.3-3.7    5.4 ms       0.55 ms (10.1%)                     0.44 ms   (one other job still running)
    0.5-2.5    4.0 ms       0.28 ms (7.1%)                      0.25 ms
    0.3-0.5    3.7 ms       0.33 ms (8.8%)                      0.18 ms

So idle, a proxied 1 KiB PUT costs 7-9% more than a direct one (under the 10% the results
model asks of the proxy); with other work on the 2 cores the share rises with the load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import queue
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import httptools

from .faults import (
    Answer,
    Delay,
    FaultRules,
    Forward,
    Injection,
    KillGroup,
    LoseResponse,
    Observed,
    Replay,
    RequestInfo,
    Reset,
    profile,
)
from .s3ops import BULK_DELETE_CAPTURE, Event, area_of, describe, first_deleted_key

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

_BUF = 65536
#: The longest message head the proxy reads before it gives up on the connection (h11's default limit
#: was 16 KiB; S3 allows 8 KiB of user metadata in a head).
_MAX_HEAD = 65536
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: ``s3ops.describe`` reads one header: whether a PUT names a copy source.
_COPY_SOURCE = ("x-amz-copy-source",)


def upstream_address(upstream: str) -> tuple[str, int]:
    """``(host, port)`` of a plain ``http://host[:port]`` URL; ValueError for anything else."""
    parts = urlsplit(upstream)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"upstream must be an http://host:port URL, not {upstream!r}")
    return parts.hostname, parts.port or 80


class MeteringProxy:
    """Forwards HTTP to ``upstream`` (e.g. ``"http://127.0.0.1:9000"``) and records an
    ``Event`` per request. ``start()`` serves on a free loopback port (``endpoint``)
    from background threads; ``stop()`` closes every connection. Thread-safe.

    ``fault_profile`` (a name in ``infra.faults.PROFILES``) and ``seed`` put that profile's
    rules in force from the start; ``use_profile`` changes them later."""

    def __init__(self, upstream: str, fault_profile: str = "none", seed: int = 0) -> None:
        self.upstream = upstream
        self._upstream_addr = upstream_address(upstream)
        self.endpoint = ""
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._injections: list[Injection] = []
        self._dropped = 0  # events removed by reset(), so marks stay valid across it
        self._sessions: set[_Session] = set()
        self._faults = FaultRules()
        self._credentials: tuple[str, str, str] | None = None  # for probe_size's HEAD
        self.fault_profile, self.seed = "none", seed
        self.use_profile(fault_profile, seed)
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        # Worker threads outlive their connections: starting a thread per connection
        # cost ~0.3 ms a request against moto, which closes every connection after
        # one response.
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._handoff: queue.SimpleQueue[_Session | None] = queue.SimpleQueue()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
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
        with contextlib.suppress(OSError):  # already shut
            listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- events and faults -----------------------------------------------------

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

    def reset(self) -> None:
        """Forget every event (and injection) so far; earlier marks stay usable."""
        with self._lock:
            self._dropped += len(self._events)
            self._events = []
            self._injections = []

    def injections(self) -> list[Injection]:
        """Every fault applied since start (or the last reset), in the order applied."""
        with self._lock:
            return list(self._injections)

    def inject(self, rule) -> None:
        """Apply ``rule`` (see ``infra.faults``) to the requests that arrive from now on, after
        the rules already in force."""
        self._faults.add(rule)

    def clear_faults(self) -> None:
        self._faults.clear()

    def use_profile(self, name: str, seed: int = 0) -> None:
        """Replace the rules in force with fault profile ``name``'s, built afresh with ``seed``."""
        rules = profile(name)(seed)
        self._faults.clear()
        for rule in rules:
            self._faults.add(rule)
        self.fault_profile, self.seed = name, seed

    def sign_probes_with(self, access_key: str, secret_key: str, region: str = "us-east-1") -> None:
        """Credentials for the proxy's own HEADs (``probe_size``); without them it sends them unsigned."""
        self._credentials = (access_key, secret_key, region)

    def probe_size(self, bucket: str, key: str) -> int | None:
        """An object's size, from a HEAD the proxy sends the store itself (not recorded as an
        event); None if the store does not say."""
        # Imported here: a proxy that never probes keeps botocore's thousands of objects out of its heap.
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials as BotoCredentials

        host, port = self._upstream_addr
        url = f"{self.upstream.rstrip('/')}/{quote(bucket)}/{quote(key, safe='/~')}"
        request = AWSRequest(method="HEAD", url=url)
        if self._credentials is not None:
            access, secret, region = self._credentials
            S3SigV4Auth(BotoCredentials(access, secret), "s3", region).add_auth(request)
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("HEAD", url[len(self.upstream.rstrip("/")):], headers=dict(request.headers.items()))
            response = conn.getresponse()
            length = response.getheader("Content-Length", "")
            return int(length) if response.status == 200 and length.isdigit() else None
        except OSError:
            return None
        finally:
            conn.close()

    def _record(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def _injected(self, ex: _Exchange, fault: str) -> None:
        with self._lock:
            self._injections.append(Injection(ex.start, ex.op, ex.bucket, ex.key, fault))

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
    """The store could not be reached, or closed or broke the connection before a
    response head arrived: the client gets a 502."""


class _ResponseCut(ConnectionError):
    """The store's connection broke inside a response already being relayed."""


class _ClientReset(Exception):
    """The proxy reset the client's connection on purpose (an injected fault)."""


@dataclasses.dataclass(slots=True)
class _Exchange:
    """One request's figures, as they become known; ends as one ``Event``."""

    start: float
    method: str
    op: str
    bucket: str
    key: str
    decoded_length: str | None  # x-amz-decoded-content-length, if sent
    capture: bytearray | None  # the start of a bulk DELETE's body, for its first key
    kept: bytearray | None = None  # the request body, for a response hook that asked for it
    status: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    body_done: bool = False
    recorded: bool = False

    def event(self) -> Event:
        key = first_deleted_key(self.capture) if self.capture is not None else self.key
        bytes_in = self.bytes_in
        if self.body_done and self.decoded_length is not None and self.decoded_length.isdigit():
            bytes_in = int(self.decoded_length)
        return Event(self.start, time.time(), self.method, self.op, area_of(key), self.bucket, key,
                     self.status, bytes_in, self.bytes_out)


class _NotHttp(Exception):
    """What arrived is not an HTTP message (llhttp refused it, or its head is too long)."""


class _Message:
    """What llhttp reports of one message, as its callbacks fire (a fresh one per message)."""

    __slots__ = ("body", "done", "head_done", "headers", "keep_alive", "parser", "url")

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []  # (name as sent, value)
        self.head_done = self.done = self.keep_alive = False
        self.body: list[bytes] = []  # a chunked body's data, without its framing, since last taken
        self.parser = None  # while the head is parsed

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.head_done = True
        # Asked now: once the message is complete, llhttp has reset what it says this from.
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.done = True


class _Framed:
    """One message's head, parsed, and how its body is delimited: ``length`` bytes, or
    ``chunked`` (llhttp finds the end), or (a response only) ``until_close``; ``parser`` goes
    on with a chunked body. ``fields`` holds the values of ``_FIELDS`` that the head has."""

    __slots__ = ("chunked", "fields", "head", "length", "msg", "parser", "until_close")

    def __init__(self, head: bytes, parser_class, no_body: bool = False) -> None:
        self.head = head
        self.msg = msg = _Message()
        self.parser = msg.parser = parser_class(msg)
        try:
            self.parser.feed_data(head)
        except httptools.HttpParserError as e:
            raise _NotHttp(str(e)) from None
        finally:
            msg.parser = None
        if not msg.head_done:
            raise _NotHttp("no request or status line")
        fields = self.fields = {}
        for name, value in msg.headers:
            field = _FIELDS.get(name.lower())
            if field is not None:
                fields[field] = value.strip()
        # llhttp has checked the framing headers (no Content-Length beside Transfer-Encoding, a
        # single Content-Length, a request's chunked coding last), so they say where the body ends.
        self.length, self.chunked, self.until_close = 0, False, False
        if msg.done or no_body:
            msg.done = True
        elif "te" in fields:
            self.chunked = fields["te"].lower().endswith(b"chunked")
            self.until_close = not self.chunked  # a response's other coding: the body ends at close
        elif "length" in fields:
            self.length = int(fields["length"])
        else:
            self.until_close = True  # only a response gets here: llhttp ends a request at its head

    def header_dict(self) -> dict[str, str]:
        """Every header, lower-case name to value (the last of repeated names)."""
        return {name.decode("latin-1").lower(): value.decode("latin-1").strip() for name, value in self.msg.headers}


#: The headers the relay itself reads, lower-case name to the short name ``_Framed.fields`` uses.
_FIELDS = {b"content-length": "length", b"transfer-encoding": "te", b"expect": "expect",
           b"x-amz-decoded-content-length": "decoded", b"x-amz-copy-source": "copy", b"connection": "connection"}


def _chunked_end(framed: _Framed, data: bytes, carried: bytes) -> int:
    """Feed ``data``, the next bytes of ``framed``'s chunked body (``carried``: the last 3 bytes
    fed before), to its parser, no further than where the message ends: that position in
    ``data``, or -1 if it has not ended. A chunked message ends right after a blank line (its last
    chunk's, or its trailers'), so ``data`` goes in up to each ``\\r\\n\\r\\n`` in turn and llhttp
    says whether that was the end: httptools does not tell where in what it was fed a message
    ended."""
    joined, pos, at = carried + data, 0, 0
    view = memoryview(data)
    try:
        while (found := joined.find(b"\r\n\r\n", at)) >= 0:
            at = found + 1
            end = found + 4 - len(carried)
            if end > pos:
                framed.parser.feed_data(view[pos:end])
                pos = end
                if framed.msg.done:
                    return end
        if pos < len(data):
            framed.parser.feed_data(view[pos:])
    except httptools.HttpParserError as e:
        raise _NotHttp(str(e)) from None
    return -1


def _body(framed: _Framed, buf: bytes, more) -> Iterator[tuple[bytes, bytes, bytes]]:
    """The pieces of ``framed``'s body as they arrive, ``(raw, data, rest)``: its bytes as sent,
    their data without chunk framing (the same bytes unless chunked), and what was read past the
    body's end (b"" but with the last piece). ``buf`` is what was read already; ``more()``
    reads on (b"" at the end of a body the connection's close delimits)."""
    if framed.chunked:
        carried = b""
        while True:
            data, buf = buf or more(), b""
            end = _chunked_end(framed, data, carried)
            decoded = b"".join(framed.msg.body)
            framed.msg.body.clear()
            if end >= 0:
                yield data[:end], decoded, data[end:]
                return
            yield data, decoded, b""
            carried = (carried + data)[-3:]
    elif framed.until_close:
        if buf:
            yield buf, buf, b""
        while data := more():
            yield data, data, b""
    else:
        remaining = framed.length
        while remaining:
            data, buf = buf or more(), b""
            if len(data) > remaining:
                yield data[:remaining], data[:remaining], data[remaining:]
                return
            remaining -= len(data)
            yield data, data, b""


class _Session:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: MeteringProxy, sock: socket.socket) -> None:
        self.proxy = proxy
        self.client = sock
        self.cbuf = b""  # bytes from the client not yet taken: the start of its next message
        self.client_out: list[bytes] = []  # to send to the client before the next wait
        self.up: socket.socket | None = None
        self.ubuf = b""  # bytes from the store not yet taken
        self.up_out: list[bytes] = []  # to send to the store: a whole request, or _BUF bytes of it
        self.up_out_bytes = 0
        self.up_broken = False  # a send to the store failed during this exchange

    def abort(self) -> None:
        for sock in (self.client, self.up):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def serve(self) -> None:
        try:
            while self._exchange():
                pass
        except (OSError, EOFError, _NotHttp):
            pass  # client gone or not speaking HTTP: drop the connection
        finally:
            self._close_upstream()
            self.client.close()

    # -- one request -------------------------------------------------------------

    def _exchange(self) -> bool:
        """Forward one request and relay its response; True to keep the client connection."""
        head = self._head_from_client()
        if head is None:
            return False  # the client is done
        start = time.time()
        request = _Framed(head, httptools.HttpRequestParser)
        method = request.parser.get_method().decode("ascii")
        target = request.msg.url.decode("latin-1")
        fields = request.fields
        op, bucket, key = describe(method, target, _COPY_SOURCE if "copy" in fields else ())
        decoded = fields.get("decoded")
        ex = _Exchange(start, method, op, bucket, key, decoded.decode("latin-1") if decoded is not None else None,
                       bytearray() if op == "BULK_DELETE" else None)
        keep_alive = request.msg.keep_alive
        try:
            info = RequestInfo(method, op, bucket, key, _Headers(request), target)
            action = self.proxy._faults.decide(info)
            while type(action) is Delay:  # in this request's own thread: other connections go on
                self.proxy._injected(ex, action.fault)
                time.sleep(action.seconds)
                action = action.then
            if type(action) is Reset or (type(action) is KillGroup and not action.after_applied):
                if type(action) is KillGroup:
                    _kill_group(action.pid)
                self.proxy._injected(ex, action.fault)
                raise _ClientReset
            # As h11 had it: a client that sent Expect: 100-continue and no body bytes yet waits.
            answered_continue = (fields.get("expect", b"").lower() == b"100-continue"
                                 and request.parser.get_http_version() == "1.1" and not self.cbuf)
            if answered_continue:
                self.client.sendall(_CONTINUE)
            if type(action) is Answer:
                self.proxy._injected(ex, action.label)
                self._read_body(ex, request, forward=False)
                path = target.partition("?")[0]
                return self._answer(ex, action.status, action.reason, action.body(path), b"application/xml",
                                    close=not keep_alive)
            if type(action) is Replay:
                self.proxy._injected(ex, action.fault)
                self._read_body(ex, request, forward=False)
                return self._replay(ex, action, keep_alive)
            if type(action) is Forward and action.drop_header is not None:
                self.proxy._injected(ex, f"dropped {action.drop_header}")
                head = _without_header(head, action.drop_header)
            if type(action) is Forward and action.on_response is None:
                return self._forward(ex, request, head, answered_continue, keep_alive)
            return self._forward_buffered(ex, info, request, head, answered_continue, keep_alive, action)
        except _ClientReset:
            ex.status = 0  # the client got no response
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False  # serve() closes the socket: with SO_LINGER 0 that sends a RST
        except _UpstreamFailed as e:
            self._close_upstream()
            if not ex.body_done:
                self._read_body(ex, request, forward=False)
            body = f"metering proxy: {e} ({self.proxy.upstream})\n".encode()
            self._answer(ex, 502, "Bad Gateway", body, b"text/plain", close=True)
            return False
        finally:
            if not ex.recorded:
                self.proxy._record(ex.event())

    def _send_request(self, ex: _Exchange, request: _Framed, head: bytes, answered_continue: bool,
                      keep_body: int = 0) -> tuple[_Framed, bool]:
        """Send ``head`` and ``request``'s body (read off the client on the way) to the store; the
        store's final response head, and whether a 100 Continue came first."""
        reused = self._ensure_upstream()
        self._to_upstream(head)
        self._read_body(ex, request, forward=True, keep=keep_body)
        try:
            response, continued = self._response_head(ex.method, answered_continue)
        except _UpstreamFailed:
            if not (reused and not request.chunked and request.length == 0 and not self.up_broken):
                raise
            # The store dropped an idle connection as we reused it: once more, fresh (the
            # request is its head alone).
            self._close_upstream()
            self._ensure_upstream()
            self._to_upstream(head)
            self._flush_upstream()
            response, continued = self._response_head(ex.method, answered_continue)
        ex.status = response.parser.get_status_code()
        return response, continued

    def _forward(self, ex: _Exchange, request: _Framed, head: bytes, answered_continue: bool,
                 keep_alive: bool) -> bool:
        """Forward the request and stream the store's response to the client as it arrives; True
        if the client connection may carry another message (``keep_alive``: the request allows it)."""
        response, continued = self._send_request(ex, request, head, answered_continue)
        self.client_out.append(response.head)
        for raw, data in self._response_body(response):
            ex.bytes_out += len(data)
            self.client_out.append(raw)
        self._record(ex)
        self._flush_client()
        return self._done_upstream(ex, response, answered_continue, continued) and keep_alive

    def _forward_buffered(self, ex: _Exchange, info: RequestInfo, request: _Framed, head: bytes,
                          answered_continue: bool, keep_alive: bool,
                          action: Forward | LoseResponse | KillGroup) -> bool:
        """Forward the request, read the store's whole response, then do what ``action`` says with
        it: hand it to a response hook (and relay it, or the hook's ``Replay``), or lose it."""
        keep = action.keep_body if type(action) is Forward else 0
        forwarded = time.monotonic()
        response, continued = self._send_request(ex, request, head, answered_continue, keep)
        raw, body = [response.head], bytearray()
        for piece, data in self._response_body(response):
            raw.append(piece)
            body += data
        keep_alive = self._done_upstream(ex, response, answered_continue, continued) and keep_alive
        if type(action) is not Forward:  # the store applied it; the client never hears
            if type(action) is KillGroup:
                _kill_group(action.pid)
            self.proxy._injected(ex, action.fault)
            raise _ClientReset
        kept = bytes(ex.kept) if ex.kept is not None and ex.body_done and len(ex.kept) <= keep else None
        observed = Observed(info, ex.status, response.header_dict(), bytes(body), kept, forwarded,
                            self.proxy.probe_size)
        replay = action.on_response(observed)
        for fault in observed.faults:
            self.proxy._injected(ex, fault)
        if replay is not None:
            self.proxy._injected(ex, replay.fault)
            return self._replay(ex, replay, keep_alive)
        ex.bytes_out = len(body)
        self.client_out += raw
        self._record(ex)
        self._flush_client()
        return keep_alive

    def _done_upstream(self, ex: _Exchange, response: _Framed, answered_continue: bool, continued: bool) -> bool:
        """Keep the upstream connection for the next request if it is clean, else close it;
        whether the client's may carry another message after this response."""
        # A store that answers an ``Expect: 100-continue`` request with a final status and no
        # 100 may not have read the body the proxy sent it anyway: Ceph RGW keeps such a
        # connection and would read that body as the start of the next request.
        body_maybe_unread = answered_continue and not continued and ex.bytes_in > 0
        keep_alive = not response.until_close and response.msg.keep_alive
        if not keep_alive or self.up_broken or body_maybe_unread or self.ubuf:
            self._close_upstream()
        return keep_alive

    def _read_body(self, ex: _Exchange, request: _Framed, forward: bool, keep: int = 0) -> None:
        """Read the request body off the client, counting it, and send it on if ``forward``;
        keep its first ``keep`` bytes and one more (so a longer body shows) in ``ex.kept``."""
        if keep:
            ex.kept = bytearray()
        for raw, data, rest in _body(request, self.cbuf, self._from_client):
            self.cbuf = rest
            self._body_piece(ex, raw, data, forward, keep)
        ex.body_done = True
        if forward:
            self._flush_upstream()

    def _body_piece(self, ex: _Exchange, raw: bytes, data: bytes, forward: bool, keep: int) -> None:
        """Count a piece of the request body (``data``, ``raw`` with its chunk framing), and
        queue ``raw`` for the store if ``forward``."""
        ex.bytes_in += len(data)
        if ex.capture is not None and len(ex.capture) < BULK_DELETE_CAPTURE:
            ex.capture += data
        if ex.kept is not None and len(ex.kept) <= keep:
            ex.kept += data[:keep + 1 - len(ex.kept)]
        if forward:
            self._to_upstream(raw)
            if self.up_out_bytes >= _BUF:
                self._flush_upstream()

    def _response_head(self, method: str, answered_continue: bool) -> tuple[_Framed, bool]:
        """The store's final response head, and whether a 100 Continue came first; interim
        responses are relayed, except a 100 Continue the proxy already gave the client itself."""
        continued = False
        while True:
            head = self._head_from_upstream()
            try:
                # A response to a HEAD has no body, whatever its head says (RFC 9112, 6.3);
                # llhttp cannot be told which request a response answers.
                response = _Framed(head, httptools.HttpResponseParser, no_body=method == "HEAD")
            except _NotHttp as e:
                raise _UpstreamFailed(f"bad response from the store: {e}") from None
            status = response.parser.get_status_code()
            if status >= 200:
                return response, continued
            continued = continued or status == 100
            if not (status == 100 and answered_continue):
                self.client_out.append(head)

    def _response_body(self, response: _Framed):
        """The response body's pieces as they arrive: ``(raw, data)`` as ``_body`` has them;
        _ResponseCut if the store's connection ends or breaks first."""
        try:
            for raw, data, rest in _body(response, self.ubuf, lambda: self._from_upstream(eof_ok=response.until_close)):
                self.ubuf = rest
                yield raw, data
        except (_UpstreamFailed, _NotHttp, EOFError) as e:
            raise _ResponseCut(str(e) or "the store closed the connection") from e

    def _answer(self, ex: _Exchange, status: int, reason: str, body: bytes, content_type: bytes,
                close: bool = False) -> bool:
        """Answer the client from the proxy itself (a HEAD's answer without its body, as HTTP
        has it); whether the client connection stays."""
        headers = [(b"Content-Type", content_type), (b"Content-Length", b"%d" % len(body))]
        if ex.method == "HEAD":
            body = b""
        ex.status, ex.bytes_out = status, len(body)
        return self._respond(ex, status, reason, headers, body, not close)

    def _replay(self, ex: _Exchange, replay: Replay, keep_alive: bool) -> bool:
        """Answer the client with ``replay``, as the store might have."""
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in replay.headers]
        if not any(name.lower() == b"content-length" for name, _ in headers):
            headers.append((b"Content-Length", b"%d" % len(replay.body)))
        body = b"" if ex.method == "HEAD" else replay.body
        ex.status, ex.bytes_out = replay.status, len(body)
        return self._respond(ex, replay.status, replay.reason, headers, body, keep_alive)

    def _respond(self, ex: _Exchange, status: int, reason: str, headers: list[tuple[bytes, bytes]], body: bytes,
                 keep_alive: bool) -> bool:
        """Send a response of the proxy's own making (``Connection: close`` added when the client
        connection is to close); returns ``keep_alive``."""
        if not keep_alive:
            headers = [*headers, (b"Connection", b"close")]
        lines = [b"HTTP/1.1 %d %s" % (status, reason.encode("latin-1"))]
        lines += [name + b": " + value for name, value in headers]
        self.client_out.append(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        self._record(ex)
        self._flush_client()
        return keep_alive

    def _record(self, ex: _Exchange) -> None:
        ex.recorded = True
        self.proxy._record(ex.event())

    # -- the client side -------------------------------------------------------

    def _head_from_client(self) -> bytes | None:
        """The next message head from the client; None if it closed before sending one."""
        try:
            head, self.cbuf = _head(self.cbuf, self._from_client)
        except EOFError:
            return None
        return head

    def _from_client(self) -> bytes:
        data = self.client.recv(_BUF)
        if not data:
            raise EOFError
        return data

    def _flush_client(self) -> None:
        if self.client_out:
            data, self.client_out = b"".join(self.client_out), []
            self.client.sendall(data)

    # -- the store side ----------------------------------------------------------

    def _ensure_upstream(self) -> bool:
        """Have a usable upstream connection: True if reused, False if new; _UpstreamFailed
        if the store cannot be reached."""
        self.up_broken = False
        if self.up is not None:
            # Readable while idle means the store closed it (or sent junk): replace it.
            try:
                self.up.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return True
            except OSError:
                pass
            self._close_upstream()
        try:
            self.up = self.proxy._connect_upstream()
        except OSError as e:
            raise _UpstreamFailed(f"cannot connect to the store: {e}") from None
        return False

    def _head_from_upstream(self) -> bytes:
        try:
            head, self.ubuf = _head(self.ubuf, self._from_upstream)
        except EOFError:
            raise _UpstreamFailed("the store closed the connection") from None
        except _NotHttp as e:
            raise _UpstreamFailed(f"bad response from the store: {e}") from None
        return head

    def _from_upstream(self, eof_ok: bool = False) -> bytes:
        """The next bytes from the store, after sending what is pending to the client;
        _UpstreamFailed if the connection ends (unless ``eof_ok``: then b"") or breaks."""
        self._flush_client()
        try:
            data = self.up.recv(_BUF)
        except OSError as e:
            raise _UpstreamFailed(f"no response from the store: {e}") from None
        if not data and not eof_ok:
            raise EOFError
        return data

    def _to_upstream(self, data: bytes) -> None:
        # A failed send does not end the exchange: the client's body must still be
        # read off its connection, and the store may have answered before closing.
        if not self.up_broken:
            self.up_out.append(data)
            self.up_out_bytes += len(data)

    def _flush_upstream(self) -> None:
        if self.up_out:
            data, self.up_out, self.up_out_bytes = b"".join(self.up_out), [], 0
            if not self.up_broken:
                try:
                    self.up.sendall(data)
                except OSError:
                    self.up_broken = True

    def _close_upstream(self) -> None:
        self.up_out, self.up_out_bytes, self.ubuf = [], 0, b""
        if self.up is not None:
            self.up.close()
            self.up = None


class _Headers(Mapping):
    """A request's headers for the fault rules, lower-case name to value: built on first use,
    so a request no rule looks at never builds them."""

    __slots__ = ("_dict", "_framed")

    def __init__(self, framed: _Framed) -> None:
        self._framed, self._dict = framed, None

    def _headers(self) -> dict[str, str]:
        if self._dict is None:
            self._dict = self._framed.header_dict()
        return self._dict

    def __getitem__(self, name: str) -> str:
        return self._headers()[name]

    def __iter__(self):
        return iter(self._headers())

    def __len__(self) -> int:
        return len(self._headers())


def _head(buf: bytes, more) -> tuple[bytes, bytes]:
    """The message head at the start of ``buf`` (reading on with ``more()`` as needed; EOFError
    if the connection ends first), and what follows it."""
    at = 0
    while (end := buf.find(b"\r\n\r\n", at)) < 0:
        if len(buf) > _MAX_HEAD:
            raise _NotHttp(f"no message head in the first {_MAX_HEAD} bytes")
        at = max(0, len(buf) - 3)
        data = more()
        if not data:
            raise EOFError
        buf += data
    return buf[:end + 4], buf[end + 4:]


def _without_header(head: bytes, name: str) -> bytes:
    """``head`` without its ``name`` header lines (any case)."""
    drop = name.lower().encode("latin-1")
    lines = head.split(b"\r\n")
    return b"\r\n".join([lines[0], *(line for line in lines[1:] if line.partition(b":")[0].lower() != drop)])


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` is in; it may be gone already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
