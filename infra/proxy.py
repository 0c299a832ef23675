"""A metering HTTP proxy in front of any S3-compatible store.

Clients (S3A's AWS SDK, boto3) use ``MeteringProxy(upstream).endpoint`` as their
S3 endpoint with path-style addressing; the proxy relays each request to the
store and records one ``infra.s3ops.Event`` per request: what S3 operation it was
(``op``), which part of a Structured Streaming checkpoint or sink it touched
(``area``), its status, timing and payload bytes.

Guarantees:

* Requests are forwarded unchanged in everything a signature covers: method,
  target, every header with its name's case and its value (the client's ``Host``
  included, which SigV4 and SigV2 sign), in the order sent except that ``Host``
  goes first, and the body's bytes, with its framing (``Content-Length``, or
  ``Transfer-Encoding: chunked`` with its trailers). Responses, interim ones
  included, are relayed the same way, with one exception below. SigV4 and SigV2
  signatures therefore stay valid. (An injected fault breaks this on purpose, for
  the requests it matches: see ``infra.faults``.)
* Every request whose head arrives is counted, even if it then fails: the proxy's
  own 502 (store unreachable) is recorded with status 502, and a request cut
  short by a dropped connection with status 0. (Pipelined requests still waiting
  their turn when the connection closes were never read, so never counted.)

What ``h11`` does (one ``h11.Connection(h11.SERVER)`` toward the client and one
``h11.Connection(h11.CLIENT)`` toward the store per client connection): parsing
request and response heads, the body framing of both (Content-Length, chunked
with trailers, read-until-close), keep-alive (when a connection may carry another
message, ``Connection: close``, HTTP/1.0 peers), pipelined requests, and the
``Expect: 100-continue`` bookkeeping. The proxy hands h11's events from one side to
the other: the received ``Request``/``Response`` objects themselves, so h11 writes
the header names back in their original case (its raw items). What h11 writes
differently from what arrived, none of it signed: ``Host`` first (RFC 9110's
advice to clients), a value's surrounding spaces trimmed, ``Transfer-Encoding``'s
value in lower case, a chunked body re-chunked (same bytes and trailers; chunk
extensions dropped: the AWS Java SDK v1 puts its aws-chunked chunk signatures
inside a body it frames with Content-Length, which passes unchanged), an HTTP/1.0
message sent on as HTTP/1.1, a chunked response's ``Transfer-Encoding`` moved to
the end of its headers, and a response body the store delimits by closing sent on
chunked. h11 never adds a header to a request; to a response only ``Connection:
close`` when the client connection is to close (the client asked for it, or
speaks HTTP/1.0), and the chunked framing just named.

What the proxy still does itself, because it is about proxying, not HTTP:

* ``Expect: 100-continue`` (the AWS Java SDK v1 sends it on every PUT, boto3 on
  PUTs with a body): the proxy answers ``100 Continue`` to the client itself as
  soon as the head arrives, forwards the head unchanged (``Expect`` included, as it
  may be signed) and streams the body straight on; the store's own ``100
  Continue`` is then dropped, as the client already had one. So a PUT never waits
  for the SDK's 100-continue timeout, whether or not the store answers 100. Cost:
  a store that rejects a request early (a 403 or a 404 before reading the body)
  still gets the body. Ceph RGW then neither reads it nor closes, so it would
  take that body for the start of the next request (405, then 400): the proxy
  does not reuse an upstream connection whose store answered an ``Expect``
  request with a final status and no ``100``. If the store closes instead, the
  proxy drains the client's body, relays the response if it can still read it,
  else a 502.
* Connections: one thread (from a pool) and one persistent upstream connection
  per client connection, checked for a close by the store before reuse; a
  bodiless request that meets a stale connection is retried once on a fresh one.
  TCP_NODELAY on both sockets. A request goes to the store in one send once the
  client has sent all of it (or in 64 KiB pieces), a response to the client when
  the proxy is about to wait for more of it; the event is recorded before a
  response's last bytes go out, so a client that has its response finds its
  event already there.
* Counting: the S3 vocabulary is ``infra.s3ops``; ``bytes_in`` of an aws-chunked
  upload is its ``x-amz-decoded-content-length``, else the body bytes as h11
  decoded them (without chunk framing).
* Faults: one hook per request, ``FaultRules.decide`` (``infra.faults``), asked
  once the head has arrived and before anything is forwarded, and the response-side hook
  an action may carry (``Forward.on_response``), called with the store's whole response
  before any of it is relayed. Each fault applied is kept as an ``Injection``. With no
  rules in force (profile ``none``) a request takes exactly the path it takes without
  the fault machinery.

Limits: path-style addressing only (the first path segment is the bucket),
plain-HTTP upstream only, and the store must accept whatever ``Host`` the client
used (Ceph RGW, MinIO and moto do; AWS S3 does not).

Measured overhead (2026-11-23; the project's 2-vCPU VM, shared: other jobs' Spark
JVMs kept the load average at 4-18 throughout; Ceph RGW 16.2 on memstore as
``infra.CephStore`` runs it; the proxy in its own process, as the lab runs it).
``ckptbench.measure.proxy_overhead``: boto3, 800 pairs of 1 KiB PUTs then HEADs of
the same keys, direct and proxied interleaved; per run the median of the pairs'
differences. 10 runs of this relay and 10 of the hand-written one it replaced
(58a4e43), alternating (old, new, new, old, ...)::

                   direct PUT   added to a PUT (% of direct PUT)   added to a HEAD
    h11 relay      3.6-6.2 ms   0.61-1.17 ms, median 0.84 (15-21%, median 18%)   0.43-0.86 ms, median 0.60
    hand-written   3.3-5.9 ms   0.56-1.25 ms, median 0.82 (15-21%, median 17%)   0.40-0.69 ms, median 0.57
    null TCP relay (a 20-line recv/sendall thread pair, no HTTP), 3 runs:
                   3.9-4.9 ms   0.00-0.20 ms (0-4%)                0.10 ms

So on this machine under that load neither relay meets 10% of a 1 KiB PUT, and h11
is not measurably slower than the hand-written relay (the run-to-run spread,
0.6 ms, dwarfs the 0.02 ms between the medians). What costs is the proxy's own
per-request work, not the extra hop: the proxy thread spent 0.39-0.43 ms of CPU
per proxied HEAD with h11, 0.38-0.39 ms with the hand-written relay
(``/proc/<pid>/task/*/schedstat``, 1000 HEADs, 2 runs each); the h11 calls of one
proxied PUT alone take 0.13 ms in a loop without sockets. On a quieter machine the
notes (``/work/shared/notes/environment.md``) had the hand-written relay at
+0.4 ms on a 4.2 ms PUT.

To measure (in a checkout; the other trees, e.g. ``git archive 58a4e43 | tar -x -C
../old``, run alternately against the same Ceph)::

    PYTHONPATH=. python -c "
    import statistics as s, sys, infra, infra.proxy_process as pp
    from pathlib import Path
    from infra.metered import MeteredStore
    from ckptbench.measure import proxy_overhead
    with infra.CephStore() as ceph:
        ceph.create_bucket('overhead')
        for tree in sys.argv[1:]:
            pp._ROOT = Path(tree)  # the proxy child imports infra from this tree
            with MeteredStore(ceph) as m:
                o = proxy_overhead(m, 'overhead', 800)
            put = s.median(o['PUT']['direct'])
            for op, d in o.items():
                direct = s.median(d['direct'])
                added = s.median([p - q for p, q in zip(d['proxied'], d['direct'])])
                print(tree, op, f'direct {direct:.2f} ms, added {added:.3f} ms = {100 * added / put:.1f}% of PUT')
    " . ../old . ../old
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import queue
import select
import signal
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import h11

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
_CONTINUE = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")


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


class _Session:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: MeteringProxy, sock: socket.socket) -> None:
        self.proxy = proxy
        self.client = sock
        self.cconn = h11.Connection(h11.SERVER)
        self.client_out: list[bytes] = []  # to send to the client before the next wait
        self.up: socket.socket | None = None
        self.uconn: h11.Connection | None = None
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
                self.cconn.start_next_cycle()
        except (OSError, h11.ProtocolError):
            pass  # client gone or not speaking HTTP: drop the connection
        finally:
            self._close_upstream()
            self.client.close()

    # -- one request -------------------------------------------------------------

    def _exchange(self) -> bool:
        """Forward one request and relay its response; True to keep the client connection."""
        request = self._client_event()
        if type(request) is not h11.Request:
            return False  # ConnectionClosed: the client is done
        start = time.time()
        method = request.method.decode("ascii")
        target = request.target.decode("ascii")
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in request.headers}
        op, bucket, key = describe(method, target, headers)
        ex = _Exchange(start, method, op, bucket, key, headers.get("x-amz-decoded-content-length"),
                       bytearray() if op == "BULK_DELETE" else None)
        try:
            info = RequestInfo(method, op, bucket, key, headers, target)
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
            answered_continue = self.cconn.they_are_waiting_for_100_continue
            if answered_continue:
                self._to_client(_CONTINUE)
                self._flush_client()
            if type(action) is Answer:
                self.proxy._injected(ex, action.label)
                self._read_body(ex, forward=False)
                path = target.partition("?")[0]
                self._answer(ex, action.status, action.reason, action.body(path), b"application/xml")
            elif type(action) is Replay:
                self.proxy._injected(ex, action.fault)
                self._read_body(ex, forward=False)
                self._replay(ex, action)
            else:
                if type(action) is Forward and action.drop_header is not None:
                    self.proxy._injected(ex, f"dropped {action.drop_header}")
                if (type(action) is Forward and action.drop_header is not None) or request.http_version != b"1.1":
                    request = _rebuilt(request, action.drop_header if type(action) is Forward else None)
                if type(action) is Forward and action.on_response is None:
                    self._forward(ex, request, answered_continue)
                else:
                    self._forward_buffered(ex, info, request, answered_continue, action)
        except _ClientReset:
            ex.status = 0  # the client got no response
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False  # serve() closes the socket: with SO_LINGER 0 that sends a RST
        except _UpstreamFailed as e:
            self._close_upstream()
            if self.cconn.their_state is h11.SEND_BODY:
                self._read_body(ex, forward=False)
            body = f"metering proxy: {e} ({self.proxy.upstream})\n".encode()
            self._answer(ex, 502, "Bad Gateway", body, b"text/plain", close=True)
            return False
        finally:
            if not ex.recorded:
                self.proxy._record(ex.event())
        return self.cconn.our_state is h11.DONE and self.cconn.their_state is h11.DONE

    def _send_request(self, ex: _Exchange, request: h11.Request, answered_continue: bool,
                      keep_body: int = 0) -> tuple[h11.Response, bool]:
        """Send ``request`` (its body read off the client on the way) to the store; the store's
        final response head, and whether a 100 Continue came first."""
        reused = self._ensure_upstream()
        self._to_upstream(request)
        self._read_body(ex, forward=True, keep=keep_body)
        try:
            response, continued = self._response(answered_continue)
        except _UpstreamFailed:
            if not (reused and ex.bytes_in == 0 and not self.up_broken):
                raise
            # The store dropped an idle connection as we reused it: once more, fresh.
            self._close_upstream()
            self._ensure_upstream()
            self._to_upstream(request)
            self._to_upstream(h11.EndOfMessage())
            self._flush_upstream()
            response, continued = self._response(answered_continue)
        ex.status = response.status_code
        if response.http_version != b"1.1":  # h11 sends HTTP/1.1 only
            response = h11.Response(status_code=response.status_code, headers=response.headers,
                                    reason=response.reason)
        return response, continued

    def _forward(self, ex: _Exchange, request: h11.Request, answered_continue: bool) -> None:
        """Forward ``request`` and stream the store's response to the client as it arrives."""
        response, continued = self._send_request(ex, request, answered_continue)
        self._to_client(response)
        while True:
            try:
                event = self._upstream_event()
            except _UpstreamFailed as e:
                raise _ResponseCut(str(e)) from e
            if type(event) is h11.Data:
                ex.bytes_out += len(event.data)
                self._to_client(event)
            else:  # EndOfMessage
                self._record(ex)
                self._to_client(event)
                self._flush_client()
                break
        self._done_upstream(ex, answered_continue, continued)

    def _forward_buffered(self, ex: _Exchange, info: RequestInfo, request: h11.Request, answered_continue: bool,
                          action: Forward | LoseResponse | KillGroup) -> None:
        """Forward ``request``, read the store's whole response, then do what ``action`` says with
        it: hand it to a response hook (and relay it, or the hook's ``Replay``), or lose it."""
        keep = action.keep_body if type(action) is Forward else 0
        forwarded = time.monotonic()
        response, continued = self._send_request(ex, request, answered_continue, keep)
        body, trailers = bytearray(), []
        while True:
            try:
                event = self._upstream_event()
            except _UpstreamFailed as e:
                raise _ResponseCut(str(e)) from e
            if type(event) is h11.Data:
                body += event.data
            else:  # EndOfMessage
                trailers = event.headers
                break
        self._done_upstream(ex, answered_continue, continued)
        if type(action) is not Forward:  # the store applied it; the client never hears
            if type(action) is KillGroup:
                _kill_group(action.pid)
            self.proxy._injected(ex, action.fault)
            raise _ClientReset
        kept = bytes(ex.kept) if ex.kept is not None and ex.body_done and len(ex.kept) <= keep else None
        observed = Observed(info, response.status_code,
                            {name.decode("latin-1"): value.decode("latin-1") for name, value in response.headers},
                            bytes(body), kept, forwarded, self.proxy.probe_size)
        replay = action.on_response(observed)
        for fault in observed.faults:
            self.proxy._injected(ex, fault)
        if replay is not None:
            self.proxy._injected(ex, replay.fault)
            self._replay(ex, replay)
            return
        ex.bytes_out = len(body)
        self._to_client(response)
        if body:
            self._to_client(h11.Data(data=bytes(body)))
        self._record(ex)
        self._to_client(h11.EndOfMessage(headers=trailers))
        self._flush_client()

    def _done_upstream(self, ex: _Exchange, answered_continue: bool, continued: bool) -> None:
        """Keep the upstream connection for the next request if it is clean, else close it."""
        # A store that answers an ``Expect: 100-continue`` request with a final status and no
        # 100 may not have read the body the proxy sent it anyway: Ceph RGW keeps such a
        # connection and would read that body as the start of the next request.
        body_maybe_unread = answered_continue and not continued and ex.bytes_in > 0
        if (self.uconn.our_state is h11.DONE and self.uconn.their_state is h11.DONE
                and not self.up_broken and not body_maybe_unread and not self.uconn.trailing_data[0]):
            self.uconn.start_next_cycle()
        else:
            self._close_upstream()

    def _read_body(self, ex: _Exchange, forward: bool, keep: int = 0) -> None:
        """Read the request body off the client, counting it, and send it on if ``forward``;
        keep its first ``keep`` bytes and one more (so a longer body shows) in ``ex.kept``."""
        if keep:
            ex.kept = bytearray()
        while True:
            event = self._client_event()
            if type(event) is h11.Data:
                ex.bytes_in += len(event.data)
                if ex.capture is not None and len(ex.capture) < BULK_DELETE_CAPTURE:
                    ex.capture += event.data
                if ex.kept is not None and len(ex.kept) <= keep:
                    ex.kept += event.data[:keep + 1 - len(ex.kept)]
            elif type(event) is not h11.EndOfMessage:
                raise ConnectionError(f"unexpected {event!r} inside a request")
            if forward:
                self._to_upstream(event)
                if self.up_out_bytes >= _BUF:
                    self._flush_upstream()
            if type(event) is h11.EndOfMessage:
                ex.body_done = True
                break
        if forward:
            self._flush_upstream()

    def _response(self, answered_continue: bool) -> tuple[h11.Response, bool]:
        """The store's final response head, and whether a 100 Continue came first; interim
        responses are relayed, except a 100 Continue the proxy already gave the client itself."""
        continued = False
        while True:
            event = self._upstream_event()
            if type(event) is h11.Response:
                return event, continued
            if type(event) is h11.InformationalResponse:
                continued = continued or event.status_code == 100
                if not (event.status_code == 100 and answered_continue):
                    self._to_client(event)
            else:
                raise _UpstreamFailed(f"the store sent {event!r} before a response")

    def _answer(self, ex: _Exchange, status: int, reason: str, body: bytes, content_type: bytes,
                close: bool = False) -> None:
        """Answer the client from the proxy itself (a HEAD's answer without its body, as HTTP
        has it)."""
        headers = [(b"Content-Type", content_type), (b"Content-Length", b"%d" % len(body))]
        if close:
            headers.append((b"Connection", b"close"))
        if ex.method == "HEAD":
            body = b""
        ex.status, ex.bytes_out = status, len(body)
        self._to_client(h11.Response(status_code=status, headers=headers, reason=reason))
        if body:
            self._to_client(h11.Data(data=body))
        self._record(ex)
        self._to_client(h11.EndOfMessage())
        self._flush_client()

    def _replay(self, ex: _Exchange, replay: Replay) -> None:
        """Answer the client with ``replay``, as the store might have."""
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in replay.headers]
        if not any(name.lower() == b"content-length" for name, _ in headers):
            headers.append((b"Content-Length", b"%d" % len(replay.body)))
        ex.status, ex.bytes_out = replay.status, len(replay.body)
        self._to_client(h11.Response(status_code=replay.status, headers=headers, reason=replay.reason))
        if replay.body:
            self._to_client(h11.Data(data=replay.body))
        self._record(ex)
        self._to_client(h11.EndOfMessage())
        self._flush_client()

    def _record(self, ex: _Exchange) -> None:
        ex.recorded = True
        self.proxy._record(ex.event())

    # -- the client side -------------------------------------------------------

    def _client_event(self):
        """The next h11 event from the client, reading as needed."""
        while (event := self.cconn.next_event()) is h11.NEED_DATA:
            self.cconn.receive_data(self.client.recv(_BUF))
        return event

    def _to_client(self, event) -> None:
        self.client_out += self.cconn.send_with_data_passthrough(event)

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
            if not select.select([self.up], [], [], 0)[0]:
                return True
            self._close_upstream()
        try:
            self.up = self.proxy._connect_upstream()
        except OSError as e:
            raise _UpstreamFailed(f"cannot connect to the store: {e}") from None
        self.uconn = h11.Connection(h11.CLIENT)
        return False

    def _upstream_event(self):
        """The next h11 event from the store, reading (after sending what is pending to the
        client) as needed; _UpstreamFailed if the connection ends or breaks first."""
        try:
            while (event := self.uconn.next_event()) is h11.NEED_DATA:
                self._flush_client()
                self.uconn.receive_data(self.up.recv(_BUF))
        except h11.RemoteProtocolError as e:
            raise _UpstreamFailed(f"bad response from the store: {e}") from None
        except OSError as e:
            raise _UpstreamFailed(f"no response from the store: {e}") from None
        if type(event) is h11.ConnectionClosed:
            raise _UpstreamFailed("the store closed the connection")
        return event

    def _to_upstream(self, event) -> None:
        # A failed send does not end the exchange: the client's body must still be
        # read off its connection, and the store may have answered before closing.
        if not self.up_broken:
            for data in self.uconn.send_with_data_passthrough(event):
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
        self.up_out, self.up_out_bytes = [], 0
        if self.up is not None:
            self.up.close()
            self.up = self.uconn = None


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` is in; it may be gone already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)


def _rebuilt(request: h11.Request, drop_header: str | None) -> h11.Request:
    """``request`` as HTTP/1.1 (h11 sends nothing else), without ``drop_header`` if given."""
    headers = request.headers
    if drop_header is not None:
        drop = drop_header.lower().encode()
        headers = [(raw, value) for raw, value in headers.raw_items() if raw.lower() != drop]
    return h11.Request(method=request.method, target=request.target, headers=headers)
