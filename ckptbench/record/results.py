"""The record of one experiment in memory: ``Results`` (its tables and environment), ``Run`` (one
run's rows, warm-up and what no batch made left out in one place: ``ckptbench.record.attribution``)
and ``Recorder`` (how an experiment builds one, each row checked against its table's schema). The
tables, their columns and types are ``ckptbench.record.schema``'s."""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import functools
import json
import socket
import subprocess

import numpy as np
import pandas as pd

import ckpt_impls
from ckpt_impls import settings
from ckptbench.config import ROOT
from ckptbench.record import attribution, schema
from ckptbench.record.attribution import WINDOW_SLACK_S
from ckptbench.record.schema import DURATIONS, SCHEMA_VERSION, SOURCES, TABLES
from infra.net import archives_mapped


class RunFailed(RuntimeError):
    """The run asked for failed; str() is Spark's (or the harness's) reason."""


class Refused(RunFailed):
    """Spark refused the run's configuration for its workload (or lacks one of its levers);
    str() is Spark's reason. A result of the measurement, not a failure of it."""


def environment(store, experiment: str, size: str, plan: dict, spark=None, **extra) -> dict:
    """What an experiment ran on: the store, the fault profile its metering proxy injected and that
    profile's seed, the run size and plan, the commit and the versions of Spark, Hadoop and the S3A
    connector that ran it (read from the jars that are loaded) and the strategies it cannot run; the
    strategies from outside and the
    user's settings (``ckpt_impls.settings.recorded``: secret values redacted); where requests went
    (``where``) and, given the running ``spark`` session, its master, executor count and the driver
    JVM's ``-X`` flags (a JIT or heap setting changes what is timed: ``SPARK_SUBMIT_OPTS`` reaches them)."""
    from ckpt_impls import jars

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    env = {"schema_version": SCHEMA_VERSION, "experiment": experiment, "store": store.name,
           "describe": store.describe(), "emulator": store.emulator,
           "fault_profile": getattr(store, "fault_profile", "none"), "fault_seed": getattr(store, "seed", 0),
           "size": size, "plan": plan,
           "commit": commit, "host": socket.gethostname(),
           "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": jars.versions(), "where": where(store), "foreign_strategies": foreign_strategies(),
           "not_runnable": not_runnable(),
           "settings": settings.recorded()}
    return {**env, **(session_said(spark) if spark is not None else {}), **extra}


def session_said(spark) -> dict:
    """What a record's environment says of the running ``spark`` session: its master, executor count,
    the driver JVM's ``-X`` flags and the class data archives it mapped (``jvm_archives``)."""
    return {"spark_master": spark.sparkContext.master, "executors": executors(spark), "jvm_flags": jvm_flags(spark),
            "jvm_archives": jvm_archives(spark)}


def not_runnable() -> dict[str, str]:
    """The strategies the loaded S3A connector cannot run (``ckpt_impls.unavailable``), none of which
    a run measures, each with the hadoop-aws it needs."""
    return {name: s.min_hadoop_aws for name, s in ckpt_impls.STRATEGIES.items() if ckpt_impls.unavailable(name)}


def foreign_strategies() -> dict:
    """The strategies from outside this process knows (``ckpt_impls.foreign``), each named fully: its
    class, and each jar's path, SHA-256, size and ``Implementation-Version``, so that records of two
    builds of one manager are never taken for one."""
    return {s.name: {"class": s.manager_class, "jars": [dataclasses.asdict(j) for j in s.jars]}
            for s in ckpt_impls.STRATEGIES.values() if s.jars}


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


