"""Amazon S3's consistency before December 2020, emulated: the ``Eventual`` rule (see its
docstring for what it does and does not model)."""

from __future__ import annotations

import dataclasses
import re
import time
from collections import OrderedDict
from email.utils import formatdate
from html import escape, unescape
from urllib.parse import quote, unquote

from .actions import Action, Forward, Observed, Replay, RequestInfo, error_xml
from .rules import Locked, body_size, copy_source, succeeded


@dataclasses.dataclass
class _Object:
    """What the eventual-consistency emulation knows of one object."""

    size: int | None
    etag: str
    modified: float  # epoch seconds
    headers: tuple[tuple[str, str], ...] = ()  # Content-Type and x-amz-meta-*, to replay
    body: bytes | None = None  # kept for stale reads
    created: float | None = None  # time.monotonic() it appeared, if the proxy saw it appear


_CONTENTS = re.compile(r"<Contents>.*?</Contents>", re.DOTALL)
_COMMON = re.compile(r"<CommonPrefixes>.*?</CommonPrefixes>", re.DOTALL)
_ENTRY = re.compile(r"<Contents>.*?</Contents>|<CommonPrefixes>.*?</CommonPrefixes>", re.DOTALL)
_FIELD = {name: re.compile(rf"<{name}>(.*?)</{name}>", re.DOTALL)
          for name in ("Key", "Prefix", "Size", "ETag", "LastModified", "IsTruncated", "KeyCount")}
_DELETED_KEY = re.compile(r"<Deleted>\s*<Key>(.*?)</Key>", re.DOTALL)
_KEY = re.compile(r"<Key>(.*?)</Key>", re.DOTALL)
_FAILED_KEY = re.compile(r"<Error>\s*<Key>(.*?)</Key>", re.DOTALL)
#: The most of a bulk DELETE's body the emulation reads its keys from (1,000 keys of ~1 KiB each).
_BULK_DELETE_BODY = 1 << 20
_COPY_ETAG = re.compile(rb"<ETag>(.*?)</ETag>", re.DOTALL)
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


def _field(name: str, xml: str) -> str | None:
    m = _FIELD[name].search(xml)
    return unescape(m.group(1)) if m else None


