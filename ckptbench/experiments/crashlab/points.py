"""The crash lab's workloads and crash points: where a driver is killed (some inside a request:
the metering proxy kills it as the request arrives), and the lab's time limits."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from infra.s3ops import Event

IGNORE_MISSING = "spark.sql.files.ignoreMissingFiles"

# -- workloads ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """A query ``ckptbench.harness.driver`` runs (``ckptbench.harness.workloads`` builds it) and what its output
    must hold: each output ``value`` belongs to batch ``batch_sql`` (a SQL expression over
    ``value``, with ``{rows}`` rows per batch), which must show ``rows_in(batch, rows)`` distinct
    values exactly once each."""

    name: str
    description: str
    stateful: bool
    batch_sql: str
    rows_in: Callable[[int, int], int]
    exactly_once: bool = True  # False: a deliberately broken sink, for the verifier's tests
    points: tuple[str, ...] | None = None  # the only crash points it is measured at (None: all that apply)
    conf: dict = dataclasses.field(default_factory=dict)  # Spark settings its driver needs


WORKLOADS = {w.name: w for w in (
    Workload("stateless", "rate-micro-batch -> parquet file sink", False,
             "floor(value / {rows})", lambda batch, rows: rows),
    # Half of each batch repeats the previous batch's new values (workloads.replayable).
    Workload("stateful", "rate-micro-batch -> dropDuplicates(value) -> parquet file sink (append)", True,
             "CASE WHEN value < 0 THEN 0 ELSE floor(value / ({rows} DIV 2)) END",
             lambda batch, rows: rows if batch == 0 else rows // 2),
    # Each sink file is ~6 MiB uncompressed (128 KiB a row, 50 rows a task), over S3A's 5 MiB
    # block, so S3A writes it as a multipart upload: the workload of ``during-multipart-upload``.
    Workload("wide", "rate-micro-batch -> 128 KiB a row, uncompressed -> parquet file sink (multipart uploads)",
             False, "floor(value / {rows})", lambda batch, rows: rows, points=("during-multipart-upload",),
             conf={"spark.hadoop.fs.s3a.multipart.size": "5242880",
                   "spark.sql.parquet.compression.codec": "uncompressed"}),
    Workload("unsafe-foreach", "rate-micro-batch -> foreachBatch appending parquet, no batch-id check "
             "(NOT idempotent, on purpose)", False, "floor(value / {rows})", lambda batch, rows: rows,
             exactly_once=False),
)}
#: The workloads measured by default (the others exist to test the verifier).
MEASURED_WORKLOADS = ("stateless", "stateful")


# -- crash points ---------------------------------------------------------------------------

#: Requests that store an object's bytes (a rename's COPY publishes the temp file).
WRITES = ("PUT", "COPY", "MPU_INIT", "MPU_PART", "MPU_COMPLETE")


def publishes(event: Event, log: str) -> bool:
    """``event`` stored a file of metadata log ``log`` (``offsets``, ``commits``,
    ``_spark_metadata``): the object at ``<log>/N`` (or ``N.compact``), or, for the manifest
    strategy, a record of ``<log>``'s manifest."""
    if not 200 <= event.status < 300:
        return False
    if event.op in ("PUT", "COPY", "MPU_COMPLETE") and re.search(rf"(^|/){log}/\d+(\.compact)?$", event.key):
        return True
    return event.op == "PUT" and re.search(rf"(^|/){log}/_manifest/r/\d+$", event.key) is not None


@dataclasses.dataclass(frozen=True)
class CrashPoint:
    """Where in a query's life the lab kills the driver: after a seeded random delay
    (``random_delay``); as soon as the metering proxy has recorded a request that ``match``es
    (polled: the kill lands a few milliseconds after that request's answer); or inside a request:
    ``inside(prefix)`` names ``(op, key pattern)`` pairs, and the proxy itself kills the driver
    when the first request matching one of them arrives, before forwarding it
    (``infra.faults.Kill``), so the store never sees it."""

    name: str
    description: str
    match: Callable[[Event], bool] | None = None
    random_delay: bool = False
    stateful_only: bool = False
    inside: Callable[[str], tuple[tuple[str, str], ...]] | None = None

    def applies_to(self, workload: Workload) -> bool:
        if workload.points is not None:
            return self.name in workload.points
        return (workload.stateful or not self.stateful_only) and self.name not in ONLY_FOR_THEIR_WORKLOAD


CRASH_POINTS = {p.name: p for p in (
    CrashPoint("random", "a seeded random delay, anywhere in a batch", random_delay=True),
    CrashPoint("after-offsets", "offsets/N stored, commits/N not yet", lambda e: publishes(e, "offsets")),
    CrashPoint("during-state-upload", "one state file of the batch stored, the batch not committed",
               lambda e: e.area == "state" and e.op in WRITES, stateful_only=True),
    CrashPoint("after-sink-commit", "the sink committed the batch (_spark_metadata/N or _SUCCESS), "
               "commits/N not yet",
               lambda e: publishes(e, "_spark_metadata") or (e.op == "PUT" and 200 <= e.status < 300
                                                             and e.key.endswith("/_SUCCESS"))),
    # The request that publishes offsets/N: rename's COPY of its staged temp file, direct's and
    # conditional's PUT of the file itself, manifest's PUT of the record naming its staged object.
    CrashPoint("inside-publish", "inside the manager call writing offsets/N, at the request that "
               "publishes it (after rename's and manifest's staging)",
               inside=lambda prefix: (("COPY", rf"^{re.escape(prefix)}/checkpoint/offsets/\d+$"),
                                      ("PUT", rf"^{re.escape(prefix)}/checkpoint/offsets/(\d+|_manifest/r/\d+)$"))),
    # manifest compacts each directory's records every 10; the others' compaction is the file
    # sink's _spark_metadata N.compact (every 10 batches), through the strategy.
    CrashPoint("during-compaction", "at the write of a compaction: a manifest compact, or the file "
               "sink's _spark_metadata N.compact",
               inside=lambda prefix: (("PUT", rf"^{re.escape(prefix)}/.*/_manifest/c/\d+$"),
                                      ("PUT", rf"^{re.escape(prefix)}/output/_spark_metadata/\d+\.compact$"),
                                      ("COPY", rf"^{re.escape(prefix)}/output/_spark_metadata/\d+\.compact$"))),
    CrashPoint("during-multipart-upload", "a sink file's multipart upload started, at its first part",
               inside=lambda prefix: (("MPU_PART", rf"^{re.escape(prefix)}/output/part-"),)),
)}
#: Points measured only with the workloads that name them (``Workload.points``).
ONLY_FOR_THEIR_WORKLOAD = ("during-multipart-upload",)
#: Each cycle's crash point in turn, from those that apply to the workload.
DEFAULT_POINTS = ("random", "after-offsets", "during-state-upload", "after-sink-commit", "inside-publish",
                  "during-compaction", "during-multipart-upload")
RANDOM_DELAY_S = (0.0, 3.0)  # the random point's delay, uniform, after the lab starts watching
WAIT_LIMIT_S = 60.0  # a point whose request never comes: killed then anyway, ``landed`` False
RESTART_LIMIT_S = 300.0  # a restart with no committed batch by then failed
POLL_S = 0.003
