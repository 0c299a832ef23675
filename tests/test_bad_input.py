"""Bad input gets one clear line on stderr, exit status 2, no hang and no results written.

The CLI runs as a real process against real servers; credentials reach it through its
environment, never its command line. Input refused before anything starts is checked case by case
through the command line's ``main`` in this process (``ckptbench_here``).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from helpers import ROOT, bucket_of, ckptbench, ckptbench_here, one_error_line, skip_unless_ci


def test_unknown_strategy_lists_the_valid_ones():
    line = one_error_line(ckptbench("measure", "--strategies", "rename,bogus"))
    assert "'bogus'" in line and "rename, direct, conditional" in line


def test_bench_refuses_an_unknown_strategy_in_one_line():
    line = one_error_line(ckptbench_here("bench", "--strategies", "conditional,bogus"))
    assert "'bogus'" in line and "rename, direct, conditional" in line


def test_bench_resumes_only_an_interrupted_run_and_gates_one_store(tmp_path):
    line = one_error_line(ckptbench_here("bench", "--store", "embedded", "--resume", "--results", str(tmp_path)))
    assert line.startswith("ckptbench: error: nothing to resume: no interrupted bench of embedded at size quick")
    assert "run bench without --resume" in line
    line = one_error_line(ckptbench_here("bench", "--store", "embedded,ceph", "--continuous", "HEAD~1", "HEAD"))
    assert "--continuous and --commits run on one store" in line
    line = one_error_line(ckptbench_here("bench", "--store", "embedded,hdfs"))
    assert "unknown store 'hdfs'" in line


def test_unknown_store_lists_the_valid_ones():
    line = one_error_line(ckptbench_here("measure", "--stores", "hdfs"))
    assert "'hdfs'" in line and "embedded, ceph" in line


def test_an_unknown_crash_plan_lists_the_plans():
    line = one_error_line(ckptbench_here("crashlab", "--size", "huge"))
    assert "'huge'" in line and "smallest, quick, full" in line


def test_malformed_option_is_one_line():
    line = one_error_line(ckptbench_here("measure", "--batches", "many"))
    assert "--batches" in line


def test_unreachable_endpoint():
    line = one_error_line(ckptbench("measure", "--stores", "endpoint", "--bucket", "any",
                                    env={"CKPT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a",
                                         "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "cannot reach" in line and "127.0.0.1:9" in line


@pytest.mark.ceph
def test_wrong_credentials(suite_stores):
    ceph = suite_stores.get("ceph")
    line = one_error_line(ckptbench("measure", "--stores", "endpoint", "--bucket", bucket_of(ceph),
                                    env={"CKPT_S3_ENDPOINT": ceph.endpoint, "AWS_ACCESS_KEY_ID": "wrong",
                                         "AWS_SECRET_ACCESS_KEY": "wrong-secret"}))
    assert "rejected the credentials" in line
    assert "wrong-secret" not in line


@pytest.mark.parametrize("name", ["embedded", "ceph"])
def test_missing_bucket(suite_stores, name):
    store = suite_stores.get(name)
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
    from ckptbench.record import disk, results, schema

    streaming = tmp_path / "embedded-streaming"
    disk.write(results.Recorder().results({"schema_version": schema.SCHEMA_VERSION, "plan": {"keys": [10]},
                                           "store": "embedded", "experiment": "streaming"}), streaming)
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
    (("faultlab", "--seeds", "2", "--part", "3/2"), "--part takes K/N with 1 <= K <= N <= "),
    (("faultlab", "--strategies", "conditional", "--workloads", "stateful", "--profiles", "outage-5s", "--seeds", "1",
      "--part", "1/2"), "--part takes K/N with 1 <= K <= N <= 1, the runs (strategies x workloads x profiles x seeds)"),
    (("counting", "--queries", "1"), "--queries"),
    (("counting", "--strategies", "rename,bogus"), "'bogus'"),
])
def test_scale_cost_and_counting_options_say_what_is_wrong(args, says):
    assert says in one_error_line(ckptbench_here(*args))


@pytest.mark.parametrize("command", ["bench", "scale", "counting", "faultlab", "crashlab", "contract", "probe",
                                     "clean"])
def test_every_command_on_one_store_reads_ckpt_store(command):
    """``$CKPT_STORE`` names the store when ``--store`` does not, for every command that runs on one:
    an unknown one is refused in one line before anything starts."""
    line = one_error_line(ckptbench_here(command, env={"CKPT_STORE": "nonsense"}))
    assert "unknown store 'nonsense'; valid stores: embedded, ceph" in line


#: A recommend command line that is right, which each case below spoils in one option.
RECOMMEND = {"--store": "embedded", "--workload": "stateless", "--partitions": "2", "--trigger": "10s"}


@pytest.mark.parametrize("changed, says", [
    ({"--store": "hdfs"}, "unknown store 'hdfs'; valid stores: embedded, ceph"),
    ({"--trigger": "soon"}, "--trigger must be a duration such as 10s, 500ms or 2m, not 'soon'"),
    ({"--trigger": "0s"}, "--trigger must be more than 0 s"),
    ({"--partitions": "0"}, "--partitions must be 1 to 10000, not 0"),
    ({"--workload": "batch"}, "--workload must be one of stateless, stateful, not 'batch'"),
    ({"--provider": "rocksdb"}, "--provider applies to a stateful job (its state store), not a stateless one"),
    ({"--state-keys": "10"}, "--state-keys applies to a stateful job"),
    ({"--workload": "stateful", "--provider": "cassandra"}, "--provider must be one of hdfs, rocksdb"),
    ({"--sink": "kafka"}, "--sink must be one of noop, foreach, file, not 'kafka'"),
    ({"--batches": "1"}, "--batches must be 3 to 1000"),
    ({"--repeats": "0"}, "--repeats must be 1 to --batches (10: each query measures at least one batch), not 0"),
    ({"--batches": "4", "--repeats": "5"}, "--repeats must be 1 to --batches (4: "),
    ({"--bucket": "mine"}, "--store embedded starts a store of its own with a fresh bucket: leave out --bucket"),
    ({"--partitions": "many"}, "--partitions: invalid int value"),
])
def test_recommend_says_what_is_wrong(tmp_path, changed, says):
    args = [word for option, value in {**RECOMMEND, **changed}.items() for word in (option, value)]
    line = one_error_line(ckptbench_here("recommend", *args, "--out", str(tmp_path / "out")))
    assert says in line
    assert not (tmp_path / "out").exists()


def test_recommend_names_a_file_as_out(tmp_path):
    (tmp_path / "out").write_text("mine")
    args = [word for item in RECOMMEND.items() for word in item]
    line = one_error_line(ckptbench_here("recommend", *args, "--out", str(tmp_path / "out")))
    assert "is a file: name a directory" in line


def test_recommend_on_a_missing_bucket(suite_stores, tmp_path):
    store = suite_stores.get("embedded")
    spoilt = {**RECOMMEND, "--store": "endpoint", "--bucket": "no-such-bucket"}
    args = [word for item in spoilt.items() for word in item]
    line = one_error_line(ckptbench("recommend", *args, "--out", str(tmp_path / "out"),
                                    env={"CKPT_S3_ENDPOINT": store.endpoint,
                                         "AWS_ACCESS_KEY_ID": store.credentials.access_key,
                                         "AWS_SECRET_ACCESS_KEY": store.credentials.secret_key}))
    assert "bucket 'no-such-bucket' does not exist" in line
    assert store.credentials.secret_key not in line
    assert not (tmp_path / "out").exists()


# -- where a command writes --------------------------------------------------------------------------

SPARK35 = ROOT / ".venv-spark35" / "bin" / "python"


def test_the_labs_write_under_the_running_sparks_results():
    """On Spark 3.5 a lab's records go under results-spark3.5/, like every command's (``results_root``),
    never into the default Spark's results/."""
    if not SPARK35.exists():
        skip_unless_ci(f"no Spark 3.5 venv at {SPARK35.parent.parent}: run `make setup-spark35`")
    code = ("from ckptbench.cli import app, labs\n"
            "for command in ('faultlab', 'crashlab', 'scale', 'counting'):\n"
            "    print(labs.lab_settings(app.parser().parse_args([command, '--store', 'embedded']), 'quick').raw)\n")
    done = subprocess.run([str(SPARK35), "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(ROOT / "results-spark3.5" / "raw")] * 4


def test_no_command_names_the_default_results_directory_itself():
    """Every command writes under ``results_root()``: a path built on ``RESULTS`` would be the default
    Spark's on every Spark."""
    found = [f"{path.name}:{n}" for path in sorted((ROOT / "ckptbench" / "cli").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if "RESULTS /" in line]
    assert found == []
