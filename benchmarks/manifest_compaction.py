"""Compaction as history grows: the ``manifest`` strategy's compacts against Spark's own
``_spark_metadata`` log, for a history of 100 and of 1,000 batches (40 and 80 in the smallest run).

Driven without a streaming query (a 1,000-batch query would take far too long), as Spark's
``HDFSMetadataLog`` drives a log; py4j only drives, the metering proxy times:

- manifest: a ``ManifestCheckpointFileManager`` in the Spark JVM, built by Spark's own factory,
  writes an offsets log: per batch ``exists(offsets/<b>)``, then ``createAtomic`` + ``close`` of
  a ~300-byte offsets file, then, from batch ``retain`` on, the delete of ``offsets/<b - retain>``
  (Spark's purge keeps ``spark.sql.streaming.minBatchesToRetain``, 100, batches; purge lists
  first, which for this manager is one GET and is left out). So the log's live entries stop
  growing at ``retain``; two records per batch from then on. Every ``compactInterval`` records
  the manager compacts: a LIST of its staged objects, bulk DELETE(s) of garbage past the
  cleanup delay, the PUT of the compact and the PUT of the hint. Those requests, picked out of
  the batch's requests by operation and key, summed over the proxy's per-request times, are a
  compaction's time; its compact is read back with boto3 for its bytes, live entries and the
  garbage it still lists.
- Spark: Spark's real ``FileStreamSinkLog`` (``org.apache.spark.sql.execution.streaming.sinks``),
  built through py4j, gets one small file entry per batch with ``add``, compacting every
  ``spark.sql.streaming.fileSink.log.compactInterval`` (set to the manifest's interval). Its
  compaction time is every request of a compaction batch's ``add`` (read the previous compact
  and the deltas, write ``N.compact``, list for expired files); ``N.compact`` is read back for
  its bytes and entries. It keeps every entry ever written, so it grows linearly: that is the
  point of the comparison. It writes through the ``direct`` strategy, not Spark's default
  ``rename``: on S3A a rename makes each ``add`` ~30 requests instead of ~10 (~100 ms against
  ~25 ms on Ceph), which would bury the log's own cost under the rename's (measured on its own
  elsewhere in the suite) and push this module past its time budget.

Memory: a manifest view in the JVM holds exactly what its compact holds (the live entries and
the pending garbage) plus at most ``compactInterval`` records, and Spark's compaction holds
every entry of ``N.compact`` while it writes it; so the compact's bytes and entries are the
memory figures here. A JVM heap reading was left out: for views of tens of KiB, GC noise in
a driver heap of hundreds of MiB would swamp it.

The cleanup delay: superseded records, compacts and staged objects stay listed as garbage in
each compact until ``ckptbench.manifest.cleanupDelayMs`` has passed, so a compact's size is
bounded by the live entries plus the garbage of the last delay: flat in history, but set by
(delay / trigger interval). The run is paced like a query with a fixed trigger interval
(``delay / window``: a batch starts at ``b * trigger`` or as soon as the previous one ends,
as Spark's ProcessingTime trigger does), so the delay covers ``window`` batches, about what
the 10-minute default covers for a 10-second trigger (quick: 60). The delay is shortened to
1 s (its minimum) to fit the run; at this rate every ~30 batches the view is also reloaded
(half the delay), as it would be in a real query.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid

from ckptbench import progress

from . import common

MANIFEST_MANAGER = "ckptbench.checkpoint.ManifestCheckpointFileManager"
SINK_LOG = "org.apache.spark.sql.execution.streaming.sinks"
SPARK_LOG_STRATEGY = "direct"  # the checkpoint manager Spark's log writes through (see above)


@dataclasses.dataclass(frozen=True)
class Shape:
    batches: tuple[int, ...]  # the history lengths compared (asv parameter)
    retain: int  # offsets files kept by the purge (Spark's minBatchesToRetain)
    interval: int  # records between compacts (manifest), batches between compacts (Spark)
    delay_ms: int  # ckptbench.manifest.cleanupDelayMs
    window: int  # batches the delay covers: the trigger interval is delay_ms / window
    tail: int  # compactions at the end of the history the time median is taken over


SHAPES = {
    "smallest": Shape((40, 80), 10, 5, 1000, 20, 5),
    "quick": Shape((100, 1000), 100, 10, 1000, 60, 10),
    "full": Shape((100, 1000), 100, 10, 1000, 60, 10),  # same values, so asv compares them
}
SHAPE = SHAPES[common.SIZE]

_OFFSETS_TEMPLATE = (
    'v1\n{"batchWatermarkMs":0,"batchTimestampMs":%d,"conf":{'
    '"spark.sql.streaming.stateStore.providerClass":'
    '"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",'
    '"spark.sql.streaming.multipleWatermarkPolicy":"min",'
    '"spark.sql.shuffle.partitions":"200"}}\n{"logOffset":%d}')


def _offsets_file(batch: int) -> bytes:
    """An offsets file as Spark writes one (~300 bytes): version, metadata, one source offset."""
    return (_OFFSETS_TEMPLATE % (1_700_000_000_000 + batch, batch)).encode()


def _store_ms(events) -> float:
    return sum(e.duration for e in events) * 1000


def _parse_compact(text: str) -> dict:
    lines = text.splitlines()[1:]
    garbage = [line.split(" ") for line in lines if line.startswith("garbage ")]
    return {"entries": sum(1 for line in lines if line.startswith(("file ", "dir "))),
            "garbage_generations": len(garbage),
            "garbage_staged": sum(len(g) - 5 for g in garbage)}


def _compactions(events, manifest_prefix: str) -> list[list]:
    """The compactions among one batch's requests, each as its requests: LIST of the staged
    objects and bulk DELETEs (which carry no key the proxy records), then the compact's PUT,
    then the hint's PUT, which ends it."""
    out, pending = [], []
    for e in events:
        if e.op in ("LIST", "BULK_DELETE"):
            pending.append(e)
        elif e.op == "PUT" and e.key.startswith(manifest_prefix + "c/"):
            pending.append(e)
        elif e.op == "PUT" and e.key == manifest_prefix + "hint" and pending:
            out.append(pending + [e])
            pending = []
    return out


