"""How a checkpoint's cost grows along the axes production jobs hit: shuffle partitions, stateful
operators and batch count, for every strategy; ``scale(settings)`` returns the record
(``ckptbench.record``, experiment ``scale``).

- Partitions: the stateful workload (``workloads.stateful``) at each of ``Axes.partitions``
  (``spark.sql.shuffle.partitions``, fixed in a checkpoint when its query first starts, so each
  point is a fresh query). Every partition's state store writes its own delta file each batch, so
  the state area's requests grow with the partitions while offsets/ and commits/ do not.
- Operators: one and two stateful operators (``workloads.stateful(operators=2)``: a
  ``dropDuplicates`` before the aggregation) at ``Axes.operators_partitions``; the one-operator
  point is the partitions axis's run at that count, not run twice.
- Batches: one long query per strategy (``Axes.long_batches``, 2 partitions, Spark's purge on with
  ``spark.sql.streaming.minBatchesToRetain`` at ``Axes.retain``, its first ``retain`` batches
  warm-up too, so that the purge runs from the first measured batch), cut into ``Axes.windows``
  windows by batch id (``ckptbench.metrics.scale_points``): offsets/, commits/ and the state
  directory stop growing once the purge starts, so their requests and times per batch should
  stay flat in the batch count. Every ``long_batches / windows`` batches the driver JVM is
  asked for a full GC and its heap in use is read (``HeapReader``), with the checkpoint
  managers' own objects from a class histogram: the memory benchmarks, which must stay bounded.

State store maintenance (snapshots, deleting old state files) runs every
``MAINTENANCE_INTERVAL`` instead of Spark's 60 s, so that it happens within these runs; its
requests fall between batches and are in the record's ``requests`` with no batch. Points get few
measured batches each (the partitions fit is over the points, not within one); every figure and
fit is defined in ``ckptbench.metrics``.
"""

from __future__ import annotations

import dataclasses
import subprocess

from ckptbench import config, progress
from ckptbench.harness import querylab, stores, workloads
from ckptbench.record import disk, results

KEYS = 1_000  # state keys of every scale query: small, so the axes, not the data, set the cost
MAINTENANCE_INTERVAL = "2s"
#: The classes of the checkpoint managers (``ckpt_impls/java``): what a manager itself holds.
MANAGER_PACKAGE = "ckptbench.checkpoint."


@dataclasses.dataclass(frozen=True)
class Axes:
    partitions: tuple[int, ...]  # shuffle partitions, at one stateful operator
    operators: tuple[int, ...]  # stateful operators, at operators_partitions partitions
    operators_partitions: int
    warmup: int  # batches run first in each query, recorded as warm-up (the long query: retain more)
    batches: int  # measured batches per point
    long_batches: int  # measured batches of the long query (the batch-count axis)
    retain: int  # spark.sql.streaming.minBatchesToRetain in the long query
    windows: int  # windows the long query is cut into; a heap reading after each


AXES = {
    "smallest": Axes((2, 8), (1, 2), 8, 1, 2, 12, 4, 3),
    "quick": Axes((2, 8), (1, 2), 8, 1, 2, 12, 4, 3),
    "full": Axes((2, 20, 200, 1000), (1, 2), 200, 3, 10, 10_000, 100, 20),
}
LONG_PARTITIONS = 2


def axes_of(record: results.Results) -> Axes:
    return Axes(**{k: tuple(v) if isinstance(v, list) else v for k, v in record.environment["plan"].items()})


class HeapReader:
    """The driver JVM's heap after a full GC, and the checkpoint managers' objects in it.

    ``jcmd <pid> GC.class_histogram`` (the JDK's own tool; it runs a full GC first) counts the live
    instances and shallow bytes per class; the managers' are the ``MANAGER_PACKAGE`` classes'
    (a manifest's view, its entries and garbage lists included; the Strings and collections they
    point to are not, so the KiB is a floor). The heap is then read as each heap pool's use just
    after the last collection (``MemoryPoolMXBean.getCollectionUsage``) following a ``System.gc()``:
    the live set, which a reading of the heap in use would blur with whatever the running query
    allocated since (hundreds of MiB). Such a reading can still come out high now and then (garbage
    a full GC had not yet freed), so it is taken twice and the smaller kept (measured:
    docs/findings/scale.md).

    Both are the whole JVM's: they include what the session's earlier queries left behind (state
    store providers, with their managers, that Spark has not unloaded yet), so a strategy's first
    reading is not its own alone; growth over the long query is what says whether memory is bounded."""

    def __init__(self, spark) -> None:
        self.jvm = spark._jvm
        self.pid = str(self.jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid())

    def read(self) -> dict:
        histogram = subprocess.run(["jcmd", self.pid, "GC.class_histogram"], capture_output=True, text=True,
                                   timeout=120, check=True).stdout
        objects = size = 0
        for line in histogram.splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[3].startswith(MANAGER_PACKAGE):
                objects, size = objects + int(fields[1]), size + int(fields[2])
        heap = min(self._live_heap() for _ in range(2))
        return {"heap_mib": heap / 2**20, "manager_objects": objects, "manager_kib": size / 1024}


    def _live_heap(self) -> int:
        management = self.jvm.java.lang.management
        self.jvm.java.lang.System.gc()
        return sum(pool.getCollectionUsage().getUsed() for pool in management.ManagementFactory.getMemoryPoolMXBeans()
                   if pool.getType() == management.MemoryType.HEAP and pool.getCollectionUsage() is not None)


