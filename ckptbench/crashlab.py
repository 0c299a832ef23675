"""The crash lab: does each checkpoint strategy keep exactly-once when the driver is killed?

A driver is a child process (``ckptbench.driver``: its own Python and JVM, settings and keys on
stdin) running one workload with one strategy on one checkpoint and output, through the metering
proxy. The lab:

- **crash cycles** (``series``): kill the driver with SIGKILL (to its whole process group, the JVM
  included) at a crash point, restart it on the same checkpoint and output, wait for the
  restarted query's first committed batch, verify; repeat. After a clean stop at the end, verify
  again and count what was left behind.
- **two writers** (``two_writers``): a zombie after failover. A second driver starts on a
  checkpoint a first one is still running on (after its first few batches, or together with it:
  a job submitted twice, where both race for the same first files); both run until the second
  has committed a batch or failed, and a few seconds more; then both stop. Which failed, with
  what error, and whether the output and the logs survived (``classify``).

Crash points (``CRASH_POINTS``, one entry each): ``random`` (a seeded random delay); after a
request, polled every few milliseconds in the metering proxy's records (a kill lands after the
request's answer, a few milliseconds late): ``after-offsets`` (``offsets/N`` is stored: the kill
lands between ``offsets/N`` and ``commits/N``), ``during-state-upload`` (a state file of the batch
is stored, others are not yet), ``after-sink-commit`` (the sink has committed the batch,
``commits/N`` is not written); and inside a request, where the proxy itself kills the driver's
process group when the request arrives, before forwarding it (``infra.faults.Kill``), so the store
never sees it: ``inside-publish`` (inside the manager call writing ``offsets/N``, at the request
that publishes it: after rename's and manifest's staging), ``during-compaction`` (the write of a
manifest compact or of the file sink's ``_spark_metadata/N.compact``) and
``during-multipart-upload`` (a sink file's first part, with the ``wide`` workload, whose files are
multipart uploads). Adding one is one entry. A run of many cycles may be split in parts
(``CrashPlan.in_part``, ``crashlab --part K/N``); ``results.read`` merges the parts' records.

Verification (``verify``) reads what a user would: the sink through Spark
(``spark.read.parquet(output)``, which trusts ``_spark_metadata``), in a SparkSession switched to
the strategy (the ``manifest`` strategy's logs can only be read through it), and the last
committed batch from ``commits/`` through the strategy's own ``CheckpointFileManager``. The
workloads' input is replayable and every output value names its batch (``Workload.batch_sql``),
so it counts duplicated rows, rows lost from batches ``0..last`` and batches only partly visible.

Clocks: ``time.time()`` on one host for the driver's events and the proxy's requests. A restart's
JVM start (spawn to SparkSession up) is recorded apart from its recovery, which runs from just
before the restarted query's ``start()`` to the end of the request that stored its first
``commits/N``; the recovery's requests are the proxy's events in that window. Every random choice
comes from ``seed`` (recorded in each row and in the environment).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import ckpt_impls
from infra.faults import Kill
from infra.net import ending_with_us, live_processes, proc_stat
from infra.s3ops import Event

from . import progress, results
from .driver import Config, StoreSpec
from .spark import settings_set

ROOT = Path(__file__).resolve().parent.parent
IGNORE_MISSING = "spark.sql.files.ignoreMissingFiles"

# -- workloads ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    """A query ``ckptbench.driver`` runs (``ckptbench.workloads`` builds it) and what its output
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


# -- drivers ---------------------------------------------------------------------------------


class DriverGone(RuntimeError):
    """A driver ended (or timed out) before the event waited for."""


