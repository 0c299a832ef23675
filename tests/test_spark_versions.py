"""Two Spark versions from one set of Java sources: the package of CheckpointFileManager is the one
difference (``ckpt_impls.jars.checkpoint_package``), rewritten by the build; the CLI re-runs a
command in the venv of the Spark version it is asked for. Each Spark line runs the S3A its users
deploy, and the session's JVM holds only the AWS SDK that S3A is built on. No Spark starts here but
for that check (mvn's JVM runs where a jar is fetched)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckpt_impls import build, jars
from ckptbench.cli import app, common
from ckptbench.record import results

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("version", "package"), [
    ("3.5", "org.apache.spark.sql.execution.streaming"),
    ("4.0", "org.apache.spark.sql.execution.streaming"),
    ("4.1", "org.apache.spark.sql.execution.streaming.checkpointing"),
    ("4.3", "org.apache.spark.sql.execution.streaming.checkpointing"),
])
def test_checkpoint_package_moved_in_4_1(version, package):
    assert jars.checkpoint_package(version) == package


def test_the_sink_log_moved_with_it():
    assert jars.streaming_package("sinks", "3.5") == "org.apache.spark.sql.execution.streaming"
    assert jars.streaming_package("sinks", "4.3") == "org.apache.spark.sql.execution.streaming.sinks"


def test_the_running_spark_decides_the_trait_and_the_jar():
    version, trait = jars.spark_version(), ckpt_impls.MANAGER_TRAIT
    assert trait == f"{jars.checkpoint_package(version)}.CheckpointFileManager"
    assert jars.managers_jar().name == f"ckpt-impls-spark{version}-sdk{jars.aws_sdk()[1:]}.jar"
    assert jars.versions()["spark"].startswith(version + ".")


def test_build_rewrites_only_the_import_of_checkpoint_file_manager(tmp_path):
    sources = sorted(build.SOURCES.rglob("*.java"))
    importing = {s for s in sources if "checkpointing.CheckpointFileManager" in s.read_text()}
    assert importing, "no source imports CheckpointFileManager: the rewrite has nothing to do"
    own = build._for_package(sources, jars.checkpoint_package("4.1"), tmp_path / "own")
    assert own == sources
    older = build._for_package(sources, jars.checkpoint_package("3.5"), tmp_path / "old")
    for original, compiled in zip(sources, older, strict=True):
        if original not in importing:
            assert compiled == original
            continue
        before, after = original.read_text().splitlines(), compiled.read_text().splitlines()
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert changed and all(
            a.startswith("import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager")
            and b == a.replace(".streaming.checkpointing.", ".streaming.") for a, b in changed)


def test_each_spark_line_runs_the_s3a_its_users_deploy():
    """hadoop-aws of the Spark's own Hadoop client, on the SDK that declares (3.3: v1; 3.4+: v2)."""
    versions, (connector, sdk, *_) = jars.versions(), jars.bundled()
    assert connector.version == versions["hadoop"] == versions["hadoop_aws"]
    generation = "v2" if sdk.group == "software.amazon.awssdk" else "v1"
    assert generation == ("v2" if tuple(map(int, connector.version.split(".")[:2])) >= (3, 4) else "v1")
    assert versions["aws_sdk"] == f"{generation} {sdk.version}"
    assert jars.aws_sdk() == generation


def test_a_record_names_the_strategies_the_loaded_s3a_cannot_run():
    """S3A's conditional create came in hadoop-aws 3.4.2: Spark 3.5's 3.3.4 cannot run s3a-conditional,
    Spark 4.3's 3.5.0 runs every strategy; a record says which it left out, for the report to say."""
    expected = {} if jars.spark_version() != "3.5" else {"s3a-conditional": "3.4.2"}
    assert results.not_runnable() == expected
    assert [s for s in ckpt_impls.STRATEGIES if s not in ckpt_impls.runnable()] == list(expected)


