"""A real Spark standalone cluster on this machine (``infra.SparkCluster``): a master and two
workers, each a JVM of its own, and an executor JVM per worker for an application on it.

``cluster_cross_check`` (conftest) runs every strategy's stateful workload on such a cluster, once
for the whole run, in a child process beside the suite (one Python process holds one SparkContext,
and the suite's is a local one). These tests read what it saw: executors writing the state store's files, their
requests reaching the driver through the plugin and agreeing with the metering proxy's per
operation, and nothing left running once it ended. tests/test_secrets.py checks its command lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import ckpt_impls
import infra
import infra.spark_cluster
from ckptbench import config
from ckptbench.experiments import jvm_crosscheck
from ckptbench.harness import spark
from ckptbench.report import page
from helpers import cluster_cross_check_run, comparable_totals
from infra.net import proc_started, proc_stat

# -- without a cluster --------------------------------------------------------------------------


def test_executor_state_puts_leave_out_the_driver_and_other_areas():
    rows = [("PUT", "state", "driver"), ("PUT", "state", "0"), ("PUT", "state", "0"), ("PUT", "state", "1"),
            ("PUT", "offsets", "1"), ("GET", "state", "1"), ("PUT", "state", None)]
    jvm = pd.DataFrame(rows, columns=["op", "area", "origin"])
    assert jvm_crosscheck.executor_state_puts(jvm) == {"0": 2, "1": 1}
    # local mode: the driver's JVM runs the tasks, so no executor sent anything
    assert jvm_crosscheck.executor_state_puts(jvm.assign(origin="driver")) == {}


@pytest.mark.parametrize(("master", "least"), [("local[2]", 0), ("local", 0), ("local-cluster[3,1,1024]", 3),
                                               ("spark://127.0.0.1:7077", 1)])
def test_an_application_waits_for_its_masters_executors(master, least):
    assert spark.least_executors(master) == least


RETRIED = {"spark.task.maxFailures": "4"}


@pytest.mark.parametrize(("master", "conf", "started", "tries"), [
    ("local[2]", {}, "local[2]", 1), ("local", {}, "local", 1), ("local[2]", RETRIED, "local[2,4]", 4),
    ("local", RETRIED, "local[1,4]", 4), ("local[*]", RETRIED, "local[*,4]", 4),
    ("local[2,3]", RETRIED, "local[2,3]", 3),
    ("local-cluster[3,1,1024]", RETRIED, "local-cluster[3,1,1024]", None),
    ("spark://h:7077", RETRIED, "spark://h:7077", None)])
def test_a_local_master_tries_a_task_as_its_settings_say(master, conf, started, tries):
    assert spark.local_with_retries(master, conf) == started
    assert config.task_tries(started) == tries


FAILS_ONCE = """
import sys
from pyspark import TaskContext
from ckptbench.harness import spark


def once(rows):
    if TaskContext.get().attemptNumber() == 0:
        raise OSError("the store did not answer")
    return rows


if __name__ == "__main__":
    session = spark.session("rename", {}, conf={"spark.task.maxFailures": sys.argv[1]})
    print(session.sparkContext.master, session.sparkContext.parallelize(range(4), 2).mapPartitions(once).sum())
