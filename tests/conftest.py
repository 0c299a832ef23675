"""Shared fixtures: every store that can start here, and one SparkSession that reaches them all.

A SparkSession takes 6-12 s to start, so the whole run shares one; tests switch strategy on it
with ``ckpt_impls.use``. Under CI (CI=true, root, Debian) Ceph must run: its absence fails the
run instead of skipping it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import ckpt_impls
import infra
from ckptbench.experiments import contract
from ckptbench.harness.spark import session
from infra.metered import MeteredStore
from infra.net import live_processes
from infra.s3ops import Event

#: The JIT setting of every driver JVM the tests start (this session's, the crash lab's drivers, the
#: spark-submit runs, the bench beside the suite: the environment carries it to them all, and a
#: bench records it, ``results.jvm_flags``). Tests check behaviour, never speed, and most of their
#: JVMs live seconds: without C2 a driver starts and runs its first job on about a third less CPU
#: (10.3-10.7 s against 15.9-17.1 s of JVM CPU, a local[2] session with the S3A jars, 2026-11-23),
#: and make test is CPU-bound on 2 cores.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1"
if TEST_JVM_OPTS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):  # a suite beside this one inherits it
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), TEST_JVM_OPTS]))

TEST_STORES = ("embedded", "ceph", "minio")
ROOT = Path(__file__).resolve().parent.parent
#: (strategy, store, test) -> temp objects left under the checkpoint, filled by the streaming tests.
LEFTOVERS = pytest.StashKey[dict]()
#: start function of a ``beside_the_suite`` test -> (its child process, its working directory).
BESIDE = pytest.StashKey[dict]()
#: nice(1) value of the processes beside the suite: 10 leaves them a tenth of a busy core's time.
BESIDE_NICENESS = 10


# -- fixed inputs for the results model: progress reports and requests at known times ----------

T0 = 1_800_000_000.0  # epoch seconds of batch 0's start


def progress(batch: int, wal: float, trigger: float = 500.0, state_ms: float | None = None) -> dict:
    """A Spark progress report for batch ``batch`` starting at T0 + batch seconds."""
    stamp = dt.datetime.fromtimestamp(T0 + batch, dt.timezone.utc).isoformat(timespec="milliseconds")
    p = {"batchId": batch, "timestamp": stamp.replace("+00:00", "Z"), "numInputRows": 10,
         "durationMs": {"walCommit": wal, "commitOffsets": wal / 2, "triggerExecution": trigger}}
    if state_ms is not None:
        p["stateOperators"] = [{"commitTimeMs": state_ms, "numRowsTotal": 5, "memoryUsedBytes": 1}]
    return p


def event(batch: float, op: str, key: str, ms: float = 2.0, bytes_in: int = 0) -> Event:
    """A request that started ``batch`` seconds after T0: inside batch N's window (N to N + its
    triggerExecution) for N plus a few hundredths."""
    start = T0 + batch
    return Event(start, start + ms / 1000, "PUT", op, "offsets" if "offsets" in key else "state", "b", key, 200,
                 bytes_in, 0)


def skip_unless_ci(reason: str):
    """Skip for want of ``reason``, except under CI (CI=true), which must run everything."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: not skipped)")
    pytest.skip(reason)


def comparable_totals(checked: dict) -> tuple[dict[str, int], dict[str, int]]:
    """A ``jvm_crosscheck`` result's requests per operation as each source counted them, the JVM's
    less its attempts the proxy never saw (``unseen_by_proxy``), the proxy's less its unanswered
    records no attempt pairs with (``unanswered_only_in_proxy``): ``(jvm, proxy)``, equal when the
    sources agree."""
    def less(counts: dict, minus: dict) -> dict:
        return {op: n - minus.get(op, 0) for op, n in counts.items() if n > minus.get(op, 0)}

    return (less(checked["by_op"]["jvm"], checked["unseen_by_proxy"]),
            less(checked["by_op"]["proxy"], checked["unanswered_only_in_proxy"]))


def bucket_of(store) -> str:
    return f"ckptbench-{store.name}"



class CheckpointFiles(contract.CheckpointFiles):
    """``contract.CheckpointFiles`` in the test store's own bucket (``bucket_of``) unless told another."""

    def __init__(self, spark, strategy: str, store, prefix: str, bucket: str | None = None,
                 settings: dict | None = None) -> None:
        super().__init__(spark, strategy, store, prefix, bucket or bucket_of(store), settings)


class Lab:
    def __init__(self) -> None:
        self.stores: dict[str, infra.ObjectStore] = {}
        self.reasons: dict[str, str] = {}
        for name in TEST_STORES:
            cls = infra.STORES[name]
            reason = cls.unavailable_reason()
            if reason is None:
                try:
                    store = cls().start()
                    store.create_bucket(bucket_of(store))
                    self.stores[name] = store
                    continue
                except infra.StoreUnavailable as e:
                    reason = str(e)
            self.reasons[name] = reason

    def get(self, name: str) -> infra.ObjectStore:
        if name not in self.stores:
            if name == "ceph" and os.environ.get("CI"):
                pytest.fail(f"Ceph RGW must run in CI but cannot: {self.reasons[name]}")
            pytest.skip(self.reasons[name])
        return self.stores[name]

    def stop(self) -> None:
        for store in self.stores.values():
            store.stop()