def jvm_archives(spark) -> list[str]:
    """The class data sharing archives (``.jsa``) the driver JVM has mapped: the JDK's own and, where
    it started from one that matched its class path, the drivers' (``harness.jvm_archive``); a flag
    naming an archive (``jvm_flags``) says only that it was asked for."""
    return archives_mapped(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def executors(spark) -> int:
    """Executor JVMs beside the driver: 0 in local mode, where the driver runs the tasks itself."""
    if spark.sparkContext.master.startswith("local"):
        return 0
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager too


@dataclasses.dataclass
class Results:
    """One experiment's record. Build it with ``Recorder``; write and read it with
    ``ckptbench.record.disk`` (``write``, ``read``)."""

    environment: dict
    tables: dict[str, pd.DataFrame]

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in TABLES:
            return self.tables[name] if name in self.tables else schema.frame(name, [])
        raise AttributeError(name)

    def __getstate__(self):
        # __getattr__ above must not answer pickle's probes; the cached properties below are left out.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def runs_of(self, strategy: str, workload: str, keys: int | None = None, preset: str = "default",
                source: str | None = None) -> list[Run]:
        """Every run of ``strategy`` x ``workload`` x ``keys`` in configuration ``preset`` that did
        not fail, in the order they ran (``run`` is the last of them, where it did not fail): the
        repeats of one configuration, for figures pooled over them."""
        keys = self.environment["plan"]["keys"][0] if keys is None else keys
        runs = self.runs
        match = runs[(runs.strategy == strategy) & (runs.workload == workload) & (runs["keys"] == keys)
                     & (runs.preset.fillna("default") == preset) & ~runs.error.apply(lambda e: isinstance(e, str))]
        return [Run(self, int(run), source) for run in match.run]

    def run(self, strategy: str, workload: str, keys: int | None = None, source: str | None = None,
            preset: str = "default") -> Run:
        """The run of ``strategy`` x ``workload`` (with ``keys`` keys: by default the plan's first)
        in configuration ``preset``, its requests as ``source`` counted them (by default the proxy
        where it did, else the JVM); raises ``Refused`` with Spark's reason if Spark refused the
        configuration, ``RunFailed`` with its reason if it failed, ``KeyError`` if there is none."""
        keys = self.environment["plan"]["keys"][0] if keys is None else keys
        runs = self.runs
        match = runs[(runs.strategy == strategy) & (runs.workload == workload) & (runs["keys"] == keys)
                     & (runs.preset.fillna("default") == preset)]
        if match.empty:
            raise KeyError(f"no run of {strategy} x {workload} x {keys} keys in configuration {preset}")
        row = match.iloc[-1]
        if isinstance(row.error, str):
            kind = Refused if row.refused else RunFailed
            named = f"{strategy} x {workload}" + ("" if preset == "default" else f" ({preset})")
            raise kind(f"{named} {'refused' if row.refused else 'failed'}: {row.error}")
        return Run(self, int(row.run), source)

    # What is worked out from the tables is kept once per record as a ``_``-named cached property,
    # which ``__getstate__`` leaves out of a pickle or copy: its reader works it out again.

    @functools.cached_property
    def _in_run_order(self) -> dict[str, tuple[pd.DataFrame, np.ndarray]]:
        """Each table in run order (as recorded; else sorted, stably) with its ``run`` values, a
        table at a time, as ``rows_of`` first asks for it."""
        return {}

    @functools.cached_property
    def _by_run(self) -> dict[tuple[str, int], pd.DataFrame]:
        """Each (table, run)'s rows, as ``rows_of`` first asks for them."""
        return {}

    def rows_of(self, table: str, run: int) -> pd.DataFrame:
        """``table``'s rows of ``run``: the table put in run order once per record, then each run's
        rows a slice of it found by binary search, once. Filtering a 10,000-batch run's two million
        requests again for every figure of every window takes minutes (measured:
        docs/findings/scale.md); splitting the whole table at once would make a process that
        reads one run (asv runs a process per benchmark and parameter) pay for every run."""
        if (table, run) not in self._by_run:
            if table not in self._in_run_order:
                frame = getattr(self, table)
                runs = frame["run"].to_numpy(dtype=np.int64)
                if len(runs) and (np.diff(runs) < 0).any():
                    frame = frame.sort_values("run", kind="stable")
                    runs = frame["run"].to_numpy(dtype=np.int64)
                self._in_run_order[table] = frame, runs
            frame, runs = self._in_run_order[table]
            first, end = np.searchsorted(runs, run, "left"), np.searchsorted(runs, run, "right")
            self._by_run[table, run] = frame.iloc[first:end]
        return self._by_run[table, run]

    @functools.cached_property
    def _counted(self) -> dict[tuple[int, str], pd.DataFrame]:
        """Each (run, source)'s requests, as first asked for."""
        return {}

    @functools.cached_property
    def _sources(self) -> dict[int, list[str]]:
        """Each run's sources, as first asked for."""
        return {}

    def requests_counted(self, run: int, source: str) -> pd.DataFrame:
        """The requests of ``run`` that ``source`` counted, of the run's rows (``rows_of``)."""
        if (run, source) not in self._counted:
            rows = self.rows_of("requests", run)
            self._counted[run, source] = rows[rows.source == source]
        return self._counted[run, source]

    def sources_of(self, run: int) -> list[str]:
        """The sources that counted requests of ``run``, in ``SOURCES`` order."""
        if run not in self._sources:
            counted = set(self.rows_of("requests", run).source)
            self._sources[run] = [s for s in SOURCES if s in counted]
        return self._sources[run]

    @functools.cached_property
    def _causes(self) -> pd.DataFrame:
        causes = [attribution.attribute(rows, self.rows_of("maintenance", run), self.rows_of("file_commits", run))
                  for run, rows in self.requests.groupby("run")]
        return pd.concat(causes) if causes else attribution.attribute(self.requests, self.maintenance)

    def causes(self) -> pd.DataFrame:
        """``attribution.attribute`` over the whole ``requests`` table (``cause``, ``batch``,
        ``call`` per request), each run's requests against its own maintenance calls; worked out
        once per record (a 10,000-batch run has a million requests)."""
        return self._causes

    @functools.cached_property
    def _attributed(self) -> dict[tuple[int, str], pd.DataFrame]:
        return {}

    def attributed(self, run: int, source: str) -> pd.DataFrame:
        """The requests of ``run`` that ``source`` counted, with their ``cause`` and ``call``
        (``causes``); ``batch_id`` the batch that made each (NA: none), ``window`` the batch whose
        window it started in (the recorded ``batch_id``). Once per run and source: every figure of
        every window of a long run reads them."""
        if (run, source) not in self._attributed:
            requests = self.requests_counted(run, source)
            causes = self.causes().reindex(requests.index)
            self._attributed[run, source] = requests.assign(window=requests.batch_id, batch_id=causes.batch,
                                                            cause=causes.cause, call=causes.call)
        return self._attributed[run, source]

    def strategies(self) -> list[str]:
        """The strategies of the runs, in the order they ran (the benchmark floor is none)."""
        return [s for s in dict.fromkeys(self.runs.strategy) if s != ckpt_impls.FLOOR.name]