class Driver:
    """A ``ckptbench.driver`` child in a process group of its own (so a SIGKILL to the group takes
    its JVM too), reached through its stdin and stdout. Its stderr (Spark's log) goes to a file.

    The group stays in the lab's session: where Linux schedules by session (autogroup), a session
    of its own would give each driver as much CPU as everything else, and a nice value set on the
    lab would not reach its drivers."""

    def __init__(self, config: Config, log: Path) -> None:
        self.config, self.log = config, log
        # Spark's scratch space (its copies of the jars: 185 MiB a driver) and the JVM's temp files
        # (the native libraries snappy and lz4 unpack, Spark's artifact directory) in a directory
        # of the driver's own: a killed JVM never removes them, so ``kill`` does.
        self.local_dir = Path(tempfile.mkdtemp(prefix="spark-local-", dir=log.parent))
        tmpdir = f"-Djava.io.tmpdir={self.local_dir}"
        submit_opts = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), tmpdir]))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               "SPARK_LOCAL_DIRS": str(self.local_dir), "SPARK_SUBMIT_OPTS": submit_opts}
        self.spawned = time.time()
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(ending_with_us([sys.executable, "-m", "ckptbench.driver"]),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         process_group=0, env=env)
        self.proc.stdin.write(config.to_json() + "\n")  # the keys travel here, never in argv
        self.proc.stdin.flush()
        self.events: list[dict] = []
        self._queue: queue.SimpleQueue[dict] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.events.append(event)
            self._queue.put(event)
        self._queue.put({"event": "exit", "t": time.time()})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def first(self, name: str) -> dict | None:
        return next((e for e in self.events if e["event"] == name), None)

    def wait(self, name: str, timeout: float) -> dict:
        """The next event ``name``; ``DriverGone`` (saying why) if the driver fails, ends or takes
        longer than ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DriverGone(f"no {name} within {timeout:.0f}s") from None
            if event["event"] == name:
                return event
            if event["event"] == "failed":
                raise DriverGone(event["error"])
            if event["event"] == "exit":
                raise DriverGone(f"the driver exited (status {self.proc.wait()}) before {name}: {self.stderr_tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def failure(self) -> str | None:
        event = self.first("failed")
        return event["error"] if event else None

    def stderr_tail(self, lines: int = 1) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        errors = [line for line in text if "Error" in line or "Exception" in line] or text
        return " | ".join(errors[-lines:])[:300]

    def processes(self) -> list[int]:
        """The live processes of the driver's group: itself and its JVM (and whatever they started)."""
        return live_processes(group=self.proc.pid)

    def kill(self) -> float:
        """SIGKILL to the whole process group, then wait until the driver and its JVM are gone;
        returns when the signal was sent."""
        jvm = (self.first("ready") or {}).get("jvm_pid")
        t = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 30
        while jvm and (stat := proc_stat(jvm)) is not None and stat[1] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        shutil.rmtree(self.local_dir, ignore_errors=True)
        return t

    def go(self) -> None:
        """Start the query of a driver started with ``hold``."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def ask_to_stop(self) -> None:
        """``stop`` on stdin, then stdin closed; returns at once."""
        if self.alive():
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()

    def stop(self, timeout: float = 120) -> None:
        """Ask for a clean stop (``stop`` on stdin); kill the group if it takes longer than ``timeout``."""
        if self.alive():
            self.ask_to_stop()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self.kill()


# -- reading what a user would read ------------------------------------------------------------


def log_ids(spark, strategy: str, url: str) -> list[int]:
    """The batch ids in the metadata log at ``url`` (``.../commits``, ``.../offsets``), as the
    strategy's manager lists them (temp files and others left out)."""
    fm, path = ckpt_impls.manager(spark, url, strategy), spark._jvm.org.apache.hadoop.fs.Path(url)
    if not fm.exists(path):
        return []
    names = [s.getPath().getName() for s in fm.list(path, spark._jvm.org.apache.hadoop.fs.GlobFilter("[0-9]*"))]
    return sorted(int(n) for n in names if n.isdigit())


