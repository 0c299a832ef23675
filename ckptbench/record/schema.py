"""The results model: the tables of one experiment's record, their columns and the schema version.

Every measurement ckptbench makes lands here first; ``measure``, ``report``, ``drift`` and every
asv ``track_*`` read it back through ``ckptbench.metrics``, which defines each derived number
once. An experiment's record (``Results``) is a set of tables, each a pandas DataFrame with the
columns ``TABLES`` names, plus an environment (what was measured where, with which versions):

- ``runs``: one row per streaming query: its strategy, workload, key count, the key prefix its
  objects were under, ``error`` (None, or why the run failed), the driver's peak resident
  memory, the temp objects (``.<name>.<uuid>.tmp``) it left under its prefix, and ``settings``:
  the checkpoint settings in force as the query started (``config.CHECKPOINT_SETTINGS``: state
  store provider, changelog, file checksums, format version, retention...), a JSON object, a
  setting unset with no default this Spark knows as null (before schema 3: ``{}``, not recorded);
  ``preset``: the configuration of Spark's own levers it ran with (``config.presets_for``;
  "default" before schema 8) and ``refused``: whether Spark refused that configuration for the
  workload (or this Spark lacks a lever of it), ``error`` then holding Spark's reason: a result,
  not a failed run (before schema 8: false).
- ``batches``: one row per micro-batch of a run, ``phase`` "warmup" or "measured", with Spark's
  own ``durationMs`` entries (milliseconds, NaN where Spark did not report one) and the state
  operators' commit time.
- ``requests``: one row per S3 request of a run, ``batch_id`` the batch whose window it started
  in (NA: between batches, such as state store maintenance), with the operation, checkpoint
  area, key, status, payload bytes and the latency; ``source`` says who counted it: ``proxy``
  (the metering proxy; its latency is store-side) or ``jvm`` (inside Spark's JVMs,
  ``ckptbench.harness.jvm_requests``; client-side latency, one row per HTTP attempt), and for the JVM's
  ``origin``: the JVM that sent it (``driver``, or an executor's id, whose host the environment's
  ``executor_hosts`` names; NA for the proxy's). A run usually has
  both, each a full count on its own: never add them up (``Run`` shows one source at a time).
- ``samples``: requests timed without Spark (the store's floor, COPY against size, the metering
  proxy's paired overhead): ``experiment``, ``op``, ``route`` (``proxy``: timed by the proxy;
  ``direct``/``proxied``: client-timed, in pairs at equal ``seq``), object ``size``, ``ms``.
- ``compactions``: one row per compaction of a log history (``history`` batches long).
- ``cycles``: one row per crash cycle of the crash lab (``ckptbench.experiments.crashlab``): the driver killed
  at ``crash_point`` (``landed``: the point was reached, not the wait limit), the last batch in
  ``offsets/`` and in ``commits/`` then, the restart (``jvm_start_ms``: spawn to SparkSession up;
  ``recovery_ms``/``recovery_requests``/``recovery_store_ms``: the restarted query's start to its
  first stored ``commits/N``, the requests in that window and their summed store-side time), and
  the check after it: ``duplicates``, ``lost`` rows, ``partial`` batches of the committed
  ``0..verified_through``.
- ``crash_series``: one row per strategy x workload series of cycles: the check at rest after its
  clean stop and what was left under its prefix (``temp_objects``, sink ``orphan_files`` the
  sink's log does not list (-1: a sink with no log), ``pending_uploads``, all ``objects``).
- ``two_writers``: one row per run of two drivers on one checkpoint, the second started after
  ``head_start`` batches of the first (0: together): each one's error (first line), the check at
  rest, log files written twice (``overwritten_logs``, ``overwritten_files``) and the ``outcome``;
  ``race``: the file kind both drivers were held at until both wrote it (a ``Rendezvous``,
  started together), None for a zombie run; ``race_met``: whether the two writes of that file met
  (false: one driver stopped before it, Spark's own check or an error, so the run raced nothing;
  NA: not raced) (before schema 7, neither recorded).
- ``races``: one row per round of the race (``ckptbench.experiments.race``): two managers of a
  ``strategy`` creating one fresh file of a ``kind`` (offsets, commits, state, _spark_metadata)
  at once, held by the proxy until both writes met (``paired``; false: the round tested
  nothing): the closes that succeeded (``winners``: 0, 1 or 2), each writer's outcome
  (``outcome_0``, ``outcome_1``: "won" or the Java exception class), whose ``content`` the file
  held afterwards ("writer-0", "writer-1", "none"...), ``seconds``. Before schema 7, not recorded.
- ``fault_runs``: one row per run of the failure lab (``ckptbench.experiments.faultlab``): the fault
  ``profile`` and ``seed`` in force, ``batches`` asked and ``batches_done``, ``outcome``
  (completed, died, stalled), the ``cause`` of a death (the first line of the innermost JVM
  exception; ``runs.error`` has Spark's own), whether a restart without faults ``recovered``
  (None: not needed),
  whether the file sink's output held every row ``exactly_once`` (None: no file sink), seconds;
  under an outage profile (the store taken away, ``ckptbench.experiments.outages``), in seconds:
  ``outage_s`` how long the store was away, ``died_after_s`` from the outage's start to the query's
  death, ``resumed_after_s`` from the outage's start to the end of its first batch after the store
  was back (NaN where they do not apply; before schema 7, not recorded).
- ``scale``: one row per run of the scale experiment (``ckptbench.experiments.scale``): its shuffle
  ``partitions``, stateful ``operators`` and ``kind`` (``point``: a few batches at one point of the
  partitions and operators axes; ``long``: one long query, the batch-count axis).
- ``memory``: heap readings taken while a long scale run ran, after a full GC: the batches done
  (``batch``), the driver JVM's heap in use (MiB) and the checkpoint managers' own objects
  (``ckptbench.checkpoint`` classes: their count and shallow KiB).
- ``maintenance``: one row per call Spark's state store maintenance (snapshots, deleting old
  state files, on its own schedule beside the batches) made to a run's checkpoint manager, as
  ``ckpt_impls.MAINTENANCE_WATCH`` logged it: ``start``, ``end`` (a write's: when its stream
  closed), ``method``, the ``thread`` that made it, ``key``; ``maintenance_methods`` tells the
  requests they made from a batch's own. Logged in local mode only (maintenance runs on the
  executors); before schema 6, not recorded.
- ``injections``: one row per fault the metering proxy injected into a run's requests: the
  request's ``start``, operation and key, and the ``fault`` label (``infra.faults``).
- ``capabilities``: one row per check of the store probe (``ckptbench.experiments.probe``): the
  ``capability`` (``ckpt_impls.CAPABILITIES``), whether the store had it (``ok``), what it did
  (``detail``) and the check's ``seconds``; which strategies the store can run follows from them.

The record in memory is ``ckptbench.record.results``'s ``Results``; on disk
(``ckptbench.record.disk``) a directory holding ``environment.json`` (with ``schema_version``) and
one Parquet file per non-empty table. A reader refuses another schema version rather than guess at it.
"""

