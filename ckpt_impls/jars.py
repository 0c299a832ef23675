"""The jars a SparkSession needs to checkpoint on S3: the S3A connector, our managers and the
Spark modules that hold Spark's own managers.

The managers are built once per Spark version and AWS SDK generation
(``build/ckpt-impls-spark<major.minor>-sdk<1|2>.jar``, see ``ckpt_impls.build``); the running pyspark
and the loaded S3A pick their own.

pyspark ships no object-store filesystem. Users on a real cluster name their own hadoop-aws + AWS
SDK jars in ``CKPT_S3A_JARS`` (comma-separated paths); otherwise the set-up fetches the set pinned
for the running Spark (``S3A``) from Maven Central with ``mvn`` into ``build/jars``, each checked
against its sha256. The Spark modules (``SPARK_MODULES``) are fetched the same way, whoever's S3A
jars run.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
BUNDLED_DIR = BUILD / "jars"
USER_JARS_ENV = "CKPT_S3A_JARS"

#: Maven settings that mirror every repository by Maven Central, so that no POM's own repository
#: (Spark's name one this machine cannot reach) is asked for anything.
MAVEN_SETTINGS = Path(__file__).resolve().parent / "maven-central.xml"
#: The plugin that copies one artifact by its coordinates, pinned rather than Maven's default of the day.
MAVEN_COPY = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy"
#: Terminal colour codes, which Maven prints even in batch mode.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One jar on Maven Central: its coordinates and the sha256 it must have."""

    group: str
    name: str
    version: str
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file(self) -> str:
        return f"{self.name}-{self.version}.jar"


#: The S3A connector (hadoop-aws and the AWS SDK it is built on) for each Spark line, as its users
#: deploy it: hadoop-aws of the Spark's own Hadoop client and the SDK that declares. Spark 4.3:
#: hadoop-aws 3.5.0 on AWS SDK v2 (its shaded bundle, and the analytics accelerator, which S3A's
#: default auditor reads on every request); Spark 3.5: hadoop-aws 3.3.4 on SDK v1.
S3A = {
    "4.3": (Artifact("org.apache.hadoop", "hadoop-aws", "3.5.0",
                     "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa"),
            Artifact("software.amazon.awssdk", "bundle", "2.35.4",
                     "db4b55f24ad1b4e70f17eb1717a4de76a8dadc5a27d764be7c44ff67b2c1c677"),
            Artifact("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1",
                     "4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e")),
    "3.5": (Artifact("org.apache.hadoop", "hadoop-aws", "3.3.4",
                     "53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a"),
            Artifact("com.amazonaws", "aws-java-sdk-bundle", "1.12.262",
                     "873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5")),
}


#: Spark's modules that pyspark does not ship, each pinned per Spark line: a strategy names one as
#: ``ckpt_impls.Strategy.module``. Maven Central has no spark-hadoop-cloud of 4.3 or 3.5.9: each line
#: takes its newest, whose classes link against that line's pyspark (the package of
#: CheckpointFileManager moved in 4.1, so 4.1+ serves 4.3 and 3.5.x serves 3.5).
SPARK_MODULES = {
    "spark-hadoop-cloud": {
        "4.3": Artifact("org.apache.spark", "spark-hadoop-cloud_2.13", "4.1.2",
                        "672d7d872f434cb7fe1c90f7edcd19b1e8c67a335a578288426fbd4db5096915"),
        "3.5": Artifact("org.apache.spark", "spark-hadoop-cloud_2.12", "3.5.8",
                        "9c9be6d3e185c2c9f53e66f8781f0fa32944882ced2c5c08945a78eb2f989ced"),
    },
}


class JarsMissing(RuntimeError):
    """A jar Spark needs is not there; str() says which and how to get it."""


def pyspark_jars_dir() -> Path:
    """Found without importing pyspark, which a command that only names jars need not load."""
    return Path(importlib.util.find_spec("pyspark").origin).parent / "jars"


def pyspark_version() -> str:
    """The running pyspark's version ("4.3.0"): from its installed metadata rather than an import of
    it (``pyspark_jars_dir``); from the import where pyspark is on the path without metadata (a Spark
    distribution's ``python/``)."""
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        import pyspark

        return pyspark.__version__


def spark_version() -> str:
    """The running pyspark's ``major.minor`` ("4.3", "3.5")."""
    return ".".join(pyspark_version().split(".")[:2])


