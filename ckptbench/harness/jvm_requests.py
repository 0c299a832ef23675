"""S3 requests counted inside Spark's JVMs, driver and executors, read from Python.

``ckpt_impls.configure`` installs the plugin ``ckpt_impls.REQUESTS_PLUGIN``: the S3A SDK's global
hook (SDK v1: a ``RequestHandler2``; v2: an ``ExecutionInterceptor``) in every Spark JVM records one
line per HTTP attempt (retries included), executors
ship theirs to the driver, and ``JvmRequests`` drains the driver's collection through py4j into the
same ``Event`` rows the metering proxy makes (the area from the key by the proxy's own ``area_of``),
so ``results.Recorder.add_requests`` files both alike, each under its ``source`` ("proxy", "jvm").

What the JVM side sees that the proxy cannot: executors on other machines, HTTPS endpoints, stores
with no proxy in front. What it cannot see: requests made outside that SDK (boto3 from
Python, a client of the other SDK generation). Its clock is the client's: an event's ``start`` is
when the SDK began the attempt, its duration runs to the attempt's end (the proxy's is
store-side; each SDK's meter says where its attempts begin and end), and ``bytes_out`` is the
response's declared length (-1: not known, such as an error's body).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter

import pandas as pd

import ckpt_impls
from ckptbench.record.results import Run
from infra.s3ops import Event, area_of

#: The JVM class that holds the records (``ckpt_impls/java/ckptbench/metering/S3RequestLog.java``).
LOG_CLASS = "ckptbench.metering.S3RequestLog"
#: How often executors ship their records to the driver (the plugin's default ``flushMs``).
FLUSH_S = 0.2
#: An executor that shipped nothing for this long (milliseconds) is gone and not waited for.
LIVE_MS = 5000


@dataclasses.dataclass(frozen=True, slots=True)
class JvmEvent(Event):
    """An ``Event`` as recorded inside a JVM; ``origin`` is the executor id, or ``driver``."""

    origin: str = "driver"


_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPE = {"t": "\t", "n": "\n"}


def _unescape(field: str) -> str:
    """A field as ``S3RequestLog.escape`` wrote it: ``\\t``, ``\\n`` and ``\\\\`` back to tab, newline, backslash."""
    return _ESCAPED.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), field) if "\\" in field else field


def parse(text: str) -> list[JvmEvent]:
    """The records of ``S3RequestLog.drain()``'s text, in completion order."""
    events = []
    for line in text.split("\n"):
        if not line:
            continue
        start_us, duration_us, method, op, status, bytes_in, bytes_out, bucket, key, origin = line.split("\t")
        start, key = int(start_us) / 1e6, _unescape(key)
        events.append(JvmEvent(start, start + int(duration_us) / 1e6, method, op, area_of(key), _unescape(bucket),
                               key, int(status), int(bytes_in), int(bytes_out), _unescape(origin)))
    events.sort(key=lambda e: e.end)
    return events


class JvmRequests:
    """The JVM-side counts of one SparkSession, with the metering proxy's ``mark``/``events_since``
    interface. Get it with ``of(spark)``: draining is destructive, so each session has one."""

    def __init__(self, spark) -> None:
        self._log = ckpt_impls.jvm_class(spark, LOG_CLASS)
        master = spark.sparkContext.master
        #: Local mode: the executor is the driver's JVM, so nothing arrives late.
        self.local = master == "local" or master.startswith("local[")
        self._events: list[JvmEvent] = []
        self._forgotten = 0
        #: Requests drained so far per JVM that made them (executor id, or ``driver``).
        self.origins: Counter[str] = Counter()

    @property
    def enabled(self) -> bool:
        """Whether the driver JVM records (the plugin is installed and not switched off)."""
        return bool(self._log.isEnabled())

    def set_enabled(self, on: bool) -> None:
        """Switch recording on or off in the driver JVM (in local mode: every request of the session)."""
        self._log.setEnabled(bool(on))

    def dropped(self) -> int:
        """Records the driver's JVM lost (its buffer full, a request not understood, a shipment lost)."""
        return int(self._log.dropped())

    def settle(self, timeout: float = 10.0) -> float:
        """Wait for a moment at which no S3 request was in flight in any of the application's JVMs,
        and return it (epoch seconds; at most ``timeout`` seconds on, then the latest tried): every
        request begun before it had ended and is in this log, and, if it went through a metering
        proxy, in the proxy's too (the proxy records a request before relaying its response's last
        bytes). Cutting both sources at it makes them comparable: a query's stragglers (an upload
        still running after ``stop()``, a state store maintenance LIST on an executor) land in both
        or in neither.

        The driver's JVM is asked directly; off local mode, executors vouch for a moment in their
        shipments' reports (``S3RequestLog.executorsIdleAt``): one that was busy then makes this
        try a later moment: without these reports, an executor's LIST in flight as its query stops
        can reach one source and not the other."""
        deadline = time.time() + timeout
        while True:
            cut = time.time()
            if self._log.inFlight() > 0:
                if cut > deadline:
                    return cut
                time.sleep(0.01)
                continue
            if self.local:
                return cut
            while (idle := self._log.executorsIdleAt(int(cut * 1e6), LIVE_MS)) == 0 and time.time() < deadline:
                time.sleep(FLUSH_S / 4)
            if idle == 1 or time.time() > deadline:
                return cut

    def pull(self) -> None:
        """Move what the driver's JVM recorded so far into this process. A long query's heap
        readings call it first: the log holds every request since the last drain, up to its
        capacity, so undrained it is the harness's own growth in the heap it reads, enough to pass
        for a strategy's growth over a long query (measured: docs/findings/scale.md)."""
        events = parse(self._log.drain())
        self.origins.update(e.origin for e in events)
        self._events += events

    def mark(self) -> int:
        """A position in the event stream, for ``events_since``."""
        self.pull()
        return self._forgotten + len(self._events)

    def events_since(self, mark: int) -> list[JvmEvent]:
        """The events recorded after ``mark()`` returned ``mark``. Off local mode, first waits for
        the executors' next shipments."""
        if not self.local:
            time.sleep(3 * FLUSH_S)
        self.pull()
        return self._events[max(0, mark - self._forgotten):]

    def reset(self) -> None:
        """Forget every event so far; earlier marks stay usable."""
        self.pull()
        self._forgotten += len(self._events)
        self._events = []


