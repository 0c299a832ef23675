"""Bad input gets one clear line on stderr, exit status 2, no hang and no results written.

The CLI runs as a real process against real servers; credentials reach it through its
environment, never its command line.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ckptbench.cli.common import RESULTS
from conftest import bucket_of


def ckptbench(*args: str, env: dict | None = None, unset=()) -> subprocess.CompletedProcess:
    """``python -m ckptbench ARGS`` with this environment, ``env`` added and ``unset`` removed."""
    before = set(RESULTS.glob("*")) if RESULTS.exists() else set()
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    done = subprocess.run([sys.executable, "-m", "ckptbench", *args], capture_output=True, text=True,
                          timeout=60, env=env)
    after = set(RESULTS.glob("*")) if RESULTS.exists() else set()
    assert after == before, "a failed run wrote results"
    return done


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ckptbench: error: ")
    return lines[0]


def test_unknown_strategy_lists_the_valid_ones():
    line = one_error_line(ckptbench("measure", "--strategies", "rename,bogus"))
    assert "'bogus'" in line and "rename, direct, conditional" in line


def test_unknown_store_lists_the_valid_ones():
    line = one_error_line(ckptbench("measure", "--stores", "hdfs"))
    assert "'hdfs'" in line and "embedded, ceph" in line


def test_malformed_option_is_one_line():
    line = one_error_line(ckptbench("measure", "--batches", "many"))
    assert "--batches" in line


def test_unreachable_endpoint():
    line = one_error_line(ckptbench("measure", "--stores", "endpoint", "--bucket", "any",
                                    env={"CKPT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a",
                                         "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "cannot reach" in line and "127.0.0.1:9" in line


def test_wrong_credentials(lab):
    ceph = lab.get("ceph")
    line = one_error_line(ckptbench("measure", "--stores", "endpoint", "--bucket", bucket_of(ceph),
                                    env={"CKPT_S3_ENDPOINT": ceph.endpoint, "AWS_ACCESS_KEY_ID": "wrong",
                                         "AWS_SECRET_ACCESS_KEY": "wrong-secret"}))
    assert "rejected the credentials" in line
    assert "wrong-secret" not in line


@pytest.mark.parametrize("name", ["embedded", "ceph"])
def test_missing_bucket(lab, name):
    store = lab.get(name)
    line = one_error_line(ckptbench("measure", "--stores", "endpoint", "--bucket", "no-such-bucket",
                                    env={"CKPT_S3_ENDPOINT": store.endpoint,
                                         "AWS_ACCESS_KEY_ID": store.credentials.access_key,
                                         "AWS_SECRET_ACCESS_KEY": store.credentials.secret_key}))
    assert "bucket 'no-such-bucket' does not exist" in line


def test_missing_user_jars():
    line = one_error_line(ckptbench("measure", "--stores", "embedded",
                                    env={"CKPT_S3A_JARS": "/nonexistent/hadoop-aws.jar"}))
    assert "/nonexistent/hadoop-aws.jar" in line


def test_drift_without_results(tmp_path):
    line = one_error_line(ckptbench("drift", str(tmp_path), str(tmp_path)))
    assert "no asv results under" in line and "--results DIR" in line


def test_cost_at_scale_needs_scale_records(tmp_path):
    from ckptbench.record import results, schema

    streaming = tmp_path / "embedded-streaming"
    results.Recorder().results({"schema_version": schema.SCHEMA_VERSION, "plan": {"keys": [10]}, "store": "embedded",
                                "experiment": "streaming"}).write(streaming)
    line = one_error_line(ckptbench("cost", "--partitions", "200", "--record", str(streaming)))
    assert "needs scale records" in line and "streaming" in line


@pytest.mark.parametrize("args, says", [
    (("cost", "--partitions", "200", "--strategy", "bogus"), "'bogus'"),
    (("cost", "--partitions", "0"), "at least 1"),
    (("cost", "--strategy", "direct"), "--partitions"),
    (("scale", "--operators", "3"), "--operators"),
    (("scale", "--partitions", "2,lots"), "--partitions"),
    (("scale", "--axes", "batches,depth"), "--axes"),
    (("scale", "--part", "3/2"), "--part"),
    (("scale", "--part", "2/2", "--strategies", "conditional"), "--part"),
    (("counting", "--queries", "1"), "--queries"),
    (("counting", "--strategies", "rename,bogus"), "'bogus'"),
])
def test_scale_cost_and_counting_options_say_what_is_wrong(args, says):
    assert says in one_error_line(ckptbench(*args))
