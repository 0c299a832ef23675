"""The fault lab's store outages (``infra.faults`` profiles with an ``outage``): taking the store
away in the middle of a query, and the times a run records about it.

A run under an outage profile starts its query with no faults; once the query has done its lead
batches (``FaultPlan.outage_after``), the store goes away, so the outage meets every strategy at
the same point of its query (after start-up and a committed batch), however loaded the machine:

* a proxy outage (``Outage``): the profile is put in force; the window opens at the next request
  and lasts the profile's seconds. Its start is the first ``outage`` injection's (the request that
  opened it), its end that plus the seconds: the rule's own definition, not a reading of a clock.
* a gateway restart (``StoreOutage.restart``): the store's S3 gateway (Ceph's radosgw, SeaweedFS's
  ``weed s3``) is SIGKILLed, and started again after the profile's seconds, from this (the main)
  thread, because a server started from another thread dies with that thread
  (``infra.net.ending_with_us``). The outage runs from the kill to the
  moment the restarted gateway answered an S3 request (its start-up included, so longer than the
  pause). Only a store with ``kill_gateway``/``start_gateway`` (``RESTARTABLE``) can run it.

The times (seconds, NaN where they do not apply): ``outage_s``, how long the store was away;
``died_after_s``, from the outage's start to when the lab saw the query dead (it polls every
0.1 s, so up to that much late); ``resumed_after_s``, from the outage's start to the end of the
query's first batch that ended after the store was back (a batch caught in its retries
through the outage counts: that is riding it out).
"""

from __future__ import annotations

import dataclasses
import math
import time
from datetime import datetime

from infra.faults import PROFILES, StoreOutage

#: How often the lab looks at the query while the gateway is down (seconds).
_POLL = 0.1


@dataclasses.dataclass
class Window:
    """When the store went away and came back (``time.time()``), as far as the lab knows it."""

    outage: StoreOutage
    start: float | None = None
    end: float | None = None
    died_at: float | None = None  # seen dead while the gateway was down


def of(profile: str) -> StoreOutage | None:
    """What ``profile`` takes away (None: not an outage profile)."""
    return PROFILES[profile].outage


#: The stores (``infra.STORES`` names) whose gateway the lab can kill and start again.
RESTARTABLE = ("ceph", "seaweedfs")


def can_run(profile: str, store: str) -> bool:
    """Whether the lab can run ``profile`` on the store named ``store``: a gateway restart needs a
    store whose gateway it can kill and start again (``RESTARTABLE``)."""
    outage = of(profile)
    return outage is None or not outage.restart or store in RESTARTABLE


def take_away(lab, profile: str, seed: int, query) -> Window:
    """Take the store away under ``profile`` (an outage profile) while ``query`` runs: put the
    proxy's rule in force, or kill the gateway, wait out the pause (watching the query) and start it
    again. Returns at once for a proxy outage, after the gateway is back for a restart."""
    window = Window(of(profile))
    if not window.outage.restart:
        lab.store.proxy.use_profile(profile, seed)
        return window
    store = getattr(lab.store, "inner", lab.store)
    window.start = time.time()
    store.kill_gateway()
    try:
        while time.time() < window.start + window.outage.seconds:
            if window.died_at is None and query.exception() is not None:
                window.died_at = time.time()
            time.sleep(_POLL)
    finally:
        store.start_gateway()  # even if the query died: its restart needs the store
    window.end = time.time()
    return window


def times(window: Window | None, injections: list, done: list[dict], died_at: float | None) -> dict:
    """The run's ``outage_s``, ``died_after_s`` and ``resumed_after_s`` (see the module's docstring):
    ``injections`` every one of the run's (the proxy's), ``done`` its batches' progress, ``died_at``
    when the lab saw its query dead (None: it did not die)."""
    nan = {"outage_s": math.nan, "died_after_s": math.nan, "resumed_after_s": math.nan}
    if window is None:
        return nan
    start, end = window.start, window.end
    if not window.outage.restart:
        opened = [i.start for i in injections if i.fault == "outage"]
        if not opened:
            return nan  # the query sent nothing after the rule was put in force: no outage began
        start = min(opened)
        end = start + window.outage.seconds
    died = window.died_at or died_at
    after = [batch_end(p) for p in done if batch_end(p) > end]
    return {"outage_s": end - start,
            "died_after_s": died - start if died is not None else math.nan,
            "resumed_after_s": min(after) - start if after and died is None else math.nan}


def batch_end(progress: dict) -> float:
    """When a batch ended (``time.time()``): Spark's trigger timestamp plus its triggerExecution."""
    began = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return began + progress["durationMs"].get("triggerExecution", 0) / 1000
