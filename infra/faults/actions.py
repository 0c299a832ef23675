"""What the metering proxy does with one request (an action), what a rule may look at to decide
(``RequestInfo``, and through a response hook ``Observed``), and the record of a fault applied
(``Injection``). Plain data: the proxy carries the actions out (``infra.proxy``). Also
``error_xml``, the S3 error document of an answer the proxy makes up, for the rules that replay
one."""

from __future__ import annotations

import dataclasses
import http
import uuid
from collections.abc import Callable, Mapping
from html import escape
from urllib.parse import parse_qsl


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
    seconds: float = 0.0  # how long the proxy held the request for it: a ``Delay``'s; 0 for the others


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
        return error_xml(self.code, self.message, resource)


@dataclasses.dataclass(frozen=True, slots=True)
class Delay:
    """Sleep ``seconds``, then do ``then``; a rule's ``Delay`` without ``then`` lets the later
    rules decide what follows (``FaultRules.decide`` fills it in)."""

    seconds: float
    then: Action | None = None
    fault: str = "latency"


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """Wait in the request's own thread until ``wait()`` returns, then do ``then``. ``wait``
    returns the label of the injection to record (how the wait ended), or None to record none.
    Like ``Delay``, a rule's ``Hold`` without ``then`` lets the later rules decide what follows."""

    wait: Callable[[], str | None]
    then: Action | None = None


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


Action = Forward | Answer | Replay | Delay | Hold | Reset | LoseResponse | KillGroup
FORWARD = Forward()


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Injected Fault"


def error_xml(code: str, message: str, resource: str) -> bytes:
    """An S3 error document (``<Error>`` with ``Code``, ``Message``, ``Resource`` and a fresh
    ``RequestId``), as a store answers a failed request."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>{uuid.uuid4().hex[:16]}</RequestId></Error>"
    ).encode()
