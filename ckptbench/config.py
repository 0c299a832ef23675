"""What a run measures and how: the run sizes (``PLANS``), the settings a run takes from the
environment (``Settings``, which ``python -m ckptbench bench`` sets for asv), the workloads' Spark
settings, and the Spark masters a run can use. The CLI, the experiments and the asv suite share them;
nothing here starts a store or Spark."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from pathlib import Path

import ckpt_impls
import infra
from infra.faults import PROFILES

#: The repository: where results, the venvs and the built jars live.
ROOT = Path(__file__).resolve().parent.parent
KiB, MiB = 1024, 1024 * 1024
#: Each lab's one name: its command, its experiment's record (``results/raw/<store>-<name>``), its
#: metrics module and its asv module.
CRASHLAB, FAULTLAB = "crashlab", "faultlab"
#: The record of ``bench``'s crash check of the configurations its levers experiment's jobs lead
#: with (``experiments.crash_check.check_jobs``): ``results/raw/<store>-crash-check``.
CRASH_CHECK = "crash-check"
#: The record of a ``bench`` run itself, its plan's stages planned and run: ``results/raw/<store>-bench``.
BENCH = "bench"
#: ``recommend``'s record, and the directory of a results directory its records go under by default
#: (``recommend/<store>-<job>/``, each with its page), where the report finds them.
RECOMMEND = "recommend"
#: The fault lab's workloads: a job's store outages are read from the one ``record.jobs.fault_workload``
#: names for it.
FAULT_WORKLOADS = ("stateless", "stateful", "file_sink")


@dataclasses.dataclass(frozen=True)
class Plan:
    jvm_warmup: int  # batches of the untimed queries that warm the JVM up before any run
    warmup: int  # batches run first in each query, recorded as warm-up
    # Measured batches per strategy x workload. The streaming and levers experiments split them over
    # ``repeats`` queries (``batches_per_query`` each); the other experiments run one query of them.
    batches: int
    compact_interval: int  # of the file sink's and file source's logs
    keys: tuple[int, ...]  # state sweep; keys[0] is every workload's
    sweep: tuple[tuple[int, int], ...]  # (warm-up, measured) batches for each of keys[1:]
    floor_samples: int
    copy_sizes: tuple[int, ...]
    copy_samples: int
    overhead_samples: int
    workloads: tuple[str, ...] = ("stateful", "file_sink", "file_source")
    sweep_workloads: tuple[str, ...] = ("stateful",)  # the workloads the state sweep (keys[1:]) runs
    # Untimed keys (5 requests each) the client floor sends first (``client_floor``): the SDK's request
    # path, shared by every strategy, compiled by the JIT before anything is timed: in a cold JVM the
    # SDK's PUT is markedly slower for its first few hundred keys (measured: docs/findings/overhead.md).
    client_floor_warmup: int = 1000
    # Independent queries of each configuration in the streaming and levers experiments, run in
    # mirrored rounds (``interleaved``), so that drift in a shared machine's load reaches every
    # configuration compared alike and the decision pools batches of more than one query. Every run
    # size has two or more: the reproducibility figure (``decide.halves``) decides on each half.
    repeats: int = 2

    @property
    def batches_per_query(self) -> int:
        """Measured batches of each of a configuration's ``repeats`` queries: ``batches`` split over
        them, rounded up."""
        return per_query(self.batches, self.repeats)

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"a plan's repeats must be 1 or more, not {self.repeats}")
    # ``bench``'s crash check (``experiments.crash_check``) of the configurations each job of its levers
    # experiment leads with that the crash lab has not run: how many leaders it checks a round (1: the
    # chosen one; 2: and the runner-up, which spares a round should the chosen one break), and the
    # cycles of each (a cycle costs a driver's restart and a check of the output, on top of a series'
    # first start and its check at rest, which cost more).
    crash_check_leaders: int = 2
    crash_check_cycles: int = 2


#: The stateful workloads users run (``WORKLOAD_CONF``), in the full plan.
STATE_STORES = ("stateful_rocksdb", "stateful_rocksdb_changelog", "windowed", "stateful_no_checksum")


COPY_SIZES = (KiB, 64 * KiB, MiB, 8 * MiB, 32 * MiB, 128 * MiB)
KEYS = (1_000, 30_000, 300_000)  # state files of ~35 KiB, ~1 MiB, ~10 MiB (two per batch)
# Few batches at 300k keys: Ceph RGW frees a deleted object's tail (beyond 4 MiB) only after its
# garbage collection delay, hours later, and the lab's in-memory OSD holds 1 GiB, of which
# 5 strategies x 10 batches x 2 state files of ~10 MiB already take five eighths.
PLANS = {
    "smallest": Plan(1, 1, 3, 2, (100, 1_000), ((1, 2),), 10, (KiB, MiB, 4 * MiB), 3, 40, client_floor_warmup=20,
                     repeats=2, crash_check_leaders=1, crash_check_cycles=1),
    # quick, `make bench`'s: what the decision and the report's tables read, on every real store in
    # 30 minutes. The jobs at their own keys (``Shape.keys``), so the streaming runs and the levers'
    # pool into one decision; the state stores' jobs are the levers experiment's (``BENCH_SHAPES``),
    # the other state stores and the state sweep beyond 30k keys the full plan's.
    "quick": Plan(1, 1, 4, 2, KEYS[:2], ((1, 2),), 100, COPY_SIZES[:4], 3, 200, client_floor_warmup=200,
                  repeats=2, crash_check_leaders=1, crash_check_cycles=1),
    "full": Plan(10, 5, 100, 10, KEYS, ((3, 20), (2, 8)), 1000, COPY_SIZES, 15, 2000,
                 ("stateful", *STATE_STORES, "file_sink", "file_source"), ("stateful", "stateful_rocksdb_changelog"),
                 repeats=4, crash_check_cycles=5),
}
#: The state store comparison of the README's strategy table: every stateful workload, RocksDB with
#: changelog checkpointing at three state sizes; few batches, for the request pattern.
STATE_STORES_PLAN = dataclasses.replace(PLANS["smallest"], warmup=1, batches=4, keys=(1_000, 10_000, 30_000),
                                        sweep=((1, 3), (1, 3)), workloads=("stateful", *STATE_STORES),
                                        sweep_workloads=("stateful_rocksdb_changelog",))

#: The checkpoint manager Spark's own log (``FileStreamSinkLog``) writes through in the history experiment.
SPARK_LOG_STRATEGY = "direct"
#: The compacted logs: the file sink's (in the file_sink workload) and the file source's.
LOGS = {"_spark_metadata": "file_sink", "sources": "file_source"}
ROWS_PER_BATCH = 1_000  # file_sink's input; stateful reads as many rows as it has keys
#: How many progress updates a query keeps (Spark's ``recentProgress``).
RECENT_PROGRESS = "spark.sql.streaming.numRecentProgressUpdates"
SPARK_CONF = {
    "spark.driver.memory": "2g",  # the largest state sweep holds a few versions of 300k keys
    RECENT_PROGRESS: "1000",
    # State store maintenance (snapshots, RocksDB's changelog snapshot uploads, old-version
    # deletes) every 5 s, not Spark's 60 s: a measured query runs for tens of seconds, and with
    # 60 s it would see a maintenance round or none by chance. Read once per JVM, so set here.
    "spark.sql.streaming.stateStore.maintenanceInterval": "5s",
}

#: The manifest strategy's root (``ckpt_impls``' option): directories at or above it are not recorded.
MANIFEST_ROOT = "spark.hadoop.ckptbench.manifest.root"
STATE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FILE_CHECKSUM = "spark.sql.streaming.checkpoint.fileChecksum.enabled"  # Spark 4.1+
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"  # Spark 4.0+
#: The settings that change a stateful query's checkpoint requests; every run records their values.
CHECKPOINT_SETTINGS = (
    STATE_PROVIDER, CHANGELOG, FILE_CHECKSUM,
    FORMAT_VERSION,
    "spark.sql.streaming.minBatchesToRetain",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot",
    "spark.sql.streaming.stateStore.maintenanceInterval",
)
#: The workloads' session settings beyond the session's own (``ckptbench.harness.spark.BASE_CONF``: the
#: HDFS-backed state store); each query starts with them set and they are restored after it.
WORKLOAD_CONF = {
    "stateful_rocksdb": {STATE_PROVIDER: ROCKSDB, CHANGELOG: "false"},
    "stateful_rocksdb_changelog": {STATE_PROVIDER: ROCKSDB, CHANGELOG: "true"},
    "stateful_no_checksum": {FILE_CHECKSUM: "false"},
}
#: Task slots per core a session runs tasks in: ckptbench's setting, not Spark's. A checkpoint's
#: state files are written from the tasks, one store round trip after another, so a slot waiting on
#: the store holds its core idle; more slots than cores let those waits overlap. A session's slots
#: are fixed as it starts (``harness.spark.session`` makes a local master ``local[N]`` run N x this
#: many threads: ``with_slots``); a cluster's executors take theirs from ``spark.executor.cores``,
#: set where they start, so the levers that set it run on a local master only.
SLOTS_PER_CORE = "ckptbench.task.slotsPerCore"
#: Query options of async progress tracking (Spark 3.4+): offsets and commits written off the batch's
#: critical path, at most once per interval.
ASYNC_PROGRESS = "asyncProgressTrackingEnabled"
ASYNC_INTERVAL = "asyncProgressTrackingCheckpointIntervalMs"


@dataclasses.dataclass(frozen=True)
class Lever:
    """One of Spark's own checkpoint levers: session settings (``conf``) and query options
    (``options``) a query starts with. ``state``: True where it acts on state store files only
    (a stateless query has none to change); ``provider``: the state store it acts on (None: any);
    ``needs_spark``: the first Spark (major, minor) with it. A lever Spark refuses for a workload
    is still run: Spark's refusal is the result (``ckptbench.experiments.levers``)."""

    conf: dict = dataclasses.field(default_factory=dict)
    options: dict = dataclasses.field(default_factory=dict)
    state: bool = False
    provider: str | None = None
    needs_spark: tuple[int, int] = (3, 5)


