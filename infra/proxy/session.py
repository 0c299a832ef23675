"""One client connection of the metering proxy and its upstream connection: each request read,
classified, handed to the fault rules, then forwarded and its response relayed (or answered,
replayed, reset as an action says), and recorded as one ``Event``.

Its interface, for ``server``: ``Session`` (one connection, served by ``serve()``) and
``ProxyLink``, all a session may use of the proxy that runs it. A session reaches the proxy only
through its link, so this module never imports ``server``."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import struct
import time
from collections.abc import Callable

import httptools

from ..faults import (
    Action,
    Answer,
    Delay,
    Forward,
    Hold,
    Injection,
    KillGroup,
    LoseResponse,
    Observed,
    Replay,
    RequestInfo,
    Reset,
)
from ..s3ops import BULK_DELETE_CAPTURE, Event, area_of, describe, first_deleted_key
from .framing import BUF, Framed, LazyHeaders, NotHttp, body_pieces, read_head, without_header

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: ``s3ops.describe`` reads one header: whether a PUT names a copy source.
_COPY_SOURCE = ("x-amz-copy-source",)


class _UpstreamFailed(Exception):
    """The store could not be reached, or closed or broke the connection before a
    response head arrived: the client gets a 502."""


class _ResponseCut(ConnectionError):
    """The store's connection broke inside a response already being relayed."""


class _ClientReset(Exception):
    """The proxy reset the client's connection on purpose (an injected fault)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyLink:
    """What a session needs of the proxy that runs it, and all it may use of it. The proxy makes
    one and hands it to every session; each callable may be called from any session's thread."""

    #: The store's URL, for the proxy's own 502 answer.
    upstream: str
    #: A new connection to the store; OSError if it cannot be reached.
    connect: Callable[[], socket.socket]
    #: The fault rules in force, asked once per request (``FaultRules.decide``).
    decide: Callable[[RequestInfo], Action]
    #: Keep one request's event.
    record: Callable[[Event], None]
    #: Keep one fault applied.
    injected: Callable[[Injection], None]
    #: An object's size (bucket, key), from a HEAD the proxy sends itself; for response hooks.
    probe_size: Callable[[str, str], int | None]


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


