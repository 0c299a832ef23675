"""The store on its own: its floor per operation, the metering proxy's overhead, COPY against size
(measured and projected)."""

from __future__ import annotations

import pandas as pd

from ckptbench.metrics.stats import duration_percentile, linear_fit, median, percentile
from ckptbench.record.results import Results, Run

# -- the store on its own -------------------------------------------------------------------

#: The clocks a request of the store alone is timed by, preferred first: the metering proxy's (store
#: side), else the client's (a store with no proxy: https, AWS S3).
TIMED_ROUTES = ("proxy", "client")


def samples(results: Results, experiment: str, op: str, route: str | None = None,
            size: int | None = None) -> pd.Series:
    """The milliseconds of ``experiment``'s ``op`` samples timed on ``route`` (by default the first
    of ``TIMED_ROUTES`` the record has for the experiment)."""
    frame = results.samples
    frame = frame[(frame.experiment == experiment) & (frame.op == op)
                  & (frame.route == (route or timed_by(results, experiment)))]
    if size is not None:
        frame = frame[frame["size"] == size]
    return frame.sort_values("seq").ms


def timed_by(results: Results, experiment: str) -> str:
    """The clock ``experiment``'s samples were timed by: the first of ``TIMED_ROUTES`` the record has."""
    routes = set(results.samples.route[results.samples.experiment == experiment])
    return next((route for route in TIMED_ROUTES if route in routes), TIMED_ROUTES[0])


def floor_percentile(results: Results, op: str, q: float) -> float:
    """The store's own latency for a 1 KiB request of ``op``, as the metering proxy timed it (the
    client, on a store with no proxy: ``samples``)."""
    return percentile(samples(results, "floor", op), q)


#: The route of the floor as Spark's own S3 client makes it, in the driver JVM (``store_alone.client_floor``).
JVM_ROUTE = "jvm"


def client_floor_percentile(results: Results, op: str, q: float) -> float:
    """A 1 KiB request of ``op`` as Spark's own S3 client makes it in the driver JVM, after the
    store sat idle (``store_alone.client_floor``: the client's work and the path to the store included).
    NaN in a record without it."""
    return percentile(samples(results, "floor", op, JVM_ROUTE), q)


def put_floor_ms(results: Results) -> float:
    """The floor of a checkpoint file's PUT: ``client_floor_percentile``'s PUT p50, made as walCommit's
    PUT is made, so a strategy can reach it; no client reaches the store-side time of
    ``floor_percentile``."""
    return client_floor_percentile(results, "PUT", 50)


def proxy_added_ms(results: Results, op: str) -> float:
    """What the metering proxy adds to a request: the median of paired differences, proxied minus
    direct, both timed by the client."""
    proxied, direct = (samples(results, "overhead", op, route).to_numpy() for route in ("proxied", "direct"))
    return median(proxied - direct)


def proxy_added_pct_of_put(results: Results, op: str) -> float:
    """``proxy_added_ms`` as a percentage of the direct 1 KiB PUT's median."""
    return 100 * proxy_added_ms(results, op) / median(samples(results, "overhead", "PUT", "direct"))


#: The samples of COPY against size: measured on the store, and through the metering proxy's
#: ``aws-projection`` profile (``store_alone.projected_copy_samples``): a projection to AWS S3, never a
#: measurement of it.
COPY, PROJECTED_COPY = "copy", "copy-aws-projection"


def copy_sizes(results: Results, experiment: str = COPY) -> list[int]:
    return sorted(int(s) for s in results.samples[results.samples.experiment == experiment]["size"].unique())


def copy_percentile(results: Results, op: str, size: int, q: float, experiment: str = COPY) -> float:
    return percentile(samples(results, experiment, op, size=size), q)


#: A server-side COPY that moves the bytes costs, per byte, at least this share of what a
#: PUT of them costs (it reads and writes them where the PUT only writes). Ceph RGW's, which
#: shares the object's tail, measured 0.04 here; moto's, copying in memory, about 1.
COPY_MOVES_DATA = 0.1


def copy_fit(results: Results, experiment: str = COPY) -> dict:
    """Fit ``ms = base + per_mib * MiB`` to COPY and to PUT durations over all object sizes and
    say whether the COPY moves the data.

    ``mb_per_s`` (10^6 bytes/s) is only given when it does: for a store whose COPY time barely
    grows with size, a throughput would be a misleading line through noise.
    """
    copies = results.samples[results.samples.experiment == experiment]
    fits = {}
    for op in ("COPY", "PUT"):
        rows = copies[copies.op == op]
        fits[op] = linear_fit(rows["size"] / 2**20, rows.ms)
    (base, per_mib, r2), put_per_mib = fits["COPY"], fits["PUT"][1]
    share = per_mib / put_per_mib if put_per_mib > 0 else float("nan")
    moves = share >= COPY_MOVES_DATA
    return {"base_ms": base, "ms_per_mib": per_mib, "r2": r2, "put_ms_per_mib": put_per_mib,
            "share_of_put": share, "moves_data": moves, "mb_per_s": _mb_per_s(per_mib) if moves else float("nan")}


def copy_verdict(share_of_put: float | None) -> str:
    """What ``copy_fit``'s ``share_of_put`` says with margin: ``moves`` the data (at least twice
    ``COPY_MOVES_DATA``), ``shares`` it (under half of it), else ``near`` the threshold (a store that
    copies part of an object, such as Ceph RGW's 4 MiB head, or no fit at all: NaN, or None as a
    probe's JSON holds NaN)."""
    if share_of_put is None:
        return "near"
    if share_of_put >= 2 * COPY_MOVES_DATA:
        return "moves"
    if share_of_put < COPY_MOVES_DATA / 2:
        return "shares"
    return "near"


def _mb_per_s(ms_per_mib: float) -> float:
    return 2**20 / 1e6 * 1000 / ms_per_mib if ms_per_mib > 0 else float("nan")


def projected_copy_mb_per_s(results: Results) -> float:
    """COPY's throughput fitted to the samples projected to AWS S3 (a projection): the
    ``aws-projection`` profile's cap, slowed a little by the store's own COPY. Fitted whatever a
    projected PUT does, whose per-MiB cost is the local store's."""
    return _mb_per_s(copy_fit(results, PROJECTED_COPY)["ms_per_mib"])


def wal_commit_in_store_puts(results: Results, run: Run) -> float:
    """walCommit p50 as a multiple of the store's own 1 KiB PUT p50 (proxy-timed, same record)."""
    return duration_percentile(run, "walCommit", 50) / floor_percentile(results, "PUT", 50)
