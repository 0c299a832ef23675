"""``python -m ckptbench deploy STRATEGY``: the jars, spark-submit flags and SparkSession settings to
run a strategy in production.

The printed flags are the lab's own (``ckpt_impls.session_conf``, which ``configure`` uses) plus
the strategy's declared options, with no key anywhere; run as printed by a real ``spark-submit``,
they make a streaming query checkpoint to the embedded store through the strategy's manager.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import ckpt_impls
from ckpt_impls import jars, manifest_format
from ckptbench import deploy
from helpers import ckptbench, ckptbench_here, one_error_line
from infra import SparkCluster

JAVA = Path(ckpt_impls.__file__).parent / "java" / "ckptbench" / "checkpoint"
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
#: Settings a manager reads that are no production option: fault injection for the crash tests.
TEST_ONLY = {"ckptbench.manifest.haltAt"}


def default_chain_keys(store) -> dict[str, str]:
    """``store``'s keys as the AWS SDK's default chain reads them from a node's environment."""
    return {k: v for k, v in env_for(store).items() if k.startswith("AWS_")}


def env_for(store) -> dict[str, str]:
    """The environment of a user whose store is ``store``: its URL, and keys for the default chain."""
    return {"CKPT_S3_ENDPOINT": store.endpoint, "AWS_ACCESS_KEY_ID": store.credentials.access_key,
            "AWS_SECRET_ACCESS_KEY": store.credentials.secret_key}


def printed_command(stdout: str) -> list[str]:
    """The spark-submit command as printed (lines continued by a backslash), split as a shell would."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("spark-submit "))
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    return shlex.split(" ".join(line.removesuffix("\\") for line in lines[start:end + 1]))


def printed_session_conf(stdout: str) -> dict[str, str]:
    """The ``.config(key, value)`` settings of the printed PySpark builder."""
    found = re.findall(r"^\s+\.config\((.*)\)$", stdout, re.MULTILINE)
    return dict(ast.literal_eval(f"({args})") for args in found)


def flags(argv: list[str]) -> tuple[str, dict[str, str]]:
    """``--jars`` and the ``--conf`` settings of a spark-submit argv."""
    jar_list, conf = None, {}
    for option, value in zip(argv[1:-1:2], argv[2:-1:2], strict=True):
        if option == "--jars":
            jar_list = value
        else:
            assert option == "--conf", option
            key, _, setting = value.partition("=")
            conf[key] = setting
    return jar_list, conf


@pytest.fixture
def bucket(suite_stores):
    """A bucket of this test's own on the embedded store."""
    store = suite_stores.get("embedded")
    name = f"deploy-{uuid.uuid4().hex[:8]}"
    store.create_bucket(name)
    yield store, name
    store.empty_bucket(name)
    store.client().delete_bucket(Bucket=name)


@pytest.mark.parametrize("strategy", list(ckpt_impls.STRATEGIES))
def test_the_printed_settings_are_the_labs_own_without_keys(bucket, strategy, monkeypatch):
    store, name = bucket
    monkeypatch.setenv("CKPT_S3_ENDPOINT", store.endpoint)
    done = ckptbench("deploy", strategy, "--store", "embedded", "--bucket", name, env=env_for(store))
    assert done.returncode == 0, done.stderr
    argv = printed_command(done.stdout)
    assert argv[0] == "spark-submit" and argv[-1] == deploy.APP
    jar_list, conf = flags(argv)
    chosen = ckpt_impls.get(strategy)
    expected = ckpt_impls.session_conf(strategy, deploy.target("embedded"), name) | {
        "spark.hadoop." + o.name: o.default for o in chosen.options}
    others = {*([] if chosen.ours else [str(jars.MANAGERS_JAR)]),
              *(str(jars.module_jar(m)) for m in jars.SPARK_MODULES if m != chosen.module)}
    expected_jars = [p for p in expected.pop("spark.jars").split(",") if p not in others]
    assert jar_list.split(",") == expected_jars
    if chosen.module:  # Spark's own manager: its module's jar, pinned, and its version in the header
        assert str(jars.module_jar(chosen.module)) in expected_jars
        assert f", {chosen.module} {jars.module(chosen.module).version}; run it" in done.stdout
    assert conf == expected
    assert printed_session_conf(done.stdout) == {"spark.jars": jar_list, **conf}
    packages = {a.file: a.coordinates for a in jars.bundled()}
    named = [packages[os.path.basename(p)] for p in expected_jars if os.path.basename(p) in packages]
    assert re.findall(r"--packages (\S+)$", done.stdout, re.M) == ([",".join(named)] if named else [])
    assert conf.get(ckpt_impls.MANAGER_CLASS_CONF) == chosen.manager_class
    assert conf[f"spark.hadoop.fs.s3a.bucket.{name}.endpoint"] == store.endpoint
    assert conf[f"spark.hadoop.fs.s3a.bucket.{name}.aws.credentials.provider"] == {
        "v1": "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
        "v2": "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"}[jars.aws_sdk()]
    assert not [k for k in conf if k.endswith((".access.key", ".secret.key", ".session.token"))]
    assert store.credentials.secret_key not in done.stdout + done.stderr
    assert store.credentials.access_key not in done.stdout + done.stderr


