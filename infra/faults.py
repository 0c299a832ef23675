"""Faults the metering proxy injects on purpose: the one place their rules live.

The proxy consults its ``FaultRules`` at exactly one hook per request: once the request's
head has arrived and been classified, before anything of it is forwarded, it calls
``decide(RequestInfo) -> Action`` and does what the action says:

* ``Forward()`` (``FORWARD``): relay the request unchanged; what every request gets
  when no rule matches.
* ``Forward(drop_header=name)``: relay it without that header (a store that ignores
  ``If-None-Match``, say). This breaks the proxy's forwards-unchanged guarantee on
  purpose, for the matching requests only.
* ``Forward(on_response=hook, keep_body=n)``: relay it, but read the store's whole response
  before sending any of it on, and call ``hook(Observed)`` with it (and the first ``n`` bytes
  of the request body): the response-side hook. The hook returns None (relay the response as
  it came) or a ``Replay`` to send instead; it may note an injection that changed nothing but
  time (``Observed.note``).
* ``Answer(status, code, message)``: do not forward; read the request's body off the
  client (so the connection stays usable) and answer ``status`` with an S3-style XML
  error body (``Answer.body``). The store never sees the request.
* ``Replay(status, headers, body)``: do not forward; answer with this response (a stale
  read, a 404 the store would no longer give).
* ``Delay(seconds, then)``: sleep in the request's own thread (other connections are not
  slowed), then do ``then``.
* ``Reset()``: SO_LINGER 0 on the client socket and close it, before anything is forwarded:
  the client sees ECONNRESET, the store nothing.
* ``LoseResponse()``: forward as usual, read the store's whole response (the store has
  applied the request), then reset the client connection instead of relaying it. A client
  retry of an ``If-None-Match: *`` PUT then meets its own write (412).
* ``KillGroup(pid, after_applied)``: SIGKILL the process group of ``pid``, before forwarding
  (the store never sees the request) or after the store answered it; either way the client
  connection is then reset.

Every action that injects something carries a ``fault`` label; the proxy keeps one
``Injection`` per label it applied (``MeteringProxy.injections``), so a run can count them.

Rules (plain picklable data, so ``ProxyProcess.inject`` can hand them to a proxy in a child
process) each have ``decide(request) -> Action | None``; None means no opinion. The first rule
with an opinion decides, except that a rule answering ``Delay(seconds)`` with no ``then``
adds its delay and lets the later rules decide what follows it, so latency composes with
everything else. The rules:

* ``Fault(op, status=..., drop_header=..., times=...)``: the next ``times`` requests of
  ``op`` (every one when None) get an answer or lose a header.
* ``Latency(p50, p99, ops)``: a delay per request, fixed (no ``p99``) or lognormal with that
  median and 99th percentile.
* ``Chance(action, probability, ops)``: each matching request gets ``action`` (an
  ``Answer``, ``Reset`` or ``LoseResponse``) with that probability.
* ``Throttle(rate, burst, depth, ops)``: a token bucket per key prefix (the key's first
  ``depth`` path segments), answering 503 SlowDown over budget, as S3 limits request rates
  per prefix.
* ``Eventual(window)``: the S3 consistency model of before December 2020, emulated (see its
  docstring for what it does and does not model).
* ``CopyThroughput(bytes_per_second)``: a server-side COPY answers no sooner than its
  source's size at that rate, as on AWS S3 where a COPY moves the bytes.
* ``Kill(pid, after_applied, op, key)``: SIGKILL a process group at one request.

Randomness is reproducible: every rule that draws has its own ``random.Random(seed)``, so
a sequence of requests (one client, one at a time) meets the same faults for the same seed;
concurrent requests draw in the order they arrive. Named sets of rules are in ``PROFILES``.

A rule sees only the request head (and, through a hook, the response and as much of the
request body as it asked for): a bulk DELETE's keys are in its body, so its ``RequestInfo.key``
is ``""``; ``Eventual`` reads them from the body it keeps (the answer of a ``Quiet`` bulk
DELETE, as S3A sends, names no deleted key).

What injecting nothing costs (2026-11-24, the project's 2-vCPU VM shared with other jobs' Spark
JVMs, load average 12-18; Ceph RGW on memstore; ``runs.proxy_overhead``, 500 pairs of 1 KiB
PUTs then HEADs, direct and proxied interleaved; the proxy before the fault hooks (231848e),
this one with profile ``none`` (no rules: ``FaultRules.decide`` returns at once) and this one
with a rule that every request consults and none matches, alternated over 6 rounds)::

                          added to a PUT (median, range)   added to a HEAD
    before (231848e)      0.63 ms (0.38-0.77)              0.42 ms (0.36-0.57)
    profile none          0.67 ms (0.52-0.85)              0.42 ms (0.40-0.44)
    a rule never firing   0.71 ms (0.49-0.78)              0.41 ms (0.37-0.51)
    paired per round, none minus before: PUT -0.04 ms, HEAD +0.01 ms (medians)

No difference stands out of the run-to-run spread (0.4 ms). An earlier build that imported
botocore at the proxy's start (for ``probe_size``) looked 0.1 ms slower on HEADs in 4 of 4
rounds; it now imports it on the first probe only.
"""

