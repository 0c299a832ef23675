"""The crash lab's workloads and crash points: where a driver is killed (some inside a request:
the metering proxy kills it as the request arrives), and the lab's time limits."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from ckptbench.config import ASYNC_PROGRESS
from infra.s3ops import Event

IGNORE_MISSING = "spark.sql.files.ignoreMissingFiles"

# -- workloads ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """A query ``ckptbench.harness.query_process`` runs (``ckptbench.harness.workloads`` builds it) and what its output
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
    #: Its sink (``SINKS``): where the output goes and how a batch shows there.
    sink: str = "file"

    @property
    def atomic_batches(self) -> bool:
        """A batch shows in the output whole or not at all; else each task's rows show on their
        own, so a batch past the last commit can be partly written until a restart re-runs it."""
        return self.sink != "foreach"


#: ``file``: Spark's parquet file sink under the series' prefix, a batch published by its
#: ``_spark_metadata`` log; ``foreachBatch``: parquet appended under the prefix by a foreachBatch
#: function, no log; ``foreach``: a Python ForeachWriter's text files (``ckptbench.harness.query_process.EpochFiles``)
#: in a directory of the lab's own on this machine (the drivers run here, in local mode), not on the
#: store: no request of the sink is among the proxy's, so no crash point lands inside one.
SINKS = ("file", "foreachBatch", "foreach")
#: The crash points of the foreach workloads: those a sink with no log and no request can meet.
FOREACH_POINTS = ("random", "after-offsets", "after-skipped-offsets", "inside-publish", "inside-commit")

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
             exactly_once=False, sink="foreachBatch"),
    # The sink async progress tracking accepts on Spark 4.x (3.5 refuses it). Idempotent per
    # (partition, epoch), as Spark's ForeachWriter contract has it; but a restart under async
    # progress tracking re-runs every batch since the last offsets it wrote as ONE batch, under the
    # id of the last (Spark: offset ranges change on a failure), so their rows are written again
    # under another epoch: twice in the output (``after-skipped-offsets`` kills where this happens).
    Workload("stateless-foreach", "rate-micro-batch -> foreach: a ForeachWriter writing each (partition, epoch) "
             "as one file, replaced whole on a replay", False, "floor(value / {rows})", lambda batch, rows: rows,
             points=FOREACH_POINTS, sink="foreach"),
    Workload("unsafe-foreach-writer", "rate-micro-batch -> foreach: a ForeachWriter appending to one file per "
             "partition (NOT idempotent, on purpose)", False, "floor(value / {rows})", lambda batch, rows: rows,
             exactly_once=False, points=FOREACH_POINTS, sink="foreach"),
)}
#: The workloads measured by default (the others: ``wide`` for its crash point, ``stateless-foreach`` for
#: the configurations async progress tracking takes, and the broken ones to test the verifier).
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
    (``infra.faults.Kill``), so the store never sees it.

    ``confirm(before, batch)``: a request that ``match``es and stores ``offsets/<batch>`` kills
    only if ``confirm`` holds, ``before`` being the batch ids whose offsets the proxy saw stored
    since the lab started watching (for a window no request marks alone; read from the requests,
    no listing: a listing takes longer than some windows last). ``needs_option``: a query option
    (a lever's, ``config.LEVERS``) without which the window never comes, so a series whose
    configuration lacks it skips the point."""

    name: str
    description: str
    match: Callable[[Event], bool] | None = None
    random_delay: bool = False
    stateful_only: bool = False
    inside: Callable[[str], tuple[tuple[str, str], ...]] | None = None
    confirm: Callable[[set[int], int], bool] | None = None
    needs_option: str | None = None

    def applies_to(self, workload: Workload, options: dict | None = None) -> bool:
        """Whether the point is measured with ``workload`` run with query ``options`` (None: any)."""
        if options is not None and self.needs_option is not None and self.needs_option not in options:
            return False
        if workload.points is not None:
            return self.name in workload.points
        return (workload.stateful or not self.stateful_only) and self.name not in ONLY_FOR_THEIR_WORKLOAD


def skipped_before(before: set[int], batch: int) -> bool:
    """``batch``'s offsets follow batches whose offsets were never stored: ``before`` holds an
    earlier batch, and the latest of them is not ``batch - 1``."""
    earlier = [b for b in before if b < batch]
    return bool(earlier) and batch - max(earlier) >= 2


CRASH_POINTS = {p.name: p for p in (
    CrashPoint("random", "a seeded random delay, anywhere in a batch", random_delay=True),
    CrashPoint("after-offsets", "offsets/N stored, commits/N not yet", lambda e: publishes(e, "offsets")),
    # Async progress tracking writes offsets only once an interval: a kill after one that follows
    # batches whose own offsets were never written lands where the restart re-runs those batches
    # with it as one batch, under its id. Where every batch is slower than the interval, each one's
    # offsets are written and the point never comes. The first offsets stored after the lab starts
    # watching is the baseline: the kill comes at a later one.
    CrashPoint("after-skipped-offsets", "offsets/N stored after batches whose offsets were never written (async "
               "progress tracking's), commits/N not yet", lambda e: publishes(e, "offsets"),
               confirm=skipped_before, needs_option=ASYNC_PROGRESS),
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
    # The request that stores commits/N (as inside-publish's for offsets/N), the batch's output
    # already written: the restart re-runs batch N, so a sink that is not idempotent writes it twice.
    # Not batch 0's: the lab starts watching once batch 0 is reported, which async progress
    # tracking does before its commits/0 is stored.
    CrashPoint("inside-commit", "inside the manager call writing commits/N (N > 0), at the request that "
               "publishes it: the batch's output written, its commit not",
               inside=lambda prefix: (
                   ("COPY", rf"^{re.escape(prefix)}/checkpoint/commits/[1-9]\d*$"),
                   ("PUT", rf"^{re.escape(prefix)}/checkpoint/commits/([1-9]\d*|_manifest/r/[1-9]\d*)$"))),
    CrashPoint("during-multipart-upload", "a sink file's multipart upload started, at its first part",
               inside=lambda prefix: (("MPU_PART", rf"^{re.escape(prefix)}/output/part-"),)),
)}
#: Points measured only with the workloads that name them (``Workload.points``).
ONLY_FOR_THEIR_WORKLOAD = ("during-multipart-upload",)
#: Each cycle's crash point in turn, from those that apply to the workload. ``after-skipped-offsets``
#: and ``inside-commit`` are chosen by name (``crashlab.CONFIGURATION_POINTS``): in Spark's own
#: configuration ``after-offsets`` and ``after-sink-commit`` kill in the same windows.
DEFAULT_POINTS = ("random", "after-offsets", "during-state-upload", "after-sink-commit", "inside-publish",
                  "during-compaction", "during-multipart-upload")
RANDOM_DELAY_S = (0.0, 3.0)  # the random point's delay, uniform, after the lab starts watching
# A point whose request never comes: killed then anyway, ``landed`` False. A guard: the wait ends
# at the request, and a compaction's comes up to ten batches on, seconds each on a loaded machine.
WAIT_LIMIT_S = 300.0
RESTART_LIMIT_S = 300.0  # a restart with no committed batch by then failed
POLL_S = 0.003
