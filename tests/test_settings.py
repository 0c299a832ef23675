"""The user's settings (``--conf KEY=VALUE``, a strategies file's ``NAME: KEY=VALUE``;
``ckpt_impls.settings``): refused in one line where they cannot be used, recorded with secret values
redacted, and given by ``deploy``. That they reach each strategy's manager, and its alone, in a
running session is ``test_foreign``'s run of a manager with a client of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ckpt_impls import settings
from helpers import ckptbench, ckptbench_here, one_error_line

SECRET = "hunter2-not-a-key"


def strategies_file(tmp_path, *lines: str):
    path = tmp_path / "strategies.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize(("args", "said"), [
    (("--conf", "fs.s3a.connection.maximum=9"), "fs.s3a.connection.maximum is not a Spark setting (spark.*), "
                                                "which Spark would ignore: a Hadoop key a manager reads is "
                                                "spark.hadoop.fs.s3a.connection.maximum"),
    (("--conf", "spark.sql.shuffle.partitions"), "--conf takes KEY=VALUE"),
    (("--conf", f"spark.hadoop.fs.s3a.secret.key={SECRET}"),
     "--conf spark.hadoop.fs.s3a.secret.key looks secret, and ps shows a command line to every user: give it in a "
     "strategies file (--strategies-file) as '*: spark.hadoop.fs.s3a.secret.key=...'"),
    (("--conf", f"={SECRET}"), "--conf takes KEY=VALUE"),
])
def test_a_setting_that_cannot_be_used_is_one_line(args, said):
    line = one_error_line(ckptbench_here(*args, "strategies"))
    assert said in line and SECRET not in line


@pytest.mark.parametrize(("line", "said"), [
    ("nope: spark.hadoop.a.b=1", "a setting for 'nope', which is no strategy: use one of rename, "),
    ("conditional: spark.sql.shuffle.partitions=3", "a strategy's own setting is set in the running session, so it "
                                                    "must be a Hadoop key (spark.hadoop.*), not "
                                                    "spark.sql.shuffle.partitions"),
    (f"*: spark.driver.password={SECRET}", "a secret setting is set in the running session, so it must be a "
                                           "Hadoop key (spark.hadoop.*)"),
    (f"conditional: ={SECRET}", "takes KEY=VALUE"),
])
def test_a_strategies_file_setting_that_cannot_be_used_is_one_line(tmp_path, line, said):
    listed = strategies_file(tmp_path, line)
    done = ckptbench_here("--strategies-file", listed, "strategies")
    error = one_error_line(done)
    assert said in error and SECRET not in error
    assert f"strategies file {listed}" in error or "no strategy" in error


def test_a_refused_setting_is_a_process_exiting_2(tmp_path):
    assert "is not a Spark setting" in one_error_line(ckptbench("--conf", "a.b=1", "strategies"))


def test_a_record_keeps_the_settings_with_secret_values_redacted(tmp_path):
    """What every experiment's environment.json says of them (``record.results.environment``)."""
    listed = strategies_file(tmp_path, "conditional: spark.hadoop.ckptbench.manifest.compactInterval=20  # why",
                             f"*: spark.hadoop.fs.s3a.secret.key={SECRET}#with a hash",
                             "  # a comment", "direct: spark.hadoop.ckptbench.direct.cancel.abort=false")
    script = ("import json, sys; from ckptbench.cli import app; from ckpt_impls import settings; "
              "app.register_foreign(sys.argv[1:]); print(json.dumps(settings.recorded()))")
    done = subprocess.run([sys.executable, "-c", script, "--conf", "spark.sql.shuffle.partitions=3",
                           "--strategies-file", listed, "strategies"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "*": {"spark.sql.shuffle.partitions": "3", "spark.hadoop.fs.s3a.secret.key": "*********(redacted)"},
        "conditional": {"spark.hadoop.ckptbench.manifest.compactInterval": "20"},
        "direct": {"spark.hadoop.ckptbench.direct.cancel.abort": "false"}}


def test_deploy_gives_the_settings_and_names_the_secret_ones_without_their_values(tmp_path):
    listed = strategies_file(tmp_path, "manifest: spark.hadoop.ckptbench.manifest.compactInterval=20",
                             "conditional: spark.hadoop.ckptbench.manifest.inlineMaxBytes=1",
                             f"manifest: spark.hadoop.org.example.token={SECRET}")
    done = ckptbench_here("--conf", "spark.hadoop.fs.s3a.connection.maximum=99", "--strategies-file", listed,
                          "deploy", "manifest", "--store", "s3", "--bucket", "b", "--no-check")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for key, value in (("spark.hadoop.fs.s3a.connection.maximum", "99"),
                       ("spark.hadoop.ckptbench.manifest.compactInterval", "20")):
        assert any(line.startswith(key) and line.endswith("yours (--conf, or the strategies file)")
                   for line in lines), done.stdout
        assert f"--conf {key}={value}" in done.stdout
    # Another strategy's own setting is not this one's.
    assert "inlineMaxBytes=1" not in done.stdout
    assert "Your settings spark.hadoop.org.example.token look secret and are not printed" in done.stdout


@pytest.mark.spark
def test_a_session_gives_each_strategy_its_own_settings(spark, monkeypatch):
    """What Spark gives a query's checkpoint manager (``newHadoopConf``: its offsets and commits logs,
    its state stores and file sink log are built from it) as the session switches strategy."""
    import ckpt_impls

    monkeypatch.setattr(settings, "_SETTINGS", [])
    monkeypatch.delenv(settings.ENV, raising=False)
    every, own = "ckptbench.test.every", "ckptbench.test.own"
    for setting in (settings.parse(f"spark.hadoop.{every}=all"),
                    settings.parse(f"spark.hadoop.{own}=conditional's", "conditional"),
                    settings.parse(f"spark.hadoop.{every}=direct's", "direct")):
        settings.add(setting, ckpt_impls.STRATEGIES)

    def seen(strategy: str) -> tuple[str | None, str | None]:
        ckpt_impls.use(spark, strategy)
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        return conf.get(every), conf.get(own)

    try:
        assert seen("conditional") == ("all", "conditional's")
        assert seen("direct") == ("direct's", None)
        assert seen("rename") == ("all", None)
        assert seen("conditional") == ("all", "conditional's")
    finally:
        settings._SETTINGS.clear()
        ckpt_impls.use(spark, "rename")
        for key in (every, own):
            spark.conf.unset(key)
