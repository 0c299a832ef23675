"""Credentials never reach a command line: checked over every process while Spark and the stores run.

PySpark hands builder confs to the JVM as command-line arguments, which ``ps`` shows;
the keys must travel in memory instead (see ckpt_impls.set_credentials). ``tests/test_tls.py`` runs
the same check (``leaks``) throughout runs over HTTPS, where the JVMs also get a truststore.
"""

from __future__ import annotations

from infra.net import command_lines


def leaks(secrets: list[str], lines: list[str] | None = None) -> list[str]:
    """The start of every command line (of ``lines``, else every process's now) holding one of ``secrets``."""
    return [line[:80] for line in (command_lines() if lines is None else lines) for secret in secrets if secret in line]


def test_no_secret_key_on_any_command_line(lab, spark):
    secrets = [s.credentials.secret_key for s in lab.stores.values() if s.credentials]
    assert secrets, "no store with credentials started"
    assert any("org.apache.spark.deploy.SparkSubmit" in line for line in command_lines()), "the JVM is not running"
    assert not leaks(secrets), f"secret key on a command line: {leaks(secrets)}"


def test_the_check_finds_a_secret_on_a_command_line():
    assert leaks(["s3cr3t"], ["java -Dfs.s3a.secret.key=s3cr3t Main", "python -m ckptbench"]) == [
        "java -Dfs.s3a.secret.key=s3cr3t Main"]


def test_the_session_can_use_the_keys_it_was_given(lab, spark):
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for store in lab.stores.values():
        bucket = f"ckptbench-{store.name}"
        assert hadoop_conf.get(f"fs.s3a.bucket.{bucket}.secret.key") == store.credentials.secret_key
