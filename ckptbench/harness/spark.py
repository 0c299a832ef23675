"""Start a SparkSession wired to a checkpoint strategy and one or more stores."""

from __future__ import annotations

import contextlib
import os
import time

import ckpt_impls
from ckptbench import config
from ckptbench.harness import jvm_archive

# Spark settings that keep a 2-core machine measuring checkpoints rather than scheduling:
# two shuffle partitions (so a stateful batch writes two state files), no UI.
BASE_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}
#: JVM options (``SPARK_SUBMIT_OPTS``) of the drivers of what times nothing (``bench``'s crash and
#: fault labs and crash checks: ``cli.untimed``): C1 alone and the serial collector. Those run beside
#: each other on every core, each driver of theirs lives a few batches, where C2's compiling and G1's
#: threads cost CPU they never pay back; what they find (rows lost or duplicated, an outage ridden
#: out) does not depend on how fast the code runs. A timed experiment's driver runs as Spark's do.
UNTIMED_JVM_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def local_with_retries(master: str, settings: dict) -> str:
    """``master`` trying a task as ``settings``' ``spark.task.maxFailures`` says, where set: ``local``
    or ``local[N]`` as ``local[N,F]``. Spark tries a task once under ``local[N]`` and ignores that
    setting there, so one failed store request in a task (its retries spent) ends a query that a
    cluster (4 tries by default, ``config.TASK_MAX_FAILURES``) carries on. Any other master, one
    naming F, or settings without the key: ``master`` as it is."""
    match = config.LOCAL_MASTER.fullmatch(master.replace(" ", ""))
    if match is None or match.group(2) or "spark.task.maxFailures" not in settings:
        return master
    return f"local[{match.group(1) or 1},{settings['spark.task.maxFailures']}]"


def session(strategy: str, stores: dict, master: str = config.DEFAULT_MASTER, conf: dict | None = None):
    """A SparkSession using ``strategy``, reaching each ``{bucket: store}`` through S3A.

    S3A settings are per bucket name, so each store needs buckets of its own; the last of
    ``stores`` is the store under test, whose keys the driver's JVM starts with in its environment
    (``ckpt_impls.chain_env``). ``conf`` adds or overrides Spark settings (e.g. for a real ``--master``).
    A local master tries a task as often as ``spark.task.maxFailures`` in ``conf`` says (``local_with_retries``),
    and runs ``config.SLOTS_PER_CORE`` in ``conf`` task slots per core (``config.with_slots``); ValueError
    for more than one on another master.

    The JVM's cached filesystems (Hadoop's ``FileSystem`` cache, by scheme and bucket) are closed as
    the session starts: a session of an earlier experiment in this process may have cached one for a
    bucket name that is now at another endpoint (a store started afresh gets a bucket named after the
    store, ``stores.started_stores``), and a manager given that filesystem would retry a store that
    is gone.

    The driver's JVM starts from the class archive of its class path and options
    (``jvm_archive.with_archive``: made first if need be) unless ``SPARK_SUBMIT_OPTS`` names one;
    where the JVM cannot map it (another class path) it loads its classes from the jars.
    """
    from pyspark.sql import SparkSession

    settings = {**BASE_CONF, **(conf or {})}
    slots = int(settings.pop(config.SLOTS_PER_CORE, "1"))
    slotted = config.with_slots(master, slots)
    if slotted is None:
        raise ValueError(f"{slots} task slots per core are a local master's threads here, not {master}'s: a "
                         "cluster's executors take theirs from spark.executor.cores, set where they start")
    for bucket, store in stores.items():
        settings = ckpt_impls.configure(settings, strategy, store, bucket)
    if master.startswith("local["):
        # Tasks run in the driver's JVM, so the jars go on its class path: as ``spark.jars`` every
        # session would copy them (185 MiB) into a scratch directory that a killed JVM never removes,
        # and start later (measured: docs/findings/timings.md). Executors elsewhere need spark.jars.
        jars = [jar for jar in settings.pop("spark.jars", "").split(",") if jar]  # none without a store
        before = [p for p in settings.get("spark.driver.extraClassPath", "").split(os.pathsep) if p]
        settings["spark.driver.extraClassPath"] = os.pathsep.join(dict.fromkeys([*before, *jars]))
    builder = SparkSession.builder.master(local_with_retries(slotted, settings)).appName("ckptbench")
    for key, value in settings.items():
        builder = builder.config(key, value)
    env = {**ckpt_impls.chain_env(list(stores.values())[-1] if stores else None),
           "SPARK_SUBMIT_OPTS": jvm_archive.with_archive(os.environ.get("SPARK_SUBMIT_OPTS"))}
    with environment(env):
        spark = builder.getOrCreate()  # the driver's JVM starts here, in this environment
    spark.sparkContext.setLogLevel("ERROR")
    spark._jvm.org.apache.hadoop.fs.FileSystem.closeAll()
    for bucket, store in stores.items():
        ckpt_impls.set_credentials(spark, store, bucket)
    ckpt_impls.set_settings(spark, strategy)
    return spark


@contextlib.contextmanager
def environment(extra: dict[str, str]):
    """This process's environment with ``extra`` added for the ``with`` block (what a child started
    in it inherits), then as it was."""
    before = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def setting(spark, key: str) -> str | None:
    """``key``'s value in ``spark``'s session (its default if unset); None if it is unset and this Spark
    knows no default for it: a setting it does not have, or one of RocksDB's, which are read with
    their defaults by the store itself (changelog checkpointing: off)."""
    try:
        return spark.conf.get(key)
    except Exception:  # py4j's error for an unset key with no default
        return None


@contextlib.contextmanager
def settings_set(spark, settings: dict[str, str]):
    """``settings`` set in the running session for the ``with`` block, then each put back as it
    was (``setting``), or unset where it had no value."""
    before = {key: setting(spark, key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def executors(spark, dead_too: bool = False) -> dict[str, str]:
    """The application's live executors (``dead_too``: and those it has lost) apart from the driver:
    ``{executor id: host:port}`` ({} in local mode, where tasks run in the driver's JVM)."""
    listed = spark.sparkContext._jsc.sc().statusStore().executorList(not dead_too)
    found = (listed.apply(i) for i in range(listed.size()))
    return {e.id(): e.hostPort() for e in found if e.id() != "driver"}


def least_executors(master: str) -> int:
    """How many executor JVMs an application on ``master`` waits for before it starts work:
    ``local-cluster[N,cores,memory]``'s N, none in local mode, else one."""
    if master.startswith("local-cluster["):
        return int(master[len("local-cluster["):].split(",")[0])
    return 0 if master.startswith("local") else 1


def await_executors(spark, count: int, timeout: float = 300) -> dict[str, str]:
    """``executors(spark)`` once ``count`` of them have registered; raises TimeoutError after
    ``timeout`` seconds (a job started before would run on fewer, or wait)."""
    deadline = time.monotonic() + timeout
    while True:
        found = executors(spark)
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(found)} of {count} executors registered with {spark.sparkContext.master} "
                               f"in {timeout:.0f} s: are its workers up, with the cores and memory asked for?")
        time.sleep(0.2)