def last_committed(spark, strategy: str, checkpoint: str) -> int:
    """The last batch id in ``commits/``; -1 if none."""
    return max(log_ids(spark, strategy, f"{checkpoint}/commits"), default=-1)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the output holds against the committed batches ``0..last``.

    ``duplicates``: rows beyond the first of each value (anywhere in the output). ``lost``: values
    of batches ``0..last`` missing. ``partial``: batches only partly visible (among ``0..last``
    while a writer runs; also the batch after it at rest, when the sink may be a batch ahead of
    ``commits/``). ``unexpected``: rows at rest from batches past that one.
    """

    last: int
    rows: int
    duplicates: int
    lost: int
    partial: int
    unexpected: int

    @property
    def exactly_once(self) -> bool:
        return not (self.duplicates or self.lost or self.partial or self.unexpected)


def output_counts(spark, strategy: str, workload: Workload, output: str,
                  rows_per_batch: int) -> dict[int, tuple[int, int]]:
    """``{batch: (rows, distinct values)}`` of the sink's output read through Spark (one scan,
    counted here: a Spark aggregation would add two shuffle stages to every check)."""
    from pyspark.errors import AnalysisException

    ckpt_impls.use(spark, strategy)
    try:
        frame = spark.read.schema("value long").parquet(output)
    except AnalysisException as e:
        if "PATH_NOT_FOUND" in str(e) or "Path does not exist" in str(e):
            return {}
        raise
    batch = workload.batch_sql.format(rows=rows_per_batch)
    # A data file the sink's log lists but the store lost is lost rows, not a failed check. The
    # rows come through Arrow (DataFrame.toArrow is Spark 4.0+; toPandas over Arrow is in 3.5 too).
    with settings_set(spark, {IGNORE_MISSING: "true", "spark.sql.execution.arrow.pyspark.enabled": "true"}):
        table = frame.selectExpr(f"CAST({batch} AS long) AS batch", "value").toPandas()
    values: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for b, value in zip(table["batch"].tolist(), table["value"].tolist(), strict=True):
        values[b][value] += 1
    return {b: (sum(c.values()), len(c)) for b, c in values.items()}


def judge(counts: dict[int, tuple[int, int]], last: int, workload: Workload, rows_per_batch: int,
          at_rest: bool) -> Verdict:
    """The verdict on ``counts`` (``output_counts``) against committed batches ``0..last``; see
    ``Verdict``. Pure, so the rules are tested on their own."""
    duplicates = sum(n - d for n, d in counts.values())
    lost = partial = unexpected = 0
    for batch in range(last + 1):
        expected = workload.rows_in(batch, rows_per_batch)
        distinct = counts.get(batch, (0, 0))[1]
        lost += max(0, expected - distinct)
        partial += 0 < distinct < expected
        unexpected += max(0, distinct - expected)
    if at_rest:
        for batch, (_, distinct) in counts.items():
            if batch == last + 1:  # the sink may have committed the batch commits/ has not
                expected = workload.rows_in(batch, rows_per_batch)
                partial += 0 < distinct < expected
                unexpected += max(0, distinct - expected)
            elif batch > last + 1 or batch < 0:
                unexpected += distinct
    return Verdict(last, sum(n for n, _ in counts.values()), duplicates, lost, partial, unexpected)


def verify(spark, strategy: str, workload: Workload, base: str, rows_per_batch: int, at_rest: bool) -> Verdict:
    """Read ``commits/`` (first) and then the output under ``base`` and judge them. Safe while a
    writer runs (``at_rest`` False): batches committed after ``commits/`` was read are ignored but
    for duplicates, which are wrong whenever they are seen."""
    last = last_committed(spark, strategy, f"{base}/checkpoint")
    counts = output_counts(spark, strategy, workload, f"{base}/output", rows_per_batch)
    return judge(counts, last, workload, rows_per_batch, at_rest)


@dataclasses.dataclass(frozen=True)
class Leftovers:
    temp_objects: int  # Spark's rename temp files, .<name>.<uuid>.tmp
    orphan_files: int  # sink data files the sink's log does not list (NaN-like -1: no log to ask)
    pending_uploads: int  # multipart uploads never completed nor aborted
    objects: int  # every object under the prefix


def leftovers(spark, strategy: str, store, bucket: str, prefix: str, workload: Workload) -> Leftovers:
    """What a series left under ``prefix`` at rest, listed on the store itself (``store``: not
    through the proxy)."""
    s3 = store.client()
    keys = store.list_keys(bucket, prefix + "/")
    temps = [k for k in keys if ckpt_impls.TEMP_FILE.search(k)]
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix + "/").get("Uploads", [])
    orphans = -1
    if workload.exactly_once:  # a file sink: its log says which data files are the output
        output = f"{prefix}/output/"
        data = {k for k in keys if k.startswith(output) and not any(
            part.startswith(("_", ".")) for part in k[len(output):].split("/"))}
        ckpt_impls.use(spark, strategy)
        listed = set()
        if data:
            listed = {re.sub(r"^s3a://[^/]+/", "", f) for f in
                      spark.read.schema("value long").parquet(f"s3a://{bucket}/{output}").inputFiles()}
        orphans = len(data - listed)
    return Leftovers(len(temps), orphans, len(uploads), len(keys))


# -- the lab ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CrashPlan:
    cycles: int  # kill/restart cycles per strategy x workload
    workloads: tuple[str, ...]
    two_writers: tuple[str, ...]  # workloads of the two-writer runs
    two_writer_strategies: tuple[str, ...] | None = None  # None: every strategy measured
    #: The first driver's batches before the second starts; 0: both start together.
    two_writer_starts: tuple[int, ...] = (3,)
    rows_per_batch: int = 100
    multipart_cycles: int = 0  # cycles of the ``wide`` workload (the multipart-upload point) per strategy
    #: (K, N): this run is part K of N of the plan: its share of each series' cycles and of the
    #: two-writer runs (``part``); the parts' records merge on reading (``results.read``).
    part: tuple[int, int] = (1, 1)

    def series_cycles(self) -> list[tuple[str, int]]:
        """(workload, cycles) of each strategy's series in this part."""
        k, n = self.part
        share = [(w, c // n + (k <= c % n)) for w, c in
                 [*((w, self.cycles) for w in self.workloads), ("wide", self.multipart_cycles)]]
        return [(w, c) for w, c in share if c > 0]

    def two_writer_runs(self, strategies: list[str]) -> list[tuple[str, str, int]]:
        chosen = [s for s in strategies if self.two_writer_strategies is None or s in self.two_writer_strategies]
        every = [(strategy, workload, start) for start in self.two_writer_starts for workload in self.two_writers
                 for strategy in chosen]
        k, n = self.part
        return every[k - 1::n]

    def in_part(self, k: int, n: int) -> CrashPlan:
        if not 1 <= k <= n:
            raise ValueError(f"a part is K/N with 1 <= K <= N, not {k}/{n}")
        return dataclasses.replace(self, part=(k, n))


PLANS = {
    # CI: every benchmark once. One two-writer run: each costs two JVM starts.
    "smallest": CrashPlan(1, ("stateless",), ("stateless",), ("conditional",)),
    "quick": CrashPlan(2, ("stateless",), ("stateless",)),
    "full": CrashPlan(25, MEASURED_WORKLOADS, MEASURED_WORKLOADS, two_writer_starts=(3, 0), multipart_cycles=3),
}
#: Wall time per crash cycle, per series beyond its cycles (the first driver's start, the clean
#: stop, the checks at rest) and per two-writer run, in seconds: medians of the quick size on Ceph
#: RGW on this project's 2-core VM while other jobs loaded it (load average 10-17; 866 s in all).
#: ``expected_seconds`` uses them when no earlier record of the store says better.
CYCLE_S = 46.0
SERIES_OVERHEAD_S = 60.0
TWO_WRITERS_S = 70.0


def measured_times(previous: results.Results | None) -> tuple[float, float, float, str]:
    """(seconds per cycle, per series beyond its cycles, per two-writer run, where they come from):
    medians of an earlier record, else the constants above."""
    from . import metrics

    if previous is not None and len(previous.cycles) and "seconds" in previous.crash_series:
        cycles = previous.cycles.groupby("series").seconds.sum()
        series = previous.crash_series.set_index("series").seconds
        overhead = metrics.median((series - cycles.reindex(series.index, fill_value=0)).dropna())
        two = metrics.median(previous.two_writers.seconds) if len(previous.two_writers) else TWO_WRITERS_S
        return (metrics.median(previous.cycles.seconds), overhead, two,
                f"as measured by the run of {previous.environment.get('created', '?')}")
    return CYCLE_S, SERIES_OVERHEAD_S, TWO_WRITERS_S, "as measured when the lab was written"


def expected_seconds(plan: CrashPlan, strategies: list[str], previous: results.Results | None = None) -> float:
    cycle, overhead, two, _ = measured_times(previous)
    per_strategy = sum(cycles * cycle + overhead for _, cycles in plan.series_cycles())
    return len(strategies) * per_strategy + len(plan.two_writer_runs(strategies)) * two


class Lab:
    """Crash cycles and two-writer runs of drivers on ``store`` (a ``MeteredStore``: the drivers
    go through its proxy) in ``bucket``. ``spark`` is the lab's own session, which verifies; it
    must reach ``bucket`` (on the store itself, not through the proxy, so that its reads are not
    among the drivers' requests)."""

    def __init__(self, spark, store, bucket: str, recorder: results.Recorder, seed: int = 1,
                 rows_per_batch: int = 100, keep: bool = False, say=print) -> None:
        self.spark, self.store, self.bucket, self.recorder = spark, store, bucket, recorder
        self.seed, self.rows_per_batch, self.keep, self.say = seed, rows_per_batch, keep, say
        self.logs = Path(tempfile.mkdtemp(prefix="ckptbench-crashlab-"))
        self.drivers: list[Driver] = []

    def close(self) -> None:
        """Kill the drivers still alive and remove their logs (what the results need of a log, its
        error lines, was read into them while the driver ran)."""
        for driver in self.drivers:
            if driver.alive():
                driver.kill()
        shutil.rmtree(self.logs, ignore_errors=True)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def driver(self, strategy: str, workload: str, prefix: str, **extra) -> Driver:
        config = Config(strategy=strategy, workload=workload, bucket=self.bucket,
                        store=StoreSpec.of(self.store), checkpoint=f"s3a://{self.bucket}/{prefix}/checkpoint",
                        output=f"s3a://{self.bucket}/{prefix}/output", rows_per_batch=self.rows_per_batch,
                        conf=WORKLOADS[workload].conf, **extra)
        driver = Driver(config, self.logs / f"{prefix.replace('/', '_')}-{len(self.drivers)}.log")
        self.drivers.append(driver)
        return driver

    def _events(self, mark: int, prefix: str) -> tuple[list[Event], int]:
        events = self.store.proxy.events_since(mark)
        return [e for e in events if e.key.startswith(prefix + "/")], mark + len(events)

    def _watch(self, driver: Driver, point: CrashPoint, prefix: str, delay: float) -> tuple[bool, float]:
        """Wait for ``point`` (or its delay), then kill ``driver``: (landed, seconds waited)."""
        start = time.monotonic()
        if point.inside is not None:
            return self._kill_inside(driver, point, prefix), time.monotonic() - start
        mark = self.store.proxy.mark()
        landed = False
        while driver.alive():
            waited = time.monotonic() - start
            if point.random_delay:
                if waited >= delay:
                    landed = True
                    break
            else:
                events, mark = self._events(mark, prefix)
                if any(point.match(e) for e in events):
                    landed = True
                    break
            if waited >= WAIT_LIMIT_S:
                break
            time.sleep(POLL_S)
        driver.kill()
        return landed, time.monotonic() - start

    def _kill_inside(self, driver: Driver, point: CrashPoint, prefix: str) -> bool:
        """Have the proxy kill ``driver`` at the first request ``point.inside`` names (or kill it
        after ``WAIT_LIMIT_S``); whether the proxy's kill did it."""
        proxy = self.store.proxy
        seen = len(proxy.injections())
        try:
            for op, key in point.inside(prefix):
                proxy.inject(Kill(driver.pid, False, op, key))
            deadline = time.monotonic() + WAIT_LIMIT_S
            while driver.alive() and time.monotonic() < deadline:
                time.sleep(POLL_S)
        finally:
            proxy.clear_faults()  # before any restart: the rules that did not fire must not take the next driver
        driver.kill()
        return any(i.fault == "kill-before-forwarding" and i.key.startswith(prefix + "/")
                   for i in proxy.injections()[seen:])

    def _recovery(self, prefix: str, mark: int, t0: float, progress_end: float) -> tuple[float, int, float]:
        """From ``t0`` to the end of the request that stored the first ``commits/N`` (the batch's
        progress end if no such request is found): (ms, the requests in that window, their summed
        store-side ms: the part of the recovery spent waiting on the store, one request at a time)."""
        for _ in range(20):
            events, _ = self._events(mark, prefix)
            events = [e for e in events if e.start >= t0]
            commit = next((e for e in events if publishes(e, "commits")), None)
            if commit is not None:
                break
            time.sleep(0.05)
        end = commit.end if commit is not None else progress_end
        window = [e for e in events if e.end <= end]
        return (end - t0) * 1000, len(window), sum(e.duration for e in window) * 1000

    def series(self, strategy: str, workload: str, cycles: int, points=DEFAULT_POINTS, bar=None) -> int:
        """``cycles`` kill/restart cycles of ``strategy`` x ``workload`` on a fresh checkpoint and
        output; rows added to ``cycles`` and ``crash_series``. Returns the series number."""
        chosen = WORKLOADS[workload]
        points = [CRASH_POINTS[p] for p in points if CRASH_POINTS[p].applies_to(chosen)]
        if not points:
            raise ValueError(f"no crash point of {', '.join(points)} applies to workload {workload}")
        rng = random.Random(f"{self.seed}:{strategy}:{workload}")
        prefix = f"{self.store.run_prefix}crash/{strategy}-{workload}-{uuid.uuid4().hex[:8]}"
        base = f"s3a://{self.bucket}/{prefix}"
        number = len(self.recorder.rows["crash_series"])
        series_began = time.monotonic()
        row = {"series": number, "strategy": strategy, "workload": workload, "cycles": 0, "seed": self.seed,
               "rows_per_batch": self.rows_per_batch, "prefix": prefix, "error": None}
        driver = self.driver(strategy, workload, prefix)
        try:
            driver.wait("progress", RESTART_LIMIT_S)
            for cycle in range(cycles):
                point = points[cycle % len(points)]
                delay = rng.uniform(*RANDOM_DELAY_S)  # drawn every cycle: the sequence is the seed's
                if bar:
                    bar.set_postfix_str(f"{strategy} x {workload}: cycle {cycle + 1}/{cycles}, {point.name}")
                began = time.monotonic()
                landed, waited = self._watch(driver, point, prefix, delay)
                died = driver.failure()  # the query failed on its own before the crash point
                offsets = max(log_ids(self.spark, strategy, f"{base}/checkpoint/offsets"), default=-1)
                committed = last_committed(self.spark, strategy, f"{base}/checkpoint")
                mark = self.store.proxy.mark()
                driver = self.driver(strategy, workload, prefix)
                cycle_row = {"series": number, "strategy": strategy, "workload": workload, "cycle": cycle,
                             "crash_point": point.name, "seed": self.seed,
                             "delay_s": delay if point.random_delay else float("nan"), "landed": landed,
                             "wait_s": waited, "offsets_at_kill": offsets, "committed_at_kill": committed,
                             "first_batch": None, "jvm_start_ms": float("nan"), "recovery_ms": float("nan"),
                             "recovery_requests": None, "recovery_store_ms": float("nan"), "restart_ok": False,
                             "error": f"the query failed before the crash point: {_one_line(died)}" if died else None,
                             "duplicates": None, "lost": None, "partial": None,
                             "verified_through": None, "seconds": float("nan")}
                self.recorder.rows["cycles"].append(cycle_row)
                row["cycles"] += 1
                try:
                    ready = driver.wait("ready", RESTART_LIMIT_S)
                    cycle_row["jvm_start_ms"] = (ready["t"] - driver.spawned) * 1000
                    started = driver.wait("started", RESTART_LIMIT_S)
                    first = driver.wait("progress", RESTART_LIMIT_S)
                except DriverGone as e:
                    cycle_row["error"] = "; ".join(filter(None, [cycle_row["error"], _one_line(str(e))]))
                    row["error"] = f"cycle {cycle}: restart failed: {cycle_row['error']}"
                    cycle_row["seconds"] = time.monotonic() - began
                    if bar:
                        bar.update()
                    break
                recovery_ms, requests, store_ms = self._recovery(prefix, mark, started["t0"], first["end"])
                verdict = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=False)
                cycle_row.update(first_batch=first["batchId"], recovery_ms=recovery_ms, recovery_requests=requests,
                                 recovery_store_ms=store_ms,
                                 restart_ok=True, duplicates=verdict.duplicates, lost=verdict.lost,
                                 partial=verdict.partial, verified_through=verdict.last,
                                 seconds=time.monotonic() - began)
                if bar:
                    bar.update()
        except DriverGone as e:
            row["error"] = f"first start failed: {_one_line(str(e))}"
        finally:
            driver.stop()
        final = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=True)
        left = leftovers(self.spark, strategy, self.store.inner, self.bucket, prefix, chosen)
        row.update(last_batch=final.last, duplicates=final.duplicates, lost=final.lost, partial=final.partial,
                   unexpected=final.unexpected, **dataclasses.asdict(left),
                   seconds=time.monotonic() - series_began)
        self.recorder.rows["crash_series"].append(row)
        if not self.keep:
            self.store.inner.empty_bucket(self.bucket, prefix + "/")
        return number

    def two_writers(self, strategy: str, workload: str = "stateless", head_start: int = 3,
                    overlap_s: float = 5.0, bar=None) -> dict:
        """A second driver on the checkpoint and output a first is still running on (a zombie
        after failover), started after the first's ``head_start`` batches (0: both queries start
        together, a job submitted twice, so that both race for the same files from the first);
        both run until the second has committed a batch or failed, and ``overlap_s`` seconds more,
        then stop. A row of ``two_writers``, also returned."""
        chosen = WORKLOADS[workload]
        prefix = f"{self.store.run_prefix}crash/two-{strategy}-{workload}-{uuid.uuid4().hex[:8]}"
        base = f"s3a://{self.bucket}/{prefix}"
        if bar:
            bar.set_postfix_str(f"two writers: {strategy} x {workload}, head start {head_start}")
        began, mark = time.monotonic(), self.store.proxy.mark()
        first = self.driver(strategy, workload, prefix, hold=head_start == 0)
        # The second JVM starts alongside the first; its query waits for "go".
        second = self.driver(strategy, workload, prefix, hold=True)
        row = {"strategy": strategy, "workload": workload, "head_start": head_start, "seed": self.seed,
               "first_error": None,
               "second_error": None, "second_started": False, "first_batches": 0, "second_batches": 0,
               "verify_error": None}
        try:
            if head_start == 0:
                first.wait("ready", RESTART_LIMIT_S)
            for _ in range(head_start):
                first.wait("progress", RESTART_LIMIT_S)
            try:
                second.wait("ready", RESTART_LIMIT_S)
                if head_start == 0:
                    first.go()
                second.go()
                second.wait("started", RESTART_LIMIT_S)
                row["second_started"] = True
            except DriverGone:
                pass
            # Both run until the second has committed a batch or failed (its first batch can take
            # many seconds in a cold JVM), then ``overlap_s`` more.
            limit = time.monotonic() + RESTART_LIMIT_S
            while (time.monotonic() < limit and first.alive() and second.alive()
                   and second.first("progress") is None):
                time.sleep(0.1)
            deadline = time.monotonic() + overlap_s
            while time.monotonic() < deadline and (first.alive() or second.alive()):
                time.sleep(0.1)
        except DriverGone as e:
            row["first_error"] = _one_line(str(e))
        finally:
            drivers = (first, second)
            for driver in drivers:  # both asked at once: neither runs on alone while the other stops
                driver.ask_to_stop()
            for driver in drivers:
                driver.stop()
        row["first_error"] = row["first_error"] or _one_line(first.failure())
        went = second.first("ready") is not None and first.first("failed") is None
        row["second_error"] = _one_line(second.failure()) or (
            None if row["second_started"] or not went else _one_line(second.stderr_tail()))
        row["first_batches"] = sum(e["event"] == "progress" for e in first.events)
        row["second_batches"] = sum(e["event"] == "progress" for e in second.events)
        events, _ = self._events(mark, prefix)
        twice = overwritten_logs(events, self.store.inner, self.bucket, prefix,
                                 ckpt_impls.get(strategy).keys_mirror_paths)
        row["overwritten_logs"], row["overwritten_files"] = len(twice), ",".join(twice)[:300] or None
        try:
            verdict = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=True)
            row.update(duplicates=verdict.duplicates, lost=verdict.lost, partial=verdict.partial,
                       unexpected=verdict.unexpected, last_batch=verdict.last)
        except Exception as e:
            row.update(duplicates=None, lost=None, partial=None, unexpected=None, last_batch=None,
                       verify_error=_one_line(str(e)))
        row["outcome"] = classify(row)
        row["seconds"] = time.monotonic() - began
        self.recorder.rows["two_writers"].append(row)
        if bar:
            bar.update()
        if not self.keep:
            self.store.inner.empty_bucket(self.bucket, prefix + "/")
        return row


