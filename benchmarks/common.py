"""What every benchmark shares: the store and run size, and the two measurements asv caches.

Switches, environment variables read when asv imports the suite (``python -m ckptbench bench``
sets them from its options):

- ``CKPT_STORE``: embedded | ceph | minio | s3 | endpoint. Default: ceph where Ceph RGW can
  start here (a real store), else embedded (an emulator: its timings are not a real store's).
  ``endpoint`` also needs ``CKPT_S3_ENDPOINT``; remote stores take their keys from
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` and a bucket from ``CKPT_BUCKET``.
- ``CKPT_BENCH_SIZE``: quick (default) | full | smallest (every benchmark in its smallest form,
  for CI). quick and full share parameter values (key counts, object sizes) so asv can publish
  and compare them side by side; they differ in batches and samples.
- ``CKPT_BENCH_RAW``: where the raw measurements are also written as JSON, for the plots
  (default ``results/raw``).

The store is not an asv parameter but an asv machine (``<host>-<store>``): asv publishes a
parameterised result only for the parameter values of the latest discovery, so runs on two
stores under one parameter would hide each other. Each store's results are their own series.

Starting Spark costs ~10 s and asv runs every benchmark, for every parameter combination, in a
process of its own. So the expensive part runs once, in ``setup_cache``: asv keys it by the
module and line that define the function, so every class that sets
``setup_cache = staticmethod(common.streaming)`` reads the same pickled result of one run per
``asv run``, in which one SparkSession serves every strategy (switched with ``ckpt_impls.use``).
Benchmarks are ``track_*`` over those numbers, never ``time_*``: asv would time py4j and Spark's
scheduling, not the checkpoint. The honest clocks are Spark's own (progress ``durationMs``), the
metering proxy's (per request, store side) and the store's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import statistics
import subprocess
import uuid
from pathlib import Path

import ckpt_impls
import infra
from ckptbench import measure, metrics, progress, workloads

KiB, MiB = 1024, 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Plan:
    jvm_warmup: int  # batches of the untimed queries that warm the JVM up before any run
    warmup: int  # batches run first in each query, reported on their own
    batches: int  # measured batches per strategy x workload
    compact_interval: int  # of the file sink's and file source's logs
    keys: tuple[int, ...]  # state sweep; keys[0] is the `stateful` workload's
    sweep: tuple[tuple[int, int], ...]  # (warm-up, measured) batches for each of keys[1:]
    floor_samples: int
    copy_sizes: tuple[int, ...]
    copy_samples: int
    overhead_samples: int


COPY_SIZES = (KiB, 64 * KiB, MiB, 8 * MiB, 32 * MiB, 128 * MiB)
KEYS = (1_000, 30_000, 300_000)  # state files of ~35 KiB, ~1 MiB, ~10 MiB (two per batch)
# Few batches at 300k keys: Ceph RGW frees a deleted object's tail (beyond 4 MiB) only after its
# garbage collection delay, hours later, and the lab's in-memory OSD holds 1 GiB, of which
# 4 strategies x 10 batches x 2 state files of ~10 MiB already take half.
PLANS = {
    "smallest": Plan(1, 1, 3, 2, (100, 1_000), ((1, 2),), 10, (KiB, MiB, 4 * MiB), 3, 40),
    "quick": Plan(5, 3, 20, 10, KEYS, ((2, 6), (2, 6)), 300, COPY_SIZES, 5, 600),
    "full": Plan(10, 5, 100, 10, KEYS, ((3, 20), (2, 8)), 1000, COPY_SIZES, 15, 2000),
}
SIZE = os.environ.get("CKPT_BENCH_SIZE", "quick")
if SIZE not in PLANS:
    raise ValueError(f"CKPT_BENCH_SIZE must be one of {', '.join(PLANS)}, not {SIZE!r}")
PLAN = PLANS[SIZE]
STORE = os.environ.get("CKPT_STORE") or measure.default_store()
BUCKET = os.environ.get("CKPT_BUCKET") or None
ROOT = Path(__file__).resolve().parent.parent
RAW = Path(os.environ.get("CKPT_BENCH_RAW") or ROOT / "results" / "raw")

STRATEGIES = list(ckpt_impls.STRATEGIES)
WORKLOADS = ["stateful", "file_sink", "file_source"]
#: The compacted logs: the file sink's (in the file_sink workload) and the file source's.
LOGS = {"_spark_metadata": "file_sink", "sources": "file_source"}
ROWS_PER_BATCH = 1_000  # file_sink's input; stateful reads as many rows as it has keys
SPARK_CONF = {
    "spark.driver.memory": "2g",  # the largest state sweep holds a few versions of 300k keys
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
}


def _started_store(stack):
    reason = infra.store_class(STORE).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    stores = stack.enter_context(measure.started_stores([STORE], BUCKET))
    return stores[STORE]


def _meta(store) -> dict:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return {"store": STORE, "describe": store.describe(), "emulator": store.emulator, "size": SIZE,
            "plan": dataclasses.asdict(PLAN), "commit": commit,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def _save(kind: str, data: dict) -> None:
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / f"{STORE}-{kind}.json").write_text(json.dumps(data))


def _progress(p: dict) -> dict:
    """The parts of a Spark progress report the benchmarks read."""
    keep = {k: p[k] for k in ("batchId", "timestamp", "durationMs", "numInputRows")}
    keep["stateOperators"] = [{k: op.get(k) for k in ("commitTimeMs", "memoryUsedBytes", "numRowsTotal")}
                              for op in p.get("stateOperators", [])]
    return keep


def _run(spark, store, bucket: str, strategy: str, workload: str, keys: int, warmup: int, batches: int,
         bar: progress.Recorder) -> dict:
    """One query of ``workload`` checkpointing with ``strategy``, as the benchmarks read it."""
    prefix = f"bench/{strategy}-{workload}-{keys}-{uuid.uuid4().hex[:8]}"
    base = f"s3a://{bucket}/{prefix}"
    starts = {
        # rows_per_batch=keys: every batch updates every key, so each state file holds them all.
        "stateful": lambda: workloads.stateful(spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys,
                                               digest=True),
        "file_sink": lambda: workloads.file_sink(spark, f"{base}/checkpoint", f"{base}/output",
                                                 compact_interval=PLAN.compact_interval,
                                                 rows_per_batch=ROWS_PER_BATCH),
        "file_source": lambda: workloads.file_source(spark, f"{base}/checkpoint", f"{base}/input",
                                                     f"{base}/output", compact_interval=PLAN.compact_interval),
    }
    result = {"strategy": strategy, "workload": workload, "keys": keys, "error": None}
    if workload == "file_source":
        workloads.seed_text_files(store.client(), bucket, f"{prefix}/input", warmup + batches + 1)
    bar.set_postfix_str(f"{strategy} x {workload}, {keys:,} keys")
    try:
        run = measure.observe(spark, store, strategy, prefix + "/", starts[workload], batches, warmup, bar)
    except Exception as e:  # one broken strategy must not cost the others their numbers
        result["error"] = " ".join(str(e).split())[:500]
        return result
    finally:
        store.inner.empty_bucket(bucket, prefix + "/")  # an in-memory store would fill up
    per_batch, outside = metrics.events_by_batch(run.events, run.measured)
    result.update(warmup=[_progress(p) for p in run.warmup], measured=[_progress(p) for p in run.measured],
                  batches=[metrics.batch_summary(b) for b in per_batch],
                  outside=metrics.batch_summary(outside), peak_rss_mib=run.peak_rss_mib)
    return result


def streaming() -> dict:
    """Every streaming run: strategy x workload, then the state sweep (strategy x larger key counts)."""
    from contextlib import ExitStack

    from ckptbench.spark import session

    with ExitStack() as stack:
        store, bucket = _started_store(stack)
        floor = measure.store_floor(store, bucket, PLAN.floor_samples)
        spark = session(STRATEGIES[0], {bucket: store}, conf=SPARK_CONF)
        stack.callback(spark.stop)
        # JVM warm-up (JIT, class loading, each manager's first use), untimed: a query's own
        # warm-up batches do not cover it, and the first run measured would pay for it.
        jvm_warmup = [(STRATEGIES[0], w) for w in WORKLOADS] + [(s, "stateful") for s in STRATEGIES[1:]]
        # Strategies inside workloads: drift in the machine's load spreads over the strategies
        # compared with each other instead of landing on one of them.
        measured = [(strategy, workload, PLAN.keys[0], PLAN.warmup, PLAN.batches)
                    for workload in WORKLOADS for strategy in STRATEGIES]
        measured += [(strategy, "stateful", keys, warmup, batches)
                     for keys, (warmup, batches) in zip(PLAN.keys[1:], PLAN.sweep) for strategy in STRATEGIES]
        total = len(jvm_warmup) * PLAN.jvm_warmup + sum(warmup + batches for *_, warmup, batches in measured)
        bar = progress.Recorder("streaming queries", total, "batch")
        for strategy, workload in jvm_warmup:
            _run(spark, store, bucket, strategy, workload, PLAN.keys[0], 0, PLAN.jvm_warmup, bar)
        runs = [_run(spark, store, bucket, *run, bar) for run in measured]
        data = {**_meta(store), "floor": floor, "runs": runs}
    _save("streaming", data)
    return data


streaming.timeout = 4 * 3600  # the full run; a stuck query fails sooner, in await_batches


def store_only() -> dict:
    """The store on its own, no Spark: request latency floor, proxy overhead, COPY against size."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        store, bucket = _started_store(stack)
        bar = progress.Recorder("store alone", 3, "part")
        bar.set_postfix_str("the store's floor")
        data = {**_meta(store), "floor": measure.floor_samples(store, bucket, PLAN.floor_samples)}
        bar.update()
        bar.set_postfix_str("the proxy's overhead")
        data["overhead"] = measure.proxy_overhead(store, bucket, PLAN.overhead_samples)
        bar.update()
        bar.set_postfix_str("COPY against size")
        data["copy"] = {str(size): ms for size, ms in
                        measure.copy_samples(store, bucket, PLAN.copy_sizes, PLAN.copy_samples).items()}
        bar.update()
    _save("store", data)
    return data


store_only.timeout = 3600


# -- reading the cached runs --------------------------------------------------------------

def run_of(data: dict, strategy: str, workload: str, keys: int | None = None) -> dict:
    """The run of ``strategy`` x ``workload`` (``keys``: the sweep's); raises if it failed, so asv
    records the benchmark as failed, with Spark's reason."""
    keys = data["plan"]["keys"][0] if keys is None else keys
    for run in data["runs"]:
        if (run["strategy"], run["workload"], run["keys"]) == (strategy, workload, keys):
            if run["error"]:
                raise RuntimeError(f"{strategy} x {workload} failed: {run['error']}")
            return run
    raise KeyError(f"no run of {strategy} x {workload} x {keys} keys")


def median(values) -> float:
    return metrics.percentile(values, 50)


def mean(values) -> float:
    return statistics.fmean(values) if values else float("nan")
