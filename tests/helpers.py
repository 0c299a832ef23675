"""What test files share besides fixtures: fixed inputs for the results model, the suite's stores,
the CLI as a real process, and the children that run beside the suite (``conftest.py`` holds the
fixtures and hooks, and imports from here; test files import from here, never from conftest)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import io
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import ckpt_impls
import infra
from ckpt_impls import settings
from ckptbench import config
from ckptbench.cli.common import RESULTS
from ckptbench.experiments import contract, crashlab
from ckptbench.record import results, schema
from infra import net
from infra.metered import MeteredStore
from infra.s3ops import Event, area_of

#: The JIT setting of every driver JVM the tests start (this session's, the crash lab's drivers, the
#: spark-submit runs, the bench beside the suite: conftest puts it in the environment, which carries
#: it to them all, and a bench records it, ``results.jvm_flags``). Tests check behaviour, never
#: speed, and most of their JVMs live seconds: without C2 a driver starts and runs its first job on
#: less CPU, and the suite is CPU-bound on 2 cores.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1"

#: The stores ``SuiteStores`` starts where they can run, each on its first use.
TEST_STORES = ("embedded", "ceph", "seaweedfs", "minio")
#: The real stores CI always has: there a test of one that cannot start fails instead of skipping.
MUST_RUN_IN_CI = ("ceph", "seaweedfs")
#: The stores that are Ceph (their tests carry the ``ceph`` marker).
CEPH_STORES = ("ceph", "ceph-tls")
ROOT = Path(__file__).resolve().parent.parent
#: (strategy, store, test) -> temp objects left under the checkpoint, filled by the streaming tests.
LEFTOVERS = pytest.StashKey[dict]()
#: start function of a ``beside_the_suite`` test -> (its child process, its working directory).
BESIDE = pytest.StashKey[dict]()
#: The test running now (its setup, call and teardown; conftest's ``pytest_runtest_protocol``).
RUNNING: list[pytest.Item] = []


def refuse_unmarked_ceph() -> None:
    """Fail the running test if it lacks the ``ceph`` marker: it is about to start or use Ceph."""
    if RUNNING and not RUNNING[-1].get_closest_marker("ceph"):
        pytest.fail(f"{RUNNING[-1].nodeid} starts Ceph without the ceph marker (pytest.mark.ceph, or "
                    "pytest.param(..., marks=pytest.mark.ceph) for a Ceph parameter)", pytrace=False)


# -- fixed inputs for the results model: progress reports and requests at known times ----------

T0 = 1_800_000_000.0  # epoch seconds of batch 0's start


@contextlib.contextmanager
def fresh_bucket_behind_proxy(spark, store, label: str):
    """``store`` behind a fresh metering proxy, on a bucket of its own (``ckptbench-<store>-<label>-...``)
    that the session can reach: yields the metered store and the bucket."""
    bucket = f"ckptbench-{store.name}-{label}-{uuid.uuid4().hex[:6]}"
    store.create_bucket(bucket)
    with MeteredStore(store) as m:
        ckpt_impls.attach(spark, m, bucket)
        yield m, bucket


def progress(batch: int, wal: float, trigger: float = 500.0, state_ms: float | None = None) -> dict:
    """A Spark progress report for batch ``batch`` starting at T0 + batch seconds."""
    stamp = dt.datetime.fromtimestamp(T0 + batch, dt.timezone.utc).isoformat(timespec="milliseconds")
    p = {"batchId": batch, "timestamp": stamp.replace("+00:00", "Z"), "numInputRows": 10,
         "durationMs": {"walCommit": wal, "commitOffsets": wal / 2, "triggerExecution": trigger}}
    if state_ms is not None:
        p["stateOperators"] = [{"commitTimeMs": state_ms, "numRowsTotal": 5, "memoryUsedBytes": 1}]
    return p


#: The environment of a fixed record: where and with what it was "measured".
FIXED_ENV = {"schema_version": schema.SCHEMA_VERSION, "store": "ceph", "emulator": False,
             "describe": "ceph (fixed numbers for a test)", "size": "smallest", "commit": "0" * 40, "host": "test",
             "created": "2026-11-23T00:00:00+00:00",
             "versions": {"spark": "4.3.0", "hadoop": "3.5.0", "hadoop_aws": "3.5.0", "aws_sdk": "v2 2.35.4"}}
#: The walCommit of each strategy's runs in the fixed records (batch N adds N ms).
FIXED_WAL_MS = {"rename": 40.0, "direct": 30.0, "conditional": 20.0, "manifest": 10.0}


def fixed_streaming_record(wal_ms: dict[str, float] | None = None) -> results.Results:
    """A streaming record of fixed numbers, shaped as ``streaming.streaming`` writes one: every strategy's
    stateful run at 1,000 keys (walCommit ``wal_ms``, by default ``FIXED_WAL_MS``), a file-sink run for
    one, the store's floor."""
    wal_ms = wal_ms or FIXED_WAL_MS
    recorder = results.Recorder()
    recorder.add_samples("floor", "PUT", [3.0, 3.5, 4.0])
    recorder.add_samples("floor", "HEAD", [1.5, 1.6])
    for i, strategy in enumerate(("rename", "direct", "conditional", "manifest")):
        for workload in ("stateful", "file_sink") if strategy == "conditional" else ("stateful",):
            run = recorder.add_run(strategy, workload, 1000, f"p{i}")
            batches = [progress(b, wal_ms[strategy] + b, state_ms=5.0) for b in range(1, 6)]
            recorder.add_batches(run, "measured", batches)
            recorder.add_requests(run, [event(b + 0.01, "PUT", f"p{i}/offsets/{b}", bytes_in=300) for b in range(1, 6)],
                                  batches)
    plan = {**dataclasses.asdict(config.PLANS["smallest"]), "keys": [1000]}
    return recorder.results({**FIXED_ENV, "experiment": "streaming", "plan": plan})