def test_the_s3a_jars_by_coordinates_only_where_they_are_the_bundled_ones(bucket):
    store, name = bucket
    bundled = ",".join(str(jars.BUNDLED_DIR / a.file) for a in jars.bundled())
    printed = {}
    for user_jars in ("", bundled):
        done = ckptbench("deploy", "conditional", "--store", "embedded", "--bucket", name,
                         env={**env_for(store), jars.USER_JARS_ENV: user_jars})
        assert done.returncode == 0, done.stderr
        printed[user_jars] = re.findall(r"--packages (\S+)$", done.stdout, re.M)
    assert printed == {"": [",".join(a.coordinates for a in jars.bundled())], bundled: []}


def test_ceph_gets_its_signer():
    done = ckptbench("deploy", "conditional", "--store", "ceph", "--bucket", "events", "--no-check",
                     env={"CKPT_S3_ENDPOINT": "http://rgw.example:7480"})
    assert done.returncode == 0, done.stderr
    _, conf = flags(printed_command(done.stdout))
    # SDK v1's SigV2 signer; S3A 3.4+ (SDK v2) has none, and signs headers but not the payload
    assert conf["spark.hadoop.fs.s3a.bucket.events.signing-algorithm"] == \
        {"v1": "S3SignerType", "v2": "AWS4UnsignedPayloadSignerType"}[jars.aws_sdk()]
    assert conf["spark.hadoop.fs.s3a.bucket.events.endpoint"] == "http://rgw.example:7480"


def java_options(manager_class: str) -> dict[str, str]:
    """The ``ckptbench.*`` settings a manager's source reads, with the defaults written there
    (directly, or through ``Backoff.fromConf(conf, prefix)``)."""
    source = (JAVA / f"{manager_class.rsplit('.', 1)[1]}.java").read_text()
    found = {name: value for name, value in
             re.findall(r'conf\.get\w*\(\s*"(ckptbench\.[\w.]+)",\s*([\w"]+)\s*\)', source)}
    backoff = (JAVA / "Backoff.java").read_text()
    backoff_defaults = re.findall(r'conf\.get\w+\(prefix \+ "(\.\w+)",\s*(\w+)\)', backoff)
    for prefix in re.findall(r'Backoff\.fromConf\(conf,\s*"(ckptbench\.[\w.]+)"\)', source):
        found |= {prefix + suffix: value for suffix, value in backoff_defaults}
    return {name: value.strip('"').rstrip("L").replace("_", "") for name, value in found.items()}