def streaming_package(area: str, version: str | None = None) -> str:
    """The package of Spark's streaming classes of ``area`` (``checkpointing``: CheckpointFileManager;
    ``sinks``: FileStreamSinkLog) in Spark ``version`` (default: the running one). Spark 4.1 split
    ``org.apache.spark.sql.execution.streaming`` into such sub-packages (SPARK-52787); before that
    (3.5) they were all in it. The one place that knows; checked against the jars of 3.5.9 and 4.3.0."""
    major, minor = (int(n) for n in (version or spark_version()).split(".")[:2])
    base = "org.apache.spark.sql.execution.streaming"
    return f"{base}.{area}" if (major, minor) >= (4, 1) else base


def checkpoint_package(version: str | None = None) -> str:
    """The package of Spark's ``CheckpointFileManager`` (the trait and its factory)."""
    return streaming_package("checkpointing", version)


def managers_jar(version: str | None = None, sdk: str | None = None) -> Path:
    """Our managers compiled for Spark ``version`` and AWS SDK ``sdk`` ("v1", "v2"); by default
    the running Spark's, on the SDK of the S3A jars that are loaded (``aws_sdk``)."""
    return BUILD / f"ckpt-impls-spark{version or spark_version()}-sdk{(sdk or aws_sdk()).removeprefix('v')}.jar"


def __getattr__(name: str):
    # MANAGERS_JAR, a name callers already use: the running pyspark's jar, found when asked for.
    if name == "MANAGERS_JAR":
        return managers_jar()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def users_own() -> bool:
    """Whether the S3A jars are the user's own (``CKPT_S3A_JARS`` names some), not the bundled ones."""
    return bool(os.environ.get(USER_JARS_ENV, "").strip())


def s3a_jars() -> list[Path]:
    """The S3A connector jars to load: the user's (CKPT_S3A_JARS) or the bundled fallback."""
    named = os.environ.get(USER_JARS_ENV, "").strip()
    if named:
        jars = [Path(p).expanduser() for p in named.split(",") if p.strip()]
        missing = [str(p) for p in jars if not p.is_file()]
        if missing:
            raise JarsMissing(f"{USER_JARS_ENV} names jars that do not exist: {', '.join(missing)}")
        return jars
    jars = [BUNDLED_DIR / artifact.file for artifact in bundled()]
    if not all(p.is_file() for p in jars):
        raise JarsMissing(f"S3A jars are not in {BUNDLED_DIR}: run `make setup` (or set {USER_JARS_ENV})")
    return jars


#: A class only the S3A connectors built on AWS SDK v2 (hadoop-aws 3.4+) have.
_S3A_ON_SDK_V2 = "org/apache/hadoop/fs/s3a/S3AInternals.class"
_S3A_FILESYSTEM = "org/apache/hadoop/fs/s3a/S3AFileSystem.class"


def aws_sdk() -> str:
    """The AWS SDK generation ("v1", "v2") the loaded S3A connector is built on, read from its
    hadoop-aws jar (whatever the jars' names: a user's may be renamed) rather than from its version."""
    return _sdk_of(tuple(s3a_jars()))


@functools.cache
def _sdk_of(connector: tuple[Path, ...]) -> str:
    for jar in sorted(connector, key=lambda p: p.stat().st_size):  # hadoop-aws is small, an SDK bundle huge
        with zipfile.ZipFile(jar) as z:
            names = set(z.namelist())
        if _S3A_FILESYSTEM in names:
            return "v2" if _S3A_ON_SDK_V2 in names else "v1"
    raise JarsMissing(f"no S3A connector (hadoop-aws, with {_S3A_FILESYSTEM}) among the S3A jars "
                      f"{', '.join(map(str, connector))}: name it in {USER_JARS_ENV}")


def module(name: str, version: str | None = None) -> Artifact:
    """The jar of Spark's module ``name`` (a key of ``SPARK_MODULES``) pinned for Spark ``version``
    (default: the running one)."""
    line = version or spark_version()
    if line not in SPARK_MODULES[name]:
        raise JarsMissing(f"no {name} jar is pinned for Spark {line} (only {', '.join(SPARK_MODULES[name])})")
    return SPARK_MODULES[name][line]


def module_jar(name: str) -> Path:
    """Where the running Spark's jar of module ``name`` is, once the set-up fetched it."""
    return BUNDLED_DIR / module(name).file