#: Spark's levers a configuration combines with a manager (``presets_for``). Async progress tracking
#: is not exactly-once end to end: after a crash Spark re-plans the batches whose offsets it never
#: wrote as one (Spark's documentation says so; the crash lab's ``after-skipped-offsets`` point shows it).
LEVERS = {
    "async-progress": Lever(options={ASYNC_PROGRESS: "true", ASYNC_INTERVAL: "1000"}),
    "changelog": Lever(conf={CHANGELOG: "true"}, state=True, provider="rocksdb"),
    "format-v2": Lever(conf={FORMAT_VERSION: "2"}, state=True, needs_spark=(4, 0)),
    "no-checksum": Lever(conf={FILE_CHECKSUM: "false"}, state=True, needs_spark=(4, 1)),
    **{f"slots-{n}": Lever(conf={SLOTS_PER_CORE: str(n)}) for n in (2, 4)},
}
#: A configuration with none of ``LEVERS``: Spark's own defaults.
DEFAULT_PRESET = "default"
#: The configuration a job runs with when nobody chooses: Spark's own manager and settings.
SPARK_DEFAULT = ("rename", DEFAULT_PRESET)
PROVIDERS = {"hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
             "rocksdb": ROCKSDB}
SINKS = ("noop", "foreach", "file")