_SESSIONS: dict[str, JvmRequests] = {}


def of(spark) -> JvmRequests:
    """The ``JvmRequests`` of ``spark``'s SparkContext (one per application)."""
    app = spark.sparkContext.applicationId
    if app not in _SESSIONS:
        _SESSIONS[app] = JvmRequests(spark)
    return _SESSIONS[app]


def counting_conf(on: bool) -> dict[str, str]:
    """Spark settings that start a session with JVM counting on or off."""
    return {ckpt_impls.REQUESTS_ENABLED_CONF: str(bool(on)).lower()}


# -- the two sources side by side ---------------------------------------------------------------

#: What makes two records the same request, besides their time: operation, checkpoint area, key,
#: status and payload bytes.
FIELDS = ("op", "area", "key", "status", "bytes_in")
#: Clock slack between the proxy's and the JVM's timestamps (both the machine's wall clock).
SLACK_S = 0.002


def _records(run: Run, source: str, fields) -> list[tuple]:
    frame = run.results.requests
    frame = frame[(frame.run == run.run) & (frame.source == source)]
    return [(None if pd.isna(b) else int(b), start, start + ms / 1000, tuple(rest))
            for b, start, ms, *rest in frame[["batch_id", "start", "ms", *fields]].itertuples(index=False)]


