"""The driver JVMs' class archive (``ckptbench.harness.jvm_archive``), on real JVMs: a crash lab's
driver, given no archive by its caller, starts from the one of its class path and options; the
record says which archives the driver mapped; an archive that does not match is ignored (the driver
runs from its jars) and a changed jar, JDK option or class path keys another archive."""

from __future__ import annotations

import os
import shlex
import shutil
import uuid
from pathlib import Path

import pytest

from ckpt_impls import jars
from ckptbench.cli import untimed
from ckptbench.harness import jvm_archive
from ckptbench.harness.spark import UNTIMED_JVM_OPTS
from ckptbench.record import results
from helpers import crash_lab

#: How long a driver may take to be up and commit a batch: a guard against a hang only.
LIMIT_S = 600


def without_archive(submit_opts: str) -> str:
    """``submit_opts`` with every class archive option taken out (the JIT setting kept)."""
    return shlex.join(o for o in shlex.split(submit_opts) if not o.startswith(
        (jvm_archive.USE, jvm_archive.MAKE, "-Xlog:cds")))


def test_a_crash_lab_driver_starts_from_the_archive_its_caller_did_not_name(spark, suite_stores, monkeypatch):
    asked = os.environ.get("SPARK_SUBMIT_OPTS", "")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", without_archive(asked))
    archive = jvm_archive.path(jvm_archive.jvm_options(asked))
    assert archive.exists()  # conftest made it for the suite's options, the driver's too
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        driver = crash.driver("conditional", "stateless", f"crash/archive-{uuid.uuid4().hex[:8]}", batches=2)
        ready = driver.wait("ready", LIMIT_S)
        assert jvm_archive.mapped(ready["jvm_pid"]) == str(archive)
        driver.wait("progress", LIMIT_S)  # and it runs its query from it
        driver.stop()
    # The suite's own session did too, and its record's environment says so beside the flag.
    said = results.session_said(spark)
    assert str(archive) in said["jvm_archives"], said
    assert f"{jvm_archive.USE}{archive}" in said["jvm_flags"], said


def test_an_untimed_driver_maps_the_archive_made_without_its_jit_and_collector(spark, suite_stores, monkeypatch):
    """The crash and fault labs' drivers run C1 alone and the serial collector
    (``harness.spark.UNTIMED_JVM_OPTS``): they map the archive of the same class path, made at
    set-up without those options, rather than have another made."""
    asked = os.environ.get("SPARK_SUBMIT_OPTS", "")
    archive = jvm_archive.path(jvm_archive.jvm_options(asked))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", untimed.submit_opts({"SPARK_SUBMIT_OPTS": without_archive(asked)}))
    assert jvm_archive.path(jvm_archive.jvm_options(os.environ["SPARK_SUBMIT_OPTS"])) == archive
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        driver = crash.driver("conditional", "stateless", f"crash/untimed-{uuid.uuid4().hex[:8]}", batches=2)
        ready = driver.wait("ready", LIMIT_S)
        assert jvm_archive.mapped(ready["jvm_pid"]) == str(archive)
        flags = Path(f"/proc/{ready['jvm_pid']}/cmdline").read_bytes().split(b"\0")
        assert {o.encode() for o in UNTIMED_JVM_OPTS} <= set(flags), flags
        driver.wait("progress", LIMIT_S)
        driver.stop()


def test_a_driver_ignores_an_archive_that_does_not_match(spark, suite_stores, monkeypatch, tmp_path):
    """An archive file at the driver's key that is not one (a stale or broken copy): the JVM does
    not map it and the driver runs its query from the jars."""
    monkeypatch.setattr(jvm_archive, "ARCHIVES", tmp_path)
    opts = without_archive(os.environ.get("SPARK_SUBMIT_OPTS", ""))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", opts)
    broken = jvm_archive.path(jvm_archive.jvm_options(opts))
    broken.write_bytes(b"not a class data archive\n" * 4096)
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        driver = crash.driver("conditional", "stateless", f"crash/broken-{uuid.uuid4().hex[:8]}", batches=2)
        ready = driver.wait("ready", LIMIT_S)
        assert jvm_archive.mapped(ready["jvm_pid"]) is None
        driver.wait("progress", LIMIT_S)
        driver.stop()
    assert broken.exists()  # used where found at its key: neither remade nor removed


def test_a_changed_jar_option_or_class_path_keys_another_archive(tmp_path, monkeypatch):
    opts = ["-Xss2m"]
    before = jvm_archive.path(opts)
    assert jvm_archive.path(opts) == before  # stable while nothing changes
    assert jvm_archive.path([]) != before
    assert jvm_archive.jvm_options(f"-Dx=1 {jvm_archive.USE}/a.jsa -Xlog:cds=off -Xss2m") == opts
    # Which compilers and collector run is no part of the key (UNKEYED).
    assert jvm_archive.jvm_options(f"-Xss2m {' '.join(UNTIMED_JVM_OPTS)}") == opts
    jar = tmp_path / "extra.jar"
    shutil.copy(jars.spark_jars()[0], jar)
    listed = jars.spark_jars()
    monkeypatch.setattr(jars, "spark_jars", lambda: [*listed, jar])
    added = jvm_archive.path(opts)
    assert added != before
    os.utime(jar, ns=(0, 0))  # the same jar, rebuilt
    assert jvm_archive.path(opts) != added
    # An archive of another key is the same name up to its key: the one ``make`` removes as stale.
    assert added.name.rsplit("-", 1)[0] == before.name.rsplit("-", 1)[0]


def test_a_caller_naming_an_archive_keeps_it():
    named = f"-XX:TieredStopAtLevel=1 {jvm_archive.USE}/elsewhere.jsa"
    assert jvm_archive.with_archive(named) == named
    making = f"{jvm_archive.MAKE}/made.jsa"
    assert jvm_archive.with_archive(making) == making


@pytest.mark.spark
def test_an_archive_is_made_for_new_options_and_the_stale_one_removed(monkeypatch, tmp_path):
    """A key with no archive yet (options no driver ran with before): ``options`` makes it by
    running the workload in a real driver, and removes the stale archive of the same options."""
    monkeypatch.setattr(jvm_archive, "ARCHIVES", tmp_path)
    opts = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    fresh = jvm_archive.path(jvm_archive.jvm_options(opts))
    stale = fresh.with_name(fresh.name.rsplit("-", 1)[0] + "-0000000000000000.jsa")
    stale.write_bytes(b"stale")
    said = jvm_archive.options(opts)
    assert said == f"{jvm_archive.USE}{fresh} {jvm_archive.QUIET}"
    assert fresh.exists() and not stale.exists()
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == [fresh.name]
