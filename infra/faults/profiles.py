"""Named fault profiles: sets of rules a run (or ``--fault-profile``) chooses by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .actions import Answer, LoseResponse, Reset
from .eventual import Eventual
from .outage import Outage, StoreOutage
from .rules import READ_OPS, WRITE_OPS, Chance, CopyThroughput, Latency, Throttle


@dataclasses.dataclass(frozen=True)
class Profile:
    """A named set of rules: ``profile(seed)`` builds them afresh (their randomness seeded).
    ``outage``: what an outage profile takes away, for its runner (None: not an outage)."""

    description: str
    build: Callable[[int], list]
    outage: StoreOutage | None = None

    def __call__(self, seed: int) -> list:
        return self.build(seed)


#: AWS S3 as projected by ``aws-projection`` (a projection, not a measurement of AWS): request
#: latency lognormal with p50 30 ms and p99 200 ms, after AWS's published S3 performance guidance;
#: a COPY moving 8 MB/s, inside what was measured of S3's server-side COPY. Sources:
#: docs/findings/fault-profiles.md.
AWS_LATENCY_P50, AWS_LATENCY_P99 = 0.030, 0.200
AWS_COPY_BYTES_PER_SECOND = 8e6
#: The pre-2020 S3 inconsistency window ``eventual`` emulates. S3 documented no bound; seconds
#: is what users reported, and longer than a batch here, so a batch meets the keys it wrote.
EVENTUAL_WINDOW = 5.0
#: ``throttle``: S3 allows 3,500 writes and 5,500 reads a second per prefix; scaled down
#: ~350x, so that a single query's checkpoint directories (prefix: 4 path segments,
#: e.g. ``bench/<run>/checkpoint/offsets``) meet it.
THROTTLE_WRITES, THROTTLE_READS, THROTTLE_DEPTH = 10.0, 16.0, 4
#: The ``outage-*`` windows, in seconds, chosen against S3A's retry budget for an operation its
#: invoker retries (hadoop-aws 3.5.0, pyspark 4.3's: AWS SDK v2's 5 retries, adaptive mode
#: (``fs.s3a.attempts.maximum``, back-off from 100 ms, at most ~3 s in all) inside each of S3A's 8
#: attempts (``fs.s3a.retry.limit`` 7, ``fs.s3a.retry.interval`` 500 ms doubling, jitter x0.5-1.5):
#: about 32 s to 2 min in all). 5 s outlasts the SDK's retries alone, which is all a strategy's own
#: SDK calls get; 30 s lies inside S3A's whole budget; 150 s lies beyond it. On pyspark 3.5
#: (hadoop-aws 3.3.4 on Hadoop 3.3.4's defaults: 20 SDK attempts, back-off capped at 20 s) every S3A
#: budget is far longer. What a query does is
#: measured by the fault lab, not promised here.
OUTAGE_SECONDS = (5.0, 30.0, 150.0)
#: ``gateway-restart``: the pause between SIGKILL and the gateway's new start (its start-up comes on top).
GATEWAY_PAUSE = 5.0


def _outage(seconds: float) -> Profile:
    return Profile(f"the store unreachable for {seconds:g} s: every request's connection reset, from the first "
                   "request after the profile is put in force; then the store is back",
                   lambda seed: [Outage(seconds)], StoreOutage(seconds))


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
    **{f"outage-{seconds:g}s": _outage(seconds) for seconds in OUTAGE_SECONDS},
    "gateway-restart": Profile(
        f"the store's gateway process (Ceph's radosgw) SIGKILLed, started again {GATEWAY_PAUSE:g} s later on the "
        "same port, its objects kept; only the fault lab on ceph runs it (the proxy injects nothing)",
        lambda seed: [], StoreOutage(GATEWAY_PAUSE, restart=True)),
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