from __future__ import annotations

import dataclasses
import http
import math
import os
import random
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from email.utils import formatdate
from html import escape, unescape
from statistics import NormalDist
from urllib.parse import parse_qsl, quote, unquote

from .s3ops import OPS, split_path

#: The S3 error code an ``Answer`` carries by default for a status.
_S3_CODES = {
    400: "InvalidRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "OperationAborted",
    412: "PreconditionFailed", 500: "InternalError", 501: "NotImplemented", 503: "SlowDown",
}
#: How many standard deviations of a normal distribution lie between its median and its 99th percentile.
_Z99 = NormalDist().inv_cdf(0.99)
#: Operations that write (S3's per-prefix budget for them is 3,500 a second; reads get 5,500).
WRITE_OPS = ("PUT", "COPY", "DELETE", "BULK_DELETE", "MPU_INIT", "MPU_PART", "MPU_COMPLETE", "MPU_ABORT")
READ_OPS = ("GET", "HEAD", "LIST")


@dataclasses.dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a rule may look at: the request head, classified (see ``infra.s3ops``).
    ``key`` is the object key, for a LIST its prefix, else ``""``; ``headers`` maps
    lower-case header names to values; ``target`` is the path and query as sent."""

    method: str
    op: str
    bucket: str
    key: str
    headers: Mapping[str, str]
    target: str = ""

    @property
    def params(self) -> dict[str, str]:
        """The query parameters."""
        query = self.target.partition("?")[2]
        return dict(parse_qsl(query, keep_blank_values=True)) if query else {}


@dataclasses.dataclass(frozen=True, slots=True)
class Injection:
    """One fault the proxy applied to one request: the request's ``start`` (as its ``Event``'s),
    operation, bucket and key, and the action's ``fault`` label."""

    start: float
    op: str
    bucket: str
    key: str
    fault: str


# -- actions ---------------------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class Observed:
    """A store's whole response, handed to a ``Forward.on_response`` hook.

    ``headers`` maps lower-case names to values; ``request_body`` holds the first
    ``Forward.keep_body`` bytes of the request body as received (None when none were kept or
    the body was longer); ``forwarded`` is ``time.monotonic()`` when the request went to the
    store; ``probe_size(bucket, key)`` asks the store for an object's size with a HEAD the
    proxy does not count (None if it cannot tell)."""

    request: RequestInfo
    status: int
    headers: dict[str, str]
    body: bytes
    request_body: bytes | None
    forwarded: float
    probe_size: Callable[[str, str], int | None]
    faults: list[str] = dataclasses.field(default_factory=list)

    def note(self, fault: str) -> None:
        """Record an injection that did not change the response (a held answer, say)."""
        self.faults.append(fault)


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    """Answer with this response instead of forwarding (or instead of the store's). ``headers``
    are (name, value) pairs; the proxy adds a Content-Length of ``body`` when they have none
    (a HEAD's replay names the object's size itself)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    fault: str

    @property
    def reason(self) -> str:
        return _reason(self.status)


@dataclasses.dataclass(frozen=True, slots=True)
class Forward:
    """Relay the request, without the header ``drop_header`` (any case) if given; with
    ``on_response``, read the whole response first and let the hook replace it."""

    drop_header: str | None = None
    on_response: Callable[[Observed], Replay | None] | None = None
    keep_body: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """Answer ``status`` with an S3 error ``code`` instead of forwarding."""

    status: int
    code: str
    message: str = "injected by the ckptbench metering proxy"
    fault: str = ""  # the label; "" gives "<status> <code>"

    @property
    def reason(self) -> str:
        return _reason(self.status)

    @property
    def label(self) -> str:
        return self.fault or f"{self.status} {self.code}"

    def body(self, resource: str) -> bytes:
        """The XML error document S3 sends, for the request path ``resource``."""
        return _error_xml(self.code, self.message, resource)


@dataclasses.dataclass(frozen=True, slots=True)
class Delay:
    """Sleep ``seconds``, then do ``then``; a rule's ``Delay`` without ``then`` lets the later
    rules decide what follows (``FaultRules.decide`` fills it in)."""

    seconds: float
    then: Action | None = None
    fault: str = "latency"


@dataclasses.dataclass(frozen=True, slots=True)
class Reset:
    """Reset the client connection before anything is forwarded."""

    fault: str = "reset"


@dataclasses.dataclass(frozen=True, slots=True)
class LoseResponse:
    """Forward, read the store's whole response, then reset the client connection."""

    fault: str = "lost-response"