@dataclasses.dataclass(frozen=True)
class Shape:
    """A streaming job as its user describes it: ``stateless`` or ``stateful`` (an aggregation
    over ``keys`` keys, every key updated every batch), its state store ``provider``
    (``PROVIDERS``), shuffle ``partitions`` (a state file each per batch), ``trigger_s`` (one batch
    every so many seconds, for requests per month) and ``sink`` (``SINKS``)."""

    kind: str = "stateful"
    provider: str = "hdfs"
    partitions: int = 2
    trigger_s: float = 10.0
    keys: int = 1_000
    sink: str = "noop"

    def __post_init__(self) -> None:
        for field, value, allowed in (("workload", self.kind, ("stateless", "stateful")),
                                      ("provider", self.provider, tuple(PROVIDERS)), ("sink", self.sink, SINKS)):
            if value not in allowed:
                raise ValueError(f"--{field} must be one of {', '.join(allowed)}, not {value!r}")
        if not 1 <= self.partitions <= 10_000:
            raise ValueError(f"--partitions must be 1 to 10000, not {self.partitions}")
        if not 0 < self.trigger_s <= 86_400:
            raise ValueError(f"--trigger must be more than 0 s and at most a day, not {self.trigger_s:g} s")
        if not 1 <= self.keys <= 10_000_000:
            raise ValueError(f"--state-keys must be 1 to 10000000, not {self.keys}")

    @property
    def stateful(self) -> bool:
        return self.kind == "stateful"

    @property
    def name(self) -> str:
        """The workload's name in a record's ``runs``: e.g. ``stateful-rocksdb-noop-200p``."""
        state = f"stateful-{self.provider}" if self.stateful else "stateless"
        return f"{state}-{self.sink}-{self.partitions}p"

    def conf(self) -> dict[str, str]:
        """The session settings of the job itself, beneath any lever's."""
        return {"spark.sql.shuffle.partitions": str(self.partitions), STATE_PROVIDER: PROVIDERS[self.provider]}


