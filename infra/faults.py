"""Faults the metering proxy injects on purpose: the one place their rules live.

The proxy consults its ``FaultRules`` at exactly one hook per request: once the request's
head has arrived and been classified, before anything of it is forwarded, it calls
``decide(RequestInfo) -> Action`` and does what the action says:

* ``Forward()`` (``FORWARD``): relay the request unchanged; what every request gets
  when no rule matches.
* ``Forward(drop_header=name)``: relay it without that header (a store that ignores
  ``If-None-Match``, say). This breaks the proxy's forwards-unchanged guarantee on
  purpose, for the matching requests only.
* ``Answer(status, code, message)``: do not forward; read the request's body off the
  client (so the connection stays usable) and answer ``status`` with an S3-style XML
  error body (``Answer.body``). The store never sees the request.

``Fault(op, status=..., drop_header=..., times=...)`` is today's only rule: it matches
requests by operation, for the next ``times`` of them (every one when None). Rules are
plain picklable data, so ``ProxyProcess.inject`` can hand them to a proxy in a child
process; the first rule that matches decides.

Room for what comes next (not implemented; where each fits):

* Latency before forwarding: an action ``Delay(seconds, then=FORWARD)``; the proxy sleeps
  in the request's own thread before it forwards, so other connections are not slowed.
* Connection reset before forwarding: an action ``Reset()``; the proxy sets SO_LINGER 0
  on the client socket and closes it, so the client sees ECONNRESET and the store nothing.
* Connection reset after the store applied the request (response lost): an action
  ``LoseResponse()``; the proxy forwards as usual, reads the store's whole response
  (the store has applied the write), then resets the client connection instead of
  relaying it. A client retry of an ``If-None-Match: *`` PUT then meets its own write (412).
* Per-prefix throttling: a rule (not an action) that matches a key prefix and keeps a
  token bucket (requests per second), answering ``Answer(503, "SlowDown", ...)`` over
  budget; ``RequestInfo.key`` is already the object key or LIST prefix.
* Stale reads and lists: a rule that remembers earlier responses for a key or prefix and
  returns an action carrying one (``Replay(status, headers, body)``), which the proxy
  sends instead of forwarding. Remembering needs a second, response-side hook
  (``Forward(on_response=...)``); the request-side hook stays the single decision point.

A rule sees only the request head: a bulk DELETE's keys are in its body, so its
``RequestInfo.key`` is ``""``.
"""

from __future__ import annotations

import dataclasses
import http
import threading
import uuid
from collections.abc import Mapping
from html import escape

from .s3ops import OPS

#: The S3 error code an ``Answer`` carries by default for a status.
_S3_CODES = {
    400: "InvalidRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "OperationAborted",
    412: "PreconditionFailed", 500: "InternalError", 501: "NotImplemented", 503: "SlowDown",
}


@dataclasses.dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a rule may look at: the request head, classified (see ``infra.s3ops``).
    ``key`` is the object key, for a LIST its prefix, else ``""``; ``headers`` maps
    lower-case header names to values."""

    method: str
    op: str
    bucket: str
    key: str
    headers: Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Forward:
    """Relay the request, without the header ``drop_header`` (any case) if given."""

    drop_header: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """Answer ``status`` with an S3 error ``code`` instead of forwarding."""

    status: int
    code: str
    message: str = "injected by the ckptbench metering proxy"

    @property
    def reason(self) -> str:
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return "Injected Fault"

    def body(self, resource: str) -> bytes:
        """The XML error document S3 sends, for the request path ``resource``."""
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{escape(self.code)}</Code><Message>{escape(self.message)}</Message>"
            f"<Resource>{escape(resource)}</Resource><RequestId>{uuid.uuid4().hex[:16]}</RequestId></Error>"
        ).encode()


Action = Forward | Answer
FORWARD = Forward()


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

    def matches(self, request: RequestInfo) -> bool:
        return request.op == self.op

    def action(self) -> Action:
        if self.status is not None:
            return Answer(self.status, _S3_CODES.get(self.status, "InjectedFault"))
        return Forward(drop_header=self.drop_header)


class FaultRules:
    """The rules in force, in the order injected; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []

    def add(self, rule: Fault) -> None:
        with self._lock:
            self._rules = [*self._rules, rule]

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def decide(self, request: RequestInfo) -> Action:
        """The action for ``request``: the first matching rule's (which counts it against
        its ``times``), else ``FORWARD``."""
        if not self._rules:  # the common case: no lock, no work
            return FORWARD
        with self._lock:
            for rule in self._rules:
                if rule.times != 0 and rule.matches(request):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule.action()
        return FORWARD