@dataclasses.dataclass(frozen=True, slots=True)
class KillGroup:
    """SIGKILL the process group of ``pid`` before forwarding or, ``after_applied``, once the
    store has answered; then reset the client connection."""

    pid: int
    after_applied: bool

    @property
    def fault(self) -> str:
        return "kill-after-applied" if self.after_applied else "kill-before-forwarding"


Action = Forward | Answer | Replay | Delay | Reset | LoseResponse | KillGroup
FORWARD = Forward()


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Injected Fault"


def _error_xml(code: str, message: str, resource: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>{uuid.uuid4().hex[:16]}</RequestId></Error>"
    ).encode()


def _ops(ops, rule: str) -> frozenset[str]:
    """``ops`` (None: every op) as a set, each checked against ``OPS``."""
    chosen = frozenset(OPS if ops is None else ops)
    unknown = sorted(chosen - set(OPS))
    if unknown or not chosen:
        raise ValueError(f"{rule}: ops must be among {', '.join(OPS)}, not {unknown or 'none'}")
    return chosen


class _Locked:
    """A rule with state that its response hooks change outside ``FaultRules``' lock: its own
    lock, left out when pickled."""

    def _init_lock(self) -> None:
        object.__setattr__(self, "_lock", threading.Lock())

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_lock()


# -- rules -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Fault:
    """A rule for the next ``times`` requests of operation ``op`` (every one when None):
    answer ``status`` without forwarding them, or forward them without the header
    ``drop_header``. Exactly one of ``status`` and ``drop_header``."""

    op: str
    status: int | None = None
    drop_header: str | None = None
    times: int | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"Fault: op must be one of {', '.join(OPS)}, not {self.op!r}")
        if (self.status is None) == (self.drop_header is None):
            raise ValueError("Fault: give exactly one of status and drop_header")
        if self.status is not None and not 200 <= self.status <= 599:
            raise ValueError(f"Fault: status must be a final HTTP status (200-599), not {self.status}")

    def decide(self, request: RequestInfo) -> Action | None:
        if self.times == 0 or request.op != self.op:
            return None
        if self.times is not None:
            self.times -= 1
        if self.status is not None:
            return Answer(self.status, _S3_CODES.get(self.status, "InjectedFault"))
        return Forward(drop_header=self.drop_header)


