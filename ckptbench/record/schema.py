"""The schema of a record: one pyarrow schema per table, each column declared once, typed and
documented, and the schema version.

An experiment's record (``ckptbench.record.results.Results``) is an environment (what was measured
where, with which versions: ``environment.json``, with ``schema_version``) and a set of tables, each
a pandas DataFrame. Every measurement ckptbench makes lands in one first; ``measure``, ``report``,
``drift`` and every asv ``track_*`` read it back through ``ckptbench.metrics``.

Each column's field carries its doc, its unit where it has one, the schema version it appeared in
(``since``) and the value a record that lacks it reads (``default``; NA where none). Everything
else is derived from these schemas: the columns of each table in order (``TABLES``), their pandas
types (``dtype``), the check of recorded rows (``check_rows``), what a record read from disk or
built from rows is conformed to (``conform``), the version history (``history``) and the page
``docs/record-schema.md`` (``ckptbench.record.schema_page``). A column added to a table is one
field here: the recorder, the writer, the reader and the page follow.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import pandas as pd
import pyarrow as pa

from ckptbench.config import CRASHLAB, FAULTLAB

#: The schema records are written with. What each version changed is ``CHANGES`` and the ``since``
#: of the columns and tables.
SCHEMA_VERSION = 16
#: Versions this reader reads: an older record lacks the tables and columns added since, which read
#: as their defaults.
READABLE = tuple(range(1, SCHEMA_VERSION + 1))
#: Changes of a version that are not a new column or table.
CHANGES = {
    6: "the benchmark floor's ``memory`` requests include the state files it deleted",
    9: "the crash lab's and fault lab's records renamed: experiment ``crashes`` is ``crashlab``, "
       "``faults`` is ``faultlab`` (an older record's environment reads with the new name)",
}
#: Experiments renamed in a version: ``{version: {old name: new name}}``. A record older than the
#: version reads with the new name (``ckptbench.record.disk.read``).
RENAMED = {9: {"crashes": CRASHLAB, "faults": FAULTLAB}}

#: Spark's progress ``durationMs`` entries kept per batch (milliseconds).
DURATIONS = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets",
             "triggerExecution")
#: Who counted a request (``requests.source``), in the order ``Run`` prefers them. ``memory``: not a
#: request but a checkpoint file the benchmark floor's in-memory manager published (``ckpt_impls.FLOOR``).
SOURCES = ("proxy", "jvm", "memory")

INT, FLOAT, BOOL, TEXT = pa.int64(), pa.float64(), pa.bool_(), pa.string()


def column(name: str, kind: pa.DataType, doc: str, unit: str = "", *, nullable: bool = False, since: int = 1,
           default=None, pandas: str = "") -> pa.Field:
    """A column: ``nullable`` if a value may be missing (NA, NaN, None); ``default``: what a record
    that lacks it reads (None: NA); ``pandas``: its pandas dtype where it is not the one ``kind`` and
    ``nullable`` give (``"string"``: text whose missing value is ``pd.NA``, not None)."""
    meta = {"doc": doc, "unit": unit, "since": str(since),
            "pandas": pandas or _pandas_dtype(kind, nullable)}
    if default is not None:
        meta["default"] = json.dumps(default)
    return pa.field(name, kind, nullable=nullable, metadata=meta)


def _pandas_dtype(kind: pa.DataType, nullable: bool) -> str:
    if kind == INT:
        return "Int64" if nullable else "int64"
    if kind == BOOL:
        return "boolean" if nullable else "bool"
    return "float64" if kind == FLOAT else "object"


def table(doc: str, *fields: pa.Field, since: int = 1) -> pa.Schema:
    """A table of ``fields`` (``column``), what one row is (``doc``), in records since ``since``."""
    return pa.schema(fields, metadata={"doc": doc, "since": str(since)})


#: The ``run`` column of a table of runs' rows.
_RUN = column("run", INT, "the run (``runs.run``)")


_NOT_CHECKED = "NA: not checked"

SCHEMAS: dict[str, pa.Schema] = {
    "runs": table(
        "One row per streaming query.",
        column("run", INT, "the run's number in its record, which the other tables' ``run`` name"),
        column("strategy", TEXT, "the checkpoint strategy (``ckpt_impls.STRATEGIES``, or the benchmark floor)"),
        column("workload", TEXT, "the workload"),
        column("keys", INT, "the workload's key count", "count"),
        column("prefix", TEXT, "the key prefix the run's objects were under"),
        column("error", TEXT, "None, or why the run failed (one line); Spark's reason where ``refused``",
               nullable=True),
        column("peak_rss_mib", FLOAT, "the driver's peak resident memory (NaN: not measured)", "MiB", nullable=True),
        column("temp_objects", INT, "temp objects (``.<name>.<uuid>.tmp``) the run left under its prefix", "count"),
        column("settings", TEXT, "the checkpoint settings in force as the query started "
               "(``config.CHECKPOINT_SETTINGS``: state store provider, changelog, file checksums, format version, "
               "retention...), a JSON object; a setting unset with no default this Spark knows is null",
               since=3, default="{}"),
        column("preset", TEXT, "the configuration of Spark's own levers the run had (``config.presets_for``)",
               since=8, default="default"),
        column("refused", BOOL, "whether Spark refused that configuration for the workload (or this Spark lacks "
               "a lever of it), ``error`` then holding Spark's reason: a result, not a failed run",
               since=8, default=False),
        column("repeat", INT, "which of its configuration's independent queries the run is (0, 1...: "
               "``config.Plan.repeats``, run in mirrored rounds); ``Results.runs_of`` pools them, and the "
               "reproducibility figure decides on each half of them (``decide.halves``); 0 where one query was run",
               since=10, default=0),
        column("task_slots", INT, "the tasks its session could run at once: a local master's threads, "
               "``config.SLOTS_PER_CORE`` per core (NA: a cluster's, set by its executors' cores)", "count",
               nullable=True, since=13),
        column("cpu_s", FLOAT, "CPU time, user and system, the driver's JVM spent over the run's measured batches; "
               "in local mode its tasks' too (NaN: not measured, as off local mode)", "s", nullable=True,
               since=13),
        column("others_cpu", FLOAT, "the share of the machine's CPU (every core's, 0 to 1) that processes other "
               "than the benchmark's own (its Python process and every process it started: Spark's JVM, the store, "
               "the proxy) took over the run's measured batches (``harness.machine``); NaN: not measured",
               "share", nullable=True, since=14)),
    "batches": table(
        "One row per micro-batch of a run, as Spark's progress reported it.",
        _RUN,
        column("batch_id", INT, "Spark's ``batchId``", nullable=True),
        column("phase", TEXT, "``warmup`` or ``measured``"),
        column("timestamp", FLOAT, "the batch's start (its progress ``timestamp``), epoch seconds", "s"),
        *[column(name, FLOAT, f"Spark's own ``durationMs.{name}`` (NaN: Spark did not report one)", "ms",
                 nullable=True) for name in DURATIONS],
        column("state_commit_ms", FLOAT, "the state operators' commit time, summed (NaN: no state operator)", "ms",
               nullable=True),
        column("state_rows", FLOAT, "the rows the state operators held (``numRowsTotal``), summed (NaN: no state "
               "operator)", "count", nullable=True),
        column("input_rows", INT, "the batch's ``numInputRows``", "count")),
    "requests": table(
        "One row per S3 request of a run. A run usually has both a ``proxy`` and a ``jvm`` count, each a full "
        "count on its own: never add them up (``Run`` shows one source at a time).",
        _RUN,
        column("batch_id", INT, "the batch whose window the request started in (NA: between batches, such as "
               "state store maintenance)", nullable=True),
        column("start", FLOAT, "when the request started, epoch seconds", "s"),
        column("ms", FLOAT, "its latency: store-side for the proxy's, client-side for the JVM's", "ms"),
        column("method", TEXT, "the HTTP method"),
        column("op", TEXT, "the S3 operation (PUT, GET, HEAD, LIST, COPY, DELETE, MPU_PART...)"),
        column("area", TEXT, "the checkpoint area of its key (offsets, commits, state...)"),
        column("bucket", TEXT, "the bucket"),
        column("key", TEXT, "the object key"),
        column("status", INT, "the HTTP status of the response"),
        column("bytes_in", INT, "payload bytes sent to the store", "bytes"),
        column("bytes_out", INT, "payload bytes the store sent back", "bytes"),
        column("source", TEXT, "who counted it (``SOURCES``): ``proxy``, the metering proxy (latency store-side); "
               "``jvm``, Spark's JVMs (``ckptbench.harness.jvm_requests``; client-side latency, one row per HTTP "
               "attempt); ``memory``, a file the benchmark floor's in-memory manager published", since=2,
               default="proxy"),
        column("origin", TEXT, "for the JVM's: the JVM that sent it (``driver``, or an executor's id, whose host "
               "the environment's ``executor_hosts`` names); NA for the proxy's", nullable=True, since=5)),
    "samples": table(
        "Requests timed without Spark: the store's floor, COPY against size, the metering proxy's paired "
        "overhead.",
        column("experiment", TEXT, "what the sample is of (``floor``, ``overhead``, ``copy``...)"),
        column("op", TEXT, "the S3 operation"),
        column("route", TEXT, "``proxy``: timed by the proxy; ``direct``/``proxied``: client-timed, in pairs at "
               "equal ``seq``; ``jvm``: timed in Spark's JVM"),
        column("size", INT, "the object's size", "bytes"),
        column("seq", INT, "the sample's number in its series"),
        column("ms", FLOAT, "the request's latency", "ms")),
    "compactions": table(
        "One row per compaction of a log history (``history`` batches long).",
        column("history", INT, "the history's length", "batches"),
        column("log", TEXT, "whose log: ``manifest`` or ``spark`` (the file sink's ``_spark_metadata``)"),
        column("batch", INT, "the batch the compaction came at"),
        column("number", INT, "the compaction's number"),
        column("ms", FLOAT, "the store-side time of its requests, summed", "ms"),
        column("requests", INT, "its requests", "count"),
        column("bytes", INT, "the compacted file's size", "bytes"),
        column("entries", INT, "the entries the compacted file holds", "count"),
        column("garbage_staged", INT, "staged objects the compaction listed as garbage", "count")),
    "cycles": table(
        "One row per crash cycle of the crash lab (``ckptbench.experiments.crashlab``): the driver killed at a "
        "crash point, restarted, and checked.",
        column("series", INT, "the series (``crash_series.series``)"),
        column("strategy", TEXT, "the checkpoint strategy"),
        column("workload", TEXT, "the workload"),
        column("cycle", INT, "the cycle's number in its series"),
        column("crash_point", TEXT, "where the driver was killed"),
        column("seed", INT, "the lab's seed"),
        column("delay_s", FLOAT, "the random delay before the kill (NaN: a point with none)", "s", nullable=True),
        column("landed", BOOL, "the point was reached, not the wait limit"),
        column("wait_s", FLOAT, "how long the kill waited", "s", nullable=True),
        column("offsets_at_kill", INT, "the last batch in ``offsets/`` at the kill", nullable=True),
        column("committed_at_kill", INT, "the last batch in ``commits/`` at the kill", nullable=True),
        column("first_batch", INT, "the restarted query's first batch", nullable=True),
        column("jvm_start_ms", FLOAT, "the restart's spawn to its SparkSession up", "ms", nullable=True),
        column("recovery_ms", FLOAT, "the restarted query's start to its first stored ``commits/N``", "ms",
               nullable=True),
        column("recovery_requests", INT, "the requests in that window", "count", nullable=True),
        column("recovery_store_ms", FLOAT, "their summed store-side time", "ms", nullable=True),
        column("restart_ok", BOOL, "whether the restart got to its first batch"),
        column("error", TEXT, "why the cycle went wrong (None: it did not)", nullable=True, pandas="string"),
        column("duplicates", INT, f"duplicate rows found by the check after the restart ({_NOT_CHECKED})", "count",
               nullable=True),
        column("lost", INT, f"rows lost ({_NOT_CHECKED})", "count", nullable=True),
        column("partial", INT, f"batches only partly visible ({_NOT_CHECKED})", "count", nullable=True),
        column("verified_through", INT, f"the check covered the committed ``0..verified_through`` ({_NOT_CHECKED})",
               nullable=True),
        column("seconds", FLOAT, "the cycle's length", "s", nullable=True)),
    "crash_series": table(
        "One row per strategy x workload series of crash cycles: the check at rest after its clean stop and "
        "what was left under its prefix (NA where Spark refused the configuration: nothing ran).",
        column("series", INT, "the series' number in its record"),
        column("strategy", TEXT, "the checkpoint strategy"),
        column("workload", TEXT, "the workload"),
        column("cycles", INT, "the cycles run", "count"),
        column("seed", INT, "the lab's seed"),
        column("rows_per_batch", INT, "rows the source adds per batch", "count"),
        column("prefix", TEXT, "the key prefix of the series' objects"),
        column("error", TEXT, "why the series stopped early, or ``refused: `` and Spark's reason (None: it did "
               "not)", nullable=True, pandas="string"),
        column("last_batch", INT, "the last committed batch at rest", nullable=True),
        column("duplicates", INT, "duplicate rows at rest", "count", nullable=True),
        column("lost", INT, "rows lost at rest", "count", nullable=True),
        column("partial", INT, "batches only partly visible at rest", "count", nullable=True),
        column("unexpected", INT, "rows at rest from batches past the last committed", "count", nullable=True),
        column("temp_objects", INT, "Spark's rename temp files left", "count", nullable=True),
        column("orphan_files", INT, "sink data files the sink's log does not list (-1: a sink with no log)",
               "count", nullable=True),
        column("pending_uploads", INT, "multipart uploads never completed nor aborted", "count", nullable=True),
        column("objects", INT, "every object left under the prefix", "count", nullable=True),
        column("seconds", FLOAT, "the series' length", "s", since=3),
        column("preset", TEXT, "the configuration of Spark's own levers it ran with", since=8, default="default")),
    "two_writers": table(
        "One row per run of two drivers on one checkpoint, the second started after ``head_start`` batches of "
        "the first.",
        column("strategy", TEXT, "the checkpoint strategy"),
        column("workload", TEXT, "the workload"),
        column("head_start", INT, "the first driver's batches before the second started (0: together)", "batches",
               since=3),
        column("seed", INT, "the lab's seed"),
        column("first_error", TEXT, "the first driver's error (its first line)", nullable=True, pandas="string"),
        column("second_error", TEXT, "the second driver's error (its first line)", nullable=True, pandas="string"),
        column("second_started", BOOL, "whether the second driver's query started"),
        column("first_batches", INT, "batches the first driver ran", "count"),
        column("second_batches", INT, "batches the second driver ran", "count"),
        column("verify_error", TEXT, "why the check at rest could not read the output (None: it could)",
               nullable=True, pandas="string"),
        column("overwritten_logs", INT, "metadata log files written twice", "count"),
        column("overwritten_files", TEXT, "those files, comma-separated", nullable=True, since=3, pandas="string"),
        column("duplicates", INT, "duplicate rows at rest", "count", nullable=True),
        column("lost", INT, "rows lost at rest", "count", nullable=True),
        column("partial", INT, "batches only partly visible at rest", "count", nullable=True),
        column("unexpected", INT, "rows at rest from batches past the last committed", "count", nullable=True),
        column("last_batch", INT, "the last committed batch at rest", nullable=True),
        column("outcome", TEXT, "``silent-damage``, ``clean-error``, ``other-error`` or "
               "``both-ran-no-damage-seen`` (``crashlab.verify.classify``)"),
        column("seconds", FLOAT, "the run's length", "s", since=3),
        column("race", TEXT, "the file kind both drivers were held at until both wrote it (a ``Rendezvous``, "
               "started together); None for a zombie run", nullable=True, since=7, pandas="string"),
        column("race_met", BOOL, "whether the two writes of that file met (false: one driver stopped before it, "
               "Spark's own check or an error, so the run raced nothing; NA: not raced)", nullable=True, since=7)),
    "races": table(
        "One row per round of the race (``ckptbench.experiments.race``): two managers of a strategy creating "
        "one fresh file of a kind at once, held by the proxy until both writes met.",
        column("strategy", TEXT, "the checkpoint strategy"),
        column("kind", TEXT, "the file kind (offsets, commits, state, _spark_metadata)"),
        column("round", INT, "the round's number"),
        column("winners", INT, "the closes that succeeded: 0, 1 or 2", "count"),
        column("outcome_0", TEXT, "writer 0's outcome: ``won`` or the Java exception class"),
        column("outcome_1", TEXT, "writer 1's outcome: ``won`` or the Java exception class"),
        column("content", TEXT, "whose content the file held afterwards (``writer-0``, ``writer-1``, ``none``...)"),
        column("paired", BOOL, "whether both writes met (false: the round tested nothing)"),
        column("seconds", FLOAT, "the round's length", "s"),
        since=7),
    "fault_runs": table(
        "One row per run of the fault lab (``ckptbench.experiments.faultlab``).",
        _RUN,
        column("profile", TEXT, "the fault profile in force (``infra.faults.PROFILES``)"),
        column("seed", INT, "the profile's seed"),
        column("batches", INT, "the batches asked", "count"),
        column("batches_done", INT, "the batches done", "count"),
        column("outcome", TEXT, "``completed``, ``died`` or ``stalled``"),
        column("cause", TEXT, "the cause of a death: the first line of the innermost JVM exception "
               "(``runs.error`` has Spark's own)", nullable=True),
        column("recovered", BOOL, "whether a restart without faults recovered (NA: not needed)", nullable=True),
        column("exactly_once", BOOL, "whether the file sink's output held every row once (NA: no file sink)",
               nullable=True),
        column("seconds", FLOAT, "the run's length", "s"),
        column("outage_s", FLOAT, "under an outage profile (``ckptbench.experiments.outages``): how long the store "
               "was away (NaN: no outage)", "s", nullable=True, since=7),
        column("died_after_s", FLOAT, "from the outage's start to the query's death (NaN: it did not die)", "s",
               nullable=True, since=7),
        column("resumed_after_s", FLOAT, "from the outage's start to the end of its first batch after the store "
               "was back (NaN: it did not resume)", "s", nullable=True, since=7)),
    "injections": table(
        "One row per fault the metering proxy injected into a run's requests.",
        _RUN,
        column("start", FLOAT, "when the request started, epoch seconds", "s"),
        column("op", TEXT, "the request's S3 operation"),
        column("key", TEXT, "the request's key"),
        column("fault", TEXT, "the fault's label (``infra.faults``)")),
    "scale": table(
        "One row per run of the scale experiment (``ckptbench.experiments.scale``).",
        _RUN,
        column("partitions", INT, "shuffle partitions", "count"),
        column("operators", INT, "stateful operators", "count"),
        column("kind", TEXT, "``point``: a few batches at one point of the partitions and operators axes; "
               "``long``: one long query, the batch-count axis")),
    "memory": table(
        "Heap readings taken while a long scale run ran, after a full GC.",
        _RUN,
        column("batch", INT, "the batches done", "count"),
        column("heap_mib", FLOAT, "the driver JVM's heap in use", "MiB"),
        column("manager_objects", INT, "the checkpoint managers' own objects (``ckptbench.checkpoint`` classes)",
               "count"),
        column("manager_kib", FLOAT, "their shallow size", "KiB")),
    "maintenance": table(
        "One row per call Spark's state store maintenance (snapshots, deleting old state files, on its own "
        "schedule beside the batches) made to a run's checkpoint manager, as ``ckpt_impls.MAINTENANCE_WATCH`` "
        "logged it; ``ckptbench.record.attribution`` tells the requests they made from a batch's own. Logged in "
        "local mode only (maintenance runs on the executors).",
        _RUN,
        column("start", FLOAT, "when the call began, epoch seconds", "s"),
        column("end", FLOAT, "when it ended (a write's: when its stream closed), epoch seconds", "s"),
        column("method", TEXT, "the manager's method"),
        column("thread", TEXT, "the thread that made the call"),
        column("key", TEXT, "the key it was on"),
        since=6),
    "file_commits": table(
        "One row per checkpoint file a run's manager committed, timed inside the JVM by "
        "``ckpt_impls.MAINTENANCE_WATCH`` (``System.nanoTime``) from ``createAtomic`` to the end of its stream's "
        "``close`` or ``cancel``, on every thread; sub-millisecond beside Spark's whole-millisecond walCommit and "
        "commitOffsets, which stay the user-facing figures. Logged in local mode only (where the state stores "
        "write in the driver's JVM); a record before it, or of a cluster, has none.",
        _RUN,
        column("batch_id", INT, "the batch the file's name says wrote it (``record.attribution.named_batch``: "
               "``offsets/N``, ``commits/N``, ``_spark_metadata/N``: N; a state file of version V: V - 1); NA "
               "where the name says none, as for a snapshot, which only maintenance writes", nullable=True),
        column("kind", TEXT, "the checkpoint area of its key (``infra.s3ops.area_of``: offsets, commits, state, "
               "_spark_metadata, metadata, sources...)"),
        column("key", TEXT, "the file's key"),
        column("start", FLOAT, "when ``createAtomic`` was called, epoch seconds (millisecond clock)", "s"),
        column("ms", FLOAT, "``createAtomic`` to the end of ``close`` or ``cancel``", "ms"),
        column("outcome", TEXT, "``closed``, ``failed`` (its ``close`` threw: not published) or ``cancelled``"),
        since=11),
    "counting_switches": table(
        "One row per switch of the JVM's request counting in the counting experiment "
        "(``ckptbench.experiments.counting``), on or off, in the driver (in local mode: every request of the "
        "session). A batch whose window (its start to the end of its ``triggerExecution``) a switch overlaps "
        "joins neither arm.",
        column("before", FLOAT, "when the switch was asked for, epoch seconds", "s"),
        column("after", FLOAT, "when the JVM had made it, epoch seconds", "s"),
        column("on", BOOL, "counting on (True) or off after it"),
        since=12),
    "capabilities": table(
        "One row per check of the store probe (``ckptbench.experiments.probe``); which strategies the store can "
        "run follows from them.",
        column("capability", TEXT, "the capability (``ckpt_impls.CAPABILITIES``)"),
        column("ok", BOOL, "whether the store had it"),
        column("detail", TEXT, "what the store did"),
        column("seconds", FLOAT, "the check's length", "s"),
        since=4),
    "stages": table(
        "One row per stage of a ``bench`` run's plan (``ckptbench.experiments.registry``), in its ``bench`` "
        "record: an experiment, asv's tracks, the crash check, the pages and the report.",
        column("stage", TEXT, "the stage: an experiment's name (``registry.EXPERIMENTS``), or one of ``bench``'s own"),
        column("title", TEXT, "the stage as the plan says it"),
        column("planned_min", FLOAT, "the minutes planned for it: the last bench's of this store and size, else "
               "the registry's estimate", "min"),
        column("actual_min", FLOAT, "the minutes it took (NaN: it did not run)", "min", nullable=True),
        column("started", FLOAT, "when it started, epoch seconds (NaN: it did not run)", "s", nullable=True),
        column("beside", TEXT, "the stages that ran beside it, comma-separated (empty: none)", since=16,
               default=""),
        since=15),
}



class _Columns(Mapping):
    """Each table's columns in order, read from ``SCHEMAS`` whenever asked: never a second copy."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return tuple(SCHEMAS[name].names)

    def __iter__(self):
        return iter(SCHEMAS)

    def __len__(self) -> int:
        return len(SCHEMAS)


