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
* ``Hold(wait, then)``: wait in the request's own thread until ``wait()`` returns (the label
  of the injection to record, or None), then do ``then``.
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
* ``Rendezvous(pattern, timeout_s, ops)``: two writers of one key made to meet: the first
  write of a matching key is held until a second write of that key comes, then both go on
  together (or it goes on alone after ``timeout_s``, or at once when the rule is released:
  ``release()``, or the faults cleared); a race that meets every time.
* ``Outage(seconds, after)``: the store unreachable for a window of ``seconds``: every request
  in it reset, on every connection (see ``outage`` for when the window opens, and for the other
  kind of outage, the store's gateway killed and restarted, which ``StoreOutage`` describes).

Randomness is reproducible: every rule that draws has its own ``random.Random(seed)``, so
a sequence of requests (one client, one at a time) meets the same faults for the same seed;
concurrent requests draw in the order they arrive. Named sets of rules are in ``PROFILES``.

A rule sees only the request head (and, through a hook, the response and as much of the
request body as it asked for): a bulk DELETE's keys are in its body, so its ``RequestInfo.key``
is ``""``; ``Eventual`` reads them from the body it keeps (the answer of a ``Quiet`` bulk
DELETE, as S3A sends, names no deleted key).

With no rules in force (profile ``none``) ``FaultRules.decide`` returns ``FORWARD`` at once,
without taking its lock, so the hooks cost a request nothing beyond the proxy's own spread
(measured: see docs/findings/proxy-overhead.md).

The code: ``actions`` (what a request gets, and what a rule sees), ``rules`` (the rules and
``FaultRules``), ``eventual`` (the consistency emulation), ``outage`` (the store taken away), ``profiles`` (the named
sets).
"""

from __future__ import annotations

from .actions import (
    FORWARD,
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
from .eventual import Eventual, decode_aws_chunked
from .outage import Outage, StoreOutage
from .profiles import (
    AWS_COPY_BYTES_PER_SECOND,
    AWS_LATENCY_P50,
    AWS_LATENCY_P99,
    EVENTUAL_WINDOW,
    GATEWAY_PAUSE,
    OUTAGE_SECONDS,
    PROFILES,
    THROTTLE_DEPTH,
    THROTTLE_READS,
    THROTTLE_WRITES,
    Profile,
    UnknownProfile,
    describe_profiles,
    profile,
)
from .rules import (
    READ_OPS,
    WRITE_OPS,
    Chance,
    CopyThroughput,
    Fault,
    FaultRules,
    Kill,
    Latency,
    Rendezvous,
    Throttle,
    copy_source,
)

__all__ = [
    "AWS_COPY_BYTES_PER_SECOND", "AWS_LATENCY_P50", "AWS_LATENCY_P99", "EVENTUAL_WINDOW", "FORWARD", "GATEWAY_PAUSE",
    "OUTAGE_SECONDS", "PROFILES", "READ_OPS", "THROTTLE_DEPTH", "THROTTLE_READS", "THROTTLE_WRITES", "WRITE_OPS",
    "Action", "Answer", "Chance",
    "CopyThroughput", "Delay", "Eventual", "Fault", "FaultRules", "Forward", "Hold", "Injection", "Kill", "KillGroup",
    "Latency", "LoseResponse", "Observed", "Outage", "Profile", "Rendezvous", "Replay", "RequestInfo", "Reset",
    "StoreOutage", "Throttle", "UnknownProfile",
    "copy_source", "decode_aws_chunked", "describe_profiles", "profile",
]