def decode_aws_chunked(body: bytes) -> bytes | None:
    """The payload of an ``aws-chunked`` body (``<hex size>[;chunk-signature=...]\\r\\n<data>\\r\\n``
    ... ``0...\\r\\n`` then trailers), or None if it is not one."""
    out, pos = bytearray(), 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            return None
        try:
            size = int(body[pos:end].split(b";")[0], 16)
        except ValueError:
            return None
        if size == 0:
            return bytes(out)
        out += body[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


class Eventual(Locked):
    """Amazon S3's consistency before December 2020, emulated with an inconsistency window
    ``window`` (seconds). What S3 then documented: read-after-write for new objects, except
    that a GET or HEAD of a key before it existed made later reads eventually consistent;
    eventual consistency for listings, overwrites and deletes. Here, for ``window`` seconds:

    * a new key (one the proxy saw appear through a PUT, COPY or multipart upload) is missing
      from LIST answers, and so is a ``CommonPrefixes`` entry all of whose keys the proxy knows
      of are still missing;
    * a key that a GET or HEAD found missing (404) before it was created keeps answering 404
      to GET and HEAD after it was created;
    * a deleted key is still listed (a ``Contents`` entry, or its ``CommonPrefixes`` entry);
    * an overwritten key is read stale: GET (ranges too) and HEAD answer the old content, from
      a copy the proxy kept of every body written through it up to ``keep_bytes`` bytes (at
      most ``budget`` bytes in all, oldest dropped first; an overwrite of a key whose copy was
      not kept reads fresh).

    ``lists=False`` leaves listings alone (the first and third behaviour), ``reads=False`` reads
    (the second and fourth), so that a failure can be put down to one half.

    LIST answers (ListObjects V1 and V2) are rewritten: the XML's ``Contents`` and
    ``CommonPrefixes`` entries are dropped or added, ``KeyCount`` follows; a deleted key is
    added only where it falls inside the page (after ``start-after``/``marker``, and before the
    last key of a truncated page). Not modelled: stale reads of a deleted key, and keys written
    before the proxy started or around it (the emulation knows only what it relayed), so use it
    on fresh prefixes."""

    def __init__(self, window: float, lists: bool = True, reads: bool = True, keep_bytes: int = 1 << 20,
                 budget: int = 256 << 20) -> None:
        if not window > 0:
            raise ValueError(f"Eventual: window must be > 0 seconds, not {window}")
        if not (lists or reads):
            raise ValueError("Eventual: give it listings, reads or both to make stale")
        self.window, self.lists, self.reads, self.keep_bytes, self.budget = window, lists, reads, keep_bytes, budget
        self._known: dict[tuple[str, str], _Object] = {}
        self._probed: set[tuple[str, str]] = set()  # found missing, not yet created
        self._negative: dict[tuple[str, str], float] = {}  # -> 404 until
        self._stale: dict[tuple[str, str], tuple[_Object, float]] = {}  # -> (old content, until)
        self._deleted: dict[tuple[str, str], tuple[_Object, float]] = {}  # -> (what it was, listed until)
        self._kept: OrderedDict[tuple[str, str], int] = OrderedDict()  # bodies kept, oldest first
        self._kept_bytes = 0
        self._init_lock()

    def __repr__(self) -> str:
        return f"Eventual(window={self.window}, lists={self.lists}, reads={self.reads})"

    # -- the request-side hook -----------------------------------------------------------------

    def decide(self, request: RequestInfo) -> Action | None:
        where, now = (request.bucket, request.key), time.monotonic()
        if request.op in ("GET", "HEAD"):
            if not self.reads:
                return None
            with self._lock:
                if self._negative.get(where, 0) > now:
                    return self._missing(request)
                stale = self._stale.get(where)
                if stale and stale[1] > now:
                    return self._replay(request, stale[0])
            return Forward(on_response=self._observe)
        if request.op == "LIST":
            return Forward(on_response=self._list) if self.lists else None
        if request.op == "PUT":  # its body, for stale reads (+ room for aws-chunked framing)
            return Forward(on_response=self._observe, keep_body=self.keep_bytes + 4096 if self.reads else 0)
        if request.op == "BULK_DELETE":
            return Forward(on_response=self._observe, keep_body=_BULK_DELETE_BODY)
        if request.op in ("COPY", "MPU_COMPLETE", "DELETE"):
            return Forward(on_response=self._observe)
        return None

    @staticmethod
    def _missing(request: RequestInfo) -> Replay:
        body = b"" if request.op == "HEAD" else error_xml(
            "NoSuchKey", "The specified key does not exist.", request.target.partition("?")[0])
        return Replay(404, (("Content-Type", "application/xml"),), body, "stale-missing")

    @staticmethod
    def _replay(request: RequestInfo, old: _Object) -> Replay:
        body = old.body
        headers = [("ETag", old.etag), ("Last-Modified", formatdate(old.modified, usegmt=True)),
                   ("Accept-Ranges", "bytes"), *old.headers]
        status = 200
        m = _RANGE.match(request.headers.get("range", "").strip())
        if m and body and (m.group(1) or m.group(2)):
            first, last = m.group(1), m.group(2)
            if first:
                start, end = int(first), min(int(last) if last else len(body) - 1, len(body) - 1)
            else:  # the last N bytes
                start, end = max(0, len(body) - int(last)), len(body) - 1
            headers.append(("Content-Range", f"bytes {start}-{end}/{len(body)}"))
            body, status = body[start:end + 1], 206
        if request.op == "HEAD":
            return Replay(status, (*headers, ("Content-Length", str(len(body)))), b"", "stale-read")
        return Replay(status, tuple(headers), body, "stale-read")

    # -- the response-side hooks ---------------------------------------------------------------

    def _observe(self, observed: Observed) -> None:
        request, now = observed.request, time.monotonic()
        where = (request.bucket, request.key)
        with self._lock:
            if request.op in ("GET", "HEAD"):
                if observed.status == 404 and where not in self._known:
                    self._probed.add(where)
                elif 200 <= observed.status < 300 and where not in self._known:
                    self._known[where] = self._learned(observed)
                return
            if not succeeded(observed):
                return
            if request.op == "PUT":
                self._created(where, self._written(observed), now)
            elif request.op == "COPY":
                source = self._known.get(copy_source(request) or ("", ""))
                m = _COPY_ETAG.search(observed.body)
                etag = unescape(m.group(1).decode()) if m else ""
                copied = _Object(source.size if source else None, etag, time.time(),
                                 source.headers if source else (), source.body if source else None)
                self._created(where, copied, now)
            elif request.op == "MPU_COMPLETE":
                m = _COPY_ETAG.search(observed.body)
                self._created(where, _Object(None, unescape(m.group(1).decode()) if m else "", time.time()), now)
            elif request.op == "DELETE":
                self._removed(where, now)
            elif request.op == "BULK_DELETE":
                answer = observed.body.decode("utf-8", "replace")
                if observed.request_body is not None:  # the keys asked for, less those the store failed
                    asked = _KEY.findall(observed.request_body.decode("utf-8", "replace"))
                    deleted = [key for key in asked if key not in set(_FAILED_KEY.findall(answer))]
                else:
                    deleted = _DELETED_KEY.findall(answer)
                for key in deleted:
                    self._removed((request.bucket, unescape(key)), now)

    def _learned(self, observed: Observed) -> _Object:
        headers = observed.headers
        size = headers.get("content-length", "")
        total = headers.get("content-range", "").rpartition("/")[2]
        size = total if total.isdigit() else size
        return _Object(int(size) if size.isdigit() else None, headers.get("etag", ""), time.time())

    def _written(self, observed: Observed) -> _Object:
        request = observed.request
        size = body_size(request)
        body = observed.request_body
        if body is not None and ("aws-chunked" in request.headers.get("content-encoding", "")
                                 or request.headers.get("x-amz-content-sha256", "").startswith("STREAMING-")):
            body = decode_aws_chunked(body)
        if body is not None and (len(body) != size or len(body) > self.keep_bytes):
            body = None
        kept = tuple((name, value) for name, value in request.headers.items()
                     if name == "content-type" or name.startswith("x-amz-meta-"))
        return _Object(size, observed.headers.get("etag", ""), time.time(), kept, body)

    def _created(self, where: tuple[str, str], obj: _Object, now: float) -> None:
        old = self._known.get(where)
        if old is None:
            obj.created = now
            if where in self._probed:
                self._probed.discard(where)
                self._negative[where] = now + self.window
        else:
            obj.created = old.created
            if old.body is not None and self.reads:
                self._stale[where] = (old, now + self.window)
        self._deleted.pop(where, None)
        self._known[where] = obj
        self._keep(where, obj)

    def _keep(self, where: tuple[str, str], obj: _Object) -> None:
        self._kept_bytes -= self._kept.pop(where, 0)
        if obj.body is None:
            return
        self._kept[where] = len(obj.body)
        self._kept_bytes += len(obj.body)
        while self._kept_bytes > self.budget:
            dropped, size = self._kept.popitem(last=False)
            self._kept_bytes -= size
            if dropped in self._known:
                self._known[dropped].body = None

    def _removed(self, where: tuple[str, str], now: float) -> None:
        old = self._known.pop(where, None)
        self._kept_bytes -= self._kept.pop(where, 0)
        self._stale.pop(where, None)
        self._negative.pop(where, None)
        if old is not None and self.lists:
            self._deleted[where] = (old, now + self.window)

    def _hidden(self, where: tuple[str, str], now: float) -> bool:
        obj = self._known.get(where)
        return obj is not None and obj.created is not None and obj.created + self.window > now

    def _list(self, observed: Observed) -> Replay | None:
        text = observed.body.decode("utf-8", "replace")
        if observed.status != 200 or "<ListBucketResult" not in text[:300]:
            return None  # an error, or another listing (multipart uploads, versions)
        request, now = observed.request, time.monotonic()
        params = request.params
        encoded = params.get("encoding-type") == "url"
        prefix, delimiter = params.get("prefix", ""), params.get("delimiter", "")

        def key_of(xml_text: str) -> str:
            key = _field("Key", xml_text) or ""
            return unquote(key) if encoded else key

        def xml_key(key: str) -> str:
            return escape(quote(key, safe="/~") if encoded else key)

        contents = [(key_of(block), block) for block in _CONTENTS.findall(text)]
        commons = [(_field("Prefix", block) or "", block) for block in _COMMON.findall(text)]
        if encoded:
            commons = [(unquote(p), block) for p, block in commons]
        with self._lock:
            for key, block in contents:  # keys the store shows that the proxy did not see appear
                where = (request.bucket, key)
                if where not in self._known:
                    size = _field("Size", block)
                    self._known[where] = _Object(int(size) if size and size.isdigit() else None,
                                                 _field("ETag", block) or "", time.time())
            kept = [(k, b) for k, b in contents if not self._hidden((request.bucket, k), now)]
            kept_commons = [(p, b) for p, b in commons if not self._all_hidden(request.bucket, p, now)]
            listed = {k for k, _ in contents} | {p for p, _ in commons}
            truncated = (_field("IsTruncated", text) or "").strip() == "true"
            after = params.get("start-after") or params.get("marker") or ""
            if params.get("continuation-token") and contents:
                after = max(after, contents[0][0])
            last = max(listed) if truncated and listed else None
            for (bucket, key), (old, until) in self._deleted.items():
                if bucket != request.bucket or until <= now or not key.startswith(prefix) or key <= after:
                    continue
                if last is not None and key > last:
                    continue
                rest = key[len(prefix):]
                if delimiter and delimiter in rest:
                    common = prefix + rest[:rest.index(delimiter) + len(delimiter)]
                    if common not in listed and common > after:
                        listed.add(common)
                        kept_commons.append((common, f"<CommonPrefixes><Prefix>{xml_key(common)}</Prefix>"
                                                     f"</CommonPrefixes>"))
                elif key not in listed:
                    listed.add(key)
                    modified = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(old.modified))
                    kept.append((key, f"<Contents><Key>{xml_key(key)}</Key><LastModified>{modified}</LastModified>"
                                      f"<ETag>{escape(old.etag)}</ETag><Size>{old.size or 0}</Size>"
                                      f"<StorageClass>STANDARD</StorageClass></Contents>"))
        if [k for k, _ in kept] == [k for k, _ in contents] and len(kept_commons) == len(commons):
            return None
        kept.sort()
        kept_commons.sort()
        blocks = "".join(b for _, b in kept) + "".join(b for _, b in kept_commons)
        # Stores order the entries differently (moto puts other elements between them): every
        # entry goes, the new ones take the first one's place.
        first = _ENTRY.search(text)
        at = first.start() if first else text.index("</ListBucketResult>")
        text = text[:at] + "\0" + text[at:]
        text = _ENTRY.sub("", text).replace("\0", blocks)
        text = _FIELD["KeyCount"].sub(f"<KeyCount>{len(kept) + len(kept_commons)}</KeyCount>", text, count=1)
        headers = tuple((name, value) for name, value in observed.headers.items()
                        if name not in ("content-length", "transfer-encoding"))
        return Replay(200, headers, text.encode(), "stale-list")

    def _all_hidden(self, bucket: str, common: str, now: float) -> bool:
        """Every key the proxy knows under ``common`` is still missing from listings (and there is one)."""
        under = [where for where in self._known if where[0] == bucket and where[1].startswith(common)]
        return bool(under) and all(self._hidden(where, now) for where in under)