@pytest.mark.parametrize("strategy", [s.name for s in ckpt_impls.STRATEGIES.values() if s.ours])
def test_declared_options_are_what_the_manager_reads(strategy):
    chosen = ckpt_impls.get(strategy)
    read = {k: v for k, v in java_options(chosen.manager_class).items() if k not in TEST_ONLY}
    assert {o.name: o.default for o in chosen.options} == read


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["manifest", "abortable"])  # conditional: on the cluster, below
def test_spark_submit_with_the_printed_flags_checkpoints_through_the_strategy(bucket, strategy, tmp_path):
    store, name = bucket
    done = ckptbench("deploy", strategy, "--store", "embedded", "--bucket", name, env=env_for(store))
    assert done.returncode == 0, done.stderr
    argv = printed_command(done.stdout)
    app = tmp_path / "app.py"
    app.write_text(APP)
    argv = [str(SPARK_SUBMIT), "--master", "local[1]", *argv[1:-1], str(app), f"s3a://{name}/ck", "2"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                         env={**os.environ, **default_chain_keys(store), "PYSPARK_PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"manager: {ckpt_impls.get(strategy).manager_class}" in run.stdout
    assert "batches: 2" in run.stdout
    objects = store.list_keys(name, "ck/")
    s3 = store.client()
    assert not [k for k in objects if ckpt_impls.TEMP_FILE.search(k)]
    if strategy == "abortable":  # Spark's own, from its module's jar: files at their own keys
        assert {"ck/offsets/0", "ck/commits/0", "ck/metadata"} <= set(objects), objects
    else:  # files are entries of per-directory manifests, not objects at their paths
        assert "ck/offsets/0" not in objects and "ck/commits/0" not in objects
        records = sorted(k for k in objects if k.startswith(manifest_format.prefix("ck/offsets") + "r/"))
        changes = [change for key in records for change in manifest_format.parse_record(
            s3.get_object(Bucket=name, Key=key)["Body"].read().decode(), int(key.rsplit("/", 1)[1]))]
        assert any(change[:2] == ["put", "0"] for change in changes), changes


#: A streaming query checkpointing to argv[1]: argv[2] batches, one per input file beside it, then it ends
#: by itself (availableNow), so no batch is interrupted by a stop. It counts lines per value: state the
#: executors write under ``state/`` (each batch reads all of it: Spark 4 checks that a
#: stateful batch's every partition ran). The master is spark-submit's.
APP = '''
import sys
from pathlib import Path

from pyspark.sql import SparkSession

url, batches = sys.argv[1], int(sys.argv[2])
spark = SparkSession.builder.appName("deploy-check").config("spark.ui.enabled", "false") \\
    .config("spark.sql.shuffle.partitions", "2").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
inputs = Path(__file__).with_name("inputs")
inputs.mkdir()
for i in range(batches):
    Path(inputs, f"{i}.txt").write_text(f"line {i}\\n")
seen = []
query = (spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(inputs))
         .groupBy("value").count().writeStream.outputMode("update")
         .foreachBatch(lambda df, batch: seen.append(df.count())).option("checkpointLocation", url)
         .trigger(availableNow=True).start())
query.awaitTermination()
print("manager:", spark.conf.get("spark.sql.streaming.checkpointFileManagerClass", "default"))
print("batches:", len(seen))
spark.stop()
'''


# -- bad input: one line, exit status 2, nothing written -------------------------------------

def test_unknown_strategy():
    line = one_error_line(ckptbench("deploy", "bogus", "--store", "s3", "--bucket", "b"))
    assert "'bogus'" in line and ", ".join(ckpt_impls.STRATEGIES) in line


def test_unknown_store():
    line = one_error_line(ckptbench_here("deploy", "conditional", "--store", "hdfs", "--bucket", "b"))
    assert "'hdfs'" in line and "embedded, ceph" in line


def test_no_bucket():
    line = one_error_line(ckptbench_here("deploy", "conditional", "--store", "s3"))
    assert "--bucket" in line


def test_missing_bucket(suite_stores):
    store = suite_stores.get("embedded")
    line = one_error_line(ckptbench("deploy", "conditional", "--store", "embedded", "--bucket", "no-such-bucket",
                                    env=env_for(store)))
    assert "bucket 'no-such-bucket' does not exist" in line


def test_a_store_it_cannot_name():
    line = one_error_line(ckptbench("deploy", "conditional", "--store", "ceph", "--bucket", "b",
                                    env={"CKPT_S3_ENDPOINT": ""}))
    assert "CKPT_S3_ENDPOINT" in line


def test_unreachable_endpoint():
    line = one_error_line(ckptbench("deploy", "conditional", "--store", "endpoint", "--bucket", "b", env={
        "CKPT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "cannot reach" in line and "127.0.0.1:9" in line


@pytest.mark.spark
def test_spark_submit_with_the_printed_flags_runs_on_a_standalone_cluster(bucket, tmp_path):
    """The README's run on a user's own cluster: the printed flags plus ``--master spark://...``,
    the keys only in the environment of each node (the driver's, the workers', which their
    executors inherit) for the default chain. The executors write the state files with them; the
    driver writes each log file as one conditional PUT, tagged with its writer."""
    reason = SparkCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    store, name = bucket
    done = ckptbench("deploy", "conditional", "--store", "embedded", "--bucket", name, env=env_for(store))
    assert done.returncode == 0, done.stderr
    app = tmp_path / "app.py"
    app.write_text(APP)
    keys = default_chain_keys(store)
    with SparkCluster(env=keys) as cluster:
        fits = [arg for key, value in cluster.spark_conf().items() for arg in ("--conf", f"{key}={value}")]
        argv = [str(SPARK_SUBMIT), "--master", cluster.master_url, *fits, *printed_command(done.stdout)[1:-1],
                str(app), f"s3a://{name}/ck", "2"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                             env={**os.environ, **keys, "PYSPARK_PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"manager: {ckpt_impls.get('conditional').manager_class}" in run.stdout
    assert "batches: 2" in run.stdout
    state = [k for k in store.list_keys(name, "ck/state/") if k.endswith(".delta")]
    assert len(state) >= 2 * 2, state  # two partitions' delta files, two batches
    s3 = store.client()
    for key in ("ck/offsets/0", "ck/commits/0", "ck/metadata"):  # each one conditional PUT, tagged
        assert "ckptbench-write-id" in s3.head_object(Bucket=name, Key=key)["Metadata"], key