def configuration_label(strategy: str, preset: str | None = DEFAULT_PRESET) -> str:
    """``strategy`` and its levers (``preset``; empty, None or NaN, as a record without one reads:
    Spark's defaults), as the report and the CLI name a configuration: ``conditional + changelog``."""
    return strategy if not isinstance(preset, str) or preset in ("", DEFAULT_PRESET) else f"{strategy} + {preset}"


def presets_for(shape: Shape) -> tuple[str, ...]:
    """The configurations measured for ``shape``: Spark's defaults, each lever that can act on it
    alone, and every combination of the state levers that act on its state store (task slots,
    ``SLOTS_PER_CORE``, alone only: they act on every request a task makes, whatever the levers). Async
    progress tracking is offered to a stateful job too, and format v2 to the HDFS-backed store: Spark
    refuses both, and says why."""
    single = [name for name, lever in LEVERS.items() if shape.stateful or not lever.state]
    state = [name for name in single if LEVERS[name].state and LEVERS[name].provider in (None, shape.provider)
             and not (name == "format-v2" and shape.provider != "rocksdb")]
    combos = ["+".join(c) for k in range(2, len(state) + 1) for c in itertools.combinations(state, k)]
    return (DEFAULT_PRESET, *(name for name in single if name in state or not LEVERS[name].provider), *combos)


#: The streaming experiment's workloads (``Plan.workloads``) that are a job a user describes, each
#: in a configuration of Spark's levers: the same query (an aggregation over the shape's keys, every key
#: updated every batch, to the noop sink; ``harness.workloads.stateful`` and ``described``), state store,
#: shuffle partitions (``harness.spark.BASE_CONF``'s 2) and session settings (``WORKLOAD_CONF`` is the
#: shape's and the preset's: tests/test_decide.py checks it). Their runs count as runs of that job only at
#: the shape's keys. Limits: the streaming experiment triggers a batch every 100 ms and the levers
#: experiment at its measured trigger (``harness.querylab.measured_trigger_s``), and its state holds one
#: column more per key (``max_value``). ``windowed``, ``file_sink`` and ``file_source`` are jobs of their
#: own: no ``Shape`` describes them.
STREAMING_JOBS = {
    "stateful": (Shape("stateful", "hdfs"), DEFAULT_PRESET),
    "stateful_no_checksum": (Shape("stateful", "hdfs"), "no-checksum"),
    "stateful_rocksdb": (Shape("stateful", "rocksdb"), DEFAULT_PRESET),
    "stateful_rocksdb_changelog": (Shape("stateful", "rocksdb"), "changelog"),
}