def fixed_levers_record(wal_ms: dict[str | tuple[str, str], float]) -> results.Results:
    """A levers record of fixed numbers: the job ``config.Shape()`` (stateful-hdfs-noop-2p, 1,000 keys)
    run by each strategy of ``wal_ms`` in Spark's own settings, or each (strategy, preset) in that
    configuration of Spark's levers, walCommit as given (batch N adds N ms)."""
    shape = config.Shape()
    recorder = results.Recorder()
    for i, (configuration, wal) in enumerate(wal_ms.items()):
        strategy, preset = configuration if isinstance(configuration, tuple) else (configuration, "default")
        run = recorder.add_run(strategy, shape.name, shape.keys, f"l{i}", preset=preset)
        batches = [progress(b, wal + b, state_ms=5.0) for b in range(1, 6)]
        recorder.add_batches(run, "measured", batches)
        recorder.add_requests(run, [event(b + 0.01, "PUT", f"l{i}/offsets/{b}", bytes_in=300) for b in range(1, 6)],
                              batches)
    plan = dataclasses.asdict(config.PLANS["smallest"])
    return recorder.results({**FIXED_ENV, "experiment": "levers", "plan": plan,
                             "shapes": [dataclasses.asdict(shape) | {"name": shape.name}]})


def file_commit_mismatches(commits, stored: set[str]) -> list[str]:
    """What the JVM's timings of one query's checkpoint files (rows of the ``file_commits`` table) and
    the files ``stored`` under its checkpoint (keys) disagree on, one line each: a stored file with no
    closed timing, a file timed closed but not stored, one timed closed twice, a timing whose kind is
    not its key's area (``infra.s3ops.area_of``). Empty where they agree."""
    closed = commits[commits.outcome == "closed"]
    said = [f"stored, not timed: {k}" for k in sorted(stored - set(closed.key))]
    said += [f"timed, not stored: {k}" for k in sorted(set(closed.key) - stored)]
    said += [f"timed twice: {k}" for k in sorted(set(closed.key[closed.key.duplicated()]))]
    said += [f"kind {kind}, not {area_of(k)}: {k}" for k, kind in zip(commits.key, commits.kind, strict=True)
             if kind != area_of(k)]
    return said
