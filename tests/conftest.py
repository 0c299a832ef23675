"""Shared fixtures and hooks: every store that can start here, one SparkSession that reaches them
all, the tiers' markers and the processes beside the suite (the helpers test files import live in
``helpers.py``).

A SparkSession takes seconds to start, so the whole run shares one; tests switch strategy on it
with ``ckpt_impls.use``. Under CI (CI=true, root, Debian) Ceph must run: its absence fails the
run instead of skipping it.

Markers say what a test starts (registered in pyproject.toml; docs/testing.md): ``store``,
``ceph``, ``spark`` and ``beside``, most of them set here from the fixtures a test uses. A test
that starts Ceph without ``ceph``, or any JVM without ``spark``, fails: so ``-m "not ceph and
not spark"`` can be trusted to start neither.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import ckpt_impls
import infra
from ckptbench.config import SPARK_DEFAULT, default_store
from ckptbench.harness import jvm_archive
from ckptbench.harness.spark import session
from helpers import (
    BESIDE,
    CEPH_STORES,
    LEFTOVERS,
    RUNNING,
    TEST_JVM_OPTS,
    TEST_STORES,
    SuiteStores,
    bucket_of,
    child_beside,
    cluster_cross_check_run,
    refuse_unmarked_ceph,
)
from infra.metered import MeteredStore
from infra.net import live_processes

if TEST_JVM_OPTS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):  # a suite beside this one inherits it
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), TEST_JVM_OPTS]))

#: nice(1) value of the processes beside the suite: 10 leaves them a tenth of a busy core's time.
BESIDE_NICENESS = 10
#: The fixtures that start a store (a real server: the moto server, Ceph RGW, a metering proxy).
STORE_FIXTURES = ("suite_stores",)
#: What a JVM started by a test without the ``spark`` marker is given: an option no JVM knows, so
#: that it exits at once saying so ("Unrecognized VM option"), in this process or any it starts.
NO_JVM_OPTION = "-XX:+TestLacksTheSparkMarker"


@pytest.fixture(scope="session")
def suite_stores():
    stores = SuiteStores()
    yield stores
    stores.stop()


@pytest.fixture(scope="session")
def spark(suite_stores):
    """The shared SparkSession, reaching the embedded store and every store ``suite_stores`` has
    started or will start."""
    suite_stores.get("embedded")
    spark = session("rename", {bucket_of(s): s for s in suite_stores.stores.values()})
    suite_stores.attach(spark)
    yield spark
    spark.stop()


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
    printed, err = (workdir / "out.json").read_text(), (workdir / "err.txt").read_text()[-5000:]
    # 1: a check failed, as the tests say, and the JSON says which; a traceback also exits 1, printing none
    assert proc.returncode in (0, 1) and printed, f"the cross-check exited {proc.returncode}: {err}"
    checked = json.loads(printed)
    # What its tests take the cluster to be, taken while the application ran: a master, two workers
    # and their executors (two, or more: under load a worker may start another).
    jvms = checked["cluster"]["jvms"]
    assert (len(jvms["master"]), len(jvms["worker"])) == (1, 2) and len(jvms["executor"]) >= 2, jvms
    return checked


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.ceph) if name in CEPH_STORES else name
                        for name in TEST_STORES])
def store(request, suite_stores):
    return suite_stores.get(request.param)


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
    """Each strategy (a test may parametrise it ``indirect`` with the benchmark floor too); one the
    loaded S3A is too old for is skipped (``tests/test_s3a_conditional.py`` shows its manager refusing
    there)."""
    reason = request.param != ckpt_impls.FLOOR.name and ckpt_impls.unavailable(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


@pytest.fixture
def prefix(strategy) -> str:
    """A fresh key prefix per test, so tests never see each other's objects."""
    return f"{strategy}-{uuid.uuid4().hex[:8]}"


def pytest_collection_modifyitems(config, items):
    """The tiers' markers from what a test uses: ``spark`` for the shared SparkSession, ``store``
    for the suite's stores, ``beside`` for a ``beside_the_suite`` child; ``slow`` (what
    ``-m "not slow"`` has always left out) for every ``spark`` and ``beside`` test. ``ceph`` comes
    from a Ceph parameter (the ``store`` fixture's, marked so, or a test's own store name) and
    from the tests' own marks."""
    for item in items:
        used = getattr(item, "fixturenames", ())
        if "spark" in used:
            item.add_marker(pytest.mark.spark)
        if any(name in used for name in STORE_FIXTURES):
            item.add_marker(pytest.mark.store)
        callspec = getattr(item, "callspec", None)
        if callspec and any(isinstance(v, str) and v in CEPH_STORES for v in callspec.params.values()):
            item.add_marker(pytest.mark.ceph)  # a Ceph parameter, of ``store`` or a test's own
        if item.get_closest_marker("beside_the_suite"):
            item.add_marker(pytest.mark.beside)
        if item.get_closest_marker("spark") or item.get_closest_marker("beside"):
            item.add_marker(pytest.mark.slow)
    off = [item for item in items if off_the_default_store(item)]
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = [item for item in items if item not in off]