from __future__ import annotations

import pandas as pd

#: 2: requests.source (a version 1 record is read as all "proxy"); 3: runs.settings,
#: crash_series.seconds, two_writers.head_start, overwritten_files and seconds (an older record's
#: are read as missing, its settings as none recorded); 4: the capabilities table (the store probe's);
#: 5: requests.origin (the JVM that sent a request; missing before); 6: the maintenance table (the
#: state store maintenance's calls), and the floor's ``memory`` rows include the files it deleted;
#: 7: the races table, two_writers.race, and the fault lab's outage columns; 8: runs.preset and
#: runs.refused, and a crash series' preset.
SCHEMA_VERSION = 8
#: Versions this reader reads: an older record lacks the tables and columns added since.
READABLE = (1, 2, 3, 4, 5, 6, 7, SCHEMA_VERSION)

#: Spark's progress ``durationMs`` entries kept per batch (milliseconds).
DURATIONS = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets",
             "triggerExecution")

#: Every table and its columns, in order.
TABLES: dict[str, tuple[str, ...]] = {
    "runs": ("run", "strategy", "workload", "keys", "prefix", "error", "peak_rss_mib", "temp_objects", "settings",
             "preset", "refused"),
    "batches": ("run", "batch_id", "phase", "timestamp", *DURATIONS, "state_commit_ms", "state_rows",
                "input_rows"),
    "requests": ("run", "batch_id", "start", "ms", "method", "op", "area", "bucket", "key", "status",
                 "bytes_in", "bytes_out", "source", "origin"),
    "samples": ("experiment", "op", "route", "size", "seq", "ms"),
    "compactions": ("history", "log", "batch", "number", "ms", "requests", "bytes", "entries", "garbage_staged"),
    "cycles": ("series", "strategy", "workload", "cycle", "crash_point", "seed", "delay_s", "landed", "wait_s",
               "offsets_at_kill", "committed_at_kill", "first_batch", "jvm_start_ms", "recovery_ms",
               "recovery_requests", "recovery_store_ms", "restart_ok", "error", "duplicates", "lost", "partial",
               "verified_through", "seconds"),
    "crash_series": ("series", "strategy", "workload", "cycles", "seed", "rows_per_batch", "prefix", "error",
                     "last_batch", "duplicates", "lost", "partial", "unexpected", "temp_objects", "orphan_files",
                     "pending_uploads", "objects", "seconds", "preset"),
    "two_writers": ("strategy", "workload", "head_start", "seed", "first_error", "second_error", "second_started",
                    "first_batches", "second_batches", "verify_error", "overwritten_logs", "overwritten_files",
                    "duplicates", "lost", "partial", "unexpected", "last_batch", "outcome", "seconds", "race",
                    "race_met"),
    "races": ("strategy", "kind", "round", "winners", "outcome_0", "outcome_1", "content", "paired", "seconds"),
    "fault_runs": ("run", "profile", "seed", "batches", "batches_done", "outcome", "cause", "recovered",
                   "exactly_once", "seconds", "outage_s", "died_after_s", "resumed_after_s"),
    "injections": ("run", "start", "op", "key", "fault"),
    "scale": ("run", "partitions", "operators", "kind"),
    "memory": ("run", "batch", "heap_mib", "manager_objects", "manager_kib"),
    "maintenance": ("run", "start", "end", "method", "thread", "key"),
    "capabilities": ("capability", "ok", "detail", "seconds"),
}
#: Integer columns that may be missing (NA): a request between batches, a check that did not run.
NULLABLE_INTS = {
    "batches": ("batch_id",),
    "requests": ("batch_id",),
    "cycles": ("offsets_at_kill", "committed_at_kill", "first_batch", "recovery_requests", "duplicates", "lost",
               "partial", "verified_through"),
    "two_writers": ("duplicates", "lost", "partial", "unexpected", "last_batch"),
}