def fixed_crash_record(cycles: dict[tuple[str, str], tuple[int, int]], experiment: str = config.CRASHLAB
                       ) -> results.Results:
    """A crash lab record (or, as ``experiment``, another of crash series) of fixed findings: a
    stateful series per (strategy, preset) of ``cycles``, given as (its cycles, rows it lost)."""
    recorder = results.Recorder()
    for series, ((strategy, preset), (n, lost)) in enumerate(cycles.items()):
        recorder.rows["crash_series"].append({
            "series": series, "strategy": strategy, "workload": "stateful", "cycles": n, "seed": 1, "preset": preset,
            "duplicates": 0, "lost": lost, "error": None})
        recorder.rows["cycles"] += [{"series": series, "strategy": strategy, "workload": "stateful", "cycle": c,
                                     "crash_point": "random", "restart_ok": True, "duplicates": 0, "lost": 0}
                                    for c in range(n)]
    return recorder.results({**FIXED_ENV, "experiment": experiment, "points": ["random"], "seed": 1})


def own_events(proxy, mark: int, prefix: str) -> list[Event]:
    """The events ``proxy`` recorded since ``mark`` on keys under ``prefix``: a metered store is
    shared by the session, and a query an earlier test stopped may still run its state store
    maintenance through it."""
    return [e for e in proxy.events_since(mark) if e.key.startswith(prefix)]


def event(batch: float, op: str, key: str, ms: float = 2.0, bytes_in: int = 0) -> Event:
    """A request that started ``batch`` seconds after T0: inside batch N's window (N to N + its
    triggerExecution) for N plus a few hundredths."""
    start = T0 + batch
    return Event(start, start + ms / 1000, "PUT", op, "offsets" if "offsets" in key else "state", "b", key, 200,
                 bytes_in, 0)


def asv_result(path: Path, machine: str, values: dict[str, float | list]) -> Path:
    """A file in asv's result format, holding ``values`` (a list for a parameterised benchmark)."""
    results_ = {name: [value, [["'a'", "'b'"]] if isinstance(value, list) else []]
                for name, value in values.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"result_columns": ["result", "params"], "results": results_,
                                "params": {"machine": machine}, "commit_hash": "0123456789abcdef"}))
    return path


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


# -- the suite's stores, and what tests build on them -------------------------------------------

def bucket_of(store) -> str:
    return f"ckptbench-{store.name}"


class SuiteStores:
    """Every store of ``TEST_STORES`` that can run here, each started on its first ``get`` (so that
    a run that selects no Ceph test starts no Ceph) with its bucket (``bucket_of``), and reached by
    the shared SparkSession once there is one (``attach``)."""

    def __init__(self) -> None:
        self.stores: dict[str, infra.ObjectStore] = {}
        self.reasons: dict[str, str] = {}
        self.spark = None

    def get(self, name: str) -> infra.ObjectStore:
        if name in CEPH_STORES:  # started already or not, a test that uses it says so
            refuse_unmarked_ceph()
        if name not in self.stores and name not in self.reasons:
            self._start(name)
        if name not in self.stores:
            if name in MUST_RUN_IN_CI and os.environ.get("CI"):
                pytest.fail(f"{name} must run in CI but cannot: {self.reasons[name]}")
            pytest.skip(self.reasons[name])
        return self.stores[name]

    def _start(self, name: str) -> None:
        cls = infra.STORES[name]
        reason = cls.unavailable_reason()
        if reason is None:
            try:
                store = cls().start()
                store.create_bucket(bucket_of(store))
            except infra.StoreUnavailable as e:
                self.reasons[name] = str(e)
                return
            self.stores[name] = store
            if self.spark is not None:
                ckpt_impls.attach(self.spark, store, bucket_of(store))
        else:
            self.reasons[name] = reason

    def attach(self, spark) -> None:
        """Have ``spark`` reach every store started so far, and each one started from now on."""
        self.spark = spark
        for store in self.stores.values():
            ckpt_impls.attach(spark, store, bucket_of(store))

    def stop(self) -> None:
        for store in self.stores.values():
            store.stop()


class CheckpointFiles(contract.CheckpointFiles):
    """``contract.CheckpointFiles`` in the test store's own bucket (``bucket_of``) unless told another."""

    def __init__(self, spark, strategy: str, store, prefix: str, bucket: str | None = None,
                 settings: dict | None = None) -> None:
        super().__init__(spark, strategy, store, prefix, bucket or bucket_of(store), settings)


