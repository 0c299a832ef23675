"""The experiments: start a store (behind the metering proxy where it speaks plain http://; an
https store or AWS S3 as it is, requests then counted in Spark's JVMs alone) and Spark, run workloads
for each strategy under a run prefix of the run's own (``started_stores``), and return what was
measured as a results record (``ckptbench.results``).

- ``streaming(settings)``: every strategy x workload as a streaming query, then the state sweep
  (stateful queries with larger key counts); Spark's progress per batch and every request.
- ``store_alone(settings)``: the store with no Spark: its floor per operation, the metering
  proxy's own overhead, server-side COPY against object size (measured, and projected to AWS S3
  through the proxy's ``aws-projection`` profile), and the store probe (``ckptbench.probe``:
  which strategies the store can run).
- ``ckptbench.histories``: a log's compaction against history length.

The clocks are Spark's own (progress ``durationMs``, in the JVM), the metering proxy's (per
request, store side) and the client's only where the proxy itself is measured or no proxy
fronts the store (``samples.route`` "client"). Spark starts once
per experiment, before anything is timed; the JVM is warmed by untimed queries first, and each
query's first batches are recorded as warm-up.

Run sizes (``PLANS``) and the settings a run takes from the environment (``Settings``), which
``python -m ckptbench bench`` sets for asv, live here too, so the CLI and the suite share them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import time
import uuid
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from infra.faults import PROFILES
from infra.metered import MeteredStore
from infra.net import proc_stat
from infra.s3ops import Event, area_of

from . import jvm_requests, metrics, probe, progress, results, workloads
from .spark import setting, settings_set

KiB, MiB = 1024, 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Plan:
    jvm_warmup: int  # batches of the untimed queries that warm the JVM up before any run
    warmup: int  # batches run first in each query, recorded as warm-up
    batches: int  # measured batches per strategy x workload
    compact_interval: int  # of the file sink's and file source's logs
    keys: tuple[int, ...]  # state sweep; keys[0] is every workload's
    sweep: tuple[tuple[int, int], ...]  # (warm-up, measured) batches for each of keys[1:]
    floor_samples: int
    copy_sizes: tuple[int, ...]
    copy_samples: int
    overhead_samples: int
    workloads: tuple[str, ...] = ("stateful", "file_sink", "file_source")
    sweep_workloads: tuple[str, ...] = ("stateful",)  # the workloads the state sweep (keys[1:]) runs
    # Untimed keys (5 requests each) the client floor sends first (``client_floor``): the SDK's request
    # path, shared by every strategy, compiled by the JIT before anything is timed. Its PUT took 2.75 ms
    # over the first 250 keys of a fresh JVM, 1.7 ms from the 500th on (in a loop on Ceph RGW).
    client_floor_warmup: int = 1000


#: The stateful workloads users run (``WORKLOAD_CONF``), in the quick and full plans.
STATE_STORES = ("stateful_rocksdb", "stateful_rocksdb_changelog", "windowed", "stateful_no_checksum")


COPY_SIZES = (KiB, 64 * KiB, MiB, 8 * MiB, 32 * MiB, 128 * MiB)
KEYS = (1_000, 30_000, 300_000)  # state files of ~35 KiB, ~1 MiB, ~10 MiB (two per batch)
# Few batches at 300k keys: Ceph RGW frees a deleted object's tail (beyond 4 MiB) only after its
# garbage collection delay, hours later, and the lab's in-memory OSD holds 1 GiB, of which
# 4 strategies x 10 batches x 2 state files of ~10 MiB already take half.
PLANS = {
    "smallest": Plan(1, 1, 3, 2, (100, 1_000), ((1, 2),), 10, (KiB, MiB, 4 * MiB), 3, 40, client_floor_warmup=20),
    # quick sweeps the HDFS-backed store alone: RocksDB with changelog took 6.9 s a batch (p50) at 30k keys
    # on Ceph RGW (/tmp run, load average ~40), so its sweep to 300k keys is for the full plan.
    "quick": Plan(5, 3, 20, 10, KEYS, ((2, 6), (2, 6)), 300, COPY_SIZES, 5, 600,
                  ("stateful", *STATE_STORES, "file_sink", "file_source")),
    "full": Plan(10, 5, 100, 10, KEYS, ((3, 20), (2, 8)), 1000, COPY_SIZES, 15, 2000,
                 ("stateful", *STATE_STORES, "file_sink", "file_source"), ("stateful", "stateful_rocksdb_changelog")),
}
#: The state store comparison of the README's strategy table: every stateful workload, RocksDB with
#: changelog checkpointing at three state sizes; few batches, for the request pattern.
STATE_STORES_PLAN = dataclasses.replace(PLANS["smallest"], warmup=1, batches=4, keys=(1_000, 10_000, 30_000),
                                        sweep=((1, 3), (1, 3)), workloads=("stateful", *STATE_STORES),
                                        sweep_workloads=("stateful_rocksdb_changelog",))

#: The compacted logs: the file sink's (in the file_sink workload) and the file source's.
LOGS = {"_spark_metadata": "file_sink", "sources": "file_source"}
ROWS_PER_BATCH = 1_000  # file_sink's input; stateful reads as many rows as it has keys
SPARK_CONF = {
    "spark.driver.memory": "2g",  # the largest state sweep holds a few versions of 300k keys
    workloads.RECENT_PROGRESS: "1000",
    # State store maintenance (snapshots, RocksDB's changelog snapshot uploads, old-version
    # deletes) every 5 s, not Spark's 60 s: a measured query runs for tens of seconds, and with
    # 60 s it would see a maintenance round or none by chance. Read once per JVM, so set here.
    "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
}

#: The manifest strategy's root (``ckpt_impls``' option): directories at or above it are not recorded.
MANIFEST_ROOT = "spark.hadoop.ckptbench.manifest.root"
STATE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FILE_CHECKSUM = "spark.sql.streaming.checkpoint.fileChecksum.enabled"  # Spark 4.1+
#: The settings that change a stateful query's checkpoint requests; every run records their values.
CHECKPOINT_SETTINGS = (
    STATE_PROVIDER, CHANGELOG, FILE_CHECKSUM,
    "spark.sql.streaming.stateStore.checkpointFormatVersion",  # Spark 4.0+
    "spark.sql.streaming.minBatchesToRetain",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot",
    "spark.sql.streaming.stateStore.maintenanceInterval",
)
#: The workloads' session settings beyond the session's own (``ckptbench.spark.BASE_CONF``: the
#: HDFS-backed state store); each query starts with them set and they are restored after it.
WORKLOAD_CONF = {
    "stateful_rocksdb": {STATE_PROVIDER: ROCKSDB, CHANGELOG: "false"},
    "stateful_rocksdb_changelog": {STATE_PROVIDER: ROCKSDB, CHANGELOG: "true"},
    "stateful_no_checksum": {FILE_CHECKSUM: "false"},
}
#: Workloads that need a newer Spark than 3.5, with the version (major, minor) they need.
NEEDS_SPARK = {"stateful_no_checksum": (4, 1)}
#: The requests of the store's floor, in the order ``floor_samples`` makes them.
FLOOR_OPS = ("PUT", "HEAD", "COPY", "LIST", "DELETE")
#: Idle time before each timed key of the floor (``floor_samples``, ``client_floor``). A checkpoint's
#: PUT follows tens of milliseconds without a request (Spark plans the batch between), and on Ceph RGW
#: a 1 KiB PUT after 20 ms or more of idle took 2.1-2.7 ms at the store (proxy-timed) against 1.4-1.6
#: ms right after another request (Spark's S3 client in a loop, pauses 0-100 ms, 100 keys each,
#: 2026-11-24; no effect up to 2 ms): a floor of back-to-back requests is one no checkpoint gets.
FLOOR_PAUSE_S = 0.1
#: Object sizes of the probe's COPY check in a run: ``copy_samples`` measures COPY against size;
#: the check needs identical copies, and two sizes for its fit.
PROBE_COPY_SIZES = (KiB, MiB)
#: The metering proxy's fault profile that projects a store to AWS S3 (``infra.faults``).
PROJECTION = "aws-projection"
#: The parts of ``record_store_alone``, in the order it runs them.
STORE_ALONE_PARTS = ("floor", "overhead", "copy", "projected copy", "probe")
DEFAULT_MASTER = "local[2]"
#: The master that starts a Spark standalone cluster on this machine for the run (``infra.SparkCluster``).
CLUSTER = "cluster"


def check_master(master: str, what: str = "--master") -> str:
    """``master`` if it names a Spark master this lab can run on, else ValueError in one line."""
    if master == CLUSTER or master.startswith(("local", "spark://")):
        return master
    raise ValueError(f"{what} must be local[N], spark://HOST:PORT or {CLUSTER} (a standalone cluster started "
                     f"on this machine), not {master!r}")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run measures where: the store, its bucket (None: a fresh one on a local store), the
    run size, the directory raw results are written to, and the fault profile the metering proxy
    injects (``infra.faults.PROFILES``) with its seed."""

    store: str
    size: str
    bucket: str | None
    raw: Path
    fault_profile: str = "none"
    fault_seed: int = 0
    master: str = DEFAULT_MASTER  # a Spark master URL, or CLUSTER

    #: The environment variables ``from_env`` reads (``python -m ckptbench bench`` sets them).
    ENV = {"store": "CKPT_STORE", "size": "CKPT_BENCH_SIZE", "bucket": "CKPT_BUCKET", "raw": "CKPT_BENCH_RAW",
           "fault_profile": "CKPT_FAULT_PROFILE", "fault_seed": "CKPT_FAULT_SEED", "master": "CKPT_SPARK_MASTER"}

    @classmethod
    def from_env(cls) -> Settings:
        size = os.environ.get(cls.ENV["size"]) or "quick"
        if size not in PLANS:
            raise ValueError(f"{cls.ENV['size']} must be one of {', '.join(PLANS)}, not {size!r}")
        fault_profile = os.environ.get(cls.ENV["fault_profile"]) or "none"
        if fault_profile not in PROFILES:
            raise ValueError(f"{cls.ENV['fault_profile']} must be one of {', '.join(PROFILES)}, not {fault_profile!r}")
        seed = os.environ.get(cls.ENV["fault_seed"]) or "0"
        if not seed.isdigit():
            raise ValueError(f"{cls.ENV['fault_seed']} must be a whole number, not {seed!r}")
        master = check_master(os.environ.get(cls.ENV["master"]) or DEFAULT_MASTER, cls.ENV["master"])
        return cls(store=os.environ.get(cls.ENV["store"]) or default_store(), size=size,
                   bucket=os.environ.get(cls.ENV["bucket"]) or None,
                   raw=Path(os.environ.get(cls.ENV["raw"]) or results.ROOT / "results" / "raw"),
                   fault_profile=fault_profile, fault_seed=int(seed), master=master)

    def env(self) -> dict[str, str]:
        out = {self.ENV["store"]: self.store, self.ENV["size"]: self.size, self.ENV["raw"]: str(self.raw),
               self.ENV["fault_profile"]: self.fault_profile, self.ENV["fault_seed"]: str(self.fault_seed),
               self.ENV["master"]: self.master}
        if self.bucket:
            out[self.ENV["bucket"]] = self.bucket
        return out

    @property
    def plan(self) -> Plan:
        return PLANS[self.size]


