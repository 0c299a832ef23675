"""The fault rules (plain picklable data, each with ``decide(request) -> Action | None``) and
``FaultRules``, the rules in force, which the proxy asks once per request (see ``infra.faults``).

Also what a rule with a response hook is built from, here and in ``eventual``: ``Locked`` (its
own lock), ``copy_source`` and ``body_size`` (what a request's head says of the object it reads
or writes) and ``succeeded`` (whether the store applied it)."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import random
import re
import threading
import time
from statistics import NormalDist

from ..s3ops import OPS, split_path
from .actions import (
    FORWARD,
    Action,
    Answer,
    Delay,
    Forward,
    Hold,
    KillGroup,
    LoseResponse,
    Observed,
    RequestInfo,
    Reset,
)

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


def _ops(ops, rule: str) -> frozenset[str]:
    """``ops`` (None: every op) as a set, each checked against ``OPS``."""
    chosen = frozenset(OPS if ops is None else ops)
    unknown = sorted(chosen - set(OPS))
    if unknown or not chosen:
        raise ValueError(f"{rule}: ops must be among {', '.join(OPS)}, not {unknown or 'none'}")
    return chosen


class Locked:
    """Base of a rule with state that its response hooks change outside ``FaultRules``' lock: its
    own lock (``_init_lock()`` makes it, in the rule's ``__init__``), left out when pickled."""

    def _init_lock(self) -> None:
        object.__setattr__(self, "_lock", threading.Lock())

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_lock()



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


def body_size(request: RequestInfo) -> int | None:
    """An upload's payload size from its head: ``x-amz-decoded-content-length`` of an aws-chunked
    body, else Content-Length."""
    for name in ("x-amz-decoded-content-length", "content-length"):
        value = request.headers.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def succeeded(observed: Observed) -> bool:
    """Whether the store applied the request: a 2xx answer that is not an error document."""
    # CompleteMultipartUpload (and a COPY) may answer 200 with an <Error> document.
    return 200 <= observed.status < 300 and b"<Error>" not in observed.body[:512]


class CopyThroughput(Locked):
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
        if not succeeded(observed):
            return
        request = observed.request
        where = (request.bucket, request.key)
        with self._lock:
            if request.op == "PUT":
                size = body_size(request)
                if size is not None:
                    self._sizes[where] = size
            elif request.op == "MPU_PART":
                size = body_size(request) if "x-amz-copy-source" not in request.headers else None
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
        if source is None or not succeeded(observed):
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


#: The operations that store an object at a key (a COPY's key is its destination).
RENDEZVOUS_OPS = ("PUT", "COPY", "MPU_COMPLETE")


class Rendezvous(Locked):
    """Two writers of one key made to meet: the first write request (of ``ops``) whose key fully
    matches the regular expression ``pattern`` is held, in its own request thread, until a second
    write request for the same bucket and key arrives; then both go to the store together (the
    second is not held at all). After ``timeout_s`` the held request goes on alone.

    Why: a create-only write that checks first and writes after (a HEAD and LIST, then a PUT or
    a rename's COPY) lets two writers both pass the check only when both checks come before
    either write, a window too narrow to meet by chance every time; held at its write, each
    writer has passed its check before the other writes, so every round tests the window.

    Each key meets once: a later write of a key already paired or timed out passes unheld (a
    retry, a late third writer). An injection is recorded on the held request: ``rendezvous``
    when its pair came, ``rendezvous-timeout`` when it went on alone after ``timeout_s``,
    ``rendezvous-released`` when it went on alone because the rule was released, so a run can
    tell whether the race met. The pattern must not match keys the two writers never share
    (rename's temp files ``.N.<uuid>.tmp``, the manifest's staged ``_manifest/s/<uuid>``): such a
    write would wait out the timeout alone. No randomness: the same requests meet the same way.

    ``release()`` (``FaultRules.clear`` calls it, so clearing the proxy's faults does) ends the
    rule: every held write goes on alone at once and later ones pass unheld. Whoever runs the
    writers knows when the other writer can no longer come (it failed, ended, or its write was
    refused before it reached the store); released then, a round that cannot meet ends at once
    instead of waiting out ``timeout_s``, which only bounds a wait nobody ended."""

    def __init__(self, pattern: str, timeout_s: float, ops: tuple[str, ...] = RENDEZVOUS_OPS) -> None:
        chosen = _ops(ops, "Rendezvous")
        if not chosen <= set(RENDEZVOUS_OPS):
            raise ValueError(f"Rendezvous: ops must be writes among {', '.join(RENDEZVOUS_OPS)}, not "
                             f"{sorted(chosen - set(RENDEZVOUS_OPS))}")
        if not timeout_s > 0:
            raise ValueError(f"Rendezvous: timeout_s must be > 0, not {timeout_s}")
        self.pattern, self.timeout_s, self.ops = pattern, timeout_s, tuple(ops)
        self._ops, self._regex = chosen, re.compile(pattern)
        self._held: dict[tuple[str, str], threading.Event] = {}  # a key -> its held request's wake-up
        self._done: set[tuple[str, str]] = set()  # keys that met, or timed out
        self._alone: set[tuple[str, str]] = set()  # keys whose held request ``release`` sent on
        self._released = False
        self._init_lock()

    def __repr__(self) -> str:
        return f"Rendezvous(pattern={self.pattern!r}, timeout_s={self.timeout_s}, ops={self.ops})"

    def __getstate__(self):
        return {**super().__getstate__(), "_held": {}}  # a held request stays in its own process

    def release(self) -> None:
        """End the rule: every held write goes on alone now (``rendezvous-released``), later ones unheld."""
        with self._lock:
            self._released = True
            held, self._held = self._held, {}
            self._done.update(held)
            self._alone.update(held)
        for waiting in held.values():
            waiting.set()

    def decide(self, request: RequestInfo) -> Action | None:
        if request.op not in self._ops or not self._regex.fullmatch(request.key):
            return None
        where = (request.bucket, request.key)
        with self._lock:
            if where in self._done or self._released:
                return None
            waiting = self._held.pop(where, None)
            if waiting is not None:  # the second: wake the first, and go on with it
                self._done.add(where)
                waiting.set()
                return None
            waiting = self._held[where] = threading.Event()
        return Hold(functools.partial(self._wait, where, waiting))

    def _wait(self, where: tuple[str, str], waiting: threading.Event) -> str:
        waiting.wait(self.timeout_s)
        with self._lock:
            if where in self._alone:
                return "rendezvous-released"
            if self._held.get(where) is not waiting:  # its pair came (as the wait ran out, perhaps)
                return "rendezvous"
            del self._held[where]
            self._done.add(where)
        return "rendezvous-timeout"


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
        """No rule in force from now on; a write a rule holds goes on now (``Rendezvous.release``)."""
        with self._lock:
            rules, self._rules = self._rules, []
        for rule in rules:
            if isinstance(rule, Rendezvous):
                rule.release()

    def decide(self, request: RequestInfo) -> Action:
        """The action for ``request``: the first opinion of a rule (a rule's ``Delay`` or ``Hold``
        without ``then`` goes before whatever the later rules decide), else ``FORWARD``."""
        if not self._rules:  # the common case: no lock, no work
            return FORWARD
        delays: list[Delay | Hold] = []
        action: Action = FORWARD
        with self._lock:
            for rule in self._rules:
                opinion = rule.decide(request)
                if isinstance(opinion, Delay | Hold) and opinion.then is None:
                    delays.append(opinion)
                elif opinion is not None:
                    action = opinion
                    break
        for delay in reversed(delays):
            action = dataclasses.replace(delay, then=action)
        return action
