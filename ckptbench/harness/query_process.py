"""One streaming query in a process of its own, for the crash lab to kill:
``python -m ckptbench.harness.query_process``.

The settings AND the store's keys arrive as one JSON line on stdin (see ``Config``), never on a
command line: PySpark passes builder settings to the JVM on its command line, where ``ps`` shows
them, so the keys go into the running session afterwards (``ckpt_impls.set_credentials``), as
``ckptbench.harness.spark`` does. Further stdin lines: ``stop`` stops the query cleanly; so does stdin
closing (the parent is gone). With ``hold`` set, the driver waits for a ``go`` line once its
SparkSession is up before it starts the query (so a second driver's JVM can start while the
first one's does).

One JSON line per event goes to stdout, flushed at once; ``t`` is ``time.time()`` on this host,
the clock the metering proxy stamps requests with:

- ``{"event": "ready", "t", "pid", "jvm_pid"}``: the SparkSession is up, keys set;
- ``{"event": "started", "t0", "t", "id", "run_id"}``: ``t0`` just before ``start()`` was called
  (the restarted query reads its checkpoint from there on), ``t`` when it returned;
- ``{"event": "progress", "batchId", "t", "start", "end", "rows"}``: batch ``batchId`` is
  committed (Spark reports progress after ``commits/N``); ``start``/``end`` its window by the
  JVM's clock, ``t`` when this process saw it;
- ``{"event": "failed", "t", "error", "refused"}``: the query died (``error``: the first line of
  Spark's reason; ``refused``: Spark's whole message where it refused the configuration before the
  first batch ended, ``ckptbench.harness.querylab.refusal``, else null); exit status 3;
- ``{"event": "stopped", "t", "reason"}``: stopped cleanly (``batches`` reached, ``stop``, or
  stdin closed); exit status 0.

The lab kills this process and its JVM together (SIGKILL to the process group it starts in):
the JVM must not outlive it, since PySpark's gateway JVM would otherwise exit on its own, running
its shutdown hooks, when it sees this process's end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import uuid

from ckpt_impls import jars

#: Spark settings of every driver: small (two JVMs share 2 cores in the two-writer run), no UI.
CONF = {
    "spark.driver.memory": "1g",
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
}
FAILED_STATUS = 3


@dataclasses.dataclass(frozen=True)
class StoreSpec:
    """What ``ckpt_impls.configure``/``set_credentials`` read of a store, rebuilt from JSON."""

    name: str
    endpoint: str
    region: str
    options: dict
    credentials: object | None

    def s3a_options(self, sdk: str) -> dict[str, str]:
        """The options the parent's store gave for the S3A of this venv, the child's too."""
        return dict(self.options)

    @classmethod
    def of(cls, store) -> dict:
        """The JSON form of ``store`` (keys included: it goes to a child's stdin only)."""
        creds = store.credentials
        return {"name": store.name, "endpoint": store.endpoint, "region": store.region,
                "options": store.s3a_options(jars.aws_sdk()),
                "access_key": creds.access_key if creds else None, "secret_key": creds.secret_key if creds else None}

    @classmethod
    def from_json(cls, data: dict) -> StoreSpec:
        from infra.store import Credentials

        creds = Credentials(data["access_key"], data["secret_key"]) if data.get("access_key") else None
        return cls(data["name"], data["endpoint"], data.get("region", "us-east-1"), data.get("options", {}), creds)


@dataclasses.dataclass(frozen=True)
class Config:
    """One driver's settings, as the lab sends them."""

    strategy: str
    workload: str  # a ckptbench.experiments.crashlab.WORKLOADS name
    bucket: str
    store: dict  # StoreSpec.of(...)
    checkpoint: str  # s3a:// URL
    output: str  # s3a:// URL
    rows_per_batch: int
    batches: int | None = None  # stop cleanly after this many committed batches (None: when told)
    trigger: str = "100 milliseconds"
    compact_interval: int = 10  # of the file sink's _spark_metadata log
    hold: bool = False  # wait for "go" on stdin before starting the query
    conf: dict = dataclasses.field(default_factory=dict)  # more Spark settings (the session's, from its start)
    options: dict = dataclasses.field(default_factory=dict)  # the query's options (a lever's: ``config.LEVERS``)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def emit(event: str, **fields) -> None:
    try:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # the lab is gone
        raise SystemExit(1) from None


class EpochFiles:
    """A ForeachWriter: each task's rows (one partition of batch ``epoch``) as text, one value a
    line, in ``directory`` on this machine. Idempotent unless ``append``: one file per (epoch,
    partition), written under a hidden temp name and renamed over it, so a replayed batch replaces
    its files whole and a reader never sees half of one. ``append`` (deliberately broken): one file
    per partition, appended to, so a replayed batch is in it twice. Rows are kept until ``close``:
    a task that fails writes nothing."""

    def __init__(self, directory: str, append: bool = False) -> None:
        self.directory, self.append = directory, append

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.partition, self.epoch, self.values = partition_id, epoch_id, []
        return True

    def process(self, row) -> None:
        self.values.append(row.value)

    def close(self, error) -> None:
        if error is not None:
            return
        os.makedirs(self.directory, exist_ok=True)
        data = "".join(f"{value}\n" for value in self.values).encode()
        if self.append:  # one write(2) on O_APPEND: a concurrent reader sees all of it or none
            fd = os.open(os.path.join(self.directory, f"part-{self.partition}"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            return
        name = f"epoch-{self.epoch}-part-{self.partition}"
        temp = os.path.join(self.directory, f".{name}.{uuid.uuid4().hex}.tmp")
        with open(temp, "wb") as out:
            out.write(data)
        os.replace(temp, os.path.join(self.directory, name))


def start_query(spark, config: Config):
    """The workload's query (``ckptbench.experiments.crashlab.WORKLOADS``) on ``config``'s checkpoint
    and output, with its query ``options``. Built here rather than by ``workloads``' builders, which
    take no options: each is ``workloads.replayable`` input to a sink."""
    from ckptbench.harness import workloads

    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", str(config.compact_interval))
    stateful = config.workload == "stateful"
    rows = workloads.replayable(spark, config.rows_per_batch, repeat_previous=stateful)
    if stateful:  # each batch repeats the previous one's new values: lost state would emit them again
        rows = rows.dropDuplicates(["value"])
    elif config.workload == "wide":  # 128 KiB of incompressible-enough text a row (sha2 differs per row)
        rows = rows.selectExpr("value", "repeat(sha2(cast(value AS string), 256), 2048) AS pad")
    writer = (rows.writeStream.outputMode("append").option("checkpointLocation", config.checkpoint)
              .options(**config.options).trigger(processingTime=config.trigger))
    if config.workload in ("stateless", "wide", "stateful"):
        return writer.format("parquet").option("path", config.output).start()
    if config.workload == "unsafe-foreach":
        # A deliberately NON-idempotent sink: each batch appended as plain parquet, no batch-id
        # check, so a batch re-run after a crash between its write and commits/N is written twice.
        output = config.output

        def append(frame, batch_id):
            frame.write.mode("append").parquet(output)

        return writer.foreachBatch(append).start()
    if config.workload in ("stateless-foreach", "unsafe-foreach-writer"):
        return writer.foreach(EpochFiles(config.output, append=config.workload == "unsafe-foreach-writer")).start()
    raise ValueError(f"unknown workload {config.workload!r}")


def _window(progress: dict) -> tuple[float, float]:
    from ckptbench.record.results import batch_window

    return batch_window(progress)


def main() -> int:
    config = Config(**json.loads(sys.stdin.readline()))
    import ckpt_impls
    from ckptbench.harness.spark import session

    store = StoreSpec.from_json(config.store)
    spark = session(config.strategy, {config.bucket: store}, conf={**CONF, **config.conf})
    jvm_pid = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()
    emit("ready", t=time.time(), pid=__import__("os").getpid(), jvm_pid=int(jvm_pid))

    if config.hold:
        line = sys.stdin.readline().strip()
        if line != "go":
            emit("stopped", t=time.time(), reason="stop" if line == "stop" else "stdin closed")
            spark.stop()
            return 0
    stop = threading.Event()
    reason = {"why": "stdin closed"}

    def listen() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                reason["why"] = "stop"
                break
        stop.set()

    threading.Thread(target=listen, daemon=True).start()
    ckpt_impls.use(spark, config.strategy)
    t0 = time.time()
    query = None
    try:
        query = start_query(spark, config)
    except Exception as e:
        _failed(e, query)
        return FAILED_STATUS
    emit("started", t0=t0, t=time.time(), id=str(query.id), run_id=str(query.runId))
    last, seen = None, 0
    try:
        while not stop.is_set():
            if query.exception() is not None:
                _failed(query.exception(), query)
                return FAILED_STATUS
            progress = query.lastProgress
            if progress is not None and progress["batchId"] != last:
                news = [progress]
                if last is not None and progress["batchId"] > last + 1:  # two batches between polls
                    news = [p for p in query.recentProgress if p["batchId"] > last]
                for p in news:
                    start, end = _window(p)
                    emit("progress", batchId=p["batchId"], t=time.time(), start=start, end=end,
                         rows=p.get("numInputRows", 0))
                    seen += 1
                last = progress["batchId"]
                if config.batches is not None and seen >= config.batches:
                    reason["why"] = "batches"
                    break
            stop.wait(0.02)
        query.stop()
        emit("stopped", t=time.time(), reason=reason["why"])
        return 0
    finally:
        spark.stop()


def _failed(error, query) -> None:
    from ckptbench.harness.querylab import refusal

    emit("failed", t=time.time(), error=_first_line(error), refused=refusal(error, query))


def _first_line(error) -> str:
    """The first line of ``error``'s message; for a py4j error, the JVM exception's own (py4j's
    says only which call failed)."""
    java = getattr(error, "java_exception", None)
    text = (str(java.toString()) if java is not None else str(error)).strip()
    return text.splitlines()[0][:500] if text else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