def default_store() -> str:
    """Ceph RGW where it can start here (a real store), else the embedded emulator."""
    return "ceph" if infra.CephStore.unavailable_reason() is None else "embedded"


#: Every key a run writes in its bucket is under ``RUNS_ROOT<run id>/``, beside which an owner object
#: (``RUNS_ROOT<run id>.owner.json``: host, pid, start) says whose run it is; nothing else in a bucket is
#: ever written or deleted by a run, and only ``RUNS_ROOT`` is listed.
RUNS_ROOT = "ckptbench-runs/"
OWNER_SUFFIX = ".owner.json"
#: A run id: its start (UTC) and a random part.
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")
#: A run prefix older than this is stale whoever owns it: no experiment runs this long.
STALE_AFTER_S = 24 * 3600


@contextlib.contextmanager
def run_prefix(store: infra.ObjectStore, bucket: str):
    """A fresh prefix for one run, under ``RUNS_ROOT``, its owner object written first; at the end
    everything under it is deleted, the owner object last, so that a clean-up cut short leaves a
    prefix still known as a run's. A run killed before that leaves them behind, for
    ``remove_stale_runs`` (the next run, or ``python -m ckptbench clean``)."""
    started = time.time()
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(started))}-{uuid.uuid4().hex[:8]}"
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "started": started}
    store.client().put_object(Bucket=bucket, Key=RUNS_ROOT + run_id + OWNER_SUFFIX, Body=json.dumps(owner).encode())
    try:
        yield f"{RUNS_ROOT}{run_id}/"
    finally:
        _remove_run(store, bucket, run_id)