class Session:
    """One client connection and its upstream connection, served for the proxy ``link`` stands for."""

    def __init__(self, link: ProxyLink, sock: socket.socket) -> None:
        self.link = link
        self.client = sock
        self.cbuf = b""  # bytes from the client not yet taken: the start of its next message
        self.client_out: list[bytes] = []  # to send to the client before the next wait
        self.up: socket.socket | None = None
        self.ubuf = b""  # bytes from the store not yet taken
        self.up_out: list[bytes] = []  # to send to the store: a whole request, or BUF bytes of it
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
        except (OSError, EOFError, NotHttp):
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
        request = Framed(head, httptools.HttpRequestParser)
        method = request.parser.get_method().decode("ascii")
        target = request.msg.url.decode("latin-1")
        fields = request.fields
        op, bucket, key = describe(method, target, _COPY_SOURCE if "copy" in fields else ())
        decoded = fields.get("decoded")
        ex = _Exchange(start, method, op, bucket, key, decoded.decode("latin-1") if decoded is not None else None,
                       bytearray() if op == "BULK_DELETE" else None)
        keep_alive = request.msg.keep_alive
        try:
            info = RequestInfo(method, op, bucket, key, LazyHeaders(request), target)
            action = self.link.decide(info)
            while type(action) in (Delay, Hold):  # in this request's own thread: other connections go on
                if type(action) is Hold:
                    fault = action.wait()
                    if fault is not None:
                        self._injected(ex, fault)
                else:
                    self._injected(ex, action.fault, action.seconds)
                    time.sleep(action.seconds)
                action = action.then
            if type(action) is Reset or (type(action) is KillGroup and not action.after_applied):
                if type(action) is KillGroup:
                    _kill_group(action.pid)
                self._injected(ex, action.fault)
                raise _ClientReset
            # A client that sent Expect: 100-continue and no body bytes yet waits for the 100.
            answered_continue = (fields.get("expect", b"").lower() == b"100-continue"
                                 and request.parser.get_http_version() == "1.1" and not self.cbuf)
            if answered_continue:
                self.client.sendall(_CONTINUE)
            if type(action) is Answer:
                self._injected(ex, action.label)
                self._read_body(ex, request, forward=False)
                path = target.partition("?")[0]
                return self._answer(ex, action.status, action.reason, action.body(path), b"application/xml",
                                    close=not keep_alive)
            if type(action) is Replay:
                self._injected(ex, action.fault)
                self._read_body(ex, request, forward=False)
                return self._replay(ex, action, keep_alive)
            if type(action) is Forward and action.drop_header is not None:
                self._injected(ex, f"dropped {action.drop_header}")
                head = without_header(head, action.drop_header)
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
            body = f"metering proxy: {e} ({self.link.upstream})\n".encode()
            self._answer(ex, 502, "Bad Gateway", body, b"text/plain", close=True)
            return False
        finally:
            if not ex.recorded:
                self.link.record(ex.event())

    def _send_request(self, ex: _Exchange, request: Framed, head: bytes, answered_continue: bool,
                      keep_body: int = 0) -> tuple[Framed, bool]:
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

    def _forward(self, ex: _Exchange, request: Framed, head: bytes, answered_continue: bool,
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

    def _forward_buffered(self, ex: _Exchange, info: RequestInfo, request: Framed, head: bytes,
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
            self._injected(ex, action.fault)
            raise _ClientReset
        kept = bytes(ex.kept) if ex.kept is not None and ex.body_done and len(ex.kept) <= keep else None
        observed = Observed(info, ex.status, response.header_dict(), bytes(body), kept, forwarded,
                            self.link.probe_size)
        replay = action.on_response(observed)
        for fault in observed.faults:
            self._injected(ex, fault)
        if replay is not None:
            self._injected(ex, replay.fault)
            return self._replay(ex, replay, keep_alive)
        ex.bytes_out = len(body)
        self.client_out += raw
        self._record(ex)
        self._flush_client()
        return keep_alive

    def _done_upstream(self, ex: _Exchange, response: Framed, answered_continue: bool, continued: bool) -> bool:
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

    def _read_body(self, ex: _Exchange, request: Framed, forward: bool, keep: int = 0) -> None:
        """Read the request body off the client, counting it, and send it on if ``forward``;
        keep its first ``keep`` bytes and one more (so a longer body shows) in ``ex.kept``."""
        if keep:
            ex.kept = bytearray()
        for raw, data, rest in body_pieces(request, self.cbuf, self._from_client):
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
            if self.up_out_bytes >= BUF:
                self._flush_upstream()

    def _response_head(self, method: str, answered_continue: bool) -> tuple[Framed, bool]:
        """The store's final response head, and whether a 100 Continue came first; interim
        responses are relayed, except a 100 Continue the proxy already gave the client itself."""
        continued = False
        while True:
            head = self._head_from_upstream()
            try:
                # A response to a HEAD has no body, whatever its head says (RFC 9112, 6.3);
                # llhttp cannot be told which request a response answers.
                response = Framed(head, httptools.HttpResponseParser, no_body=method == "HEAD")
            except NotHttp as e:
                raise _UpstreamFailed(f"bad response from the store: {e}") from None
            status = response.parser.get_status_code()
            if status >= 200:
                return response, continued
            continued = continued or status == 100
            if not (status == 100 and answered_continue):
                self.client_out.append(head)

    def _response_body(self, response: Framed):
        """The response body's pieces as they arrive: ``(raw, data)`` as ``body_pieces`` has them;
        _ResponseCut if the store's connection ends or breaks first."""
        try:
            for raw, data, rest in body_pieces(response, self.ubuf,
                                               lambda: self._from_upstream(eof_ok=response.until_close)):
                self.ubuf = rest
                yield raw, data
        except (_UpstreamFailed, NotHttp, EOFError) as e:
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
        self.link.record(ex.event())

    def _injected(self, ex: _Exchange, fault: str, seconds: float = 0.0) -> None:
        self.link.injected(Injection(ex.start, ex.op, ex.bucket, ex.key, fault, seconds))

    # -- the client side -------------------------------------------------------

    def _head_from_client(self) -> bytes | None:
        """The next message head from the client; None if it closed before sending one."""
        try:
            head, self.cbuf = read_head(self.cbuf, self._from_client)
        except EOFError:
            return None
        return head

    def _from_client(self) -> bytes:
        data = self.client.recv(BUF)
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
            self.up = self.link.connect()
        except OSError as e:
            raise _UpstreamFailed(f"cannot connect to the store: {e}") from None
        return False

    def _head_from_upstream(self) -> bytes:
        try:
            head, self.ubuf = read_head(self.ubuf, self._from_upstream)
        except EOFError:
            raise _UpstreamFailed("the store closed the connection") from None
        except NotHttp as e:
            raise _UpstreamFailed(f"bad response from the store: {e}") from None
        return head

    def _from_upstream(self, eof_ok: bool = False) -> bytes:
        """The next bytes from the store, after sending what is pending to the client;
        _UpstreamFailed if the connection ends (unless ``eof_ok``: then b"") or breaks."""
        self._flush_client()
        try:
            data = self.up.recv(BUF)
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


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` is in; it may be gone already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