def job_of(workload: str, keys: int, preset: str = DEFAULT_PRESET) -> tuple[str, str]:
    """The job a run of ``workload`` at ``keys`` keys in configuration ``preset`` measured, and the
    configuration it measured it in: ``STREAMING_JOBS``' shape's name and preset for a streaming
    workload there at the shape's keys, else ``workload`` (a shape's name already, or a job of its
    own) and ``preset``."""
    found = STREAMING_JOBS.get(workload)
    if found is None or found[0].keys != keys or preset != DEFAULT_PRESET:
        return workload, preset
    return found[0].name, found[1]


def per_query(batches: int, repeats: int) -> int:
    """Measured batches of each of ``repeats`` queries that measure ``batches`` together: rounded up."""
    return -(-batches // repeats)


def interleaved(configurations: list, repeats: int) -> list[tuple[int, object]]:
    """Each of ``configurations`` ``repeats`` times, as (repeat, configuration) in the order to run
    them: mirrored rounds, ``A B C`` then ``C B A`` and again, so that a drift in the machine's
    speed that is linear over a pair of rounds adds the same to every configuration's mean position."""
    return [(r, c) for r in range(repeats) for c in (configurations if r % 2 == 0 else configurations[::-1])]


def preset(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The session settings and query options of configuration ``name`` (levers joined by ``+``)."""
    conf, options = {}, {}
    for lever in (() if name == DEFAULT_PRESET else name.split("+")):
        if lever not in LEVERS:
            raise ValueError(f"unknown lever {lever!r}: the levers are {', '.join(LEVERS)}")
        conf.update(LEVERS[lever].conf)
        options.update(LEVERS[lever].options)
    return conf, options


def parse_trigger(text: str) -> float:
    """Seconds in a trigger interval written ``10s``, ``500ms``, ``2m``, ``1h`` or a bare number of
    seconds; ValueError in one line otherwise."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    number = text.strip().lower()
    unit = next((u for u in ("ms", "s", "m", "h") if number.endswith(u)), "s")
    number = number[: -len(unit)] if number.endswith(unit) else number
    try:
        return float(number) * units[unit]
    except ValueError:
        raise ValueError(f"--trigger must be a duration such as 10s, 500ms or 2m, not {text!r}") from None


#: Workloads that need a newer Spark than 3.5, with the version (major, minor) they need.
NEEDS_SPARK = {"stateful_no_checksum": (4, 1)}
#: The requests of the store's floor, in the order ``floor_samples`` makes them.
FLOOR_OPS = ("PUT", "HEAD", "COPY", "LIST", "DELETE")
#: Idle time before each timed key of the floor (``floor_samples``, ``client_floor``). A checkpoint's
#: PUT follows tens of milliseconds without a request (Spark plans the batch between), and a store can
#: answer a PUT after idle more slowly than one right after another request (Ceph RGW does: measured,
#: docs/findings/overhead.md): a floor of back-to-back requests is one no checkpoint gets.
FLOOR_PAUSE_S = 0.1
#: Object sizes of the probe's COPY check in a run: ``copy_samples`` measures COPY against size;
#: the check needs identical copies, and two sizes for its fit.
PROBE_COPY_SIZES = (KiB, MiB)
#: The metering proxy's fault profile that projects a store to AWS S3 (``infra.faults``).
PROJECTION = "aws-projection"
#: The parts of ``record_store_alone``, in the order it runs them.
STORE_ALONE_PARTS = ("floor", "overhead", "copy", "projected copy", "probe")
DEFAULT_MASTER = "local[2]"
#: A local master's URL: ``local``, ``local[N]`` or ``local[*]``, and ``local[N,F]`` with F, the tries a
#: task gets (groups: N, F).
LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:,(\d+))?\])?")
#: Spark's own default of ``spark.task.maxFailures``: the tries a task gets on a cluster before its
#: job fails. A local master takes it from its URL alone (``harness.spark.local_with_retries``).
TASK_MAX_FAILURES = "4"
#: The master that starts a Spark standalone cluster on this machine for the run (``infra.SparkCluster``).
CLUSTER = "cluster"


def slots_of(preset_name: str) -> int:
    """Task slots per core configuration ``preset_name`` runs with (``SLOTS_PER_CORE``; 1 where unset)."""
    return int(preset(preset_name)[0].get(SLOTS_PER_CORE, "1"))


