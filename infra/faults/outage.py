"""The store taken away for a while: the ``Outage`` rule (the proxy resets every request for a
window of seconds) and ``StoreOutage``, what an outage profile promises its runner.

Two kinds of outage, both "the store is unreachable for T seconds, then back":

* a network partition, emulated by the metering proxy: ``Outage(seconds, after)``. Every
  request that arrives in the window has its connection reset before anything of it is
  forwarded (the store never sees it), on every connection, old or new. The proxy still
  accepts TCP connections, so a client's connect timeout never fires: what it meets is a reset
  per attempt, which the AWS SDK and S3A retry as an I/O error. A refused connect (nothing
  listening) is the gateway-restart kind below.
* the store's gateway process killed (SIGKILL) and started again ``seconds`` later on the same
  port: ``StoreOutage(restart=True)``. No proxy rule can do that; the runner that owns the store
  does it (``infra.ceph.CephStore.kill_gateway`` / ``start_gateway``). Through the proxy the
  client then meets 502 Bad Gateway (the proxy cannot connect upstream), as behind a load
  balancer whose backend is down.

When the window opens, for reproducible runs: at the first request after ``after`` requests
have passed since the rule was put in force (a count, not a clock, so a loaded machine moves
the window in time but not in the request sequence); its length is wall-clock time, as an
outage's is. The fault lab puts the rule in force once the query has done a set number of
batches, with ``after`` 0, so the outage starts at the same point of every strategy's query.
"""

from __future__ import annotations

import dataclasses
import time

from .actions import Action, RequestInfo, Reset


@dataclasses.dataclass
class Outage:
    """Reset every request in a window of ``seconds``, which opens at the request that follows the
    first ``after`` ones this rule sees (that request is the first reset), then let every request
    pass. Each injection is labelled ``fault`` (default ``outage``): the first one's ``start`` is
    when the window opened."""

    seconds: float
    after: int = 0
    fault: str = "outage"

    def __post_init__(self) -> None:
        if not self.seconds > 0 or self.after < 0:
            raise ValueError(f"Outage: need seconds > 0 and after >= 0, not {self.seconds}, {self.after}")
        self._seen = 0
        self._opened: float | None = None

    def decide(self, request: RequestInfo) -> Action | None:
        if self._opened is None:
            if self._seen < self.after:
                self._seen += 1
                return None
            self._opened = time.monotonic()
        if time.monotonic() - self._opened < self.seconds:
            return Reset(self.fault)
        return None


@dataclasses.dataclass(frozen=True)
class StoreOutage:
    """What an outage profile takes away: the store, for ``seconds``. ``restart``: by killing its
    gateway process and starting it again after ``seconds`` (the store's owner does it: the
    profile's proxy rules are none), else by the proxy's ``Outage`` rule. A runner that cannot
    restart the store's gateway (only ``CephStore`` can) must not run a ``restart`` profile."""

    seconds: float
    restart: bool = False
