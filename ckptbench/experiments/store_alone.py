"""The store with no Spark: its request floor per operation, the metering proxy's own overhead,
server-side COPY against object size (measured, and projected to AWS S3 through the proxy's
``aws-projection`` profile: a projection, not a measurement), and the store probe.

Requests are timed by the proxy (store side) where it fronts the store, else by the client
(``samples.route`` "client", TLS included)."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid

from ckptbench import metrics, progress
from ckptbench.config import (
    FLOOR_OPS,
    FLOOR_PAUSE_S,
    PROBE_COPY_SIZES,
    PROJECTION,
    STORE_ALONE_PARTS,
    MiB,
    Plan,
    Settings,
)
from ckptbench.experiments import probe
from ckptbench.harness.stores import started_store
from ckptbench.record import results
from ckptbench.record.disk import save
from infra.metered import MeteredStore

# -- the store on its own -------------------------------------------------------------------

def _ok_ms(events, op: str) -> list[float]:
    return [e.duration * 1000 for e in events if e.op == op and 200 <= e.status < 300]


class _Timer:
    """Times requests the harness makes itself: by the metering proxy where ``store`` has one (its
    clock, store side, ``route`` "proxy"), else around each boto3 call (``route`` "client", which
    includes the client's own time and, over https, TLS)."""

    def __init__(self, store) -> None:
        self.proxy = getattr(store, "proxy", None)
        self.route = "proxy" if self.proxy else "client"
        self._mark = None
        self._client: list[tuple[str, float]] = []

    def start(self) -> None:
        self._client = []
        self._mark = self.proxy.mark() if self.proxy else None

    def call(self, op: str, request) -> None:
        t0 = time.perf_counter()
        request()
        if not self.proxy:
            self._client.append((op, (time.perf_counter() - t0) * 1000))

    def ms(self, op: str) -> list[float]:
        """Milliseconds of each successful ``op`` since ``start``."""
        if self.proxy:
            return _ok_ms(self.proxy.events_since(self._mark), op)
        return [ms for name, ms in self._client if name == op]


def floor_samples(store, bucket: str, samples: int = 200,
                  ops: tuple[str, ...] = FLOOR_OPS, warmup: int = 20,
                  pause: float = FLOOR_PAUSE_S) -> tuple[str, dict[str, list[float]]]:
    """Milliseconds per request for each of ``ops`` on 1 KiB objects, as timed by the proxy
    (request head in to response out), so client overhead is excluded; with no proxy (an https
    store), by the client: ``(route, {op: [ms]})`` (``_Timer``).

    For each of ``samples`` fresh keys, in turn, after ``pause`` seconds with no request (as a
    checkpoint's PUT comes, ``FLOOR_PAUSE_S``): PUT it, HEAD it, COPY it to a new key, LIST its
    prefix (one entry, as S3A's existence checks do), DELETE it (the ops not in ``ops`` left
    out). One key at a time rather than one op at a time, so that drift in the machine's load
    reaches every op alike; ``warmup`` keys go first, untimed and unpaused (connections, the
    store's caches).
    """
    s3, body, root, timer = store.client(), b"x" * 1024, f"{store.run_prefix}floor/", _Timer(store)
    calls = {
        "PUT": lambda key: s3.put_object(Bucket=bucket, Key=key, Body=body),
        "HEAD": lambda key: s3.head_object(Bucket=bucket, Key=key),
        "COPY": lambda key: s3.copy_object(Bucket=bucket, Key=key + ".copy",
                                           CopySource={"Bucket": bucket, "Key": key}),
        "LIST": lambda key: s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1),
        "DELETE": lambda key: s3.delete_object(Bucket=bucket, Key=key),
    }
    sequence = [op for op in FLOOR_OPS if op in ops or op == "PUT"]  # the others need the object

    def one_key() -> None:
        key = root + uuid.uuid4().hex
        for op in sequence:
            timer.call(op, lambda op=op: calls[op](key))

    for _ in range(warmup):
        one_key()
    timer.start()
    for _ in range(samples):
        time.sleep(pause)
        one_key()
    ms = {op: timer.ms(op) for op in ops}  # before the clean-up, whose LIST and DELETEs are not the floor's
    store.empty_bucket(bucket, root)
    return timer.route, ms


def client_floor(spark, store, bucket: str, samples: int, warmup: int,
                 pause: float = FLOOR_PAUSE_S) -> dict[str, list[float]]:
    """``floor_samples``' requests as Spark's own S3 client makes them, in the driver JVM
    (``ckptbench.metering.ClientFloor``: each SDK call timed whole, client and network included,
    through the proxy where ``store`` has one, as the strategies' requests go): ``{op: [ms]}``.
    A checkpoint file's PUT costs a strategy at least that PUT in that JVM. ``warmup`` untimed keys
    go first, unpaused, so the JIT has compiled the request path: every strategy then starts warm."""
    out = spark._jvm.ckptbench.metering.ClientFloor.sample(
        f"s3a://{bucket}/{store.run_prefix}client-floor", spark._jsc.hadoopConfiguration(), warmup, samples,
        pause * 1000)
    ms: dict[str, list[float]] = {op: [] for op in FLOOR_OPS}
    for line in out.splitlines():
        op, value = line.split("\t")
        ms[op].append(float(value))
    return ms