@pytest.fixture(scope="session")
def lab():
    lab = Lab()
    yield lab
    lab.stop()


@pytest.fixture(scope="session")
def spark(lab):
    spark = session("rename", {bucket_of(s): s for s in lab.stores.values()})
    yield spark
    spark.stop()


def cluster_cross_check_run(workdir: Path) -> subprocess.Popen | None:
    """``python -m ckptbench.experiments.jvm_crosscheck --master cluster``, every strategy, on Ceph RGW (the
    embedded store where Ceph cannot run, but not in CI), its JSON into ``workdir``; None where no
    cluster can start here. A child process: one Python process holds one SparkContext, and the
    suite's is a local one. It runs beside the suite (``beside_the_suite``)."""
    if infra.SparkCluster.unavailable_reason():
        return None
    store = "ceph" if infra.CephStore.unavailable_reason() is None else "embedded"
    root = str(ROOT)
    with (workdir / "out.json").open("w") as out, (workdir / "err.txt").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "ckptbench.experiments.jvm_crosscheck", "--store", store, "--master", "cluster",
             "--strategies", ",".join(ckpt_impls.STRATEGIES)], stdout=out, stderr=err, cwd=root,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])})


@pytest.fixture(scope="session")
def cluster_cross_check(request) -> dict:
    """What ``cluster_cross_check_run`` printed, once it has ended; its tests carry
    ``pytest.mark.beside_the_suite.with_args(cluster_cross_check_run)``."""
    reason = infra.SparkCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    if infra.CephStore.unavailable_reason() is not None and os.environ.get("CI"):
        pytest.fail(f"Ceph RGW must run in CI but cannot: {infra.CephStore.unavailable_reason()}")
    proc, workdir = child_beside(request.config, cluster_cross_check_run)
    proc.wait(timeout=1200)
    assert proc.returncode in (0, 1), (workdir / "err.txt").read_text()[-3000:]  # 1: a check failed, as the tests say
    checked = json.loads((workdir / "out.json").read_text())
    # What its tests take the cluster to be, taken while the application ran: a master, two workers
    # and their executors (two, or more where a worker started another: a fresh-clone CI run under
    # load on 2026-11-23 found three children of the workers).
    jvms = checked["cluster"]["jvms"]
    assert (len(jvms["master"]), len(jvms["worker"])) == (1, 2) and len(jvms["executor"]) >= 2, jvms
    return checked


@pytest.fixture(params=TEST_STORES)
def store(request, lab):
    return lab.get(request.param)


@pytest.fixture(scope="session")
def metered_stores(spark):
    """``get(store)``: ``store`` behind a metering proxy (one per store for the whole run), with a
    bucket of its own that the session reaches through the proxy."""
    started: dict[str, tuple[MeteredStore, str]] = {}

    def get(store) -> tuple[MeteredStore, str]:
        if store.name not in started:
            bucket = f"{bucket_of(store)}-metered"
            store.create_bucket(bucket)
            proxied = MeteredStore(store).start()
            ckpt_impls.attach(spark, proxied, bucket)
            started[store.name] = proxied, bucket
        return started[store.name]

    yield get
    for proxied, _ in started.values():
        proxied.stop()


@pytest.fixture
def metered(metered_stores, store):
    """``(metered store, bucket)`` for this test's ``store``; faults a test injects end with it."""
    proxied, bucket = metered_stores(store)
    yield proxied, bucket
    proxied.proxy.clear_faults()


@pytest.fixture(params=list(ckpt_impls.STRATEGIES))
def strategy(request) -> str:
    return request.param