def slots_said(slots: int) -> str:
    """How a user runs ``slots`` task slots per core (``SLOTS_PER_CORE``), which no setting of a running
    session changes: where executors start, and in a local master's URL."""
    return (f"run {slots} task slots per core: each executor's spark.executor.cores at {slots} x the CPUs it gets "
            f"(on Kubernetes spark.kubernetes.executor.request.cores asks for the CPUs), or a local master "
            f"local[{slots} x cores]")


def slots_preset(slots: int) -> str:
    """The configuration that sets ``slots`` task slots per core and nothing else (Spark's defaults
    for one); ValueError where no lever sets that many."""
    if slots == 1:
        return DEFAULT_PRESET
    found = [name for name, lever in LEVERS.items() if lever.conf.get(SLOTS_PER_CORE) == str(slots)]
    if not found:
        raise ValueError(f"no lever sets {slots} task slots per core")
    return found[0]


def at_slots(preset_name: str, slots: int) -> str:
    """Configuration ``preset_name`` with ``slots`` task slots per core instead of its own."""
    levers = [name for name in ([] if preset_name == DEFAULT_PRESET else preset_name.split("+"))
              if SLOTS_PER_CORE not in LEVERS[name].conf]
    with_them = [*levers, *([slots_preset(slots)] if slots > 1 else [])]
    return "+".join(with_them) or DEFAULT_PRESET


def with_slots(master: str, slots: int) -> str | None:
    """Local ``master`` running ``slots`` task slots per core: ``local[N]`` as ``local[N x slots]``
    (``local`` is one core, ``local[*]`` this machine's), a ``local[N,F]``'s F kept; ``master`` as it
    is for one slot; None for any other master (its executors' cores set their slots)."""
    cores = local_threads(master)
    if slots == 1 or cores is None:
        return master if slots == 1 else None
    tries = task_tries(master)
    return f"local[{cores * slots}{f',{tries}' if tries > 1 else ''}]"


def check_master(master: str, what: str = "--master") -> str:
    """``master`` if it names a Spark master this lab can run on, else ValueError in one line."""
    if master == CLUSTER or master.startswith(("local", "spark://")):
        return master
    raise ValueError(f"{what} must be local[N], spark://HOST:PORT or {CLUSTER} (a standalone cluster started "
                     f"on this machine), not {master!r}")


def local_threads(master: str) -> int | None:
    """The tasks a local ``master`` runs at once (``local`` one, ``local[*]`` this machine's cores);
    None for any other master."""
    match = LOCAL_MASTER.fullmatch(master.replace(" ", ""))
    if match is None:
        return None
    return (os.cpu_count() or 1) if match.group(1) == "*" else int(match.group(1) or 1)


