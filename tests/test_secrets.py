"""Credentials never reach a command line: checked over every process while Spark and the stores run,
and on a Spark standalone cluster (master, workers, executors) while an application runs on it.

PySpark hands builder confs to the JVM as command-line arguments, which ``ps`` shows;
the keys must travel in memory instead (see ckpt_impls.set_credentials). ``tests/test_tls.py`` runs
the same check (``leaks``) throughout runs over HTTPS, where the JVMs also get a truststore. On the cluster the
driver ships keys to executors inside tasks, never as a ``-D`` or ``--conf``.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from helpers import cluster_cross_check_run, command_lines, leaks
from infra.net import command_lines_holding


def test_no_secret_key_on_any_command_line(suite_stores, store, spark):
    secrets = [s.credentials.secret_key for s in suite_stores.stores.values() if s.credentials]
    assert secrets, "no store with credentials started"
    assert any("org.apache.spark.deploy.SparkSubmit" in line for line in command_lines()), "the JVM is not running"
    assert not leaks(secrets), f"secret key on a command line: {leaks(secrets)}"


def test_the_check_finds_a_secret_on_a_command_line():
    assert leaks(["s3cr3t"], ["java -Dfs.s3a.secret.key=s3cr3t Main", "python -m ckptbench"]) == [
        "java -Dfs.s3a.secret.key=s3cr3t Main"]


def test_the_cluster_check_finds_a_running_process_holding_a_secret():
    """``command_lines_holding``, which ``jvm_crosscheck`` runs over a cluster's JVMs."""
    secret = uuid.uuid4().hex
    assert command_lines_holding([secret, ""]) == {}  # an empty secret is in every line: never looked for
    # The child says it is up before the check: Popen returns when exec closes its close-on-exec pipe, and
    # Linux sets the new command line after that (setup_arg_pages); the project's CI once found no line.
    leaking = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)",
                                f"--key={secret}"], stdout=subprocess.PIPE, text=True)
    try:
        assert leaking.stdout.readline() == "up\n"
        assert list(command_lines_holding([secret])) == [leaking.pid]
    finally:
        leaking.kill()
        leaking.wait()


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(cluster_cross_check_run)
def test_no_secret_key_on_any_cluster_jvms_command_line(cluster_cross_check):
    """Taken while the application ran: every process, the cluster's JVMs among them (the
    ``cluster_cross_check`` fixture checks that they were all there)."""
    assert cluster_cross_check["secret_on_command_lines"] == {}, "secret key on these processes' command lines"


def test_the_session_can_use_the_keys_it_was_given(suite_stores, store, spark):
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for store in suite_stores.stores.values():
        bucket = f"ckptbench-{store.name}"
        assert hadoop_conf.get(f"fs.s3a.bucket.{bucket}.secret.key") == store.credentials.secret_key