@pytest.fixture
def prefix(strategy) -> str:
    """A fresh key prefix per test, so tests never see each other's objects."""
    return f"{strategy}-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(config, items):
    """Every test that needs the shared SparkSession is slow (the session alone takes 6-12 s)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session):
    """Start each selected ``beside_the_suite`` test's child process now and move the test last.

    Here, after -k/-m have deselected, only a selected test's work starts. Such a test checks a
    child process that runs for minutes (the whole smallest bench, the cluster cross-check, the
    scale axes, the Spark 3.5 part) and shares nothing with the suite (its own store, JVMs and results). Started here,
    it runs beside the other tests instead of after them: once the bench had ended, the suite alone
    kept 2 cores 26-83% busy (a fresh-clone CI run, 2026-11-23, /proc/stat read every 10 s), and
    the children fill what it leaves. They run niced (``BESIDE_NICENESS``, the whole process group
    and what it starts later) so that they take what the suite leaves rather than slowing it: all
    started at once and not niced, the first crash test of a fresh-clone CI run took 179 s.
    """
    if session.config.option.collectonly:
        return
    items = session.items
    beside = [item for item in items if item.get_closest_marker("beside_the_suite")]
    # A child that runs a test file of this suite (the marker's ``runs``) takes that file's tests
    # out of this process: they would otherwise run twice.
    moved = {item.get_closest_marker("beside_the_suite").kwargs.get("runs") for item in beside} - {None}
    run_beside = [item for item in items if item.nodeid.split("::")[0] in moved]
    if run_beside:
        session.config.hook.pytest_deselected(items=run_beside)
        items[:] = [item for item in items if item not in run_beside]
    started = session.config.stash.setdefault(BESIDE, {})
    for item in beside:
        marker = item.get_closest_marker("beside_the_suite")
        start = marker.args[0]
        if start not in started:
            workdir = Path(tempfile.mkdtemp(prefix="ckptbench-beside-"))
            if "runs" in marker.kwargs:  # the file's tests this run selected (-k, -m), or all of it if none
                runs = marker.kwargs["runs"]
                proc = start(workdir, [i.nodeid for i in run_beside if i.nodeid.split("::")[0] == runs] or [runs])
            else:
                proc = start(workdir)
            if proc is not None:  # a session leader (start_new_session)
                lower_priority(proc.pid)
            started[start] = (proc, workdir)
    items[:] = [item for item in items if item not in beside] + beside


def lower_priority(leader: int) -> None:
    """Nice the session that ``leader`` leads by ``BESIDE_NICENESS``: its process group, and its
    scheduling group where Linux has one per session (autogroup, /proc/PID/autogroup). There a
    nice value weighs only against processes of the same session, so niced children in sessions
    of their own took as much CPU as the suite: in a fresh-clone CI run (2026-11-24) a spark-submit
    test that takes 16-26 s took 106 s, the suite 28 min in all."""
    os.setpriority(os.PRIO_PGRP, leader, BESIDE_NICENESS)
    autogroup = Path(f"/proc/{leader}/autogroup")
    if not autogroup.exists():  # no autogroup scheduling: the nice value above is enough
        return
    for _ in range(20):
        try:
            autogroup.write_text(str(BESIDE_NICENESS))
            return
        except BlockingIOError:  # without CAP_SYS_ADMIN, one such write per 0.1 s on the machine
            time.sleep(0.1)


def beside_pytest(python: Path | str, args: list[str], workdir: Path) -> subprocess.Popen:
    """A ``beside_the_suite`` child that is itself pytest: ``args`` run by ``python`` (a venv's), in a
    session of its own, its output into ``workdir / "output.txt"`` (``assert_beside_pytest_passed``)."""
    with (workdir / "output.txt").open("w") as out:
        return subprocess.Popen([str(python), "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def assert_beside_pytest_passed(proc: subprocess.Popen, workdir: Path, timeout: float) -> None:
    """Wait for a ``beside_pytest`` child (``timeout``: against a hang only); it must exit 0 having
    passed tests."""
    proc.wait(timeout=timeout)
    output = (workdir / "output.txt").read_text()
    assert proc.returncode == 0, output[-5000:]
    assert re.search(r"^=+ \d+ passed", output, re.M), output[-2000:]


def child_beside(config, start) -> tuple[subprocess.Popen | None, Path]:
    """The child process the hook above started with ``start`` (None: none could start), and its
    working directory."""
    return config.stash[BESIDE][start]


def ended_beside(config, start, timeout: float, what: str) -> tuple[int, Path, str]:
    """Wait for ``start``'s child (``child_beside``) to end, failing the test if it still runs
    ``timeout`` seconds on (``what`` names it): its exit status, working directory and output."""
    proc, workdir = child_beside(config, start)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} still runs {timeout} s after the suite's end: "
                    f"{(workdir / 'output.txt').read_text()[-3000:]}")
    return proc.returncode, workdir, (workdir / "output.txt").read_text()


@pytest.fixture
def beside(request) -> tuple[subprocess.Popen | None, Path]:
    """``child_beside`` of this test's ``beside_the_suite`` marker."""
    return child_beside(request.config, request.node.get_closest_marker("beside_the_suite").args[0])


def pytest_unconfigure(config):
    """A child still running when the session ends (-x, ^C) is stopped with it: interrupted first,
    so that it stops its store and JVMs as on ^C, then whatever is left of its session killed."""
    for proc, workdir in config.stash.get(BESIDE, {}).values():
        if proc is None:  # nothing could start: the test says why
            continue
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        for pid in live_processes(session=proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, config):
    """What each strategy left under its checkpoints (temp objects), as the streaming tests found."""
    leftovers = config.stash.get(LEFTOVERS, {})
    if leftovers:
        terminalreporter.section("temp objects left under the checkpoint")
        for (strategy, store, test), count in sorted(leftovers.items()):
            terminalreporter.write_line(f"{strategy:<12} {store:<9} {test:<45} {count}")