def frame(name: str, rows: list[dict]) -> pd.DataFrame:
    """Table ``name`` of ``rows`` (dicts by column), with its columns in order and their types: an
    integer column that may be missing is nullable (``NULLABLE_INTS``), a text column all None is
    still text."""
    out = pd.DataFrame(rows, columns=list(TABLES[name]))
    for column in NULLABLE_INTS.get(name, ()):
        out[column] = out[column].astype("Int64")
    if name in ("cycles", "crash_series", "two_writers"):
        for column in ("error", "first_error", "second_error", "verify_error", "overwritten_files", "race"):
            if column in out:  # all None would be written as a null-typed column
                out[column] = out[column].astype("string")
    if name == "two_writers":
        out["race_met"] = out["race_met"].astype("boolean")  # NA: not raced
    if name == "runs":
        out["refused"] = out["refused"].fillna(False).astype(bool)
    if name == "races":
        out["winners"] = out["winners"].astype("int64")
        out["paired"] = out["paired"].astype(bool)
    if name == "fault_runs":
        for column in ("recovered", "exactly_once"):
            out[column] = out[column].astype("boolean")  # NA: not asked
        for column in ("outage_s", "died_after_s", "resumed_after_s"):
            out[column] = out[column].astype("float64")  # NaN: no outage, or it does not apply
    return out


#: Who counted a request (``requests.source``), in the order ``Run`` prefers them. ``memory``: not a
#: request but a checkpoint file the benchmark floor's in-memory manager published (``ckpt_impls.FLOOR``).
SOURCES = ("proxy", "jvm", "memory")