def _manifest_history(spark, store, bucket: str, batches: int, bar: progress.Recorder) -> dict:
    import ckpt_impls

    jvm, s3 = spark._jvm, store.inner.client()
    prefix = f"bench/manifest-history-{batches}-{uuid.uuid4().hex[:8]}"
    root = f"s3a://{bucket}/{prefix}"
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    conf.set(ckpt_impls.MANAGER_CLASS_CONF, MANIFEST_MANAGER)
    conf.set("ckptbench.manifest.compactInterval", str(SHAPE.interval))
    conf.set("ckptbench.manifest.cleanupDelayMs", str(SHAPE.delay_ms))
    Path = jvm.org.apache.hadoop.fs.Path
    fm = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(Path(root), conf)
    if fm.getClass().getName() != MANIFEST_MANAGER:
        raise RuntimeError(f"Spark's factory built {fm.getClass().getName()}, not {MANIFEST_MANAGER}")
    fm.mkdirs(Path(f"{root}/offsets"))
    manifest_prefix = f"{prefix}/offsets/_manifest/"
    trigger = SHAPE.delay_ms / SHAPE.window / 1000
    proxy = store.proxy
    compactions, batch_ms = [], []
    bar.set_postfix_str(f"manifest, {batches:,} batches")
    try:
        started = time.monotonic()
        for b in range(batches):
            bar.update()
            time.sleep(max(0.0, started + b * trigger - time.monotonic()))
            mark = proxy.mark()
            path = Path(f"{root}/offsets/{b}")
            if fm.exists(path):
                raise RuntimeError(f"offsets/{b} exists before it was written")
            out = fm.createAtomic(path, False)
            out.write(bytearray(_offsets_file(b)))
            out.close()
            if b >= SHAPE.retain:
                fm.delete(Path(f"{root}/offsets/{b - SHAPE.retain}"))
            events = proxy.events_since(mark)
            batch_ms.append(_store_ms(events))
            for requests in _compactions(events, manifest_prefix):
                key = next(e.key for e in requests if e.op == "PUT" and "/c/" in e.key)
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                compactions.append({"batch": b, "number": int(key.rsplit("/", 1)[1]), "ms": _store_ms(requests),
                                    "requests": {op: sum(e.op == op for e in requests)
                                                 for op in dict.fromkeys(e.op for e in requests)},
                                    "ms_by_op": {op: _store_ms(e for e in requests if e.op == op)
                                                 for op in dict.fromkeys(e.op for e in requests)},
                                    "bytes": len(body), **_parse_compact(body.decode())})
        elapsed = time.monotonic() - started
    finally:
        store.inner.empty_bucket(bucket, prefix + "/")
    return {"batches": batches, "seconds": elapsed, "trigger_ms": trigger * 1000, "batch_ms": batch_ms,
            "compactions": compactions}