def task_tries(master: str) -> int | None:
    """How often a local ``master`` tries a task before its job fails: ``local[N,F]``'s F, once for
    ``local`` or ``local[N]``; None for any other master (its ``spark.task.maxFailures`` decides)."""
    match = LOCAL_MASTER.fullmatch(master.replace(" ", ""))
    return None if match is None else int(match.group(2) or 1)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run measures where: the store, its bucket (None: a fresh one on a local store), the
    run size, the directory raw results are written to, and the fault profile the metering proxy
    injects (``infra.faults.PROFILES``) with its seed, the Spark master, and the strategies measured
    (``strategies``: empty for every one the loaded S3A can run; ``measured_strategies``); in a ``bench``
    run, its id and what runs beside (stage names), which each record saved says (``disk.save``)."""

    store: str
    size: str
    bucket: str | None
    raw: Path
    fault_profile: str = "none"
    fault_seed: int = 0
    master: str = DEFAULT_MASTER  # a Spark master URL, or CLUSTER
    strategies: tuple[str, ...] = ()
    bench_run: str = ""
    beside: tuple[str, ...] = ()

    #: The environment variables ``from_env`` reads (``python -m ckptbench bench`` sets them).
    ENV = {"store": "CKPT_STORE", "size": "CKPT_BENCH_SIZE", "bucket": "CKPT_BUCKET", "raw": "CKPT_BENCH_RAW",
           "fault_profile": "CKPT_FAULT_PROFILE", "fault_seed": "CKPT_FAULT_SEED", "master": "CKPT_SPARK_MASTER",
           "strategies": "CKPT_STRATEGIES", "bench_run": "CKPT_BENCH_RUN", "beside": "CKPT_BENCH_BESIDE"}

    @classmethod
    def from_env(cls) -> Settings:
        size = os.environ.get(cls.ENV["size"]) or "quick"
        if size not in PLANS:
            raise ValueError(f"{cls.ENV['size']} must be one of {', '.join(PLANS)}, not {size!r}")
        fault_profile = os.environ.get(cls.ENV["fault_profile"]) or "none"
        if fault_profile not in PROFILES:
            raise ValueError(f"{cls.ENV['fault_profile']} must be one of {', '.join(PROFILES)}, not {fault_profile!r}")
        seed = os.environ.get(cls.ENV["fault_seed"]) or "0"
        if not seed.isdigit():
            raise ValueError(f"{cls.ENV['fault_seed']} must be a whole number, not {seed!r}")
        master = check_master(os.environ.get(cls.ENV["master"]) or DEFAULT_MASTER, cls.ENV["master"])
        strategies = tuple(filter(None, (os.environ.get(cls.ENV["strategies"]) or "").split(",")))
        unknown = [name for name in strategies if name not in ckpt_impls.STRATEGIES]
        if unknown:
            raise ValueError(f"{cls.ENV['strategies']} names no strategy {', '.join(unknown)}: valid strategies: "
                             f"{', '.join(ckpt_impls.STRATEGIES)}")
        return cls(store=os.environ.get(cls.ENV["store"]) or default_store(), size=size,
                   bucket=os.environ.get(cls.ENV["bucket"]) or None,
                   raw=Path(os.environ.get(cls.ENV["raw"]) or ROOT / "results" / "raw"),
                   fault_profile=fault_profile, fault_seed=int(seed), master=master, strategies=strategies,
                   bench_run=os.environ.get(cls.ENV["bench_run"]) or "",
                   beside=tuple(filter(None, (os.environ.get(cls.ENV["beside"]) or "").split(","))))

    def env(self) -> dict[str, str]:
        values = {"store": self.store, "size": self.size, "raw": str(self.raw), "fault_profile": self.fault_profile,
                  "fault_seed": str(self.fault_seed), "master": self.master, "bucket": self.bucket or "",
                  "strategies": ",".join(self.strategies), "bench_run": self.bench_run, "beside": ",".join(self.beside)}
        return {self.ENV[name]: value for name, value in values.items() if value}

    @property
    def measured_strategies(self) -> list[str]:
        """The strategies a run measures: ``strategies``, else every one the loaded S3A connector can
        run (``ckpt_impls.runnable``)."""
        return list(self.strategies) or ckpt_impls.runnable()

    @property
    def plan(self) -> Plan:
        return PLANS[self.size]


def default_store() -> str:
    """Ceph RGW where it can start here (a real store), else the embedded emulator."""
    return "ceph" if infra.CephStore.unavailable_reason() is None else "embedded"


#: The real stores the project starts itself, which ``make bench`` measures where they can start.
BENCH_STORES = ("ceph", "seaweedfs")


def bench_stores() -> list[str]:
    """The stores of ``BENCH_STORES`` that can start here, else the embedded emulator alone."""
    return [name for name in BENCH_STORES if infra.store_class(name).unavailable_reason() is None] or ["embedded"]


def workloads_for(plan: Plan, spark_version: str) -> tuple[str, ...]:
    """``plan``'s workloads that Spark ``spark_version`` ("3.5", "4.3") can run (``NEEDS_SPARK``)."""
    version = version_of(spark_version)
    return tuple(w for w in plan.workloads if version >= NEEDS_SPARK.get(w, (0, 0)))


def version_of(spark_version: str) -> tuple[int, int]:
    """(major, minor) of a Spark version such as "4.3.0", as ``NEEDS_SPARK`` and ``Lever`` name them."""
    major, minor = spark_version.split(".")[:2]
    return int(major), int(minor)