@contextlib.contextmanager
def crash_lab(spark, store, keep: bool = False):
    """A crash lab on ``store`` behind a metering proxy of its own; the session reaches the bucket
    directly, the drivers through the proxy."""
    with MeteredStore(store) as metered:
        recorder = results.Recorder()
        with crashlab.CrashLab(spark, metered, bucket_of(store), recorder, seed=7, keep=keep) as lab:
            yield lab, recorder


# -- the CLI, as a real process or by its main here ---------------------------------------------

def ckptbench(*args: str, env: dict | None = None, unset=(), timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m ckptbench ARGS`` as a real process with this environment, ``env`` added and
    ``unset`` removed (keys reach it only there), asserting it wrote nothing under results/.
    ``timeout`` guards against a hang only, never a speed check: the suite's children keep the
    machine busy and stretch a command many times over."""
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    with writes_no_results():
        return subprocess.run([sys.executable, "-m", "ckptbench", *args], capture_output=True, text=True,
                              timeout=timeout, env=env)


@contextlib.contextmanager
def writes_no_results():
    """Fail if what runs inside adds or removes anything under results/."""
    before = set(RESULTS.glob("*")) if RESULTS.exists() else set()
    yield
    after = set(RESULTS.glob("*")) if RESULTS.exists() else set()
    assert after == before, "the command wrote results"


def ckptbench_here(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``ckptbench ARGS`` run by the command line's own ``main`` in this process, ``env`` added to
    the environment meanwhile, as ``ckptbench`` runs it as a process: for input a command refuses
    before it starts anything, where a process per case would spend its time importing. The
    strategies and settings it registers, its SIGTERM handler and the environment are put back after; an
    argparse refusal (``SystemExit``) is its exit status. Each test file keeps a case of its kind
    as a real process (``ckptbench``): that a process exits with what ``main`` returns."""
    from ckptbench.cli import app

    environ, strategies, handler = dict(os.environ), dict(ckpt_impls.STRATEGIES), signal.getsignal(signal.SIGTERM)
    taken = list(settings._SETTINGS)
    out, err = io.StringIO(), io.StringIO()
    os.environ.update(env or {})
    with writes_no_results(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = app.main(list(args))
        except SystemExit as e:
            code = e.code
        finally:
            signal.signal(signal.SIGTERM, handler)
            ckpt_impls.STRATEGIES.clear()
            ckpt_impls.STRATEGIES.update(strategies)
            settings._SETTINGS[:] = taken
            os.environ.clear()
            os.environ.update(environ)
    return subprocess.CompletedProcess(["ckptbench", *args], code, out.getvalue(), err.getvalue())


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The one line a refused ``ckptbench`` run printed (exit status 2)."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ckptbench: error: ")
    return lines[0]


def command_lines() -> list[str]:
    """Every process's command line now."""
    return list(net.command_lines().values())


def leaks(secrets: list[str], lines: list[str] | None = None) -> list[str]:
    """The start of every command line (of ``lines``, else every process's now) holding one of
    ``secrets``."""
    return [line[:80] for line in (command_lines() if lines is None else lines) for secret in secrets if secret in line]


# -- the children beside the suite (conftest's ``pytest_collection_finish`` starts them) --------

def cluster_cross_check_run(workdir: Path) -> subprocess.Popen | None:
    """``python -m ckptbench.experiments.jvm_crosscheck --master cluster``, every strategy, on Ceph RGW (the
    embedded store where Ceph cannot run, but not in CI), its JSON into ``workdir``; None where no
    cluster can start here. A child process: one Python process holds one SparkContext, and the
    suite's is a local one. It runs beside the suite (``beside_the_suite``)."""
    if infra.SparkCluster.unavailable_reason():
        return None
    store = config.default_store()
    root = str(ROOT)
    with (workdir / "out.json").open("w") as out, (workdir / "err.txt").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "ckptbench.experiments.jvm_crosscheck", "--store", store, "--master", "cluster",
             "--strategies", ",".join(ckpt_impls.STRATEGIES)], stdout=out, stderr=err, cwd=root,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])})


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
    """The child process conftest started with ``start`` (None: none could start), and its working
    directory."""
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