#: Every table and its columns, in order.
TABLES: Mapping[str, tuple[str, ...]] = _Columns()


def _meta(field: pa.Field | pa.Schema, key: str) -> str | None:
    value = (field.metadata or {}).get(key.encode())
    return None if value is None else value.decode()


def doc(field: pa.Field | pa.Schema) -> str:
    """A column's (or a table's) doc."""
    return _meta(field, "doc") or ""


def unit(field: pa.Field) -> str:
    """A column's unit ("" where it has none)."""
    return _meta(field, "unit") or ""


def since(field: pa.Field | pa.Schema) -> int:
    """The schema version a column (or a table) appeared in."""
    return int(_meta(field, "since") or 1)


def has_default(field: pa.Field) -> bool:
    """Whether a record that lacks the column reads a value for it, not NA."""
    return _meta(field, "default") is not None


def default(field: pa.Field):
    """What a record that lacks the column reads for it (None: NA)."""
    value = _meta(field, "default")
    return None if value is None else json.loads(value)


def dtype(field: pa.Field) -> str:
    """The column's pandas dtype in a record's frame."""
    return _meta(field, "pandas")


def history(schemas: dict[str, pa.Schema] | None = None) -> dict[int, list[str]]:
    """What each schema version added or changed, from the tables' and columns' ``since`` (of
    ``schemas``, by default the record's) and ``CHANGES``."""
    out: dict[int, list[str]] = {v: [] for v in READABLE}
    for name, s in (SCHEMAS if schemas is None else schemas).items():
        if since(s) > 1:
            out[since(s)].append(f"the ``{name}`` table")
        for field in s:
            if since(field) > since(s):  # added to the table after it appeared
                out[since(field)].append(f"``{name}.{field.name}``")
    for version, change in CHANGES.items():
        out[version].append(change)
    return out


