"""The first measurement: Spark's own commit latencies per strategy x store, beside the store's floor.

For each store: its raw PUT/HEAD latency (boto3 through the metering proxy, timed by the
proxy, so client overhead is excluded), then for each strategy a stateful query run for
warm-up + measured batches, reporting the median and p95 of Spark's ``walCommit`` and
``commitOffsets`` (timed by Spark in the JVM) and the S3 requests per batch the proxy saw.
Spark start-up happens once, before anything is timed; warm-up batches absorb JVM and
connection warm-up and are left out.

The pieces (``started_stores``, ``floor_samples``, ``copy_samples``, ``proxy_overhead``,
``observe``) are also what the asv suite in ``benchmarks/`` measures with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time
import uuid
from pathlib import Path

import ckpt_impls
import infra
from infra.metered import MeteredStore

from . import metrics, progress, workloads
from .spark import session


@dataclasses.dataclass
class Row:
    store: str
    strategy: str
    batches: int
    wal_commit_p50: float
    wal_commit_p95: float
    commit_offsets_p50: float
    commit_offsets_p95: float
    requests_per_batch: float
    requests_by_op: dict
    put_p50: float
    head_p50: float
    temp_objects: int
    emulator: bool


#: The requests of the store's floor, in the order ``floor_samples`` makes them.
FLOOR_OPS = ("PUT", "HEAD", "COPY", "LIST", "DELETE")


def default_store() -> str:
    """Ceph RGW where it can start here (a real store), else the embedded emulator."""
    return "ceph" if infra.CephStore.unavailable_reason() is None else "embedded"


def _ms(events, op: str) -> list[float]:
    return [e.duration * 1000 for e in events if e.op == op and 200 <= e.status < 300]


def floor_samples(store: MeteredStore, bucket: str, samples: int = 200,
                  ops: tuple[str, ...] = FLOOR_OPS, warmup: int = 20) -> dict[str, list[float]]:
    """Milliseconds per request for each of ``ops`` on 1 KiB objects, as timed by the proxy
    (request head in to response out), so client overhead is excluded.

    For each of ``samples`` fresh keys, in turn: PUT it, HEAD it, COPY it to a new key, LIST its
    prefix (one entry, as S3A's existence checks do), DELETE it (the ops not in ``ops`` left
    out). One key at a time rather than one op at a time, so that drift in the machine's load
    reaches every op alike; ``warmup`` keys go first, untimed (connections, the store's caches).
    """
    s3, body = store.client(), b"x" * 1024
    calls = {
        "PUT": lambda key: s3.put_object(Bucket=bucket, Key=key, Body=body),
        "HEAD": lambda key: s3.head_object(Bucket=bucket, Key=key),
        "COPY": lambda key: s3.copy_object(Bucket=bucket, Key=key + ".copy",
                                           CopySource={"Bucket": bucket, "Key": key}),
        "LIST": lambda key: s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1),
        "DELETE": lambda key: s3.delete_object(Bucket=bucket, Key=key),
    }
    sequence = [calls[op] for op in FLOOR_OPS if op in ops or op == "PUT"]  # the others need the object

    def one_key() -> None:
        key = f"floor/{uuid.uuid4().hex}"
        for call in sequence:
            call(key)

    for _ in range(warmup):
        one_key()
    mark = store.proxy.mark()
    for _ in range(samples):
        one_key()
    events = store.proxy.events_since(mark)
    store.inner.empty_bucket(bucket, "floor/")
    return {op: _ms(events, op) for op in ops}


def store_floor(store: MeteredStore, bucket: str, samples: int = 200) -> dict[str, float]:
    """Median milliseconds of a 1 KiB PUT and a HEAD at the store, as timed by the proxy."""
    return {op: statistics.median(ms) for op, ms in floor_samples(store, bucket, samples, ("PUT", "HEAD")).items()}


def copy_samples(store: MeteredStore, bucket: str, sizes, samples: int,
                 budget: int = 256 * 2**20) -> dict[int, dict[str, list[float]]]:
    """Server-side COPY against object size, each request timed by the proxy:
    ``{size: {"PUT": [ms], "COPY": [ms]}}``.

    For each size, objects of random bytes (nothing for a store to compress or deduplicate) are
    PUT ``samples`` times, or as often as ``budget`` bytes allow (at least once), and COPYed
    ``samples`` times in all, one ``CopyObject`` request each. Frugal with bytes on purpose:
    Ceph RGW frees the tail (beyond 4 MiB) of a deleted object only after its garbage
    collection delay, hours later, and the lab's in-memory OSD holds 1 GiB.
    """
    s3 = store.client()
    data = os.urandom(max(sizes))
    out = {}
    for size in sizes:
        body = data[:size]
        sources = [f"copy/{uuid.uuid4().hex}" for _ in range(max(1, min(samples, budget // size)))]
        mark = store.proxy.mark()
        for key in sources:
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        for i in range(samples):
            source = sources[i % len(sources)]
            s3.copy_object(Bucket=bucket, Key=f"{source}.{i}", CopySource={"Bucket": bucket, "Key": source})
            s3.delete_object(Bucket=bucket, Key=f"{source}.{i}")  # an in-memory store would fill up
        events = store.proxy.events_since(mark)
        out[size] = {op: _ms(events, op) for op in ("PUT", "COPY")}
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in sources]})
    return out


def proxy_overhead(store: MeteredStore, bucket: str, samples: int = 300) -> dict[str, dict[str, list[float]]]:
    """What the metering proxy adds: client-timed milliseconds of 1 KiB PUTs (then HEADs of the
    same keys) straight to the store and through the proxy, in pairs: each direct request next to
    a proxied one, which goes first alternating, so that drift in the machine's load hits both
    routes of a pair alike. ``{op: {"direct": [ms], "proxied": [ms]}}``, the pairs at equal
    indexes; the median of the pairs' differences is the proxy's cost."""
    routes = {"direct": store.inner.client(), "proxied": store.client()}
    for client in routes.values():
        client.head_bucket(Bucket=bucket)  # connect before anything is timed
    out = {op: {route: [] for route in routes} for op in ("PUT", "HEAD")}
    keys = [{route: f"overhead/{uuid.uuid4().hex}" for route in routes} for _ in range(samples)]
    body = b"x" * 1024
    for op in out:
        for i, pair in enumerate(keys):
            for route in sorted(routes, reverse=i % 2 == 1):
                client, key = routes[route], pair[route]
                t0 = time.perf_counter()
                if op == "PUT":
                    client.put_object(Bucket=bucket, Key=key, Body=body)
                else:
                    client.head_object(Bucket=bucket, Key=key)
                out[op][route].append((time.perf_counter() - t0) * 1000)
    store.inner.empty_bucket(bucket, "overhead/")
    return out


class DriverMemory:
    """Peak resident set of the driver JVM (in local mode also the executor) since ``reset()``:
    Linux's VmHWM, NaN elsewhere."""

    def __init__(self, spark) -> None:
        pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
        self._proc = Path(f"/proc/{pid}")

    def reset(self) -> None:
        try:
            (self._proc / "clear_refs").write_text("5")  # "5" resets VmHWM to the current RSS (Linux >= 4.0)
        except OSError:
            pass

    def peak_mib(self) -> float:
        try:
            status = (self._proc / "status").read_text().splitlines()
        except OSError:
            return float("nan")
        return next((float(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")), float("nan"))


@dataclasses.dataclass
class Observed:
    """One query run: the progress of its warm-up and of its measured batches, its requests (see
    ``observe``), and the driver's peak RSS over the measured batches."""

    warmup: list[dict]
    measured: list[dict]
    events: list
    peak_rss_mib: float


def observe(spark, store: MeteredStore, strategy: str, prefix: str, start_query, batches: int, warmup: int,
            bar=None) -> Observed:
    """Switch to ``strategy``, start a query with ``start_query()``, drive it for ``warmup`` and
    then ``batches`` batches, and stop it. Its events are the requests on keys under ``prefix``
    (where the query keeps everything) from its start to its stop: a request elsewhere, such
    as an earlier query's state store maintenance, is not its."""
    ckpt_impls.use(spark, strategy)
    memory = DriverMemory(spark)
    mark = store.proxy.mark()
    query = start_query()
    on_batch = bar.update if bar else None
    try:
        # A slow store or a big state makes batches slow: the limit grows with the count.
        warm = workloads.await_batches(query, warmup, 120 + 30 * warmup, on_batch)
        memory.reset()
        measured = workloads.await_batches(query, batches, 120 + 30 * batches, on_batch)
        peak = memory.peak_mib()
    finally:
        query.stop()
    events = [e for e in store.proxy.events_since(mark) if e.key.startswith(prefix)]
    return Observed(warm, measured, events, peak)


def measure_strategy(spark, store: MeteredStore, bucket: str, strategy: str, batches: int, warmup: int,
                     floor: dict[str, float], bar=None) -> Row:
    key = f"measure/{strategy}-{uuid.uuid4().hex[:8]}"
    run = observe(spark, store, strategy, key + "/", lambda: workloads.stateful(spark, f"s3a://{bucket}/{key}"),
                  batches, warmup, bar)
    measured = run.measured
    per_batch = metrics.requests_by_batch(run.events, measured)
    ops = sorted({op for c in per_batch for op in c})
    wal, commit = metrics.duration_stats(measured, "walCommit"), metrics.duration_stats(measured, "commitOffsets")
    temps = [k for k in store.inner.list_keys(bucket, key + "/") if k.rsplit("/", 1)[-1].endswith(".tmp")]
    return Row(store.name, strategy, len(measured), wal["p50"], wal["p95"], commit["p50"], commit["p95"],
               statistics.median(sum(c.values()) for c in per_batch),
               {op: statistics.median(c[op] for c in per_batch) for op in ops},
               floor["PUT"], floor["HEAD"], len(temps), store.emulator)


@contextlib.contextmanager
def started_stores(names: list[str], bucket: str | None, say=print):
    """Start each named store that can start (saying why for the others), metered, with its bucket.

    Local stores get a fresh bucket named after the store: S3A settings are per bucket name, so
    two stores must never share one.
    """
    if bucket and len(names) > 1:
        raise infra.StoreUnavailable("--bucket names one bucket, so measure one store at a time with it")
    with contextlib.ExitStack() as stack:
        started = {}
        for name in names:
            cls = infra.store_class(name)
            reason = cls.unavailable_reason()
            if reason:
                say(f"skipping {reason}")
                continue
            inner = stack.enter_context(cls())
            target = bucket or f"ckptbench-measure-{name}"
            if bucket is None:
                inner.create_bucket(target)
            inner.check_bucket(target)
            started[name] = (stack.enter_context(MeteredStore(inner)), target)
            say(f"store: {started[name][0].describe()}")
        yield started


def run(store_names: list[str], strategies: list[str], batches: int = 20, warmup: int = 5,
        bucket: str | None = None, master: str = "local[2]") -> list[Row]:
    for name in strategies:
        ckpt_impls.get(name)  # an unknown name fails here, before anything starts
    rows = []
    with started_stores(store_names, bucket) as stores:
        if not stores:
            raise infra.StoreUnavailable("no store could start; see the reasons above")
        spark = session(strategies[0], {b: s for s, b in stores.values()}, master=master)
        try:
            with progress.bar(total=len(stores) * len(strategies) * (batches + warmup), unit="batch",
                              desc="measuring") as bar:
                for store, target in stores.values():
                    floor = store_floor(store, target)
                    for strategy in strategies:
                        bar.set_postfix_str(f"{store.name}/{strategy}")
                        rows.append(measure_strategy(spark, store, target, strategy, batches, warmup, floor, bar))
        finally:
            spark.stop()
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    head = ("| store | strategy | walCommit p50 / p95 (ms) | commitOffsets p50 / p95 (ms) | "
            "walCommit / (HEAD+PUT) | S3 requests per batch | store PUT / HEAD p50 (ms) | temp objects |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ops = ", ".join(f"{op} {n:g}" for op, n in sorted(r.requests_by_op.items(), key=lambda kv: -kv[1]))
        store = r.store + (" (emulator)" if r.emulator else "")
        lines.append(
            f"| {store} | {r.strategy} | {r.wal_commit_p50:.0f} / {r.wal_commit_p95:.0f} | "
            f"{r.commit_offsets_p50:.0f} / {r.commit_offsets_p95:.0f} | "
            f"{r.wal_commit_p50 / (r.put_p50 + r.head_p50):.1f}x | {r.requests_per_batch:g} ({ops}) | "
            f"{r.put_p50:.1f} / {r.head_p50:.1f} | {r.temp_objects} |")
    return "\n".join(lines)