@pytest.mark.spark
def test_the_session_loads_no_class_of_the_other_sdk_generation(spark):
    """On Spark 4.3 no AWS SDK v1 class is on the session's class path, on Spark 3.5 no v2 one: the
    managers' jar carries no SDK, and S3A brings only its own."""
    ours, other = {"v1": ("com.amazonaws.services.s3.AmazonS3", "software.amazon.awssdk.services.s3.S3Client"),
                   "v2": ("software.amazon.awssdk.services.s3.S3Client", "com.amazonaws.services.s3.AmazonS3")
                   }[jars.aws_sdk()]
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    assert spark._jvm.java.lang.Class.forName(ours, False, loader).getName() == ours
    with pytest.raises(Py4JJavaError, match="ClassNotFoundException"):
        spark._jvm.java.lang.Class.forName(other, False, loader)


def test_the_sdk_is_read_from_the_connector_jar_not_its_name(monkeypatch, tmp_path):
    connector, expected = next(p for p in jars.s3a_jars() if p.name.startswith("hadoop-aws-")), jars.aws_sdk()
    renamed = tmp_path / "s3a.jar"
    shutil.copyfile(connector, renamed)
    monkeypatch.setenv(jars.USER_JARS_ENV, str(renamed))
    assert jars.aws_sdk() == expected
    with zipfile.ZipFile(tmp_path / "other.jar", "w") as other:
        other.writestr("org/example/Nothing.class", b"")
    monkeypatch.setenv(jars.USER_JARS_ENV, str(tmp_path / "other.jar"))
    with pytest.raises(jars.JarsMissing, match=r"^no S3A connector \(hadoop-aws, with org/apache/hadoop/fs/s3a/"
                                               r"S3AFileSystem\.class\) among the S3A jars .*other\.jar: name it in "
                                               r"CKPT_S3A_JARS$"):
        jars.aws_sdk()


def test_both_sdks_have_the_same_classes():
    """A class with a body per SDK generation exists in both, so either jar has every class."""
    def classes(sdk: str) -> set:
        return {p.relative_to(build.sdk_sources(sdk)) for p in build.sdk_sources(sdk).rglob("*.java")}

    assert classes("v1") == classes("v2") and classes("v1")
    assert not classes("v1") & {p.relative_to(build.SOURCES) for p in build.SOURCES.rglob("*.java")}


def test_each_spark_line_runs_the_spark_modules_pinned_for_it():
    versions, cloud = jars.versions(), jars.module("spark-hadoop-cloud")
    assert versions["spark_hadoop_cloud"] == cloud.version
    scala = ".".join(versions["scala"].split(".")[:2])
    assert cloud.name == f"spark-hadoop-cloud_{scala}"  # built for the Scala that pyspark runs
    assert jars.module_jar("spark-hadoop-cloud") in jars.spark_jars()


def test_a_spark_module_not_fetched_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(jars.USER_JARS_ENV, ",".join(map(str, jars.s3a_jars())))  # the S3A jars stay where they are
    monkeypatch.setattr(jars, "BUNDLED_DIR", tmp_path)
    missing = tmp_path / jars.module("spark-hadoop-cloud").file
    with pytest.raises(jars.JarsMissing, match=rf"^{re.escape(str(missing))} is not fetched: run `make setup` "
                                               r"\(Spark 4\.3\) or `make setup-spark35` \(Spark 3\.5\)$"):
        jars.spark_jars()


def test_a_spark_line_with_no_pinned_module_is_one_line():
    with pytest.raises(jars.JarsMissing, match=r"^no spark-hadoop-cloud jar is pinned for Spark 9\.9 "
                                               r"\(only 4\.3, 3\.5\)$"):
        jars.module("spark-hadoop-cloud", "9.9")


