"""HTTP/1.x message framing for the metering proxy: where a message head ends, how its body is
delimited and where it ends, with llhttp (``httptools``) as the parser. The bytes relayed are
always the ones received: nothing here re-serializes a message.

Its interface, for ``session``: ``Framed`` (a head parsed, and how its body is delimited),
``read_head`` and ``body_pieces`` (a message's head, then its body, off a connection),
``LazyHeaders`` (a request's headers for the fault rules), ``without_header``, ``NotHttp`` (what
arrived is not HTTP) and ``BUF`` (how much to read at once)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import httptools

#: How much the relay reads from a socket at once, and the most of a request it queues before sending.
BUF = 65536
#: The longest message head the proxy reads before it gives up on the connection (S3 allows 8 KiB of
#: user metadata in a head).
_MAX_HEAD = 65536


class NotHttp(Exception):
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


class Framed:
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
            raise NotHttp(str(e)) from None
        finally:
            msg.parser = None
        if not msg.head_done:
            raise NotHttp("no request or status line")
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


#: The headers the relay itself reads, lower-case name to the short name ``Framed.fields`` uses.
_FIELDS = {b"content-length": "length", b"transfer-encoding": "te", b"expect": "expect",
           b"x-amz-decoded-content-length": "decoded", b"x-amz-copy-source": "copy", b"connection": "connection"}


def _chunked_end(framed: Framed, data: bytes, carried: bytes) -> int:
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
        raise NotHttp(str(e)) from None
    return -1


def body_pieces(framed: Framed, buf: bytes, more) -> Iterator[tuple[bytes, bytes, bytes]]:
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


class LazyHeaders(Mapping):
    """A request's headers for the fault rules, lower-case name to value: built on first use,
    so a request no rule looks at never builds them."""

    __slots__ = ("_dict", "_framed")

    def __init__(self, framed: Framed) -> None:
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


def read_head(buf: bytes, more) -> tuple[bytes, bytes]:
    """The message head at the start of ``buf`` (reading on with ``more()`` as needed; EOFError
    if the connection ends first), and what follows it."""
    at = 0
    while (end := buf.find(b"\r\n\r\n", at)) < 0:
        if len(buf) > _MAX_HEAD:
            raise NotHttp(f"no message head in the first {_MAX_HEAD} bytes")
        at = max(0, len(buf) - 3)
        data = more()
        if not data:
            raise EOFError
        buf += data
    return buf[:end + 4], buf[end + 4:]


def without_header(head: bytes, name: str) -> bytes:
    """``head`` without its ``name`` header lines (any case)."""
    drop = name.lower().encode("latin-1")
    lines = head.split(b"\r\n")
    return b"\r\n".join([lines[0], *(line for line in lines[1:] if line.partition(b":")[0].lower() != drop)])