@dataclasses.dataclass
class Latency:
    """Delay each request of ``ops`` (None: all) by ``p50`` seconds, or, with ``p99``, by a
    lognormal draw with that median and 99th percentile (sigma = ln(p99/p50) / z(0.99)):
    the long tail a real store's latency has."""

    p50: float
    p99: float | None = None
    ops: tuple[str, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        self._ops = _ops(self.ops, "Latency")
        if not self.p50 > 0 or (self.p99 is not None and not self.p99 >= self.p50):
            raise ValueError(f"Latency: need 0 < p50 <= p99, not p50={self.p50}, p99={self.p99}")
        self._sigma = 0.0 if self.p99 is None else math.log(self.p99 / self.p50) / _Z99
        self._random = random.Random(self.seed)

    def sample(self) -> float:
        """The next delay, in seconds."""
        if not self._sigma:
            return self.p50
        return self._random.lognormvariate(math.log(self.p50), self._sigma)

    def decide(self, request: RequestInfo) -> Action | None:
        return Delay(self.sample()) if request.op in self._ops else None


@dataclasses.dataclass
class Chance:
    """Give each request of ``ops`` (None: all) ``action`` with ``probability``: an ``Answer``
    (503 SlowDown, 500 InternalError), a ``Reset`` or a ``LoseResponse``; to at most ``times``
    of them (None: no limit)."""

    action: Answer | Reset | LoseResponse
    probability: float
    ops: tuple[str, ...] | None = None
    seed: int = 0
    times: int | None = None

    def __post_init__(self) -> None:
        self._ops = _ops(self.ops, "Chance")
        if not 0 <= self.probability <= 1:
            raise ValueError(f"Chance: probability must be within [0, 1], not {self.probability}")
        if not isinstance(self.action, Answer | Reset | LoseResponse):
            raise ValueError(f"Chance: action must be an Answer, Reset or LoseResponse, not {self.action!r}")
        self._random = random.Random(self.seed)

    def decide(self, request: RequestInfo) -> Action | None:
        if request.op not in self._ops or self.times == 0:
            return None
        # Draw for every matching request, so whether request n fails depends on n alone.
        if self._random.random() >= self.probability:
            return None
        if self.times is not None:
            self.times -= 1
        return self.action


@dataclasses.dataclass
class Throttle:
    """S3's per-prefix request rates, scaled down: a token bucket per (bucket, prefix) holding
    up to ``burst`` tokens and refilled at ``rate`` a second; each request of ``ops`` (None:
    all) takes one, and with none left it is answered 503 SlowDown, never reaching the store.
    The prefix is the key's (for a LIST, its prefix's) first ``depth`` path segments."""

    rate: float
    burst: float
    depth: int
    ops: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        self._ops = _ops(self.ops, "Throttle")
        if not (self.rate > 0 and self.burst >= 1 and self.depth >= 1):
            raise ValueError(f"Throttle: need rate > 0, burst >= 1, depth >= 1, not "
                             f"{self.rate}, {self.burst}, {self.depth}")
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # -> (tokens, at)

    def prefix(self, key: str) -> str:
        return "/".join(key.split("/")[:self.depth])

    def decide(self, request: RequestInfo) -> Action | None:
        if request.op not in self._ops:
            return None
        now = time.monotonic()
        where = (request.bucket, self.prefix(request.key))
        tokens, at = self._buckets.get(where, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1:
            self._buckets[where] = (tokens, now)
            return Answer(503, "SlowDown", "Please reduce your request rate.", fault="throttle")
        self._buckets[where] = (tokens - 1, now)
        return None


@dataclasses.dataclass
class Kill:
    """At the next ``times`` requests of ``op`` whose key matches the regular expression ``key``
    (``re.search``), SIGKILL the process group of ``pid``: before the request is forwarded (the
    store never sees it), or ``after_applied``, once the store has answered it. The client's
    connection is reset either way; the process that sent it is gone. ``pid`` must lead a
    process group of its own (``process_group=0``), never the caller's."""

    pid: int
    after_applied: bool
    op: str
    key: str = ""
    times: int = 1

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"Kill: op must be one of {', '.join(OPS)}, not {self.op!r}")
        try:
            group = os.getpgid(self.pid)
        except ProcessLookupError:
            raise ValueError(f"Kill: no process {self.pid}") from None
        if group == os.getpgrp():
            raise ValueError(f"Kill: process {self.pid} is in this process's own group, which the kill would take "
                             "down too; start it with process_group=0")
        self._key = re.compile(self.key)

    def decide(self, request: RequestInfo) -> Action | None:
        if self.times > 0 and request.op == self.op and self._key.search(request.key):
            self.times -= 1
            return KillGroup(self.pid, self.after_applied)
        return None


def copy_source(request: RequestInfo) -> tuple[str, str] | None:
    """``(bucket, key)`` a COPY (or UploadPartCopy) reads, from its ``x-amz-copy-source``."""
    source = request.headers.get("x-amz-copy-source")
    if not source:
        return None
    return split_path(source.partition("?")[0])  # split_path URL-decodes


def _body_size(request: RequestInfo) -> int | None:
    """An upload's payload size from its head: ``x-amz-decoded-content-length`` of an aws-chunked
    body, else Content-Length."""
    for name in ("x-amz-decoded-content-length", "content-length"):
        value = request.headers.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _succeeded(observed: Observed) -> bool:
    # CompleteMultipartUpload (and a COPY) may answer 200 with an <Error> document.
    return 200 <= observed.status < 300 and b"<Error>" not in observed.body[:512]


class CopyThroughput(_Locked):
    """A server-side COPY (and UploadPartCopy) is answered no sooner than its source's size at
    ``bytes_per_second`` after it went to the store, as on AWS S3, where a COPY moves the
    bytes. The source's size is what this rule saw written to that key through the proxy (a
    PUT, or a multipart upload's parts), else an uncounted HEAD to the store; a COPY whose
    source size stays unknown is not held."""

    def __init__(self, bytes_per_second: float) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"CopyThroughput: bytes_per_second must be > 0, not {bytes_per_second}")
        self.bytes_per_second = bytes_per_second
        self._sizes: dict[tuple[str, str], int] = {}
        self._parts: dict[str, dict[str, int]] = {}  # uploadId -> {partNumber: size}
        self._init_lock()

    def __repr__(self) -> str:
        return f"CopyThroughput(bytes_per_second={self.bytes_per_second})"

    def decide(self, request: RequestInfo) -> Action | None:
        if request.op in ("PUT", "MPU_PART", "MPU_COMPLETE", "DELETE"):
            return Forward(on_response=self._book)
        if request.op == "COPY":
            return Forward(on_response=self._hold)
        return None

    def _book(self, observed: Observed) -> None:
        if not _succeeded(observed):
            return
        request = observed.request
        where = (request.bucket, request.key)
        with self._lock:
            if request.op == "PUT":
                size = _body_size(request)
                if size is not None:
                    self._sizes[where] = size
            elif request.op == "MPU_PART":
                size = _body_size(request) if "x-amz-copy-source" not in request.headers else None
                parts = self._parts.setdefault(request.params.get("uploadId", ""), {})
                parts[request.params.get("partNumber", "")] = size
            elif request.op == "MPU_COMPLETE":
                parts = self._parts.pop(request.params.get("uploadId", ""), {})
                if parts and None not in parts.values():
                    self._sizes[where] = sum(parts.values())
            else:  # DELETE
                self._sizes.pop(where, None)

    def _hold(self, observed: Observed) -> None:
        source = copy_source(observed.request)
        if source is None or not _succeeded(observed):
            return
        with self._lock:
            size = self._sizes.get(source)
        if size is None:
            size = observed.probe_size(*source)
        if size is None:
            return
        with self._lock:
            self._sizes[(observed.request.bucket, observed.request.key)] = size
        remaining = observed.forwarded + size / self.bytes_per_second - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        observed.note("copy-throughput")