def match(run: Run, fields=FIELDS) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Pair each request the proxy saw with the attempt the JVM recorded for it: same ``fields``,
    and the proxy's start (the request head arriving) within the JVM's attempt (its start to its
    end, give or take ``SLACK_S``). An attempt the JVM saw end with no response (status 0: an I/O
    error, an interrupt) may or may not have reached the store, and if it did the store may have
    answered it: it pairs with a proxy record alike in every field but status, or with none; and a
    proxy record with no answer (status 0) pairs with the JVM's attempt or with none.

    Returns ``(pairs, proxy_only, jvm_only)``: pairs as ``(jvm record, proxy record)``, records as
    ``(batch_id, start, end, field values)``; ``jvm_only`` leaves out the unanswered attempts that
    paired with nothing."""
    proxy, jvm = _records(run, "proxy", fields), _records(run, "jvm", fields)
    at = list(fields).index("status") if "status" in fields else None
    pairs, left = [], sorted(jvm, key=lambda r: r[1])
    taken = [False] * len(left)

    def take(p, same) -> bool:
        for i, j in enumerate(left):
            if not taken[i] and same(j) and j[1] - SLACK_S <= p[1] <= j[2] + SLACK_S:
                taken[i] = True
                pairs.append((j, p))
                return True
        return False

    proxy_only = [p for p in sorted(proxy, key=lambda r: r[1]) if not take(p, lambda j, p=p: j[3] == p[3])]
    if at is not None:  # then the JVM's unanswered attempts, alike in all but status
        def unanswered_alike(j, p):
            return j[3][at] == 0 and j[3][:at] + j[3][at + 1:] == p[3][:at] + p[3][at + 1:]

        proxy_only = [p for p in proxy_only if not take(p, lambda j, p=p: unanswered_alike(j, p))]
        # A request the proxy relayed no answer to (the client went away) may have no JVM record:
        # a task interrupted as its query stopped (a state file's PUT, say).
        proxy_only = [p for p in proxy_only if p[3][at] != 0]
    jvm_only = [j for i, j in enumerate(left) if not taken[i] and (at is None or j[3][at] != 0)]
    return pairs, proxy_only, jvm_only


def unseen_by_proxy(run: Run, fields=FIELDS) -> dict[str, int]:
    """The JVM's unanswered attempts (status 0) that no proxy record pairs with (``match``), per
    operation: requests that never reached the proxy (a pooled connection that broke before the
    request's head was sent), which the JVM counts and the proxy cannot. When the sources agree
    (``disagreements`` empty), the JVM's total less these is the proxy's total less
    ``unanswered_only_in_proxy``."""
    return _unpaired_unanswered(run, "jvm", fields)


def unanswered_only_in_proxy(run: Run, fields=FIELDS) -> dict[str, int]:
    """The proxy's records of requests it relayed no answer to (status 0: the client went away)
    that no JVM attempt pairs with (``match``), per operation: a task interrupted as its query
    stopped, whose attempt the JVM recorded with other bytes (the body it meant to send, where
    the proxy got part of it) or not at all. Counted by the proxy, not by the JVM."""
    return _unpaired_unanswered(run, "proxy", fields)


def _unpaired_unanswered(run: Run, source: str, fields) -> dict[str, int]:
    pairs, _, _ = match(run, fields)
    op, at = list(fields).index("op"), list(fields).index("status")
    side = 0 if source == "jvm" else 1
    unanswered = Counter(r[3][op] for r in _records(run, source, fields) if r[3][at] == 0)
    return dict(unanswered - Counter(pair[side][3][op] for pair in pairs if pair[side][3][at] == 0))


def disagreements(run: Run, fields=FIELDS, exact: bool = False) -> pd.DataFrame:
    """Where the proxy's and the JVM's records of ``run`` differ: per batch (NA: between batches),
    each combination of ``fields`` that one source saw a different number of times than the other,
    with both counts. Empty: they agree.

    By default requests are paired by ``match``, so a request counts in the batch each source
    filed it under, and agrees if the other source saw it: the proxy's clock starts when the
    request's head arrives, after the JVM began the attempt (signing, a connection, the proxy
    process being scheduled), so a request begun in a batch's last instants can fall after that
    batch's window by the proxy's clock (``moved`` lists them); and an unanswered JVM attempt
    pairs with the proxy's record of it or with nothing. ``exact``: the two sources' multisets per
    batch, with neither allowance."""
    if exact:
        counts = {source: Counter((r[0], *r[3]) for r in _records(run, source, fields)) for source in ("proxy", "jvm")}
    else:
        _, proxy_only, jvm_only = match(run, fields)
        counts = {"proxy": Counter((r[0], *r[3]) for r in proxy_only),
                  "jvm": Counter((r[0], *r[3]) for r in jvm_only)}
    rows = []
    for key in sorted(set(counts["proxy"]) | set(counts["jvm"]), key=lambda k: (k[0] is None, k[0] or 0, str(k[1:]))):
        proxy, jvm = counts["proxy"][key], counts["jvm"][key]
        if proxy != jvm:
            rows.append({"batch_id": key[0], **dict(zip(fields, key[1:], strict=True)), "proxy": proxy, "jvm": jvm})
    return pd.DataFrame(rows, columns=["batch_id", *fields, "proxy", "jvm"])


def moved(run: Run, fields=FIELDS) -> pd.DataFrame:
    """The paired requests the two sources filed under different batches (``jvm_batch``,
    ``proxy_batch``; NA: between batches), with ``gap_ms``: how much later the proxy's clock
    started it than the JVM's."""
    pairs, _, _ = match(run, fields)
    rows = [{"jvm_batch": j[0], "proxy_batch": p[0], **dict(zip(fields, j[3], strict=True)),
             "gap_ms": (p[1] - j[1]) * 1000} for j, p in pairs if j[0] != p[0]]
    return pd.DataFrame(rows, columns=["jvm_batch", "proxy_batch", *fields, "gap_ms"])


def counts_by_op(run: Run, source: str) -> pd.DataFrame:
    """Requests per batch (rows, all batches) and operation (columns) as ``source`` recorded them."""
    frame = run.results.requests
    frame = frame[(frame.run == run.run) & (frame.source == source)]
    return frame.groupby(["batch_id", "op"]).size().unstack(fill_value=0)