@dataclasses.dataclass(frozen=True)
class Run:
    """One run's rows of each table. Warm-up is left out of ``batches`` and ``requests`` here, the
    one place that decides it; ``warmup`` holds those batches.

    Requests are one source's (``request_source``): ``source`` if given, else the first of
    ``SOURCES`` that counted this run. Two sources counting the same requests never add up here,
    so no figure can count a request twice. Each request is given the batch that made it, or
    another cause (``ckptbench.record.attribution``): ``requests`` are the measured batches' own,
    whenever state store maintenance ran and wherever a request's start fell; ``outside`` the
    others."""

    results: Results
    run: int
    source: str | None = None
    #: Only the measured batches with ids in ``first..last`` (a window of a long run), when given.
    window: tuple[int, int] | None = None

    @property
    def sources(self) -> list[str]:
        """The sources that counted this run's requests, in ``SOURCES`` order."""
        return self.results.sources_of(self.run)

    @property
    def request_source(self) -> str:
        if self.source is not None:
            return self.source
        return next(iter(self.sources), SOURCES[0])

    def _attributed(self) -> pd.DataFrame:
        """Every request of the run that ``request_source`` counted, attributed (``Results.attributed``)."""
        return self.results.attributed(self.run, self.request_source)

    @property
    def maintenance_requests(self) -> pd.DataFrame:
        """Every request of the run (one source's, warm-up and between batches too) that state
        store maintenance made, with the ``call`` that made it where one was logged (None where its
        file alone said so: ``attribution.MAINTENANCE_FILES``)."""
        requests = self._attributed()
        return requests[requests.cause == "maintenance"]

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
        return batches if self.window is None else batches[batches.batch_id.between(*self.window)]

    @property
    def warmup(self) -> pd.DataFrame:
        batches = self.all_batches
        return batches[batches.phase == "warmup"]

    @property
    def requests(self) -> pd.DataFrame:
        """The measured batches' own requests (one source's), each in the batch that made it."""
        requests = self._attributed()
        return requests[(requests.cause == "batch") & requests.batch_id.isin(self.batches.batch_id)]

    @property
    def outside(self) -> pd.DataFrame:
        """The requests (one source's) no batch made: state store maintenance's, wherever they fell,
        and those that started between batches (the query's start, too)."""
        requests = self._attributed()
        return requests[requests.cause != "batch"]

    @property
    def info(self) -> pd.Series:
        return self.results.runs.set_index("run").loc[self.run]