#: The errors of a query that found another writer's file where it meant to write its own.
CONFLICT = re.compile(r"concurrent|already exists|FileAlreadyExists|Race while writing|Multiple streaming"
                      r"|PreconditionFailed|412|CHECKPOINT_LOCATION_NOT_EMPTY", re.I)
OUTCOMES = ("clean-error", "silent-damage", "both-ran-no-damage-seen", "other-error")


def classify(row: dict) -> str:
    """``silent-damage``: the output is not exactly-once, unreadable, or a log file was written
    twice; else ``clean-error``: a query failed on the other's file (``CONFLICT``); else
    ``other-error``: a query failed otherwise; else ``both-ran-no-damage-seen``."""
    damaged = row["verify_error"] or row["overwritten_logs"] or any(
        row.get(k) for k in ("duplicates", "lost", "partial", "unexpected"))
    if damaged:
        return "silent-damage"
    errors = [e for e in (row["first_error"], row["second_error"]) if e]
    if any(CONFLICT.search(e) for e in errors):
        return "clean-error"
    return "other-error" if errors else "both-ran-no-damage-seen"


def overwritten_logs(events: list[Event], store, bucket: str, prefix: str, keys_mirror_paths: bool) -> list[str]:
    """Metadata log files (offsets, commits, _spark_metadata) stored more than once, relative to
    ``prefix``: a log file is written once, so a second successful write replaced the first (the
    proxy does not keep bodies, so whether the two differed is not known). Seen in the proxy's
    requests where keys mirror paths; for the manifest strategy, in the manifests' records (a
    ``put`` of a name already put and not deleted since)."""
    logs = ("offsets", "commits", "_spark_metadata")
    if keys_mirror_paths:
        writes: dict[str, int] = {}
        for e in events:
            if any(publishes(e, log) and "/_manifest/" not in e.key for log in logs):
                writes[e.key] = writes.get(e.key, 0) + 1
        return sorted(key[len(prefix) + 1:] for key, n in writes.items() if n > 1)
    from ckpt_impls import manifest_format

    s3, twice = store.client(), []
    logs = (f"{prefix}/checkpoint/offsets", f"{prefix}/checkpoint/commits", f"{prefix}/output/_spark_metadata")
    for directory in logs:
        live: set[str] = set()
        keys = sorted(store.list_keys(bucket, manifest_format.prefix(directory) + "r/"))
        for key in keys:
            text = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            for change in manifest_format.parse_record(text, int(key.rsplit("/", 1)[1])):
                if change[0] == "put":
                    if change[1] in live:
                        twice.append(f"{directory[len(prefix) + 1:]}/{change[1]}")
                    live.add(change[1])
                elif change[0] == "del":
                    live.discard(change[1])
                elif change[0] == "clear":
                    live.clear()
    return twice


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    return " ".join(text.strip().splitlines()[0].split())[:300]