def _remove_run(store: infra.ObjectStore, bucket: str, run_id: str) -> None:
    store.empty_bucket(bucket, f"{RUNS_ROOT}{run_id}/")
    store.client().delete_object(Bucket=bucket, Key=RUNS_ROOT + run_id + OWNER_SUFFIX)


def stale_runs(store: infra.ObjectStore, bucket: str) -> list[str]:
    """The run prefixes in ``bucket`` whose run is over: its owner object names a process on this
    host that is gone, or a start more than ``STALE_AFTER_S`` ago, or cannot be read. Only run ids
    with an owner object count: a prefix under ``RUNS_ROOT`` without one is not a run's (a run
    writes its owner first and deletes it last), and stays."""
    s3, stale = store.client(), []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=RUNS_ROOT, Delimiter="/"):
        for entry in page.get("Contents", []):
            run_id = entry["Key"][len(RUNS_ROOT):].removesuffix(OWNER_SUFFIX)
            if not (entry["Key"].endswith(OWNER_SUFFIX) and RUN_ID.fullmatch(run_id)):
                continue
            try:
                owner = json.loads(s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read())
                here = owner["host"] == socket.gethostname()
                running = _alive(int(owner["pid"])) if here else True  # another host's: it may be
                recent = time.time() - float(owner["started"]) < STALE_AFTER_S
            except (s3.exceptions.NoSuchKey, ValueError, KeyError, TypeError):
                running = recent = False
            if not (running and recent):
                stale.append(f"{RUNS_ROOT}{run_id}/")
    return stale


