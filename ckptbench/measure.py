"""The first measurement: Spark's own commit latencies per strategy x store, beside the store's floor.

For each store: its raw PUT/HEAD latency (boto3 through the metering proxy, timed by the
proxy, so client overhead is excluded), then for each strategy a stateful query run for
warm-up + measured batches, reporting the median and p95 of Spark's ``walCommit`` and
``commitOffsets`` (timed by Spark in the JVM) and the S3 requests per batch the proxy saw.
Spark start-up happens once, before anything is timed; warm-up batches absorb JVM and
connection warm-up and are left out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import sys
import uuid

from tqdm import tqdm

import ckpt_impls
import infra
from infra.metered import MeteredStore

from . import metrics, workloads
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


def store_floor(store: MeteredStore, bucket: str, samples: int = 200) -> dict[str, float]:
    """Median milliseconds of a 1 KiB PUT and a HEAD at the store, as timed by the proxy."""
    s3, body = store.client(), b"x" * 1024
    mark = store.proxy.mark()
    keys = [f"floor/{uuid.uuid4().hex}" for _ in range(samples)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    for key in keys:
        s3.head_object(Bucket=bucket, Key=key)
    events = store.proxy.events_since(mark)
    store.inner.empty_bucket(bucket, "floor/")
    return {op: statistics.median(e.duration * 1000 for e in events if e.op == op) for op in ("PUT", "HEAD")}


def measure_strategy(spark, store: MeteredStore, bucket: str, strategy: str, batches: int, warmup: int,
                     floor: dict[str, float], bar=None) -> Row:
    ckpt_impls.use(spark, strategy)
    key = f"measure/{strategy}-{uuid.uuid4().hex[:8]}"
    mark = store.proxy.mark()
    query = workloads.stateful(spark, f"s3a://{bucket}/{key}")
    try:
        progresses = workloads.await_batches(query, warmup + batches, on_batch=bar.update if bar else None)
    finally:
        query.stop()
    measured = progresses[warmup:]
    per_batch = metrics.requests_by_batch(store.proxy.events_since(mark), measured)
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
            with tqdm(total=len(stores) * len(strategies) * (batches + warmup), unit="batch",
                      desc="measuring", mininterval=1 if sys.stderr.isatty() else 30) as bar:
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