# -- the experiment -----------------------------------------------------------------------------


def crashes(settings, strategies: list[str] | None = None, plan: CrashPlan | None = None,
            points=DEFAULT_POINTS, seed: int = 1, spark=None, say=print) -> results.Results:
    """Crash cycles (strategy x workload) and two-writer runs (per strategy), as ``plan`` (default:
    the settings' size) says, on the settings' store; written to ``settings.raw`` as the
    experiment ``crashes`` and returned. ``spark``: a session that reaches the store's bucket (one
    is started, and stopped, otherwise)."""
    from . import runs
    from .spark import session

    plan = plan or PLANS[settings.size]
    strategies = strategies or list(ckpt_impls.STRATEGIES)
    where = results.directory(settings.raw, settings.store, "crashes")
    try:
        previous = results.read(where)
    except (OSError, ValueError, KeyError):
        previous = None
    if plan.part != (1, 1):  # each part its own random choices, recorded
        seed = seed * 100 + plan.part[0]
    total_cycles = len(strategies) * sum(cycles for _, cycles in plan.series_cycles())
    pairs = plan.two_writer_runs(strategies)
    cycle, overhead, two, source = measured_times(previous)
    part = f" part {plan.part[0]} of {plan.part[1]}" if plan.part != (1, 1) else ""
    say(f"crash lab{part}: {total_cycles} crash cycles "
        f"and {len(pairs)} two-writer runs; expected about "
        f"{expected_seconds(plan, strategies, previous) / 60:.0f} min ({cycle:.0f} s per cycle, {overhead:.0f} s "
        f"more per strategy x workload, {two:.0f} s per two-writer run, {source})")
    sys.stdout.flush()
    recorder = results.Recorder()
    with runs.started_store(settings, needs_proxy="the crash lab") as (store, bucket), \
            contextlib.ExitStack() as stack:
        if spark is None:
            spark = session(strategies[0], {bucket: store.inner})
            stack.callback(spark.stop)

        # Taken at the start: the commit that ran, not the one checked out when a part is saved.
        env = results.environment(store, "crashes", settings.size, dataclasses.asdict(plan), seed=seed,
                                  points=list(points), spark_master="local[2]")

        def save(finished: bool) -> results.Results:
            """The record so far, written: after every series, so that a long run stopped (or out
            of time) keeps its finished series; ``finished`` says whether the plan was done."""
            return runs.save(recorder.results({**env, "finished": finished}), settings, plan.part)

        bar = progress.Recorder("crash lab", total_cycles + len(pairs), "cycle")
        with Lab(spark, store, bucket, recorder, seed=seed, rows_per_batch=plan.rows_per_batch, say=say) as lab:
            for workload, cycles in plan.series_cycles():
                for strategy in strategies:
                    lab.series(strategy, workload, cycles, points, bar=bar)
                    save(finished=False)
            for strategy, workload, start in pairs:
                lab.two_writers(strategy, workload, head_start=start, bar=bar)
        return save(finished=True)


crashes.timeout = 6 * 3600