def _spark_history(spark, store, bucket: str, batches: int, bar: progress.Recorder) -> dict:
    import ckpt_impls

    jvm, s3 = spark._jvm, store.inner.client()
    gateway = spark.sparkContext._gateway
    prefix = f"bench/spark-metadata-history-{batches}-{uuid.uuid4().hex[:8]}"
    ckpt_impls.use(spark, SPARK_LOG_STRATEGY)
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(SHAPE.interval))
    sinks = getattr(jvm, SINK_LOG)  # noqa: B009 (a dotted package name)
    log = sinks.FileStreamSinkLog(sinks.FileStreamSinkLog.VERSION(), spark._jsparkSession,
                                  f"s3a://{bucket}/{prefix}/_spark_metadata", jvm.scala.Option.apply(None))
    proxy = store.proxy
    compactions, batch_ms = [], []
    bar.set_postfix_str(f"_spark_metadata, {batches:,} batches")
    try:
        started = time.monotonic()
        for b in range(batches):
            bar.update()
            entry = sinks.SinkFileStatus(
                f"s3a://{bucket}/{prefix}/output/part-00000-{uuid.uuid4()}-c000.snappy.parquet",
                4_000 + b % 97, False, 1_700_000_000_000 + b * 1000, 1, 32 * common.MiB, "add")
            files = gateway.new_array(sinks.SinkFileStatus, 1)
            files[0] = entry
            mark = proxy.mark()
            if not log.add(b, files):
                raise RuntimeError(f"_spark_metadata/{b} existed before it was written")
            events = proxy.events_since(mark)
            batch_ms.append(_store_ms(events))
            if (b + 1) % SHAPE.interval == 0:
                body = s3.get_object(Bucket=bucket, Key=f"{prefix}/_spark_metadata/{b}.compact")["Body"].read()
                compactions.append({"batch": b, "ms": _store_ms(events),
                                    # the requests on N.compact itself and the one before it
                                    "compact_io_ms": _store_ms(e for e in events if ".compact" in e.key),
                                    "requests": {op: sum(e.op == op for e in events)
                                                 for op in dict.fromkeys(e.op for e in events)},
                                    "bytes": len(body), "entries": len(body.decode().splitlines()) - 1})
        elapsed = time.monotonic() - started
    finally:
        store.inner.empty_bucket(bucket, prefix + "/")
    return {"batches": batches, "seconds": elapsed, "batch_ms": batch_ms, "compactions": compactions}