def remove_stale_runs(store: infra.ObjectStore, bucket: str) -> list[str]:
    """Delete every stale run (``stale_runs``) in ``bucket``, its prefix and owner object; the
    prefixes removed."""
    stale = stale_runs(store, bucket)
    for prefix in stale:
        _remove_run(store, bucket, prefix[len(RUNS_ROOT):-1])
    return stale


def _alive(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[1] != "Z"


@contextlib.contextmanager
def started_stores(names: list[str], bucket: str | None, say=print, fault_profile: str = "none", fault_seed: int = 0,
                   needs_proxy: str | None = None):
    """Start each named store that can start (saying why for the others), with its bucket and a run
    prefix of its own in it (``store.run_prefix``, ``run_prefix``; stale ones from killed runs are
    removed first): ``{name: (store, bucket)}``.

    A store on a plain http:// endpoint is put behind the metering proxy (injecting
    ``fault_profile``'s faults), a ``MeteredStore``; one the proxy cannot front (https://, AWS S3)
    is used as it is, its requests counted inside Spark's JVMs only. ``needs_proxy`` names what
    cannot do without the proxy (a fault profile cannot either): such a store is refused in one line.

    Local stores get a fresh bucket named after the store: S3A settings are per bucket name, so two
    stores must never share one. A store this project did not start (``owns_buckets`` false) needs
    ``bucket``, an existing one: no bucket is created or deleted there.
    """
    if bucket and len(names) > 1:
        raise infra.StoreUnavailable("--bucket names one bucket, so measure one store at a time with it")
    if fault_profile != "none":
        needs_proxy = needs_proxy or f"fault profile {fault_profile}"
    with contextlib.ExitStack() as stack:
        started = {}
        for name in names:
            cls = infra.store_class(name)
            reason = cls.unavailable_reason()
            if reason:
                say(f"skipping {reason}")
                continue
            inner = stack.enter_context(cls())
            if bucket is None and not inner.owns_buckets:
                raise infra.StoreUnavailable(f"{name}: name an existing bucket (--bucket or {Settings.ENV['bucket']}); "
                                             "a bucket on a store ckptbench did not start is never created by it")
            if needs_proxy and not inner.meterable:
                raise infra.StoreUnavailable(
                    f"{name}: {needs_proxy} needs the metering proxy, which fronts plain http:// stores only, not "
                    f"{inner.endpoint or 'AWS S3'}; run it on a local store (--store ceph or embedded)")
            target = bucket or f"ckptbench-measure-{name}"
            if bucket is None:
                inner.create_bucket(target)
            inner.check_bucket(target)
            store = stack.enter_context(MeteredStore(inner, fault_profile, fault_seed)) if inner.meterable else inner
            for prefix in remove_stale_runs(inner, target):
                say(f"removed {prefix} in {target}, left by a run that ended before cleaning up")
            store.run_prefix = inner.run_prefix = stack.enter_context(run_prefix(inner, target))
            started[name] = (store, target)
            say(f"store: {store.describe()}")
        yield started


@contextlib.contextmanager
def started_store(settings: Settings, needs_proxy: str | None = None):
    """The one store of ``settings`` with its bucket (``started_stores``); fails in one line if it
    cannot start, or cannot be metered and ``needs_proxy`` says what needs that."""
    reason = infra.store_class(settings.store).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with started_stores([settings.store], settings.bucket, fault_profile=settings.fault_profile,
                        fault_seed=settings.fault_seed, needs_proxy=needs_proxy) as stores:
        yield stores[settings.store]


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


def save(record: results.Results, settings: Settings, part: tuple[int, int] = (1, 1)) -> results.Results:
    """Write ``record`` where ``settings`` keep raw results (the latest of its store and experiment),
    as part K of N when ``part`` is (K, N) of a plan split over processes (``results.write_part``)."""
    where = results.directory(settings.raw, settings.store, record.environment["experiment"])
    if part == (1, 1):
        record.write(where)
    else:
        results.write_part(record, where, *part)
    return record


# -- streaming queries ----------------------------------------------------------------------

class DriverMemory:
    """Peak resident set of the driver JVM (in local mode also the executor) since ``reset()``:
    Linux's VmHWM, NaN elsewhere."""

    def __init__(self, spark) -> None:
        pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
        self._proc = Path(f"/proc/{pid}")

    def reset(self) -> None:
        with contextlib.suppress(OSError):  # not Linux, or not ours to reset
            (self._proc / "clear_refs").write_text("5")  # "5" resets VmHWM to the current RSS (Linux >= 4.0)

    def peak_mib(self) -> float:
        try:
            status = (self._proc / "status").read_text().splitlines()
        except OSError:
            return float("nan")
        return next((float(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")), float("nan"))


class Lab:
    """One store and one SparkSession on it, for running queries one after another. Requests are
    counted inside Spark's JVMs (``jvm_requests``) and, when ``store`` is a ``MeteredStore``, by its
    metering proxy too: each run records both, under their ``source``. On a store with no proxy (an
    https endpoint, AWS S3) the JVM's count is the run's only one. Each query writes under the
    store's ``run_prefix`` only."""

    def __init__(self, spark, store: infra.ObjectStore, bucket: str, plan: Plan) -> None:
        self.spark, self.store, self.bucket, self.plan = spark, store, bucket, plan
        self.proxy = getattr(store, "proxy", None)
        self.inner = getattr(store, "inner", store)  # the store itself, for the harness's own calls
        self.jvm = jvm_requests.of(spark)
        #: Where it runs, for the results' environment: master, executors (``lab`` sets it).
        self.where = {"spark_master": spark.sparkContext.master}
        self.cluster: infra.SparkCluster | None = None  # the cluster ``lab`` started for it
        #: State store maintenance runs where the executors do; its calls are logged in this JVM only.
        self.watches_maintenance = spark.sparkContext.master.startswith("local[")

    def start(self, workload: str, base: str, keys: int):
        """Start ``workload`` with everything under ``base`` (an s3a:// URL); a started query."""
        spark, plan = self.spark, self.plan
        if workload.startswith("stateful"):
            # rows_per_batch=keys: every batch updates every key, so each state file holds them all.
            return workloads.stateful(spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys, digest=True)
        if workload == "windowed":
            return workloads.windowed(spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys)
        if workload == "file_sink":
            return workloads.file_sink(spark, f"{base}/checkpoint", f"{base}/output",
                                       compact_interval=plan.compact_interval, rows_per_batch=ROWS_PER_BATCH)
        if workload == "file_source":
            return workloads.file_source(spark, f"{base}/checkpoint", f"{base}/input", f"{base}/output",
                                         compact_interval=plan.compact_interval)
        raise ValueError(f"unknown workload {workload!r}")

    def run(self, recorder: results.Recorder | None, strategy: str, workload: str, keys: int, warmup: int,
            batches: int, bar=None) -> None:
        """One query of ``workload`` checkpointing with ``strategy``: ``warmup`` then ``batches``
        batches, added to ``recorder`` (None: untimed, recorded nowhere). A failure is recorded as
        the run's error: one broken strategy must not cost the others their numbers."""
        prefix = f"{self.store.run_prefix}bench/{strategy}-{workload}-{keys}-{uuid.uuid4().hex[:8]}"
        conf = WORKLOAD_CONF.get(workload, {})
        settings = checkpoint_settings(self.spark, conf)
        run = recorder.add_run(strategy, workload, keys, prefix, settings) if recorder else None
        if bar:
            bar.set_postfix_str(f"{strategy} x {workload}, {keys:,} keys")
        ckpt_impls.use(self.spark, strategy, watch_maintenance=self.watches_maintenance)
        memory = DriverMemory(self.spark)
        mark = self.proxy.mark() if self.proxy else None
        jvm_mark = self.jvm.mark()
        on_batch = bar.update if bar else None
        try:
            if workload == "file_source":
                workloads.seed_text_files(self.store.client(), self.bucket, f"{prefix}/input", warmup + batches + 1)
            with settings_set(self.spark, conf):  # the query keeps the settings it started with
                query = self.start(workload, f"s3a://{self.bucket}/{prefix}", keys)
            try:
                # A slow store or a big state makes batches slow: the limit grows with the count.
                warm = workloads.await_batches(query, warmup, 120 + 30 * warmup, on_batch)
                memory.reset()
                measured = workloads.await_batches(query, batches, 120 + 30 * batches, on_batch)
                peak = memory.peak_mib()
            finally:
                query.stop()
        except Exception as e:
            if recorder:
                recorder.fail_run(run, str(e))
            return
        finally:
            # A request elsewhere (an earlier query's state store maintenance) is not this query's; one
            # still running after stop() (an interrupted upload finishing) counts once it ended,
            # and only if it began before the cut, in both sources alike.
            mine, cut = prefix + "/", self.jvm.settle()
            events = [e for e in self.proxy.events_since(mark) if e.key.startswith(mine) and e.start < cut
                      ] if self.proxy else []
            jvm_events = [e for e in self.jvm.events_since(jvm_mark)
                          if e.bucket == self.bucket and e.key.startswith(mine) and e.start < cut]
            self.jvm.reset()  # drained into this run; nothing else reads them
            files = floor_files(self.spark, self.bucket, mine, cut) if strategy == ckpt_impls.FLOOR.name else []
            maintenance = maintenance_calls(self.spark, self.bucket, mine) if self.watches_maintenance else []
            temps = [k for k in self.inner.list_keys(self.bucket, mine) if ckpt_impls.TEMP_FILE.search(k)]
            self.inner.empty_bucket(self.bucket, mine)  # an in-memory store would fill up
        if recorder:
            recorder.rows["runs"][run].update(peak_rss_mib=peak, temp_objects=len(temps))
            recorder.add_batches(run, "warmup", warm)
            recorder.add_batches(run, "measured", measured)
            if self.proxy:
                recorder.add_requests(run, events, warm + measured)
            recorder.add_requests(run, jvm_events, warm + measured, source="jvm")
            if files:
                recorder.add_requests(run, files, warm + measured, source="memory")
            recorder.add_maintenance(run, maintenance)


def floor_files(spark, bucket: str, prefix: str, cut: float) -> list[Event]:
    """The checkpoint files the benchmark floor's in-memory manager (``ckpt_impls.FLOOR``) published
    or deleted under ``s3a://bucket/prefix`` before ``cut``, one ``PUT`` or ``DELETE`` event each (no
    request was made: the count of files a batch writes and deletes); the manager forgets them and
    their contents."""
    events = []
    for line in ckpt_impls.jvm_class(spark, ckpt_impls.FLOOR.manager_class).drain(f"{bucket}/{prefix}").splitlines():
        start_us, op, size, name = line.split("\t", 3)
        start, key = int(start_us) / 1e6, name.split("/", 1)[1]
        if start < cut:
            events.append(Event(start, start, op, op, area_of(key), bucket, key, 200, int(size), 0))
    return events


def maintenance_calls(spark, bucket: str, prefix: str) -> list[dict]:
    """The calls Spark's state store maintenance made under ``s3a://bucket/prefix`` to the manager
    ``ckpt_impls.MAINTENANCE_WATCH`` wrapped, since the last read: ``start`` and ``end`` (epoch
    seconds), ``method``, the ``thread`` that made it, ``key``. The JVM forgets them."""
    calls = []
    for line in ckpt_impls.jvm_class(spark, ckpt_impls.MAINTENANCE_WATCH).drain(f"{bucket}/{prefix}").splitlines():
        start_us, end_us, method, thread, name = line.split("\t", 4)
        calls.append({"start": int(start_us) / 1e6, "end": int(end_us) / 1e6, "method": method, "thread": thread,
                      "key": name.split("/", 1)[1]})
    return calls


def checkpoint_settings(spark, overrides: dict[str, str] | None = None) -> dict[str, str | None]:
    """The values of ``CHECKPOINT_SETTINGS`` a query started in ``spark``'s session with
    ``overrides`` set would have (None: see ``setting``)."""
    overrides = overrides or {}
    return {key: overrides[key] if key in overrides else setting(spark, key) for key in CHECKPOINT_SETTINGS}


def workloads_for(plan: Plan, spark_version: str) -> tuple[str, ...]:
    """``plan``'s workloads that Spark ``spark_version`` ("3.5", "4.3") can run (``NEEDS_SPARK``)."""
    version = tuple(int(part) for part in spark_version.split(".")[:2])
    return tuple(w for w in plan.workloads if version >= NEEDS_SPARK.get(w, (0, 0)))


@contextlib.contextmanager
def lab(store: MeteredStore, bucket: str, plan: Plan, strategy: str, conf: dict | None = None,
        master: str = DEFAULT_MASTER):
    """A ``Lab`` with a SparkSession on ``store``, on ``master`` (``CLUSTER``: a standalone cluster
    started here for it), its executors registered; the session, and such a cluster, stop with it.
    ``manifest`` keeps its directory manifests below the store's run prefix (``MANIFEST_ROOT``), not up
    to the bucket root."""
    from .spark import await_executors, least_executors, session

    root = {MANIFEST_ROOT: f"s3a://{bucket}/{store.run_prefix}"} if store.run_prefix else {}
    conf = {**SPARK_CONF, **root, **(conf or {})}
    with contextlib.ExitStack() as stack:
        cluster = None
        if master == CLUSTER:
            cluster = stack.enter_context(infra.SparkCluster())
            master, conf = cluster.master_url, {**cluster.spark_conf(), **conf}
        spark = session(strategy, {bucket: store}, master=master, conf=conf)
        stack.callback(spark.stop)
        hosts = await_executors(spark, cluster.workers if cluster else least_executors(master))
        bench = Lab(spark, store, bucket, plan)
        bench.cluster = cluster
        bench.where = {"spark_master": master, "cluster": cluster.describe() if cluster else None,
                       "executors": len(hosts), "executor_hosts": hosts}
        yield bench


def streaming(settings: Settings, strategies: list[str] | None = None, plan: Plan | None = None,
              experiment: str = "streaming") -> results.Results:
    """The store's floor, then every streaming run: strategy x workload (and the benchmark floor,
    ``ckpt_impls.FLOOR``, x workload: Spark's own share, with no store), then the state sweep
    (strategy x larger key counts). ``plan`` defaults to the settings' size. Written to
    ``settings.raw`` as ``experiment`` and returned."""
    plan = plan or settings.plan
    plan = dataclasses.replace(plan, workloads=workloads_for(plan, jars.spark_version()))
    strategies = strategies or list(ckpt_impls.STRATEGIES)
    # The floor keeps its files in the driver JVM's memory: only where executors share that JVM.
    floor = [ckpt_impls.FLOOR.name] if settings.master.startswith("local[") else []
    recorder = results.Recorder()
    with started_store(settings) as (store, bucket):
        record_store_alone(recorder, store, bucket, plan, parts=("floor",))
        with lab(store, bucket, plan, strategies[0], master=settings.master) as bench:
            for op, ms in client_floor(bench.spark, store, bucket, plan.floor_samples,
                                       plan.client_floor_warmup).items():
                recorder.add_samples("floor", op, ms, route=metrics.JVM_ROUTE)
            bench.jvm.reset()  # the floor's requests, counted in the JVM, are no run's
            # Strategies inside workloads: drift in the machine's load spreads over the strategies
            # compared with each other instead of landing on one of them.
            measured = [(strategy, workload, plan.keys[0], plan.warmup, plan.batches)
                        for workload in plan.workloads for strategy in [*strategies, *floor]]
            measured += [(strategy, workload, keys, warmup, batches)
                         for workload in plan.sweep_workloads
                         for keys, (warmup, batches) in zip(plan.keys[1:], plan.sweep, strict=True)
                         for strategy in strategies]
            # JVM warm-up (JIT, class loading, each manager's first use), untimed: a query's own
            # warm-up batches do not cover it, and the first run measured would pay for it.
            jvm_warmup = [(strategies[0], w) for w in plan.workloads] + [(s, plan.workloads[0])
                                                                          for s in [*strategies[1:], *floor]]
            total = len(jvm_warmup) * plan.jvm_warmup + sum(w + b for *_, w, b in measured)
            bar = progress.Recorder("streaming queries", total, "batch")
            for strategy, workload in jvm_warmup:
                bench.run(None, strategy, workload, plan.keys[0], 0, plan.jvm_warmup, bar)
            for run in measured:
                bench.run(recorder, *run, bar=bar)
            env = results.environment(store, experiment, settings.size, dataclasses.asdict(plan),
                                      spark=bench.spark, **bench.where,
                                      checkpoint_settings=checkpoint_settings(bench.spark))
    return save(recorder.results(env), settings)


streaming.timeout = 4 * 3600  # the full run; a stuck query fails sooner, in await_batches
store_alone.timeout = 3600