def spark_jars() -> list[Path]:
    """Everything the checkpoint strategies need on Spark's classpath."""
    jar = managers_jar()
    setup = "`make setup` (Spark 4.3) or `make setup-spark35` (Spark 3.5)"
    if not jar.is_file():
        raise JarsMissing(f"{jar} is not built: run {setup}")
    modules = [module_jar(name) for name in SPARK_MODULES]
    missing = [str(p) for p in modules if not p.is_file()]
    if missing:
        raise JarsMissing(f"{', '.join(missing)} is not fetched: run {setup}")
    return [jar, *s3a_jars(), *modules]


def _version(jars: list[Path], name: str) -> str:
    """The version in the file name of the jar called ``name-<version>.jar`` among ``jars``."""
    for jar in jars:
        found = re.fullmatch(rf"{re.escape(name)}-(\d[\w.-]*)\.jar", jar.name)
        if found:
            return found.group(1)
    return "unknown"


def versions() -> dict[str, str]:
    """What runs the checkpoints, read from the jars that are loaded: Spark, the Scala and Hadoop
    client it bundles, the S3A connector (hadoop-aws), the AWS SDK it is built on, and each Spark
    module of ``SPARK_MODULES`` (``spark_hadoop_cloud``)."""
    bundled, connector = sorted(pyspark_jars_dir().glob("*.jar")), s3a_jars()
    sdk_v1, sdk_v2 = _version(connector, "aws-java-sdk-bundle"), _version(connector, "bundle")
    modules = {name.replace("-", "_"): _version([module_jar(name)], module(name).name) for name in SPARK_MODULES}
    return {"spark": pyspark_version(), "scala": _version(bundled, "scala-library"),
            "hadoop": _version(bundled, "hadoop-client-api"),
            "hadoop_aws": _version(connector, "hadoop-aws"),
            "aws_sdk": f"v1 {sdk_v1}" if sdk_v1 != "unknown" else f"v2 {sdk_v2}", **modules}


def bundled(version: str | None = None) -> tuple[Artifact, ...]:
    """The S3A jars pinned for Spark ``version`` (default: the running one)."""
    line = version or spark_version()
    if line not in S3A:
        raise JarsMissing(f"no S3A jars are pinned for Spark {line} (only {', '.join(S3A)}): "
                          f"name yours in {USER_JARS_ENV}")
    return S3A[line]


def fetch_bundled() -> None:
    """Fetch the running Spark's pinned jars that are not here yet: its S3A jars, unless the user
    named their own, and its Spark modules (``SPARK_MODULES``)."""
    modules = [module(name) for name in SPARK_MODULES]
    if users_own():
        s3a_jars()  # validates the user's paths
        wanted = modules
    else:
        wanted = [*bundled(), *modules]
    missing = [a for a in wanted if not (BUNDLED_DIR / a.file).is_file()]  # verified when fetched
    if missing and shutil.which("mvn") is None:
        raise JarsMissing(f"mvn not found, and {', '.join(a.file for a in missing)} not in {BUNDLED_DIR}: "
                          f"install Maven (Debian: apt-get install maven)")
    BUNDLED_DIR.mkdir(parents=True, exist_ok=True)
    for artifact in missing:
        print(f"fetching {artifact.coordinates} from Maven Central ...", flush=True)
        done = subprocess.run(["mvn", "-q", "-B", "-s", str(MAVEN_SETTINGS), MAVEN_COPY,
                               f"-Dartifact={artifact.coordinates}", f"-DoutputDirectory={BUNDLED_DIR}"],
                              capture_output=True, text=True)
        jar = BUNDLED_DIR / artifact.file
        if done.returncode != 0 or not jar.is_file():
            said = [line.removeprefix("[ERROR]").strip() for line in _ANSI.sub("", done.stdout + done.stderr)
                    .splitlines() if line.startswith("[ERROR]") and line.removeprefix("[ERROR]").strip()]
            raise JarsMissing(f"mvn could not fetch {artifact.coordinates} (exit {done.returncode}"
                              + (f": {said[0]}" if said else "") + "): check the network"
                              + ("" if artifact in modules else f", or name your jars in {USER_JARS_ENV}"))
        if _sha256(jar) != artifact.sha256:
            jar.unlink()
            raise JarsMissing(f"{artifact.coordinates} from Maven Central does not match its pinned sha256; "
                              f"not using it")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