def history() -> dict:
    """Both logs for every history length, on one SparkSession; then the raw file (which the
    report plots)."""
    from contextlib import ExitStack

    from ckptbench.spark import session

    with ExitStack() as stack:
        store, bucket = common._started_store(stack)
        spark = session("rename", {bucket: store}, conf=common.SPARK_CONF)
        stack.callback(spark.stop)
        # Untimed first: class loading, JIT and the manager's one-off store check, so the first
        # history is paced like the others (its pace sets how much garbage its compacts hold).
        untimed = SHAPE.retain + 2 * SHAPE.interval, 2 * SHAPE.interval
        bar = progress.Recorder("compaction histories", sum(untimed) + 2 * sum(SHAPE.batches), "batch")
        _manifest_history(spark, store, bucket, untimed[0], bar)
        _spark_history(spark, store, bucket, untimed[1], bar)
        runs = []
        for batches in SHAPE.batches:
            t0 = time.monotonic()
            manifest = _manifest_history(spark, store, bucket, batches, bar)
            spark_log = _spark_history(spark, store, bucket, batches, bar)
            runs.append({"batches": batches, "manifest": manifest, "spark": spark_log,
                         "seconds": time.monotonic() - t0})
        data = {**common._meta(store), "shape": dataclasses.asdict(SHAPE), "runs": runs}
    common._save("manifest-compaction", data)
    return data


history.timeout = 3600


# -- reading the cached run ---------------------------------------------------------------

def _run(data: dict, batches: int) -> dict:
    for run in data["runs"]:
        if run["batches"] == batches:
            return run
    raise KeyError(f"no history of {batches} batches")


def _last(data: dict, batches: int, log: str) -> dict:
    compactions = _run(data, batches)[log]["compactions"]
    if not compactions:
        raise RuntimeError(f"{log}: no compaction in {batches} batches")
    return compactions[-1]


def _tail_ms(data: dict, batches: int, log: str) -> float:
    """Median store-side time of the last ``tail`` compactions: at the end of the history."""
    compactions = _run(data, batches)[log]["compactions"][-data["shape"]["tail"]:]
    return common.median([c["ms"] for c in compactions])


class ManifestCompaction:
    """The manifest's compaction at the end of a history of ``batches`` batches."""

    params = [list(SHAPE.batches)]
    param_names = ["batches"]
    setup_cache = staticmethod(history)
    timeout = history.timeout

    def track_compaction_ms(self, data, batches):
        return _tail_ms(data, batches, "manifest")

    def track_compact_kib(self, data, batches):
        return _last(data, batches, "manifest")["bytes"] / 1024

    def track_live_entries(self, data, batches):
        return _last(data, batches, "manifest")["entries"]

    def track_pending_garbage(self, data, batches):
        """Staged objects the last compact still lists as garbage (within the cleanup delay)."""
        return _last(data, batches, "manifest")["garbage_staged"]

    track_compaction_ms.unit = "ms"
    track_compact_kib.unit = "KiB"
    track_live_entries.unit = "entries"
    track_pending_garbage.unit = "objects"


class SparkMetadataCompaction:
    """Spark's FileStreamSinkLog at the end of a history of ``batches`` batches, one file each."""

    params = [list(SHAPE.batches)]
    param_names = ["batches"]
    setup_cache = staticmethod(history)
    timeout = history.timeout

    def track_compaction_ms(self, data, batches):
        return _tail_ms(data, batches, "spark")

    def track_compact_kib(self, data, batches):
        return _last(data, batches, "spark")["bytes"] / 1024

    def track_entries(self, data, batches):
        return _last(data, batches, "spark")["entries"]

    track_compaction_ms.unit = "ms"
    track_compact_kib.unit = "KiB"
    track_entries.unit = "entries"


if __name__ == "__main__":  # a run outside asv: python -m benchmarks.manifest_compaction
    t0 = time.monotonic()
    result = history()
    summary = {}
    for cls in (ManifestCompaction, SparkMetadataCompaction):
        for name in sorted(n for n in dir(cls) if n.startswith("track_")):
            for batches in SHAPE.batches:
                value = getattr(cls(), name)(result, batches)
                summary[f"{cls.__name__}.{name}[{batches}]"] = value if math.isfinite(value) else None
    print(json.dumps({"store": result["describe"], "seconds": round(time.monotonic() - t0, 1),
                      "runs": {r["batches"]: round(r["seconds"], 1) for r in result["runs"]},
                      "tracks": summary}, indent=1))