@pytest.mark.spark  # mvn is a JVM
def test_a_fetched_jar_whose_sha256_differs_is_refused_and_removed(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(jars.USER_JARS_ENV, raising=False)
    monkeypatch.setattr(jars, "BUNDLED_DIR", tmp_path)
    pinned = jars.bundled()[0]  # in Maven's local repository since `make setup`: no download here
    monkeypatch.setitem(jars.S3A, jars.spark_version(), (pinned,))
    monkeypatch.setattr(jars, "SPARK_MODULES", {})  # fetched the same way: one artifact shows it
    jars.fetch_bundled()
    assert jars.s3a_jars() == [tmp_path / pinned.file]
    (tmp_path / pinned.file).unlink()
    altered = dataclasses.replace(pinned, sha256="0" * 64)
    monkeypatch.setitem(jars.S3A, jars.spark_version(), (altered,))
    with pytest.raises(jars.JarsMissing, match=rf"^{re.escape(pinned.coordinates)} from Maven Central does not "
                                               "match its pinned sha256; not using it$"):
        jars.fetch_bundled()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.spark  # mvn is a JVM
@pytest.mark.parametrize("kind", ["s3a", "module"])
def test_a_jar_maven_cannot_fetch_is_one_line(monkeypatch, tmp_path, kind):
    """Naming one's own S3A jars is offered for an S3A jar only: a Spark module is fetched either way."""
    monkeypatch.delenv(jars.USER_JARS_ENV, raising=False)
    monkeypatch.setattr(jars, "BUNDLED_DIR", tmp_path)
    missing = jars.Artifact("org.apache.hadoop" if kind == "s3a" else "org.apache.spark",
                            "hadoop-aws" if kind == "s3a" else "spark-hadoop-cloud_2.13", "0.0.0-no-such-version",
                            "0" * 64)
    monkeypatch.setitem(jars.S3A, jars.spark_version(), (missing,) if kind == "s3a" else ())
    monkeypatch.setattr(jars, "SPARK_MODULES", {} if kind == "s3a" else {"m": {jars.spark_version(): missing}})
    with pytest.raises(jars.JarsMissing) as refused:
        jars.fetch_bundled()
    said = str(refused.value)
    hint = ", or name your jars in CKPT_S3A_JARS" if kind == "s3a" else ""
    assert re.fullmatch(rf"mvn could not fetch {re.escape(missing.coordinates)} \(exit 1: [^\n\x1b]+\): check the "
                        rf"network{hint}", said), said
    assert list(tmp_path.iterdir()) == []


def test_a_spark_line_with_no_pinned_s3a_is_one_line():
    with pytest.raises(jars.JarsMissing, match=r"^no S3A jars are pinned for Spark 9\.9 \(only 4\.3, 3\.5\): name "
                                               r"yours in CKPT_S3A_JARS$"):
        jars.bundled("9.9")


def test_a_spark_version_whose_venv_is_missing_is_one_line(monkeypatch, tmp_path, capsys):
    other = next(v for v in common.SPARK_VENVS if v != jars.spark_version())
    monkeypatch.setitem(common.SPARK_VENVS, other, (tmp_path / ".venv-missing", "setup-missing"))
    monkeypatch.setattr(app.signal, "signal", lambda *args: None)  # main's SIGTERM handler stays out of pytest
    assert app.main(["measure", "--spark", other, "--record", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"ckptbench: error: Spark {other} runs in .venv-missing, which is not made: run `make setup-missing`"]


def test_the_spark35_venv_pins_what_the_main_one_pins():
    def pins(name: str) -> dict[str, str]:
        lines = (ROOT / name).read_text().splitlines()
        return dict(line.split("==", 1) for line in lines if line.strip() and not line.startswith("#"))

    main, spark35 = pins("requirements.txt"), pins("requirements-spark35.txt")
    assert spark35["pyspark"].startswith("3.5.")
    differ = {name: (v, spark35.get(name)) for name, v in main.items()
              if name not in ("pyspark", "ruff", "playwright") and spark35.get(name) != v}
    assert not differ, f"requirements-spark35.txt is behind requirements.txt: {differ}"
