"""The tiers' markers are checked, not trusted (conftest.py): a test without ``spark`` cannot start a
JVM, here or in a process it starts, and a test without ``ceph`` cannot start Ceph. Shown on planted
tests run by a pytest of their own with this suite's conftest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_impls
from ckptbench import config
from helpers import ROOT, TEST_STORES

STRATEGY = "|".join(map(re.escape, ckpt_impls.STRATEGIES))
STORE = "|".join(TEST_STORES)


def planted(tmp_path: Path, source: str, *options: str) -> subprocess.CompletedProcess:
    """``source`` as a test file, run by pytest with this suite's conftest and markers."""
    (tmp_path / "test_planted.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
                           "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), *options, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


JVM = '''import subprocess
import pytest

def test_unmarked():
    subprocess.run(["java", "-version"], check=True)

@pytest.mark.spark
def test_marked():
    subprocess.run(["java", "-version"], check=True)
'''


@pytest.mark.spark
def test_a_jvm_started_without_the_spark_marker_refuses_to_start(tmp_path):
    done = planted(tmp_path, JVM)
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 passed" in done.stdout, done.stdout
    assert "FAILED test_planted.py::test_unmarked" in done.stdout, done.stdout
    assert "Unrecognized VM option 'TestLacksTheSparkMarker'" in done.stdout, done.stdout


CEPH = '''import infra

def test_starts_it():
    infra.CephStore().start()

def test_gets_it(suite_stores):
    suite_stores.get("ceph")
'''


def test_ceph_started_or_used_without_the_ceph_marker_fails_the_test(tmp_path):
    done = planted(tmp_path, CEPH)
    assert done.returncode == 1, done.stdout
    assert "2 failed" in done.stdout, done.stdout
    for test in ("test_starts_it", "test_gets_it"):
        assert f"test_planted.py::{test} starts Ceph without the ceph marker" in done.stdout, done.stdout


MATRIX = '''import pytest

@pytest.mark.strategies_on_the_default_store
def test_marked(strategy, store):
    pass

def test_unmarked(strategy, store):
    pass
'''


def test_a_marked_test_runs_every_strategy_on_the_default_store_and_sparks_default_on_every_store(tmp_path):
    done = planted(tmp_path, MATRIX, "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    pairs = {test: {tuple(re.search(rf"\[({STRATEGY})-({STORE})\]$", line).groups())
                    for line in lines if f"::{test}[" in line} for test in ("test_marked", "test_unmarked")}
    every = {(strategy, store) for strategy in ckpt_impls.STRATEGIES for store in TEST_STORES}
    assert pairs["test_unmarked"] == every
    assert pairs["test_marked"] == {(strategy, store) for strategy, store in every
                                    if store == config.default_store() or strategy == config.SPARK_DEFAULT[0]}
    assert len(pairs["test_marked"]) == len(ckpt_impls.STRATEGIES) + len(TEST_STORES) - 1


def test_the_suites_driver_jvm_maps_the_class_archive(spark):
    archive = re.search(r"-XX:SharedArchiveFile=(\S+)", os.environ["SPARK_SUBMIT_OPTS"]).group(1)
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    assert archive in Path(f"/proc/{pid}/maps").read_text()