def copy_samples(store, bucket: str, sizes, samples: int,
                 budget: int = 256 * MiB) -> tuple[str, dict[int, dict[str, list[float]]]]:
    """Server-side COPY against object size, each request timed by the proxy (or with no proxy by
    the client, ``_Timer``): ``(route, {size: {"PUT": [ms], "COPY": [ms]}})``.

    For each size, objects of random bytes (nothing for a store to compress or deduplicate) are
    PUT ``samples`` times, or as often as ``budget`` bytes allow (at least once), and COPYed
    ``samples`` times in all, one ``CopyObject`` request each. Frugal with bytes on purpose:
    Ceph RGW frees the tail (beyond 4 MiB) of a deleted object only after its garbage
    collection delay, hours later, and the lab's in-memory OSD holds 1 GiB.
    """
    s3, timer = store.client(), _Timer(store)
    data = os.urandom(max(sizes))
    out = {}
    for size in sizes:
        body = data[:size]
        sources = [f"{store.run_prefix}copy/{uuid.uuid4().hex}" for _ in range(max(1, min(samples, budget // size)))]
        timer.start()
        for key in sources:
            timer.call("PUT", lambda key=key, body=body: s3.put_object(Bucket=bucket, Key=key, Body=body))
        for i in range(samples):
            source = sources[i % len(sources)]
            timer.call("COPY", lambda source=source, i=i: s3.copy_object(
                Bucket=bucket, Key=f"{source}.{i}", CopySource={"Bucket": bucket, "Key": source}))
            s3.delete_object(Bucket=bucket, Key=f"{source}.{i}")  # an in-memory store would fill up
        out[size] = {op: timer.ms(op) for op in ("PUT", "COPY")}
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in sources]})
    return timer.route, out


def projected_copy_samples(store: MeteredStore, bucket: str, sizes,
                           samples: int) -> tuple[str, dict[int, dict[str, list[float]]]]:
    """``copy_samples`` through the metering proxy's ``aws-projection`` profile
    (``PROJECTION``): COPY against size projected to AWS S3, a COPY held to the throughput
    measured there and every request given AWS-like latency (``infra.faults``). A projection, not a
    measurement. One source object per size: the cap, not the store, decides a projected COPY's
    time, and an in-memory store keeps its space."""
    proxy = store.proxy
    before = proxy.fault_profile, proxy.seed
    proxy.use_profile(PROJECTION)
    try:
        return copy_samples(store, bucket, sizes, samples, budget=0)
    finally:
        proxy.use_profile(*before)


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
    keys = [{route: f"{store.run_prefix}overhead/{uuid.uuid4().hex}" for route in routes} for _ in range(samples)]
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
    store.inner.empty_bucket(bucket, f"{store.run_prefix}overhead/")
    return out


def record_store_alone(recorder: results.Recorder, store, bucket: str, plan: Plan,
                       parts=STORE_ALONE_PARTS, bar=None) -> dict:
    """The store-alone measurements named in ``parts`` (of ``STORE_ALONE_PARTS``), added to
    ``recorder``; returns what the environment should say of them (the probe's prefix and its
    clean-up). On a store with no metering proxy (an https one, AWS S3) the requests are timed by
    the client (``_Timer``), and the parts that need the proxy (its overhead, the projected COPY)
    are left out."""
    said = {}
    proxy = getattr(store, "proxy", None)
    for part in parts:
        if bar:
            bar.set_postfix_str(part)
        if part == "floor":
            route, floor = floor_samples(store, bucket, plan.floor_samples)
            for op, ms in floor.items():
                recorder.add_samples("floor", op, ms, route=route)
        elif part == "overhead":
            if proxy:
                for op, routes in proxy_overhead(store, bucket, plan.overhead_samples).items():
                    for route, ms in routes.items():
                        recorder.add_samples("overhead", op, ms, route=route)
        elif part in ("copy", "projected copy"):
            measure, experiment = ((copy_samples, metrics.COPY) if part == "copy"
                                   else (projected_copy_samples, metrics.PROJECTED_COPY))
            if proxy or part == "copy":
                route, copies = measure(store, bucket, plan.copy_sizes, plan.copy_samples)
                for size, ops in copies.items():
                    for op, ms in ops.items():
                        recorder.add_samples(experiment, op, ms, route=route, size=size)
        elif part == "probe":
            # The store itself, not through the proxy: a fault profile in force must not decide
            # what the store can do.
            found = probe.run(getattr(store, "inner", store), bucket, copy_sizes=PROBE_COPY_SIZES,
                              under=store.run_prefix)
            recorder.add_capabilities(found["checks"])
            said["probe"] = {key: found[key] for key in ("prefix", "cleanup", "checked_at")}
        else:
            raise ValueError(f"unknown store-alone part {part!r}; valid: {', '.join(STORE_ALONE_PARTS)}")
        if bar:
            bar.update()
    return said


def store_alone(settings: Settings) -> results.Results:
    """The store on its own, no Spark: request latency floor, proxy overhead, COPY against size
    (measured and projected to AWS S3), the store probe. Written to ``settings.raw`` and returned."""
    recorder = results.Recorder()
    with started_store(settings) as (store, bucket):
        bar = progress.Recorder("store alone", len(STORE_ALONE_PARTS), "part")
        said = record_store_alone(recorder, store, bucket, settings.plan, bar=bar)
        env = results.environment(store, "store", settings.size, dataclasses.asdict(settings.plan), **said)
    return save(recorder.results(env), settings)
store_alone.timeout = 3600
