"""The results model: the tidy record of one experiment, and how it is written and read.

Every measurement ckptbench makes lands here first; ``measure``, ``report``, ``drift`` and every
asv ``track_*`` read it back through ``ckptbench.metrics``, which defines each derived number
once. An experiment's record (``Results``) is a set of tables, each a pandas DataFrame with the
columns ``TABLES`` names, plus an environment (what was measured where, with which versions):

- ``runs``: one row per streaming query: its strategy, workload, key count, the key prefix its
  objects were under, ``error`` (None, or why the run failed), the driver's peak resident
  memory, the temp objects (``.<name>.<uuid>.tmp``) it left under its prefix, and ``settings``:
  the checkpoint settings in force as the query started (``runs.CHECKPOINT_SETTINGS``: state
  store provider, changelog, file checksums, format version, retention...), a JSON object, a
  setting unset with no default this Spark knows as null (before schema 3: ``{}``, not recorded).
- ``batches``: one row per micro-batch of a run, ``phase`` "warmup" or "measured", with Spark's
  own ``durationMs`` entries (milliseconds, NaN where Spark did not report one) and the state
  operators' commit time.
- ``requests``: one row per S3 request of a run, ``batch_id`` the batch whose window it started
  in (NA: between batches, such as state store maintenance), with the operation, checkpoint
  area, key, status, payload bytes and the latency; ``source`` says who counted it: ``proxy``
  (the metering proxy; its latency is store-side) or ``jvm`` (inside Spark's JVMs,
  ``ckptbench.jvm_requests``; client-side latency, one row per HTTP attempt), and for the JVM's
  ``origin``: the JVM that sent it (``driver``, or an executor's id, whose host the environment's
  ``executor_hosts`` names; NA for the proxy's). A run usually has
  both, each a full count on its own: never add them up (``Run`` shows one source at a time).
- ``samples``: requests timed without Spark (the store's floor, COPY against size, the metering
  proxy's paired overhead): ``experiment``, ``op``, ``route`` (``proxy``: timed by the proxy;
  ``direct``/``proxied``: client-timed, in pairs at equal ``seq``), object ``size``, ``ms``.
- ``compactions``: one row per compaction of a log history (``history`` batches long).
- ``cycles``: one row per crash cycle of the crash lab (``ckptbench.crashlab``): the driver killed
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
  rest, log files written twice (``overwritten_logs``, ``overwritten_files``) and the ``outcome``.
- ``fault_runs``: one row per run of the failure lab (``ckptbench.faultlab``): the fault
  ``profile`` and ``seed`` in force, ``batches`` asked and ``batches_done``, ``outcome``
  (completed, died, stalled), the ``cause`` of a death (the first line of the innermost JVM
  exception; ``runs.error`` has Spark's own), whether a restart without faults ``recovered``
  (None: not needed),
  whether the file sink's output held every row ``exactly_once`` (None: no file sink), seconds.
- ``scale``: one row per run of the scale experiment (``ckptbench.scale``): its shuffle
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
- ``capabilities``: one row per check of the store probe (``ckptbench.probe``): the
  ``capability`` (``ckpt_impls.CAPABILITIES``), whether the store had it (``ok``), what it did
  (``detail``) and the check's ``seconds``; which strategies the store can run follows from them.

On disk (``write``/``read``): a directory holding ``environment.json`` (with
``schema_version``) and one Parquet file per non-empty table. A reader refuses another schema
version rather than guess at it.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pandas as pd

import ckpt_impls
from ckpt_impls import manifest_format

#: 2: requests.source (a version 1 record is read as all "proxy"); 3: runs.settings,
#: crash_series.seconds, two_writers.head_start, overwritten_files and seconds (an older record's
#: are read as missing, its settings as none recorded); 4: the capabilities table (the store probe's);
#: 5: requests.origin (the JVM that sent a request; missing before); 6: the maintenance table (the
#: state store maintenance's calls), and the floor's ``memory`` rows include the files it deleted.
SCHEMA_VERSION = 6
#: Versions this reader reads: an older record lacks the tables and columns added since.
READABLE = (1, 2, 3, 4, 5, SCHEMA_VERSION)

#: Spark's progress ``durationMs`` entries kept per batch (milliseconds).
DURATIONS = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets",
             "triggerExecution")

#: Every table and its columns, in order.
TABLES: dict[str, tuple[str, ...]] = {
    "runs": ("run", "strategy", "workload", "keys", "prefix", "error", "peak_rss_mib", "temp_objects", "settings"),
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
                     "pending_uploads", "objects", "seconds"),
    "two_writers": ("strategy", "workload", "head_start", "seed", "first_error", "second_error", "second_started",
                    "first_batches", "second_batches", "verify_error", "overwritten_logs", "overwritten_files",
                    "duplicates", "lost", "partial", "unexpected", "last_batch", "outcome", "seconds"),
    "fault_runs": ("run", "profile", "seed", "batches", "batches_done", "outcome", "cause", "recovered",
                   "exactly_once", "seconds"),
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

ROOT = Path(__file__).resolve().parent.parent


class RunFailed(RuntimeError):
    """The run asked for failed; str() is Spark's (or the harness's) reason."""


class SchemaMismatch(ValueError):
    """A results directory written with another schema version."""


def environment(store, experiment: str, size: str, plan: dict, spark=None, **extra) -> dict:
    """What an experiment ran on: the store, the fault profile its metering proxy injected and that
    profile's seed, the run size and plan, the commit and the versions of Spark, Hadoop and the S3A
    connector that ran it (read from the jars that are loaded); where requests went (``where``) and,
    given the running ``spark`` session, its master, executor count and the driver JVM's ``-X``
    flags (a JIT or heap setting changes what is timed: ``SPARK_SUBMIT_OPTS`` reaches them)."""
    from ckpt_impls import jars

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    env = {"schema_version": SCHEMA_VERSION, "experiment": experiment, "store": store.name,
           "describe": store.describe(), "emulator": store.emulator,
           "fault_profile": getattr(store, "fault_profile", "none"), "fault_seed": getattr(store, "seed", 0),
           "size": size, "plan": plan,
           "commit": commit, "host": socket.gethostname(),
           "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": jars.versions(), "where": where(store)}
    if spark is not None:
        env.update(spark_master=spark.sparkContext.master, executors=executors(spark), jvm_flags=jvm_flags(spark))
    return {**env, **extra}


def where(store) -> dict:
    """Where a run's requests went: the store's endpoint ``scheme`` (http/https) and ``location``
    (local: this machine's loopback; remote), and who counted them (``counted_by``: the metering
    proxy and Spark's JVMs, or the JVMs alone on a store the proxy cannot front)."""
    inner = getattr(store, "inner", store)  # the store itself, not its metering proxy's endpoint
    proxied = getattr(store, "proxy", None) is not None
    return {**inner.where, "counted_by": ["proxy", "jvm"] if proxied else ["jvm"]}


def jvm_flags(spark) -> list[str]:
    """The driver JVM's ``-X`` and ``-XX`` options (heap, JIT, GC), as it was started."""
    arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return [a for a in arguments if a.startswith("-X")]


def executors(spark) -> int:
    """Executor JVMs beside the driver: 0 in local mode, where the driver runs the tasks itself."""
    if spark.sparkContext.master.startswith("local"):
        return 0
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager too


def _table(name: str, rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(TABLES[name]))
    for column in NULLABLE_INTS.get(name, ()):
        frame[column] = frame[column].astype("Int64")
    if name in ("cycles", "crash_series", "two_writers"):
        for column in ("error", "first_error", "second_error", "verify_error", "overwritten_files"):
            if column in frame:  # all None would be written as a null-typed column
                frame[column] = frame[column].astype("string")
    if name == "fault_runs":
        for column in ("recovered", "exactly_once"):
            frame[column] = frame[column].astype("boolean")  # NA: not asked
    return frame


@dataclasses.dataclass
class Results:
    """One experiment's record. Build it with ``Recorder``; read it with ``read``."""

    environment: dict
    tables: dict[str, pd.DataFrame]

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in TABLES:
            return self.tables.get(name, _table(name, []))
        raise AttributeError(name)

    def __getstate__(self):
        # __getattr__ above must not answer pickle's probes; what is worked out from the tables
        # (``_``-named: the splits by run, the maintenance's requests) is worked out again.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def run(self, strategy: str, workload: str, keys: int | None = None, source: str | None = None) -> Run:
        """The run of ``strategy`` x ``workload`` (with ``keys`` keys: by default the plan's first),
        its requests as ``source`` counted them (by default the proxy where it did, else the JVM);
        raises ``RunFailed`` with its reason if it failed, ``KeyError`` if there is none."""
        keys = self.environment["plan"]["keys"][0] if keys is None else keys
        runs = self.runs
        match = runs[(runs.strategy == strategy) & (runs.workload == workload) & (runs["keys"] == keys)]
        if match.empty:
            raise KeyError(f"no run of {strategy} x {workload} x {keys} keys")
        row = match.iloc[-1]
        if isinstance(row.error, str):
            raise RunFailed(f"{strategy} x {workload} failed: {row.error}")
        return Run(self, int(row.run), source)

    def rows_of(self, table: str, run: int) -> pd.DataFrame:
        """``table``'s rows of ``run``. Each table is split by run once per record: a report of a
        10,000-batch run filtered its two million requests again for every figure of every window
        (138 s for one strategy's tables, 2026-11-24)."""
        split = self._worked_out(f"_{table}_by_run", lambda: dict(tuple(getattr(self, table).groupby("run"))))
        return split.get(run, getattr(self, table).iloc[0:0])

    def _worked_out(self, name: str, work):
        """``work()``, done once per record and kept as ``name`` (``_``-named: left out of a pickle)."""
        if name not in self.__dict__:
            self.__dict__[name] = work()
        return self.__dict__[name]

    def _requests_by_source(self) -> dict:
        return self._worked_out("_requests_split", lambda: dict(tuple(self.requests.groupby(["run", "source"]))))

    def requests_counted(self, run: int, source: str) -> pd.DataFrame:
        """The requests of ``run`` that ``source`` counted, split as ``rows_of`` splits a table."""
        return self._requests_by_source().get((run, source), self.requests.iloc[0:0])

    def sources_of(self, run: int) -> list[str]:
        """The sources that counted requests of ``run``, in ``SOURCES`` order."""
        return [s for s in SOURCES if (run, s) in self._requests_by_source()]

    def maintenance_methods(self) -> pd.Series:
        """``maintenance_methods`` over the whole ``requests`` table, each run's requests against
        its own calls; worked out once per record (a 10,000-batch run has a million requests)."""
        def work():
            methods = [maintenance_methods(rows, self.rows_of("maintenance", run))
                       for run, rows in self.requests.groupby("run")]
            return pd.concat(methods) if methods else pd.Series(None, index=self.requests.index, dtype=object)
        return self._worked_out("_maintenance_methods", work)

    def strategies(self) -> list[str]:
        """The strategies of the runs, in the order they ran (the benchmark floor is none)."""
        return [s for s in dict.fromkeys(self.runs.strategy) if s != ckpt_impls.FLOOR.name]

    def write(self, directory: Path) -> Path:
        """Write the record to ``directory`` (replacing what was there); returns it."""
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.parquet"):
            stale.unlink()
        for stale in directory.glob("part-*-of-*"):  # parts of an earlier run split in parts
            shutil.rmtree(stale)
        for name, frame in self.tables.items():
            if not frame.empty:
                frame.to_parquet(directory / f"{name}.parquet", index=False)
        (directory / "environment.json").write_text(json.dumps(self.environment, indent=1) + "\n")
        return directory


#: A part of a record split in parts (``write_part``), under the record's directory.
PART = re.compile(r"part-(\d+)-of-(\d+)")


def write_part(record: Results, directory: Path, k: int, n: int) -> Path:
    """Write ``record`` as part ``k`` of ``n`` of the record in ``directory`` (replacing that part,
    the parts of a split into another number of parts, and a whole record there); ``read`` of
    ``directory`` then merges its parts."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in [*directory.glob("*.parquet"), *directory.glob("environment.json")]:
        stale.unlink()
    for other in directory.glob("part-*-of-*"):
        if (m := PART.fullmatch(other.name)) and int(m.group(2)) != n:
            shutil.rmtree(other)
    part = Results({**record.environment, "part": [k, n]}, record.tables)
    return part.write(directory / f"part-{k}-of-{n}")


def merge(parts: list[Results]) -> Results:
    """One record of ``parts`` (of one experiment): their tables one after the other, series and
    run numbers renumbered so that no two parts share one; the environment is the first part's,
    with each part's ``part``, ``created``, ``commit``, ``seed`` and ``finished`` under ``parts``."""
    tables: dict[str, list[pd.DataFrame]] = {}
    offsets = {"series": 0, "run": 0}
    for record in parts:
        for name, table in record.tables.items():
            frame = table.copy()
            for column in offsets:
                if column in frame:
                    frame[column] += offsets[column]
            tables.setdefault(name, []).append(frame)
        for column in offsets:
            numbers = [record.tables[name][column].max() for name in record.tables if column in record.tables[name]
                       and len(record.tables[name])]
            offsets[column] += int(max(numbers, default=-1)) + 1
    kept = ("part", "created", "commit", "seed", "finished")
    env = {**parts[0].environment, "parts": [{k: p.environment.get(k) for k in kept} for p in parts]}
    env.pop("part", None)
    return Results(env, {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items()})


def parts_of(directory: Path) -> list[Path]:
    """The part directories of a record split in parts, in part order (none for a whole record)."""
    found = [(int(m.group(1)), p) for p in directory.glob("part-*-of-*") if (m := PART.fullmatch(p.name))]
    return [p for _, p in sorted(found) if (p / "environment.json").exists()]


def read(directory: Path) -> Results:
    """The record written to ``directory`` by ``Results.write`` (or its parts' by
    ``write_part``, merged)."""
    if not (directory / "environment.json").exists() and (parts := parts_of(directory)):
        return merge([read(part) for part in parts])
    env = json.loads((directory / "environment.json").read_text())
    version = env.get("schema_version")
    if version not in READABLE:
        raise SchemaMismatch(f"{directory} has results schema {env.get('schema_version')}, this ckptbench reads "
                             f"{SCHEMA_VERSION}: rerun the benchmark, or read it with the commit that wrote it "
                             f"({env.get('commit', 'unknown')[:8]})")
    tables = {path.stem: pd.read_parquet(path) for path in directory.glob("*.parquet") if path.stem in TABLES}
    if version == 1 and "requests" in tables:  # before requests.source, every request was the proxy's
        tables["requests"]["source"] = "proxy"
    for name, frame in tables.items():  # columns an older record (or a part of one) lacks
        for column in TABLES[name]:
            if column not in frame:
                frame[column] = "{}" if (name, column) == ("runs", "settings") else pd.NA
    env = {**env, "schema_version": SCHEMA_VERSION}
    return Results(env, tables)


def read_all(raw: Path) -> dict[str, dict[str, Results]]:
    """``{store: {experiment: Results}}`` for every record under ``raw``; another schema's are skipped."""
    out: dict[str, dict[str, Results]] = {}
    for record_dir in record_dirs(raw):
        try:
            record = read(record_dir)
        except SchemaMismatch:
            continue
        out.setdefault(record.environment["store"], {})[record.environment["experiment"]] = record
    return out


def record_dirs(raw: Path) -> list[Path]:
    """The directories under ``raw`` holding a record, whole or in parts."""
    return sorted(d for d in raw.glob("*") if (d / "environment.json").exists() or parts_of(d))


def directory(raw: Path, store: str, experiment: str) -> Path:
    """Where the latest record of ``experiment`` on ``store`` lives under ``raw``."""
    return raw / f"{store}-{experiment}"


#: Who counted a request (``requests.source``), in the order ``Run`` prefers them. ``memory``: not a
#: request but a checkpoint file the benchmark floor's in-memory manager published (``ckpt_impls.FLOOR``).
SOURCES = ("proxy", "jvm", "memory")


@dataclasses.dataclass(frozen=True)
class Run:
    """One run's rows of each table. Warm-up is left out of ``batches`` and ``requests`` here, the
    one place that decides it; ``warmup`` holds those batches.

    Requests are one source's (``request_source``): ``source`` if given, else the first of
    ``SOURCES`` that counted this run. Two sources counting the same requests never add up here,
    so no figure can count a request twice."""

    results: Results
    run: int
    source: str | None = None
    #: Only the measured batches with ids in ``first..last`` (a window of a long run), when given.
    window: tuple[int, int] | None = None
    #: Only the measured batches no state store maintenance call (``maintenance``) overlapped: a
    #: batch's own requests, whatever maintenance's schedule. The same as all of them where
    #: maintenance was not logged.
    clear_of_maintenance: bool = False
    #: Only the requests no state store maintenance call made (``maintenance_methods``), in every
    #: batch: a batch's own requests, told apart request by request where ``clear_of_maintenance``
    #: leaves whole batches out (at the scale experiment's 2 s interval every batch meets a call).
    own_requests_only: bool = False

    @property
    def sources(self) -> list[str]:
        """The sources that counted this run's requests, in ``SOURCES`` order."""
        return self.results.sources_of(self.run)

    @property
    def request_source(self) -> str:
        if self.source is not None:
            return self.source
        return next(iter(self.sources), SOURCES[0])

    def _counted(self) -> pd.DataFrame:
        """Every request of the run that ``request_source`` counted."""
        return self.results.requests_counted(self.run, self.request_source)

    def _requests(self) -> pd.DataFrame:
        requests = self._counted()
        return requests[~self._made_by_maintenance(requests)] if self.own_requests_only else requests

    def _made_by_maintenance(self, requests: pd.DataFrame) -> pd.Series:
        return self.results.maintenance_methods().reindex(requests.index).notna()

    @property
    def maintenance_requests(self) -> pd.DataFrame:
        """Every request of the run (one source's, warm-up and between batches too) that a state
        store maintenance call made, with the ``method`` of the call (``maintenance_methods``)."""
        requests = self._counted()
        methods = self.results.maintenance_methods().reindex(requests.index)
        return requests[methods.notna()].assign(call=methods[methods.notna()])

    def _of(self, table: str) -> pd.DataFrame:
        return self.results.rows_of(table, self.run)

    @property
    def all_batches(self) -> pd.DataFrame:
        return self._of("batches").sort_values("batch_id")

    @property
    def batches(self) -> pd.DataFrame:
        """The measured batches."""
        batches = self.all_batches
        batches = batches[batches.phase == "measured"]
        if self.window is not None:
            batches = batches[batches.batch_id.between(*self.window)]
        return batches[~self.overlaps_maintenance(batches)] if self.clear_of_maintenance else batches

    def overlaps_maintenance(self, batches: pd.DataFrame) -> pd.Series:
        """For each of ``batches`` (rows of this run's), whether a maintenance call's span met the
        batch's window (``batch_window``: its timestamp to the end of its triggerExecution, with the
        slack ``WINDOW_SLACK_S``, as ``Recorder.add_requests`` gives a request)."""
        calls = self._of("maintenance")
        start = batches.timestamp - WINDOW_SLACK_S
        end = batches.timestamp + batches.triggerExecution / 1000 + WINDOW_SLACK_S
        return pd.Series([bool(((calls.start <= e) & (calls.end >= s)).any()) for s, e in zip(start, end, strict=True)],
                         index=batches.index, dtype=bool)

    @property
    def warmup(self) -> pd.DataFrame:
        batches = self.all_batches
        return batches[batches.phase == "warmup"]

    @property
    def requests(self) -> pd.DataFrame:
        """The requests of the measured batches (one source's)."""
        requests = self._requests()
        return requests[requests.batch_id.isin(self.batches.batch_id)]

    @property
    def outside(self) -> pd.DataFrame:
        """The requests that started between batches (one source's)."""
        requests = self._requests()
        return requests[requests.batch_id.isna()]

    @property
    def info(self) -> pd.Series:
        return self.results.runs.set_index("run").loc[self.run]


class Recorder:
    """Collects an experiment's rows as they are measured; ``results()`` makes the record."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {name: [] for name in TABLES}

    def add_run(self, strategy: str, workload: str, keys: int, prefix: str, settings: dict | None = None) -> int:
        """A new run; its outcome columns are filled in (``rows["runs"][run].update``) as it ends."""
        run = len(self.rows["runs"])
        self.rows["runs"].append({"run": run, "strategy": strategy, "workload": workload, "keys": keys,
                                  "prefix": prefix, "error": None, "peak_rss_mib": float("nan"), "temp_objects": 0,
                                  "settings": json.dumps(settings or {}, sort_keys=True)})
        return run

    def fail_run(self, run: int, error: str) -> None:
        self.rows["runs"][run]["error"] = " ".join(error.split())[:500]

    def add_batches(self, run: int, phase: str, progresses: list[dict]) -> None:
        for p in progresses:
            durations = p["durationMs"]
            operators = p.get("stateOperators") or []
            self.rows["batches"].append({
                "run": run, "batch_id": p["batchId"], "phase": phase, "timestamp": batch_window(p)[0],
                **{name: float(durations.get(name, float("nan"))) for name in DURATIONS},
                "state_commit_ms": float(sum(op["commitTimeMs"] for op in operators)) if operators else float("nan"),
                "state_rows": float(sum(op["numRowsTotal"] for op in operators)) if operators else float("nan"),
                "input_rows": p.get("numInputRows", 0)})

    def add_requests(self, run: int, events, progresses: list[dict], source: str = "proxy") -> None:
        """``events`` (requests, as the metering proxy records them, or as ``source`` did in the
        proxy's ``Event`` form), each attributed to the batch of ``progresses`` whose window it
        started in, or to none."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
        # Back-to-back windows do not overlap, so with WINDOW_SLACK_S a request falls in at most
        # two, and the earlier one takes it. Found by bisection: a 10,000-batch query's million
        # requests tried against each window in turn held the harness for over ten minutes.
        windows = sorted(((start - WINDOW_SLACK_S, end + WINDOW_SLACK_S, p["batchId"]) for p in progresses
                          for start, end in [batch_window(p)]), key=lambda w: w[0])
        starts = [w[0] for w in windows]
        for e in events:
            last = bisect.bisect_right(starts, e.start) - 1  # the latest window begun by e.start
            batch = next((b for _, end, b in windows[max(last - 1, 0):last + 1] if e.start <= end), None)
            self.rows["requests"].append({
                "run": run, "batch_id": batch, "start": e.start, "ms": e.duration * 1000, "method": e.method,
                "op": e.op, "area": e.area, "bucket": e.bucket, "key": e.key, "status": e.status,
                "bytes_in": e.bytes_in, "bytes_out": e.bytes_out, "source": source,
                "origin": getattr(e, "origin", None)})

    def add_samples(self, experiment: str, op: str, ms: list[float], route: str = "proxy", size: int = 1024) -> None:
        self.rows["samples"] += [{"experiment": experiment, "op": op, "route": route, "size": size, "seq": i,
                                  "ms": value} for i, value in enumerate(ms)]

    def add_compaction(self, **row) -> None:
        self.rows["compactions"].append(row)

    def add_fault_run(self, run: int, **row) -> None:
        self.rows["fault_runs"].append({"run": run, **row})

    def add_scale(self, run: int, partitions: int, operators: int, kind: str) -> None:
        self.rows["scale"].append({"run": run, "partitions": partitions, "operators": operators, "kind": kind})

    def add_memory(self, run: int, **row) -> None:
        self.rows["memory"].append({"run": run, **row})

    def add_maintenance(self, run: int, calls: list[dict]) -> None:
        """The state store maintenance's calls to the run's manager (``runs.maintenance_calls``)."""
        self.rows["maintenance"] += [{"run": run, **call} for call in calls]

    def add_injections(self, run: int, injections) -> None:
        """``injections`` (``infra.faults.Injection``s, as the metering proxy keeps them) of ``run``."""
        self.rows["injections"] += [{"run": run, "start": i.start, "op": i.op, "key": i.key, "fault": i.fault}
                                    for i in injections]

    def add_capabilities(self, checks: dict[str, dict]) -> None:
        """The probe's ``checks`` (``ckptbench.probe.run``'s: ``{capability: {"ok", "detail", ...}}``)."""
        self.rows["capabilities"] += [{"capability": name, "ok": bool(check["ok"]), "detail": check["detail"],
                                       "seconds": check["seconds"]} for name, check in checks.items()]

    def results(self, environment: dict) -> Results:
        return Results(environment, {name: _table(name, rows) for name, rows in self.rows.items()})


#: Progress timestamps have millisecond resolution: a batch's window is widened by that much on each
#: side when a request or a maintenance call is placed in it.
WINDOW_SLACK_S = 0.001


#: The operations a ``list`` call sends: S3A's LIST and its HEAD of the directory's key, a
#: manifest's GETs of its records.
LISTING_OPS = ("LIST", "HEAD", "GET")


def _on_listed(key: str, directory: str) -> bool:
    """Whether ``key`` is ``directory``, its prefix, or in it but not a temp file (``.<name>...``:
    a task's write on the way to a rename, not a listing's)."""
    return key in (directory, directory + "/") or (key.startswith(directory + "/")
                                                    and not key[len(directory) + 1:].startswith("."))


def maintenance_methods(requests: pd.DataFrame, calls: pd.DataFrame) -> pd.Series:
    """For each of ``requests``, the method of the one of ``calls`` (rows of the ``maintenance``
    table) that made it, None where none did (a batch's own): it started within the call's span
    (widened by ``WINDOW_SLACK_S``) on the call's object. A ``list`` call's object is the directory
    it listed: a read (``LISTING_OPS``) of it or in it. Another call's is the file it names, under
    any name the request gives it (``.<name>.<uuid>.tmp`` on the way to a rename, S3A's probe of
    ``<name>/``), or its directory's manifest, where ``manifest`` writes and deletes a file.

    By key and time, since no request says which thread sent it: a task's own read in a directory
    during a listing of it (a few milliseconds) counts as maintenance's, and a request on a
    partition's directory itself around a write (S3A's marker cleanup) stays the batch's, as a task
    writing there at that moment sends the same. Attributes nothing where no call was logged (before
    schema 6, or on a cluster)."""
    made = pd.Series(None, index=requests.index, dtype=object)
    if calls.empty or requests.empty:
        return made
    ordered = requests.sort_values("start")
    starts, ops, keys = ordered.start.to_numpy(), ordered.op.to_numpy(), ordered.key.to_numpy()
    for start, end, method, key in zip(calls.start, calls.end, calls.method, calls.key, strict=True):
        first = starts.searchsorted(start - WINDOW_SLACK_S, side="left")
        last = starts.searchsorted(end + WINDOW_SLACK_S, side="right")
        if method == "list":
            listed = key.rstrip("/")
            hits = [i for i in range(first, last) if ops[i] in LISTING_OPS and _on_listed(keys[i], listed)]
        else:
            directory, _, name = key.rpartition("/")
            log = manifest_format.prefix(directory)
            hits = [i for i in range(first, last) if keys[i].startswith(log) or (
                keys[i].startswith(directory + "/") and name in keys[i][len(directory) + 1:])]
        made.loc[ordered.index[hits]] = method
    return made


def batch_window(progress: dict) -> tuple[float, float]:
    """The wall-clock span (epoch seconds) of one batch, from its progress report."""
    start = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + progress["durationMs"]["triggerExecution"] / 1000.0
