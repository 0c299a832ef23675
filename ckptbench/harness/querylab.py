"""One store and one SparkSession on it, for running streaming queries one after another
(``QueryLab``, started by ``lab``), with every request recorded as the proxy and Spark's JVMs counted
it, the benchmark floor's files and the state store maintenance's calls.

The clocks are Spark's own (progress ``durationMs``, in the JVM) and the metering proxy's (per
request, store side). Spark starts once per experiment, before anything is timed."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

import ckpt_impls
import infra
from ckptbench.config import (
    ASYNC_INTERVAL,
    CHECKPOINT_SETTINGS,
    CLUSTER,
    DEFAULT_MASTER,
    DEFAULT_PRESET,
    LEVERS,
    MANIFEST_ROOT,
    ROWS_PER_BATCH,
    SLOTS_PER_CORE,
    SPARK_CONF,
    WORKLOAD_CONF,
    Plan,
    Shape,
    local_threads,
    slots_of,
    version_of,
)
from ckptbench.config import preset as preset_settings
from ckptbench.harness import jvm_requests, machine, workloads
from ckptbench.harness.spark import executors, setting, settings_set
from ckptbench.record import attribution, results
from infra.metered import MeteredStore
from infra.s3ops import Event, area_of

#: Seconds a query's warm-up may take beyond 30 s a batch before it counts as hung: its first batch
#: holds the query's start, which on a loaded machine with niced JVMs has to wait for CPU.
FIRST_BATCH_S = 600

# -- streaming queries ----------------------------------------------------------------------

class DriverProcess:
    """The driver JVM's process as Linux shows it (in local mode the executor's too): its peak
    resident set since ``reset()`` (VmHWM) and the CPU time it has spent; NaN off Linux."""

    def __init__(self, spark) -> None:
        pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
        self._proc = Path(f"/proc/{pid}")

    def reset(self) -> None:
        with contextlib.suppress(OSError):  # not Linux, or not ours to reset
            (self._proc / "clear_refs").write_text("5")  # "5" resets VmHWM to the current RSS (Linux >= 4.0)

    def peak_mib(self) -> float:
        try:
            status = (self._proc / "status").read_text().splitlines()
        except OSError:
            return float("nan")
        return next((float(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")), float("nan"))

    def cpu_s(self) -> float:
        """User and system CPU seconds of every thread of the process so far (``/proc/PID/stat``'s
        utime and stime: clock ticks, read past the command's name, which may hold spaces)."""
        try:
            fields = (self._proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QueryLab:
    """One store and one SparkSession on it, for running queries one after another. Requests are
    counted inside Spark's JVMs (``jvm_requests``) and, when ``store`` is a ``MeteredStore``, by its
    metering proxy too: each run records both, under their ``source``. On a store with no proxy (an
    https endpoint, AWS S3) the JVM's count is the run's only one. Each query writes under the
    store's ``run_prefix`` only."""

    def __init__(self, spark, store: infra.ObjectStore, bucket: str, plan: Plan) -> None:
        self.spark, self.store, self.bucket, self.plan = spark, store, bucket, plan
        self.proxy = getattr(store, "proxy", None)
        self.inner = getattr(store, "inner", store)  # the store itself, for the harness's own calls
        self.jvm = jvm_requests.of(spark)
        #: Where it runs beyond the master: the cluster and the executors waited for (``lab`` sets it).
        self.placement: dict = {}
        self.cluster: infra.SparkCluster | None = None  # the cluster ``lab`` started for it
        #: State store maintenance runs where the executors do; its calls are logged in this JVM only.
        self.watches_maintenance = spark.sparkContext.master.startswith("local[")
        #: The files' commits drained from the JVM (``pull``) and not yet recorded with their run.
        self.commits: list[dict] = []
        #: Task slots per core the session runs (``config.SLOTS_PER_CORE``: ``lab`` sets it), and the
        #: tasks it can run at once: a local master's threads (None: a cluster's).
        self.slots = 1
        self.task_slots = local_threads(spark.sparkContext.master)

    @property
    def where(self) -> dict:
        """Where it runs, for the results' environment: the master, and what ``placement`` holds, its
        ``executor_hosts`` every executor the application has had so far (an executor lost under load
        is replaced by one with a new id, and the requests it made name that id)."""
        where = {"spark_master": self.spark.sparkContext.master, **self.placement}
        if "executor_hosts" in where:
            where["executor_hosts"] = {**where["executor_hosts"], **executors(self.spark, dead_too=True)}
        return where

    def pull(self) -> None:
        """Move what the driver's JVM logged so far (requests, files' commits under the store's
        run prefix) into this process: a long query's heap readings call it first, so that the heap
        read is Spark's and the managers', not these logs'."""
        self.jvm.pull()
        self.pull_commits()

    def pull_commits(self) -> None:
        """Move the files' commits the driver's JVM logged under the store's run prefix so far into
        ``commits`` (none off local mode)."""
        if self.watches_maintenance:
            self.commits += file_commits(self.spark, self.bucket, self.store.run_prefix)

    def lacks_slots(self, preset: str) -> str | None:
        """Why this session cannot run ``preset``'s task slots per core: a cluster's executors set
        theirs; else None. ValueError where a local session runs other slots than ``preset``'s (an
        experiment runs a lab per value: ``lab``'s ``conf``)."""
        wanted = slots_of(preset)
        if wanted == self.slots:
            return None
        if self.task_slots is None:
            return (f"{wanted} task slots per core are a local master's threads here: "
                    f"{self.spark.sparkContext.master}'s executors take theirs from spark.executor.cores")
        raise ValueError(f"configuration {preset} runs {wanted} task slots per core; this session runs {self.slots}")

    def start(self, workload: str | Shape, base: str, keys: int, options: dict | None = None):
        """Start ``workload`` (a named one, or a job a user described) with everything under
        ``base`` (an s3a:// URL) and the lever's query ``options``; a started query."""
        spark, plan = self.spark, self.plan
        if isinstance(workload, Shape):
            trigger = f"{round(measured_trigger_s(workload.trigger_s) * 1000)} milliseconds"
            return workloads.described(spark, f"{base}/checkpoint", f"{base}/output", workload, options, trigger)
        if workload == "stateless":  # the levers experiment's stateless job, at the workloads' trigger
            return workloads.described(spark, f"{base}/checkpoint", f"{base}/output", Shape("stateless"), options)
        if workload.startswith("stateful"):
            # rows_per_batch=keys: every batch updates every key, so each state file holds them all.
            return workloads.stateful(spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys, digest=True)
        if workload == "windowed":
            return workloads.windowed(spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys)
        if workload == "file_sink":
            return workloads.file_sink(spark, f"{base}/checkpoint", f"{base}/output",
                                       compact_interval=plan.compact_interval, rows_per_batch=ROWS_PER_BATCH)
        if workload == "file_source":
            return workloads.file_source(spark, f"{base}/checkpoint", f"{base}/input", f"{base}/output",
                                         compact_interval=plan.compact_interval)
        raise ValueError(f"unknown workload {workload!r}")

    def run(self, recorder: results.Recorder | None, strategy: str, workload: str | Shape, keys: int, warmup: int,
            batches: int, bar=None, preset: str = DEFAULT_PRESET, repeat: int = 0) -> None:
        """One query of ``workload`` (a named one, or a ``Shape``: then ``keys`` is its own)
        checkpointing with ``strategy`` in configuration ``preset`` (``config.presets_for``):
        ``warmup`` then ``batches`` batches, added to ``recorder`` (None: untimed, recorded nowhere)
        as the ``repeat``-th query of its configuration.
        A failure is recorded as the run's error: one broken strategy must not cost the others their
        numbers; where Spark refuses the configuration, or lacks one of its levers, the run is
        recorded as refused, with Spark's reason (``refusal``)."""
        shape = workload if isinstance(workload, Shape) else None
        name, keys = (shape.name, shape.keys) if shape else (workload, keys)
        prefix = f"{self.store.run_prefix}bench/{strategy}-{name}-{keys}-{uuid.uuid4().hex[:8]}"
        lever_conf, options = preset_settings(preset)
        lever_conf.pop(SLOTS_PER_CORE, None)  # the session's, fixed as it started (``lacks_slots``)
        if shape:
            conf, options = {**shape.conf(), **lever_conf}, measured_options(options, shape.trigger_s)
        else:
            conf = {**WORKLOAD_CONF.get(workload, {}), **lever_conf}
        settings = {**checkpoint_settings(self.spark, conf), **{f"option.{k}": v for k, v in options.items()},
                    **({"trigger_s": str(measured_trigger_s(shape.trigger_s))} if shape else {})}
        run = recorder.add_run(strategy, name, keys, prefix, settings, preset, repeat) if recorder else None
        if bar:
            bar.set_postfix_str(f"{strategy} x {name} ({preset}), {keys:,} keys")
        lacking = lacks(self.spark.version, preset) or self.lacks_slots(preset)
        if lacking:
            if recorder:
                recorder.fail_run(run, lacking, refused=True)
            if bar:
                bar.update(warmup + batches)
            return
        ckpt_impls.use(self.spark, strategy, watch_maintenance=self.watches_maintenance)
        process = DriverProcess(self.spark)
        mark = self.proxy.mark() if self.proxy else None
        jvm_mark = self.jvm.mark()
        on_batch = bar.update if bar else None
        query, warm, measured = None, [], []
        try:
            if workload == "file_source":
                workloads.seed_text_files(self.store.client(), self.bucket, f"{prefix}/input", warmup + batches + 1)
            with settings_set(self.spark, conf):  # the query keeps the settings it started with
                query = self.start(workload, f"s3a://{self.bucket}/{prefix}", keys, options)
            try:
                # A slow store or a big state makes batches slow: the limit grows with the count.
                warm = workloads.await_batches(query, warmup, FIRST_BATCH_S + 30 * warmup, on_batch)
                process.reset()
                cpu, beside = process.cpu_s(), machine.reading()
                measured = workloads.await_batches(query, batches, 120 + 30 * batches, on_batch)
                peak, cpu = process.peak_mib(), process.cpu_s() - cpu
                others = machine.others_share(beside, machine.reading())
            finally:
                query.stop()
        except Exception as e:
            if recorder:
                reason = refusal(e, query)
                recorder.fail_run(run, reason or str(e), refused=reason is not None)
            if bar:  # the batches it will not run
                bar.update(max(0, warmup + batches - len(warm) - len(measured)))
            return
        finally:
            # A request elsewhere (an earlier query's state store maintenance) is not this query's; one
            # still running after stop() (an interrupted upload finishing) counts once it ended,
            # and only if it began before the cut, in both sources alike.
            mine, cut = prefix + "/", self.jvm.settle()
            events = [e for e in self.proxy.events_since(mark) if e.key.startswith(mine) and e.start < cut
                      ] if self.proxy else []
            jvm_events = [e for e in self.jvm.events_since(jvm_mark)
                          if e.bucket == self.bucket and e.key.startswith(mine) and e.start < cut]
            self.jvm.reset()  # drained into this run; nothing else reads them
            files = floor_files(self.spark, self.bucket, mine, cut) if strategy == ckpt_impls.FLOOR.name else []
            maintenance = maintenance_calls(self.spark, self.bucket, mine) if self.watches_maintenance else []
            self.pull_commits()
            commits, self.commits = [c for c in self.commits if c["key"].startswith(mine)], []
            temps = [k for k in self.inner.list_keys(self.bucket, mine) if ckpt_impls.TEMP_FILE.search(k)]
            self.inner.empty_bucket(self.bucket, mine)  # an in-memory store would fill up
        if recorder:
            recorder.rows["runs"][run].update(peak_rss_mib=peak, temp_objects=len(temps), task_slots=self.task_slots,
                                              cpu_s=cpu if self.task_slots else float("nan"), others_cpu=others)
            recorder.add_batches(run, "warmup", warm)
            recorder.add_batches(run, "measured", measured)
            if self.proxy:
                recorder.add_requests(run, events, warm + measured)
            recorder.add_requests(run, jvm_events, warm + measured, source="jvm")
            if files:
                recorder.add_requests(run, files, warm + measured, source="memory")
            recorder.add_maintenance(run, maintenance)
            recorder.add("file_commits", [{"run": run, **commit} for commit in commits])


#: The Java exceptions Spark raises when it refuses a query's configuration: as the query starts
#: (an unsupported sink) or before its first batch ends (async progress with state, format v2 on a
#: state store that lacks it).
_REFUSALS = re.compile(r"IllegalArgumentException|UnsupportedOperationException|does not support|NOT_SUPPORTED")


def refusal(error: BaseException, query) -> str | None:
    """Spark's reason, where ``error`` is Spark refusing the configuration before the query's first
    batch ended (not a failure of the store, the strategy or the harness); else None."""
    if query is not None and query.lastProgress is not None:
        return None  # it ran batches: whatever stopped it is a failure, not a refusal
    text = " ".join(str(error).split())
    java = getattr(error, "desc", None) or text
    if not _REFUSALS.search(f"{type(error).__name__} {getattr(error, 'java_exception', '')} {java}"):
        return None
    return text.split(" JVM stacktrace:")[0]


def lacks(spark_version: str, preset: str) -> str | None:
    """Why Spark ``spark_version`` cannot run configuration ``preset``: a lever it does not have
    (it would ignore the setting without a word, so the run would measure its defaults); else None."""
    version = version_of(spark_version)
    for name in (() if preset == DEFAULT_PRESET else preset.split("+")):
        lever = LEVERS[name]
        if version < lever.needs_spark:
            keys = ", ".join([*lever.conf, *lever.options])
            return (f"Spark {spark_version} has no {name} ({keys}: Spark {'.'.join(map(str, lever.needs_spark))}+); "
                    "it would ignore the setting")
    return None


#: The longest trigger a described job's query runs at. Async progress tracking writes its logs on
#: a single thread with a queue of two, and runs a write in the batch's own thread when the queue is
#: full (Spark's ``CallerRunsPolicy``): with batches back to back, slow log writes land on the batch
#: again, which the job's own trigger would not do. One second lets writes of up to about half that
#: drain between batches, and keeps a query of a few batches short; a slower store still backs up
#: (a limit: its async latency is then pessimistic).
TRIGGER_CAP_S = 1.0


def measured_trigger_s(trigger_s: float) -> float:
    """The trigger a job triggered every ``trigger_s`` seconds is measured at."""
    return min(trigger_s, TRIGGER_CAP_S)


def measured_options(options: dict[str, str], trigger_s: float) -> dict[str, str]:
    """Query ``options`` as measured for a job triggered every ``trigger_s`` seconds: async progress
    tracking's checkpoint interval scaled by the measured trigger (``measured_trigger_s``) over the
    job's, so the share of batches whose offsets and commits are written is the job's (a batch
    slower than the measured trigger writes them more often than at the job's: a limit)."""
    if ASYNC_INTERVAL not in options:
        return options
    scaled = int(float(options[ASYNC_INTERVAL]) * measured_trigger_s(trigger_s) / trigger_s)
    return {**options, ASYNC_INTERVAL: str(scaled)}


def floor_files(spark, bucket: str, prefix: str, cut: float) -> list[Event]:
    """The checkpoint files the benchmark floor's in-memory manager (``ckpt_impls.FLOOR``) published
    or deleted under ``s3a://bucket/prefix`` before ``cut``, one ``PUT`` or ``DELETE`` event each (no
    request was made: the count of files a batch writes and deletes); the manager forgets them and
    their contents."""
    events = []
    for line in ckpt_impls.jvm_class(spark, ckpt_impls.FLOOR.manager_class).drain(f"{bucket}/{prefix}").splitlines():
        start_us, op, size, name = line.split("\t", 3)
        start, key = int(start_us) / 1e6, name.split("/", 1)[1]
        if start < cut:
            events.append(Event(start, start, op, op, area_of(key), bucket, key, 200, int(size), 0))
    return events


def maintenance_calls(spark, bucket: str, prefix: str) -> list[dict]:
    """The calls Spark's state store maintenance made under ``s3a://bucket/prefix`` to the manager
    ``ckpt_impls.MAINTENANCE_WATCH`` wrapped, since the last read: ``start`` and ``end`` (epoch
    seconds), ``method``, the ``thread`` that made it, ``key``. The JVM forgets them."""
    calls = []
    for line in ckpt_impls.jvm_class(spark, ckpt_impls.MAINTENANCE_WATCH).drain(f"{bucket}/{prefix}").splitlines():
        start_us, end_us, method, thread, name = line.split("\t", 4)
        calls.append({"start": int(start_us) / 1e6, "end": int(end_us) / 1e6, "method": method, "thread": thread,
                      "key": name.split("/", 1)[1]})
    return calls


def file_commits(spark, bucket: str, prefix: str) -> list[dict]:
    """The checkpoint files committed under ``s3a://bucket/prefix`` through the manager
    ``ckpt_impls.MAINTENANCE_WATCH`` wrapped, since the last read, as rows of the ``file_commits``
    table (without ``run``): ``batch_id`` (``attribution.named_batch``), ``kind``, ``key``, ``start``
    (epoch seconds), ``ms`` and ``outcome``. The JVM forgets them."""
    rows = []
    drained = ckpt_impls.jvm_class(spark, ckpt_impls.MAINTENANCE_WATCH).drainCommits(f"{bucket}/{prefix}")
    for line in drained.splitlines():
        start_us, nanos, outcome, name = line.split("\t", 3)
        key = name.split("/", 1)[1]
        rows.append({"batch_id": attribution.named_batch("PUT", key), "kind": area_of(key), "key": key,
                     "start": int(start_us) / 1e6, "ms": int(nanos) / 1e6, "outcome": outcome})
    return rows


def checkpoint_settings(spark, overrides: dict[str, str] | None = None) -> dict[str, str | None]:
    """The values of ``CHECKPOINT_SETTINGS`` a query started in ``spark``'s session with
    ``overrides`` set would have (None: see ``setting``)."""
    overrides = overrides or {}
    return {key: overrides[key] if key in overrides else setting(spark, key) for key in CHECKPOINT_SETTINGS}


@contextlib.contextmanager
def lab(store: MeteredStore, bucket: str, plan: Plan, strategy: str, conf: dict | None = None,
        master: str = DEFAULT_MASTER):
    """A ``QueryLab`` with a SparkSession on ``store``, on ``master`` (``CLUSTER``: a standalone cluster
    started here for it), its executors registered; the session, and such a cluster, stop with it.
    ``manifest`` keeps its directory manifests below the store's run prefix (``MANIFEST_ROOT``), not up
    to the bucket root."""
    from ckptbench.harness.spark import await_executors, least_executors, session

    root = {MANIFEST_ROOT: f"s3a://{bucket}/{store.run_prefix}"} if store.run_prefix else {}
    conf = {**SPARK_CONF, **root, **(conf or {})}
    with contextlib.ExitStack() as stack:
        cluster = None
        if master == CLUSTER:
            cluster = stack.enter_context(infra.SparkCluster(env=ckpt_impls.chain_env(store)))
            master, conf = cluster.master_url, {**cluster.spark_conf(), **conf}
        spark = session(strategy, {bucket: store}, master=master, conf=conf)
        stack.callback(spark.stop)
        hosts = await_executors(spark, cluster.workers if cluster else least_executors(master))
        bench = QueryLab(spark, store, bucket, plan)
        bench.slots = int(conf.get(SLOTS_PER_CORE, "1"))
        bench.cluster = cluster
        bench.placement = {"cluster": cluster.describe() if cluster else None,
                           "executors": len(hosts), "executor_hosts": hosts}
        yield bench