def off_the_default_store(item) -> bool:
    """Whether ``item`` is a ``strategies_on_the_default_store`` test's pair of a strategy other than
    Spark's default with a store other than ``config.default_store()``: such a test runs every
    strategy on the store the benchmarks default to (Ceph RGW where it runs) and Spark's default on
    every store. What a strategy does differently on a store its own tests show (``test_contract``,
    ``test_requests``); these end-to-end queries cost seconds a batch, and what a second store adds
    to them is that store's behaviour under Spark, which Spark's default shows there."""
    callspec = getattr(item, "callspec", None)
    if not item.get_closest_marker("strategies_on_the_default_store") or callspec is None:
        return False
    strategy, store = callspec.params.get("strategy"), callspec.params.get("store")
    return None not in (strategy, store) and strategy != SPARK_DEFAULT[0] and store != default_store()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Run ``item`` with the guards on: without the ``spark`` marker any JVM it starts, here or in a
    child process, refuses to start (``NO_JVM_OPTION``; a ``beside`` test's child started before
    any test, and is left alone); without ``ceph``, starting Ceph or getting it from ``suite_stores``
    fails the test (``refuse_unmarked_ceph``)."""
    saved = os.environ.get("JAVA_TOOL_OPTIONS")
    if not item.get_closest_marker("spark") and not item.get_closest_marker("beside"):
        os.environ["JAVA_TOOL_OPTIONS"] = " ".join(filter(None, [saved, NO_JVM_OPTION]))
    RUNNING.append(item)
    try:
        yield
    finally:
        RUNNING.remove(item)
        if saved is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = saved


def guard_ceph_start(start):
    """``CephStore._start`` calling ``refuse_unmarked_ceph`` first."""
    @functools.wraps(start)
    def guarded(self):
        refuse_unmarked_ceph()
        return start(self)

    return guarded


infra.CephStore._start = guard_ceph_start(infra.CephStore._start)


def pytest_collection_finish(session):
    """Start each selected ``beside_the_suite`` test's child process now and move the test last.

    Here, after -k/-m have deselected, only a selected test's work starts. Such a test checks a
    child process that runs for minutes (the whole smallest bench, the cluster cross-check, the
    scale axes, the Spark 3.5 part) and shares nothing with the suite (its own store, JVMs and
    results). Started here, it runs beside the other tests instead of after them: the suite alone
    leaves part of 2 cores idle, and the children fill it. They run niced (the marker's
    ``niceness``, else ``BESIDE_NICENESS``,
    the whole process group and what it starts later) so that they take what the suite leaves
    rather than slowing it (docs/findings/timings.md).
    """
    if session.config.option.collectonly:
        return
    items = session.items
    if any(item.get_closest_marker("spark") or item.get_closest_marker("beside") for item in items):
        use_jvm_archive()
    beside = [item for item in items if item.get_closest_marker("beside_the_suite")]
    # A child that runs test files of this suite (the marker's ``runs``) takes those files' tests
    # out of this process: they would otherwise run twice.
    moved = {path for item in beside for path in runs_of(item.get_closest_marker("beside_the_suite"))}
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
            if "runs" in marker.kwargs:  # the files' tests this run selected (-k, -m), or all of them if none
                runs = runs_of(marker)
                proc = start(workdir, [i.nodeid for i in run_beside if i.nodeid.split("::")[0] in runs] or list(runs))
            else:
                proc = start(workdir)
            if proc is not None:  # a session leader (start_new_session)
                lower_priority(proc.pid, marker.kwargs.get("niceness", BESIDE_NICENESS))
            started[start] = (proc, workdir)
    items[:] = [item for item in items if item not in beside] + beside


def runs_of(marker) -> tuple[str, ...]:
    """The test files a ``beside_the_suite`` marker's child runs (its ``runs``: a path or a tuple of
    them), none when it runs a command of its own."""
    runs = marker.kwargs.get("runs", ())
    return (runs,) if isinstance(runs, str) else tuple(runs)


def use_jvm_archive() -> None:
    """Start every driver JVM from here on, this suite's and its children's, from the class data
    archive of this venv's class path and ``TEST_JVM_OPTS`` (``harness.jvm_archive``), made now if
    need be: in the environment, it reaches children that start no session of their own first. A
    suite beside another keeps the one it was handed: niced, it would make its own on a tenth of a
    busy core, and on another class path a JVM loads from its jars as before."""
    os.environ["SPARK_SUBMIT_OPTS"] = jvm_archive.with_archive(os.environ.get("SPARK_SUBMIT_OPTS"))


def lower_priority(leader: int, niceness: int) -> None:
    """Nice the session that ``leader`` leads by ``niceness``: its process group, and its
    scheduling group where Linux has one per session (autogroup, /proc/PID/autogroup). There a
    nice value weighs only against processes of the same session, so niced children in sessions
    of their own would take as much CPU as the suite."""
    os.setpriority(os.PRIO_PGRP, leader, niceness)
    autogroup = Path(f"/proc/{leader}/autogroup")
    if not autogroup.exists():  # no autogroup scheduling: the nice value above is enough
        return
    for _ in range(20):
        try:
            autogroup.write_text(str(niceness))
            return
        except BlockingIOError:  # without CAP_SYS_ADMIN, one such write per 0.1 s on the machine
            time.sleep(0.1)


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