class Recorder:
    """Collects an experiment's rows as they are measured; ``results()`` makes the record. Every
    ``add_*`` checks its rows against the table's schema (``schema.check_rows``): a column the table
    does not have, or a required one left out, is a ``ValueError`` at the add. Rows put in ``rows``
    directly, or filled in there later, are checked when ``results()`` makes the record."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {name: [] for name in TABLES}

    def add(self, table: str, rows: list[dict]) -> None:
        """Add ``rows`` to ``table``, each checked against its schema."""
        schema.check_rows(table, rows)
        self.rows[table] += rows

    def add_run(self, strategy: str, workload: str, keys: int, prefix: str, settings: dict | None = None,
                preset: str = "default", repeat: int = 0) -> int:
        """A new run, the ``repeat``-th query of its configuration; its outcome columns are filled in
        (``rows["runs"][run].update``) as it ends."""
        run = len(self.rows["runs"])
        self.add("runs", [{"run": run, "strategy": strategy, "workload": workload, "keys": keys, "prefix": prefix,
                           "error": None, "peak_rss_mib": float("nan"), "temp_objects": 0,
                           "settings": json.dumps(settings or {}, sort_keys=True), "preset": preset,
                           "refused": False, "repeat": repeat, "task_slots": None, "cpu_s": float("nan"),
                           "others_cpu": float("nan")}])
        return run

    def fail_run(self, run: int, error: str, refused: bool = False) -> None:
        """``run`` failed with ``error``; ``refused``: Spark refused its configuration (a result)."""
        self.rows["runs"][run].update(error=" ".join(error.split())[:500], refused=refused)

    def add_batches(self, run: int, phase: str, progresses: list[dict]) -> None:
        rows = []
        for p in progresses:
            durations = p["durationMs"]
            operators = p.get("stateOperators") or []
            rows.append({
                "run": run, "batch_id": p["batchId"], "phase": phase, "timestamp": batch_window(p)[0],
                **{name: float(durations.get(name, float("nan"))) for name in DURATIONS},
                "state_commit_ms": float(sum(op["commitTimeMs"] for op in operators)) if operators else float("nan"),
                "state_rows": float(sum(op["numRowsTotal"] for op in operators)) if operators else float("nan"),
                "input_rows": p.get("numInputRows", 0)})
        self.add("batches", rows)

    def add_requests(self, run: int, events, progresses: list[dict], source: str = "proxy") -> None:
        """``events`` (requests, as the metering proxy records them, or as ``source`` did in the
        proxy's ``Event`` form), each attributed to the batch of ``progresses`` whose window it
        started in, or to none."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
        # Back-to-back windows do not overlap, so with WINDOW_SLACK_S a request falls in at most
        # two, and the earlier one takes it. Found by bisection: a 10,000-batch query's million
        # requests tried against each window in turn would take many minutes.
        windows = sorted(((start - WINDOW_SLACK_S, end + WINDOW_SLACK_S, p["batchId"]) for p in progresses
                          for start, end in [batch_window(p)]), key=lambda w: w[0])
        starts = [w[0] for w in windows]
        rows = []
        for e in events:
            last = bisect.bisect_right(starts, e.start) - 1  # the latest window begun by e.start
            batch = next((b for _, end, b in windows[max(last - 1, 0):last + 1] if e.start <= end), None)
            rows.append({
                "run": run, "batch_id": batch, "start": e.start, "ms": e.duration * 1000, "method": e.method,
                "op": e.op, "area": e.area, "bucket": e.bucket, "key": e.key, "status": e.status,
                "bytes_in": e.bytes_in, "bytes_out": e.bytes_out, "source": source,
                "origin": getattr(e, "origin", None)})
        self.add("requests", rows)

    def add_samples(self, experiment: str, op: str, ms: list[float], route: str = "proxy", size: int = 1024) -> None:
        self.add("samples", [{"experiment": experiment, "op": op, "route": route, "size": size, "seq": i,
                              "ms": value} for i, value in enumerate(ms)])

    def add_compaction(self, **row) -> None:
        self.add("compactions", [row])

    def add_fault_run(self, run: int, **row) -> None:
        self.add("fault_runs", [{"run": run, **row}])

    def add_scale(self, run: int, partitions: int, operators: int, kind: str) -> None:
        self.add("scale", [{"run": run, "partitions": partitions, "operators": operators, "kind": kind}])

    def add_memory(self, run: int, **row) -> None:
        self.add("memory", [{"run": run, **row}])

    def add_maintenance(self, run: int, calls: list[dict]) -> None:
        """The state store maintenance's calls to the run's manager (``querylab.maintenance_calls``)."""
        self.add("maintenance", [{"run": run, **call} for call in calls])

    def add_injections(self, run: int, injections) -> None:
        """``injections`` (``infra.faults.Injection``s, as the metering proxy keeps them) of ``run``."""
        self.add("injections", [{"run": run, "start": i.start, "op": i.op, "key": i.key, "fault": i.fault}
                                for i in injections])

    def add_capabilities(self, checks: dict[str, dict]) -> None:
        """The probe's ``checks`` (``ckptbench.experiments.probe.run``'s: ``{capability: {"ok", "detail", ...}}``)."""
        self.add("capabilities", [{"capability": name, "ok": bool(check["ok"]), "detail": check["detail"],
                                   "seconds": check["seconds"]} for name, check in checks.items()])

    def results(self, environment: dict) -> Results:
        """The record of the rows so far, each table conformed to its schema (``schema.frame``)."""
        return Results(environment, {name: schema.frame(name, rows) for name, rows in self.rows.items()})


def batch_window(progress: dict) -> tuple[float, float]:
    """The wall-clock span (epoch seconds) of one batch, from its progress report."""
    start = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start, start + progress["durationMs"]["triggerExecution"] / 1000.0