"""


@pytest.mark.spark
def test_a_task_that_fails_once_is_tried_again_where_the_settings_say(spark, tmp_path):
    """Spark's local mode alone (the suite's session, ``local[2]``) fails the job on the task's
    first failure; a session given ``spark.task.maxFailures`` (as the fault lab's) tries it again."""
    (tmp_path / "fails_once.py").write_text(FAILS_ONCE)
    spark.sparkContext.addPyFile(str(tmp_path / "fails_once.py"))
    import fails_once

    with pytest.raises(Exception, match="the store did not answer"):
        spark.sparkContext.parallelize(range(4), 2).mapPartitions(fails_once.once).sum()
    done = subprocess.run([sys.executable, str(tmp_path / "fails_once.py"), "4"], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, timeout=300)
    assert done.stdout.split() == ["local[2,4]", "6"], done.stderr[-3000:]


def test_a_master_the_lab_cannot_run_on_is_refused_in_one_line():
    for master in ("cluster", "local[2]", "spark://h:7077"):
        assert config.check_master(master) == master
    with pytest.raises(ValueError, match=r"must be local\[N\], spark://HOST:PORT or cluster .*'yarn'"):
        config.check_master("yarn")


def test_the_report_says_where_spark_ran():
    cluster = {"spark_master": "spark://127.0.0.1:7077", "cluster": "Spark standalone cluster at spark://...",
               "executors": 2}
    assert page._endpoint(cluster) == ("endpoint kind not recorded; master spark://127.0.0.1:7077, 2 executors; "
                                         "Spark standalone cluster at spark://...")
    assert page._endpoint({"spark_master": "local[2]", "cluster": None, "executors": 0}) == (
        "endpoint kind not recorded; master local[2] (a task tried once), executors in the driver JVM")
    assert page._endpoint({"spark_master": "local[2,4]", "executors": 0, "jvm_flags": ["-Xmx1g", "-XX:-X"]}) == (
        "endpoint kind not recorded; master local[2,4] (a task tried 4 times), executors in the driver JVM; "
        "driver JVM flags -Xmx1g -XX:-X")


# -- with a cluster ------------------------------------------------------------------------------

def _alive(pid: int, started: int) -> bool:
    """Whether the process ``pid`` that started at ``started`` runs: a pid alone may name another
    process by now."""
    stat = proc_stat(pid)
    return stat is not None and stat[1] != "Z" and proc_started(pid) == started


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(cluster_cross_check_run)
def test_every_strategy_on_the_cluster_has_executors_write_state_files(cluster_cross_check):
    where = cluster_cross_check["where"]
    assert where["executors"] == 2 and where["spark_master"].startswith("spark://127.0.0.1:")
    executors = set(where["executor_hosts"])
    for strategy, checked in cluster_cross_check["strategies"].items():
        assert "error" not in checked, (strategy, checked)
        puts = checked["executor_state_puts"]
        assert sum(puts.values()) > 0, f"{strategy}: no executor PUT a state file: {checked['by_op']}"
        assert set(puts) <= executors, (strategy, puts, executors)
        assert set(checked["origins"]) - {"driver"} <= executors
        assert set(checked["origins"]) - {"driver"}, f"{strategy}: no executor shipped a count: {checked['origins']}"
        assert checked["dropped"] == 0


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(cluster_cross_check_run)
def test_on_the_cluster_the_jvms_count_what_the_proxy_counts_per_operation(cluster_cross_check):
    for strategy in ckpt_impls.STRATEGIES:
        checked = cluster_cross_check["strategies"][strategy]
        assert checked["disagreements"] == [], (strategy, checked["disagreements"])
        # Equal but for attempts that never reached the proxy (jvm_requests.unseen_by_proxy) and
        # requests the proxy relayed no answer to that no attempt pairs with (a PUT in flight as the
        # query stops).
        jvm, proxy = comparable_totals(checked)
        assert jvm == proxy and sum(proxy.values()) > 0, strategy


def test_a_pid_names_a_running_process_only_with_its_start():
    child = subprocess.Popen(["sleep", "60"])
    try:
        started = proc_started(child.pid)
        assert _alive(child.pid, started) and not _alive(child.pid, started + 1)
    finally:
        child.kill()
        child.wait()
    assert not _alive(child.pid, started)


@pytest.mark.spark
@pytest.mark.slow
def test_a_worker_that_dies_starting_fails_the_cluster_in_one_line(monkeypatch):
    """A worker that cannot start (here: a memory size it cannot parse) ends the wait at once; the
    error names the daemon and its exit status, and nothing is left running."""
    monkeypatch.setattr(infra.spark_cluster, "WORKER_MEMORY", "plenty")
    cluster = infra.SparkCluster()
    with pytest.raises(infra.StoreUnavailable, match=r"0 of 2 workers registered .*worker-\d exited \d+") as error:
        cluster.start()
    assert "\n" not in str(error.value) and cluster.directory is None and not cluster.processes


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(cluster_cross_check_run)
def test_the_cluster_leaves_nothing_running(cluster_cross_check):
    """Its JVMs, taken while the application ran, are gone once the run ended, as is its directory
    (the daemons' logs, the executors' work directories)."""
    pids = [int(pid) for lines in cluster_cross_check["cluster"]["jvms"].values() for pid in lines]
    started = {int(pid): ticks for pid, ticks in cluster_cross_check["cluster"]["started"].items()}
    assert sorted(started) == sorted(pids) and None not in started.values(), started
    assert not [pid for pid in pids if _alive(pid, started[pid])]
    assert not Path(cluster_cross_check["cluster"]["directory"]).exists()