# -- eventual consistency ----------------------------------------------------------------------

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


class Eventual(_Locked):
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
        body = b"" if request.op == "HEAD" else _error_xml(
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
            if not _succeeded(observed):
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
        size = _body_size(request)
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


# -- the rules in force ------------------------------------------------------------------------

class FaultRules:
    """The rules in force, in the order injected; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list = []

    def add(self, rule) -> None:
        with self._lock:
            self._rules = [*self._rules, rule]

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def decide(self, request: RequestInfo) -> Action:
        """The action for ``request``: the first opinion of a rule (a rule's ``Delay`` without
        ``then`` goes before whatever the later rules decide), else ``FORWARD``."""
        if not self._rules:  # the common case: no lock, no work
            return FORWARD
        delays: list[Delay] = []
        action: Action = FORWARD
        with self._lock:
            for rule in self._rules:
                opinion = rule.decide(request)
                if isinstance(opinion, Delay) and opinion.then is None:
                    delays.append(opinion)
                elif opinion is not None:
                    action = opinion
                    break
        for delay in reversed(delays):
            action = dataclasses.replace(delay, then=action)
        return action


# -- named profiles ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Profile:
    """A named set of rules: ``profile(seed)`` builds them afresh (their randomness seeded)."""

    description: str
    build: Callable[[int], list]

    def __call__(self, seed: int) -> list:
        return self.build(seed)


#: AWS S3 as projected by ``aws-projection`` (a projection, not a measurement of AWS):
#: - request latency: lognormal, p50 30 ms, p99 200 ms. AWS's "Best Practices Design Patterns:
#:   Optimizing Amazon S3 Performance" (whitepaper, "Timeouts and Retries for Latency-Sensitive
#:   Applications") says median latencies of small requests are "often in the range of tens of
#:   milliseconds"; its S3 performance guidance as commonly quoted puts first-byte latency at
#:   100-200 ms, taken here as the 99th percentile.
#: - COPY: 8 MB/s, inside the 6-10 MB/s the zero-rename committer paper measured for S3's
#:   server-side COPY (shared/notes/environment.md).
AWS_LATENCY_P50, AWS_LATENCY_P99 = 0.030, 0.200
AWS_COPY_BYTES_PER_SECOND = 8e6
#: The pre-2020 S3 inconsistency window ``eventual`` emulates. S3 documented no bound; seconds
#: is what users reported, and longer than a batch here, so a batch meets the keys it wrote.
EVENTUAL_WINDOW = 5.0
#: ``throttle``: S3 allows 3,500 writes and 5,500 reads a second per prefix; scaled down
#: ~350x, so that a single query's checkpoint directories (prefix: 4 path segments,
#: e.g. ``bench/<run>/checkpoint/offsets``) meet it.
THROTTLE_WRITES, THROTTLE_READS, THROTTLE_DEPTH = 10.0, 16.0, 4


PROFILES: dict[str, Profile] = {
    "none": Profile("no rules: the proxy only meters", lambda seed: []),
    "latency-fixed": Profile("every request delayed 20 ms", lambda seed: [Latency(0.020)]),
    "latency-tail": Profile(
        "every request delayed, lognormal: p50 10 ms, p99 300 ms",
        lambda seed: [Latency(0.010, 0.300, seed=seed)]),
    "slowdown": Profile(
        "5% of requests answered 503 SlowDown (never reaching the store)",
        lambda seed: [Chance(Answer(503, "SlowDown", "Please reduce your request rate.", "slowdown"), 0.05,
                             seed=seed)]),
    "internal-error": Profile(
        "5% of requests answered 500 InternalError (never reaching the store)",
        lambda seed: [Chance(Answer(500, "InternalError", "We encountered an internal error. Please try again.",
                                    "internal-error"), 0.05, seed=seed)]),
    "reset": Profile(
        "2% of requests: the connection is reset before the store sees them",
        lambda seed: [Chance(Reset(), 0.02, seed=seed)]),
    "lost-response": Profile(
        "2% of writes: the store applies them, then the client's connection is reset",
        lambda seed: [Chance(LoseResponse(), 0.02, ops=WRITE_OPS, seed=seed)]),
    "throttle": Profile(
        f"per-prefix token buckets (prefix: {THROTTLE_DEPTH} path segments): {THROTTLE_WRITES:g} writes/s and "
        f"{THROTTLE_READS:g} reads/s, burst of 2 s, else 503 SlowDown",
        lambda seed: [Throttle(THROTTLE_WRITES, 2 * THROTTLE_WRITES, THROTTLE_DEPTH, WRITE_OPS),
                      Throttle(THROTTLE_READS, 2 * THROTTLE_READS, THROTTLE_DEPTH, READ_OPS)]),
    "eventual": Profile(
        f"pre-2020 S3 consistency, emulated with a {EVENTUAL_WINDOW:g} s window: new keys unlisted, "
        "probed keys 404, deleted keys listed, overwrites read stale",
        lambda seed: [Eventual(EVENTUAL_WINDOW)]),
    "eventual-lists": Profile(
        f"eventual's listings alone ({EVENTUAL_WINDOW:g} s): new keys unlisted, deleted keys listed",
        lambda seed: [Eventual(EVENTUAL_WINDOW, reads=False)]),
    "eventual-reads": Profile(
        f"eventual's reads alone ({EVENTUAL_WINDOW:g} s): probed keys 404, overwrites read stale",
        lambda seed: [Eventual(EVENTUAL_WINDOW, lists=False)]),
    "aws-projection": Profile(
        f"a projection to AWS S3: latency p50 {AWS_LATENCY_P50 * 1000:.0f} ms / p99 {AWS_LATENCY_P99 * 1000:.0f} ms, "
        f"COPY at {AWS_COPY_BYTES_PER_SECOND / 1e6:g} MB/s",
        lambda seed: [Latency(AWS_LATENCY_P50, AWS_LATENCY_P99, seed=seed),
                      CopyThroughput(AWS_COPY_BYTES_PER_SECOND)]),
}


class UnknownProfile(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown fault profile '{name}'; valid fault profiles: {', '.join(PROFILES)}")


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownProfile(name) from None


def describe_profiles() -> str:
    """One line per profile: its name and what it injects."""
    width = max(map(len, PROFILES))
    return "\n".join(f"{name:<{width}}  {p.description}" for name, p in PROFILES.items())
