"""A log's compaction as its history grows: the ``manifest`` strategy's compacts against Spark's own
``_spark_metadata`` log, for a history of 100 and of 1,000 batches (40 and 80 in the smallest run);
``history(settings)`` returns the record (``ckptbench.record``), one ``compactions`` row each.

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
- Spark: Spark's real ``FileStreamSinkLog`` (``org.apache.spark.sql.execution.streaming.sinks``, 3.5: ``.streaming``),
  built through py4j, gets one small file entry per batch with ``add``, compacting every
  ``spark.sql.streaming.fileSink.log.compactInterval`` (set to the manifest's interval). Its
  compaction time is every request of a compaction batch's ``add`` (read the previous compact
  and the deltas, write ``N.compact``, list for expired files); ``N.compact`` is read back for
  its bytes and entries. It keeps every entry ever written, so it grows linearly: that is the
  point of the comparison. It writes through the ``direct`` strategy, not Spark's default
  ``rename``: on S3A a rename makes each ``add`` ~30 requests instead of ~10, several times the
  time (measured: docs/findings/commit-latency.md), which would bury the log's own cost under the
  rename's (measured on its own elsewhere in the suite) and push this module past its time budget.

Memory: a manifest view in the JVM holds exactly what its compact holds (the live entries and
the pending garbage) plus at most ``compactInterval`` records, and Spark's compaction holds
every entry of ``N.compact`` while it writes it; so the compact's bytes and entries are the
memory figures here. A JVM heap reading is left out: for views of tens of KiB, GC noise in
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
import time
import uuid

import ckpt_impls
from ckpt_impls import jars, manifest_format
from ckptbench import config, progress
from ckptbench.config import SPARK_LOG_STRATEGY
from ckptbench.harness import querylab, stores
from ckptbench.record import disk, results

MANIFEST_MANAGER = ckpt_impls.get("manifest").manager_class


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
    "quick": Shape((40, 80), 10, 5, 1000, 20, 5),
    "full": Shape((100, 1000), 100, 10, 1000, 60, 10),
}

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


def _compactions(events, manifest_prefix: str) -> list[list]:
    """The compactions among one batch's requests, each as its requests: LIST of the staged
    objects and bulk DELETEs (which carry no key the proxy records), then the compact's PUT,
    then the hint's PUT, which ends it."""
    out, pending = [], []
    for e in events:
        if e.op in ("LIST", "BULK_DELETE") or (e.op == "PUT" and e.key.startswith(manifest_prefix + "c/")):
            pending.append(e)
        elif e.op == "PUT" and e.key == manifest_prefix + "hint" and pending:
            out.append([*pending, e])
            pending = []
    return out


def _manifest_history(spark, store, bucket: str, shape: Shape, batches: int, bar,
                      recorder: results.Recorder | None) -> None:
    jvm, s3 = spark._jvm, store.inner.client()
    prefix = f"{store.run_prefix}bench/manifest-history-{batches}-{uuid.uuid4().hex[:8]}"
    root = f"s3a://{bucket}/{prefix}"
    fm = ckpt_impls.manager(spark, root, "manifest", {"ckptbench.manifest.compactInterval": shape.interval,
                                                     "ckptbench.manifest.cleanupDelayMs": shape.delay_ms})
    Path = jvm.org.apache.hadoop.fs.Path
    if fm.getClass().getName() != MANIFEST_MANAGER:
        raise RuntimeError(f"Spark's factory built {fm.getClass().getName()}, not {MANIFEST_MANAGER}")
    fm.mkdirs(Path(f"{root}/offsets"))
    manifest_prefix = manifest_format.prefix(f"{prefix}/offsets")
    trigger = shape.delay_ms / shape.window / 1000
    proxy = store.proxy
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
            if b >= shape.retain:
                fm.delete(Path(f"{root}/offsets/{b - shape.retain}"))
            for requests in _compactions(proxy.events_since(mark), manifest_prefix):
                key = next(e.key for e in requests if e.op == "PUT" and "/c/" in e.key)
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                compact = manifest_format.parse_compact(body.decode())
                if recorder:
                    recorder.add_compaction(history=batches, log="manifest", batch=b, number=compact.number,
                                            ms=_store_ms(requests),
                                            requests=len(requests), bytes=len(body), entries=compact.entries,
                                            garbage_staged=compact.garbage_staged)
    finally:
        store.inner.empty_bucket(bucket, prefix + "/")


def _spark_history(spark, store, bucket: str, shape: Shape, batches: int, bar,
                   recorder: results.Recorder | None) -> None:
    jvm, s3 = spark._jvm, store.inner.client()
    gateway = spark.sparkContext._gateway
    prefix = f"{store.run_prefix}bench/spark-metadata-history-{batches}-{uuid.uuid4().hex[:8]}"
    ckpt_impls.use(spark, SPARK_LOG_STRATEGY)
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(shape.interval))
    sinks = getattr(jvm, jars.streaming_package("sinks"))
    log = sinks.FileStreamSinkLog(sinks.FileStreamSinkLog.VERSION(), spark._jsparkSession,
                                  f"s3a://{bucket}/{prefix}/_spark_metadata", jvm.scala.Option.apply(None))
    proxy = store.proxy
    bar.set_postfix_str(f"_spark_metadata, {batches:,} batches")
    try:
        for b in range(batches):
            bar.update()
            entry = sinks.SinkFileStatus(
                f"s3a://{bucket}/{prefix}/output/part-00000-{uuid.uuid4()}-c000.snappy.parquet",
                4_000 + b % 97, False, 1_700_000_000_000 + b * 1000, 1, 32 * config.MiB, "add")
            files = gateway.new_array(sinks.SinkFileStatus, 1)
            files[0] = entry
            mark = proxy.mark()
            if not log.add(b, files):
                raise RuntimeError(f"_spark_metadata/{b} existed before it was written")
            events = proxy.events_since(mark)
            if (b + 1) % shape.interval == 0 and recorder:
                body = s3.get_object(Bucket=bucket, Key=f"{prefix}/_spark_metadata/{b}.compact")["Body"].read()
                recorder.add_compaction(history=batches, log="spark", batch=b, number=b, ms=_store_ms(events),
                                        requests=len(events), bytes=len(body),
                                        entries=len(body.decode().splitlines()) - 1, garbage_staged=0)
    finally:
        store.inner.empty_bucket(bucket, prefix + "/")


def history(settings: config.Settings) -> results.Results:
    """Both logs for every history length, on one SparkSession. Written to ``settings.raw`` and
    returned."""
    shape = SHAPES[settings.size]
    recorder = results.Recorder()
    with stores.started_store(settings, needs_proxy="the log histories") as (store, bucket), \
            querylab.lab(store, bucket, settings.plan, "rename") as lab:
        spark = lab.spark
        # Untimed first: class loading, JIT and the manager's one-off store check, so the first
        # history is paced like the others (its pace sets how much garbage its compacts hold).
        untimed = shape.retain + 2 * shape.interval, 2 * shape.interval
        bar = progress.Recorder("compaction histories", sum(untimed) + 2 * sum(shape.batches), "batch")
        _manifest_history(spark, store, bucket, shape, untimed[0], bar, None)
        _spark_history(spark, store, bucket, shape, untimed[1], bar, None)
        for batches in shape.batches:
            _manifest_history(spark, store, bucket, shape, batches, bar, recorder)
            _spark_history(spark, store, bucket, shape, batches, bar, recorder)
        env = results.environment(store, "manifest-compaction", settings.size, dataclasses.asdict(shape))
    return disk.save(recorder.results(env), settings)


history.timeout = 3600