#: The type a column that is not nullable takes while it holds missing values.
_NULLABLE_FORM = {"int64": "Int64", "bool": "boolean"}


def check_rows(name: str, rows: list[dict]) -> None:
    """Refuse (``ValueError``) rows of table ``name`` if one names a column the table does not
    have, or leaves out one it requires (one that is not nullable); a nullable one left out reads
    as missing."""
    columns = frozenset(SCHEMAS[name].names)
    required = frozenset(f.name for f in SCHEMAS[name] if not f.nullable)
    for row in rows:
        if not required <= row.keys() <= columns:
            unknown, lacking = sorted(row.keys() - columns), sorted(required - row.keys())
            said = [f"no column {', '.join(unknown)}"] if unknown else []
            said += [f"missing {', '.join(lacking)}"] if lacking else []
            raise ValueError(f"a row of table {name}: {'; '.join(said)} (its columns: ckptbench.record.schema)")


def conform(name: str, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` as table ``name``: its columns in order, each of its pandas type (``dtype``). A
    column the table lacks (an older record's) reads as its default, NA where none; so does a
    missing value of a column that is not nullable, where it has a default. Where such a column
    still holds missing values (rows built by hand that leave it out) it takes its type's nullable
    form (Int64, boolean). A column the schema does not have is a ``ValueError``."""
    fields = SCHEMAS[name]
    if unknown := [c for c in table.columns if c not in fields.names]:
        raise ValueError(f"table {name} has no column {', '.join(map(str, unknown))}: its columns are "
                         f"{', '.join(fields.names)}")
    columns = {}
    for field in fields:
        values = (table[field.name] if field.name in table
                  else pd.Series([default(field)] * len(table), index=table.index, dtype=object))
        target = dtype(field)
        if not field.nullable and values.isna().any():
            values = values.fillna(default(field)) if has_default(field) else values
            target = _NULLABLE_FORM.get(target, target) if values.isna().any() else target
        columns[field.name] = values if str(values.dtype) == target else values.astype(target)
    return pd.DataFrame(columns, index=table.index)


def frame(name: str, rows: list[dict]) -> pd.DataFrame:
    """Table ``name`` of ``rows`` (dicts by column), conformed to its schema (``conform``). An empty
    one is a copy of one conformed once: a record has many empty tables, each read many times."""
    return conform(name, pd.DataFrame(rows)) if rows else _empty(name).copy()


@functools.cache
def _empty(name: str) -> pd.DataFrame:
    return conform(name, pd.DataFrame())
