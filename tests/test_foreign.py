"""A strategy from outside (``--strategy NAME=CLASS@JAR``): a third party's manager, built here from
source in a package and jar of its own (``tests/java/thirdparty``), checked before anything runs,
named fully in the record, measured like ours, and broken on purpose in the ways published managers
break, each caught by the contract (``python -m ckptbench contract``). And an S3-native one with an
AWS SDK v2 client of its own (``tests/java/ownclient``), configured from S3A's base keys and the
SDK's default credential chain: it runs through the commands with that one option, through the
metering proxy, and its variant that forgets the log on a restart is caught by the crash lab.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckpt_impls import jars
from ckptbench import metrics
from ckptbench.experiments.contract import CHECKS as CONTRACT_CHECKS
from ckptbench.harness import jvm_requests
from ckptbench.record import disk
from helpers import ckptbench, command_lines, leaks, one_error_line

ROOT = Path(__file__).resolve().parent.parent
JAVA = ROOT / "tests" / "java"
PACKAGE = "org.example.thirdparty"
PLAIN = f"{PACKAGE}.PlainCheckpointFileManager"
#: Each broken manager (a nested class of PLAIN) and the contract check that must fail on it.
BROKEN = {
    "exists-only-for-files": ("ExistsOnlyForFiles", "nested mkdirs are idempotent"),
    "mkdirs-does-nothing": ("MkdirsDoesNothing", "nested mkdirs are idempotent"),
    "list-ignores-filter": ("ListIgnoresItsFilter", "list honours its filter"),
    "list-throws": ("ListThrowsOnASubdirectory", "list honours its filter"),
    "lists-a-prefix": ("ListsAPrefix", "a listing holds its directory alone"),
    "missing-is-io-error": ("MissingIsAnIoError", "a missing file is not found"),
    "create-overwrites": ("CreateOverwrites", "create refuses an existing file"),
}
VERSION = "1.2.3"


def javac(sources: Path, out: Path, *more: Path) -> Path:
    classes = out / "classes"
    classpath = [f"{jars.pyspark_jars_dir()}/*", *map(str, jars.s3a_jars()), *map(str, more)]
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", ":".join(classpath), "-d", str(classes),
                    *map(str, sorted(sources.rglob("*.java")))], check=True, capture_output=True)
    return classes

#: Every test here builds the third party's jar with javac (a JVM) and most run Spark.
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def thirdparty(tmp_path_factory) -> dict[str, Path]:
    """{"jar": the third party's jar (with an Implementation-Version), "other": a manager built
    against the other Spark version's CheckpointFileManager, in a jar without that trait}."""
    out = tmp_path_factory.mktemp("thirdparty")
    library = javac(JAVA / "library", out / "library")  # on javac's class path, never in the jar
    classes = javac(JAVA / "thirdparty", out / "plain", library)
    (out / "MANIFEST.MF").write_text(f"Implementation-Title: thirdparty\nImplementation-Version: {VERSION}\n")
    subprocess.run(["jar", "cfm", str(out / "thirdparty.jar"), str(out / "MANIFEST.MF"), "-C", str(classes), "."],
                   check=True)
    other = javac(JAVA / "otherspark", out / "other")
    subprocess.run(["jar", "cf", str(out / "otherspark.jar"), "-C", str(other),
                    "org/example/thirdparty/ForOtherSpark.class"], check=True)
    return {"jar": out / "thirdparty.jar", "other": out / "otherspark.jar"}


def spec(name: str, cls: str, jar: Path) -> str:
    return f"{name}={cls}@{jar}"


@pytest.mark.parametrize(("given", "said"), [
    (lambda t: "mine", "--strategy takes NAME=CLASS@JAR"),
    (lambda t: spec("mine", PLAIN, t["jar"].with_name("missing.jar")), "missing.jar does not exist"),
    (lambda t: spec("mine", PLAIN, t["jar"].with_name("MANIFEST.MF")), "is not a jar"),
    (lambda t: spec("mine", f"{PACKAGE}.Nope", t["jar"]), f"class {PACKAGE}.Nope is not in the jars given"),
    (lambda t: spec("mine", f"{PACKAGE}.NotAManager", t["jar"]), "is not a CheckpointFileManager"),
    (lambda t: spec("mine", f"{PACKAGE}.ForOtherSpark", t["other"]), "was built for the other Spark version"),
    (lambda t: spec("mine", f"{PLAIN}$NoConstructor", t["jar"]), "has no public constructor (org.apache.hadoop"),
    (lambda t: spec("mine", f"{PACKAGE}.NeedsALibrary", t["jar"]),
     f"{PACKAGE}.NeedsALibrary needs org.example.library.Helper, which neither its jars nor the class path hold "
     f"(looked in thirdparty.jar, Spark's jars in {jars.pyspark_jars_dir()} and {jars.managers_jar().name}, "),
    (lambda t: spec("conditional", PLAIN, t["jar"]), "'conditional' is taken"),
    (lambda t: spec("Mine!", PLAIN, t["jar"]), "use a lower-case word"),
])
def test_a_strategy_that_cannot_run_is_one_line_and_nothing_runs(thirdparty, tmp_path, given, said):
    raw = tmp_path / "raw"
    done = ckptbench("--strategy", given(thirdparty), "measure", "--stores", "embedded",
                     env={"CKPT_BENCH_RAW": str(raw)})
    assert said in one_error_line(done)
    assert done.stdout == "" and not raw.exists()


def test_a_manager_that_names_s3as_classes_is_checked_on_the_class_path_spark_gives_it(thirdparty):
    done = ckptbench("--strategy", spec("ons3a", f"{PACKAGE}.OnS3A", thirdparty["jar"]), "strategies")
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^ons3a +from outside: {re.escape(PACKAGE)}\.OnS3A in thirdparty\.jar$", done.stdout, re.M)


def test_a_strategies_file_names_them_too(thirdparty, tmp_path):
    listed = tmp_path / "strategies.txt"
    listed.write_text(f"# ours\n{spec('plain', PLAIN, thirdparty['jar'])}  # the third party's\n\n")
    done = ckptbench("--strategies-file", str(listed), "strategies")
    assert done.returncode == 0, done.stderr
    assert re.search(rf"^plain +from outside: {re.escape(PLAIN)} in thirdparty\.jar$", done.stdout, re.MULTILINE)
    missing = one_error_line(ckptbench("--strategies-file", str(tmp_path / "none.txt"), "strategies"))
    assert "cannot read the strategies file" in missing


def run(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptbench", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.ceph
def test_the_contract_catches_each_broken_manager(thirdparty):
    specs = [spec("plain", PLAIN, thirdparty["jar"])]
    specs += [spec(name, f"{PLAIN}${cls}", thirdparty["jar"]) for name, (cls, _) in BROKEN.items()]
    args = [a for s in specs for a in ("--strategy", s)]
    done = run(*args, "contract", "--store", "ceph", "--strategies", ",".join(["plain", *BROKEN]))
    assert done.returncode == 1, done.stderr
    rows = [[c.strip() for c in line.split(" | ")] for line in done.stdout.splitlines() if line.startswith("| ")]
    failed = {(row[0][2:], row[1]) for row in rows if row[2] == "FAIL"}
    # Plain writes then closes with the FileSystem's own existence check first: two racing creators
    # both win, and that is all it breaks.
    assert {check for name, check in failed if name == "plain"} == {"one of two racing creators wins"}
    for name, (_, check) in BROKEN.items():
        assert (name, check) in failed, (name, done.stdout)
    # An exception PySpark converts to one of its own is a failed check too, not the run's end.
    assert re.search(r"^\| list-throws \| list honours its filter \| FAIL \| java\.lang\.IllegalArgumentException: "
                     r"Can not create a Path from an empty string", done.stdout, re.M), done.stdout


def test_a_record_names_a_strategy_from_outside_fully(thirdparty):
    """What every experiment's environment.json says of it (``record.results.environment``): its class,
    and each jar's path, SHA-256, size and Implementation-Version. That it runs through the experiments
    like ours is ``test_the_contract_catches_each_broken_manager``'s Spark run, and the crash and fault
    labs' own runs of it."""
    script = ("import json, sys, ckpt_impls; from ckptbench.record import results; "
              "ckpt_impls.register('plain', sys.argv[1], [sys.argv[2]]); "
              "print(json.dumps(results.foreign_strategies()))")
    done = subprocess.run([sys.executable, "-c", script, PLAIN, str(thirdparty["jar"])], capture_output=True,
                          text=True, timeout=120, check=True)
    named = json.loads(done.stdout)["plain"]
    assert named["class"] == PLAIN
    jar = thirdparty["jar"]
    assert named["jars"] == [{"path": str(jar), "sha256": hashlib.sha256(jar.read_bytes()).hexdigest(),
                              "size": jar.stat().st_size, "implementation_version": VERSION}]


def test_deploy_ships_its_jar_and_not_ours(thirdparty):
    done = ckptbench("--strategy", spec("plain", PLAIN, thirdparty["jar"]), "deploy", "plain", "--store", "s3",
                     "--bucket", "b", "--no-check")
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(thirdparty["jar"].read_bytes()).hexdigest()[:12]
    assert f"{thirdparty['jar']}  # plain's manager, from outside ({PLAIN}; sha256 {digest}, version {VERSION})" \
        in done.stdout
    assert str(jars.managers_jar()) not in done.stdout
    assert f"spark.sql.streaming.checkpointFileManagerClass={PLAIN}" in done.stdout


OWN = "org.example.ownclient.OwnClientCheckpointFileManager"


@pytest.fixture(scope="module")
def ownclient(tmp_path_factory) -> Path:
    """The jar of the manager with an AWS SDK v2 client of its own (and its broken variant)."""
    if jars.aws_sdk() != "v2":
        pytest.skip(f"its client is AWS SDK v2's; the loaded S3A brings {jars.aws_sdk()}")
    out = tmp_path_factory.mktemp("ownclient")
    classes = javac(JAVA / "ownclient", out)
    subprocess.run(["jar", "cf", str(out / "ownclient.jar"), "-C", str(classes), "."], check=True)
    return out / "ownclient.jar"


@pytest.mark.ceph
def test_a_manager_with_its_own_client_runs_through_the_proxy_with_one_option(ownclient, tmp_path):
    """Measured; its contract run is the next test's."""
    own = ("--strategy", spec("own", OWN, ownclient))
    raw = tmp_path / "raw"
    measured = run(*own, "measure", "--stores", "ceph", "--strategies", "own", "--size", "smallest",
                   "--batches", "3", "--warmup", "1",
                   "--allow-few-batches", env={"CKPT_BENCH_RAW": str(raw)})
    assert measured.returncode == 0, measured.stderr[-3000:]
    record = disk.read(raw / "ceph-measure")
    measured_run = record.run("own", "stateful")
    # Its own client's requests went through the proxy, and the JVM counted each of them as well.
    assert jvm_requests.disagreements(measured_run).empty, jvm_requests.disagreements(measured_run)
    by_source = record.requests.groupby("source").size().to_dict()
    assert by_source.get("proxy", 0) > 0 and by_source.get("jvm", 0) > 0, by_source


@pytest.mark.ceph
def test_the_crash_lab_catches_an_own_client_manager_that_forgets_the_log_on_a_restart(ownclient, tmp_path):
    raw = tmp_path / "raw"
    args = ("--strategy", spec("own", OWN, ownclient),
            "--strategy", spec("forgets", f"{OWN}$ListsOnlyItsOwn", ownclient))
    done = run(*args, "crashlab", "--store", "ceph", "--strategies", "own,forgets", "--size", "smallest",
               "--workloads", "stateless",
               "--cycles", "1", "--two-writers", "none", env={"CKPT_BENCH_RAW": str(raw)})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    record = disk.read(raw / "ceph-crashlab")
    cycles = record.cycles.set_index("strategy")
    assert cycles.loc[["own"]].restart_ok.all() and (cycles.loc[["own"]][["duplicates", "lost"]] == 0).all().all()
    forgot = cycles.loc[["forgets"]]
    assert not forgot.restart_ok.any(), forgot
    assert forgot.error.str.contains("CONCURRENT_STREAM_LOG_UPDATE").all(), forgot.error.tolist()
    # The managers' race met at the proxy: its own client's PUTs were held there like S3A's.
    assert metrics.race_unmet(record, "own") == 0 and metrics.refuses_second_writer(record, "own")


@pytest.mark.ceph
def test_each_strategy_gets_its_settings_and_a_secret_one_stays_off_command_lines(ownclient, tmp_path):
    """The same manager twice: ``keys`` takes its client's keys from its own settings (a wrong pair:
    ``--conf`` for every strategy, a strategies file's secret lines), ``own`` overrides that
    setting with the SDK's default chain, and passes the whole contract. Only ``keys``'s store
    calls are refused, and the secret value is on no command line, in no output and no record."""
    secret = "hunter2-not-a-key"
    options = "spark.hadoop.org.example.ownclient."
    listed = tmp_path / "strategies.txt"
    listed.write_text(f"own={OWN}@{ownclient}\nkeys={OWN}@{ownclient}\n"
                      f"own: {options}credentials=chain\n"
                      f"keys: {options}access.key=nobody\n"
                      f"*: {options}secret.key={secret}\n")
    raw = tmp_path / "raw"
    proc = subprocess.Popen([sys.executable, "-m", "ckptbench", "--conf", f"{options}credentials=keys",
                             "--strategies-file", str(listed), "contract", "--store", "ceph", "--strategies",
                             "own,keys"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CKPT_BENCH_RAW": str(raw)})
    seen_spark = False
    while proc.poll() is None:
        lines = command_lines()
        seen_spark |= any("org.apache.spark.deploy.SparkSubmit" in line for line in lines)
        assert not leaks([secret], lines), "a secret setting on a command line"
        time.sleep(0.5)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 1 and seen_spark, stderr[-3000:]
    rows = [[c.strip() for c in line.split(" | ")] for line in stdout.splitlines() if line.startswith("| ")]
    passed = [row for row in rows if row[0] == "| own" and row[2] == "PASS"]
    assert len(passed) == len(CONTRACT_CHECKS) == len([row for row in rows if row[0] == "| own"]), stdout
    refused = [row for row in rows if row[0] == "| keys" and row[2] == "FAIL"]
    assert refused and all("403" in row[3] for row in refused), stdout
    assert secret not in stdout + stderr
    assert not [p for p in raw.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