class _Sampled:
    """A progress bar (``update``/``set_postfix_str``) that also reads the heap every ``every``
    batches of a run: ``QueryLab.run`` tells it of each batch, so the readings follow the batch count.
    Before each reading the JVM's logs are drained into this process (``pull``, the lab's
    ``QueryLab.pull``): the heap read is then Spark's and the managers', not the harness's buffer of
    request records and files' commits."""

    def __init__(self, bar, reader: HeapReader, every: int, skip: int, pull) -> None:
        self.bar, self.reader, self.every, self.skip, self.pull = bar, reader, every, skip, pull
        self.done, self.readings = 0, []

    def set_postfix_str(self, label: str) -> None:
        self.bar.set_postfix_str(label)

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        before, self.done = self.done, self.done + n
        measured = self.done - self.skip  # the warm-up's batches are not on the axis
        if measured > 0 and measured // self.every > max(before - self.skip, 0) // self.every:
            self.pull()
            self.readings.append({"batch": measured, **self.reader.read()})


class ScaleLab(querylab.QueryLab):
    """A ``querylab.QueryLab`` whose stateful queries run with ``operators`` stateful operators."""

    operators = 1

    def start(self, workload: str, base: str, keys: int, options: dict | None = None):
        if workload != "stateful" or options:
            raise ValueError(f"the scale experiment runs the stateful workload in Spark's own settings, not "
                             f"{workload!r} with query options {options}")
        return workloads.stateful(self.spark, f"{base}/checkpoint", keys=keys, rows_per_batch=keys,
                                  operators=self.operators)


#: The axes a run can be limited to (``--axes``); a point of the partitions or operators axis is
#: a short query, the batches axis the one long query.
AXIS_NAMES = ("partitions", "operators", "batches")


def only(axes: Axes, names: tuple[str, ...]) -> Axes:
    """``axes`` with the ones not in ``names`` emptied: the 10,000-batch query of ``full`` alone, say."""
    return dataclasses.replace(axes, partitions=axes.partitions if "partitions" in names else (),
                               operators=axes.operators if "operators" in names else (),
                               long_batches=axes.long_batches if "batches" in names else 0)


def _points(axes: Axes) -> list[tuple[int, int]]:
    """(partitions, operators) of every point, each once."""
    points = [(p, 1) for p in axes.partitions] + [(axes.operators_partitions, o) for o in axes.operators]
    return list(dict.fromkeys(points))


def scale(settings: config.Settings, strategies: list[str] | None = None, axes: Axes | None = None,
          part: tuple[int, int] = (1, 1)) -> results.Results:
    """Every point of ``axes`` (default: the settings' size's) and the long query, for each strategy.
    Written to ``settings.raw`` and returned; written after the points and after each long query
    too, so that a long run stopped keeps what it finished (``environment["finished"]`` says
    whether it ran to the end).

    ``part`` (K, N) runs every N-th strategy from the K-th and writes the record as part K of N
    (``disk.write_part``; ``disk.read`` merges the parts): N processes share a plan too long
    for one, such as ``full``'s 10,000-batch queries."""
    axes = axes or AXES[settings.size]
    k, n = part
    strategies = (strategies or settings.measured_strategies)[k - 1::n]
    if not strategies:
        raise ValueError(f"part {k}/{n} of the scale experiment has no strategy: give at least {k} strategies")
    recorder = results.Recorder()
    conf = {"spark.sql.streaming.stateStore.maintenanceInterval": MAINTENANCE_INTERVAL}
    with stores.started_store(settings) as (store, bucket), \
            querylab.lab(store, bucket, settings.plan, strategies[0], conf=conf) as base:
        lab = ScaleLab(base.spark, store, bucket, base.plan)
        spark = lab.spark
        env = results.environment(store, "scale", settings.size, dataclasses.asdict(axes),
                                  spark=spark, keys=KEYS,
                                  long_partitions=LONG_PARTITIONS, maintenance_interval=MAINTENANCE_INTERVAL)

        def save(finished: bool) -> results.Results:
            return disk.save(recorder.results({**env, "finished": finished}), settings, part)

        points = _points(axes)
        long_warmup = axes.warmup + axes.retain
        long_query = axes.long_batches > 0
        total = len(strategies) * (len(points) * (axes.warmup + axes.batches)
                                   + (long_warmup + axes.long_batches if long_query else 0) + 1)
        bar = progress.Recorder("scale axes", total, "batch")
        # JVM warm-up (JIT, class loading, each manager's first use), untimed.
        spark.conf.set("spark.sql.shuffle.partitions", str(points[0][0] if points else LONG_PARTITIONS))
        for strategy in strategies:
            lab.run(None, strategy, "stateful", KEYS, 0, 1, bar)
        # Strategies inside points: drift in the machine's load spreads over the strategies compared.
        for partitions, operators in points:
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
            lab.operators = operators
            for strategy in strategies:
                run = len(recorder.rows["runs"])
                lab.run(recorder, strategy, "stateful", KEYS, axes.warmup, axes.batches, bar)
                recorder.add_scale(run, partitions, operators, "point")
        spark.conf.set("spark.sql.shuffle.partitions", str(LONG_PARTITIONS))
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(axes.retain))
        lab.operators = 1
        reader = HeapReader(spark)
        save(False)
        for strategy in strategies if long_query else ():
            run = len(recorder.rows["runs"])
            sampled = _Sampled(bar, reader, max(1, axes.long_batches // axes.windows), long_warmup, lab.pull)
            lab.run(recorder, strategy, "stateful", KEYS, long_warmup, axes.long_batches, sampled)
            recorder.add_scale(run, LONG_PARTITIONS, 1, "long")
            for reading in sampled.readings:
                recorder.add_memory(run, **reading)
            save(False)
        return save(True)


scale.timeout = 6 * 3600  # the full run's 10,000-batch queries; a stuck query fails sooner, in await_batches
