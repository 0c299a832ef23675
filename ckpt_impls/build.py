"""Compile the JVM checkpoint managers (and the S3 request meter) against pyspark's own jars (and the
S3A jars), with the resources of the S3A jars' AWS SDK.

One set of Java sources serves every Spark version; each venv builds the jar of its own pyspark
and S3A, ``build/ckpt-impls-spark<major.minor>-sdk<1|2>.jar``. The sources import
``CheckpointFileManager`` from its package in Spark 4.1+ (``...streaming.checkpointing``); for an
older Spark (3.5: ``...streaming``) the build compiles copies of the files that import it with that
one import rewritten (``jars.checkpoint_package``), nothing else. javac then checks the classes
against that Spark's own trait, so a difference beyond the package fails the build.

The few classes that call the AWS SDK (the strategies' S3 client, the request meter and its
benchmarks) have one body per SDK generation, under ``sdk1/`` and ``sdk2/`` beside ``java/``: S3A
3.3 is built on SDK v1, S3A 3.4+ on v2, and a jar must use the SDK its S3A brings. Each such
directory has ``java/`` (the same class names in both) and ``resources/`` (the SDK's global
handler list that registers the meter for every client: v1's
``com/amazonaws/global/handlers/request.handler2s``, v2's
``software/amazon/awssdk/global/handlers/execution.interceptors``).

Rebuilds a jar only when a Java source, a resource or the classpath changes: the inputs' digest is
stored beside the jar.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .jars import aws_sdk, checkpoint_package, managers_jar, pyspark_jars_dir, s3a_jars

HERE = Path(__file__).resolve().parent
#: The sources every jar compiles, whatever its SDK.
SOURCES = HERE / "java"
#: The sources import Spark's CheckpointFileManager (and the classes inside it) from its 4.1+ package.
_SOURCES_PACKAGE = checkpoint_package("4.1")
_IMPORT = re.compile(rf"^import {re.escape(_SOURCES_PACKAGE)}\.(?=CheckpointFileManager\b)", re.MULTILINE)


def sdk_sources(sdk: str) -> Path:
    """The sources of the classes that call AWS SDK ``sdk`` ("v1", "v2")."""
    return HERE / f"sdk{sdk.removeprefix('v')}" / "java"


def sdk_resources(sdk: str) -> Path:
    """Files packaged as they are, at their path under here, for AWS SDK ``sdk``."""
    return HERE / f"sdk{sdk.removeprefix('v')}" / "resources"


def build() -> bool:
    """Build the running pyspark's managers' jar for the loaded S3A's SDK if its inputs changed;
    True when it compiled."""
    sdk = aws_sdk()
    jar, package, resources_root = managers_jar(sdk=sdk), checkpoint_package(), sdk_resources(sdk)
    sources = sorted([*SOURCES.rglob("*.java"), *sdk_sources(sdk).rglob("*.java")])
    classpath = [f"{pyspark_jars_dir()}/*", *map(str, s3a_jars())]
    resources = sorted(p for p in resources_root.rglob("*") if p.is_file())
    digest = _digest(sources + resources, classpath, package)
    stamp = jar.with_suffix(".sha256")
    if jar.is_file() and stamp.is_file() and stamp.read_text() == digest:
        return False
    if shutil.which("javac") is None or shutil.which("jar") is None:
        raise SystemExit("javac/jar not found: install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        classes = Path(tmp, "classes")
        subprocess.run(
            ["javac", "-nowarn", "-Xlint:none", "--release", "17", "-cp", ":".join(classpath), "-d", str(classes),
             *map(str, _for_package(sources, package, Path(tmp, "src")))],
            check=True,
        )
        for resource in resources:
            target = classes / resource.relative_to(resources_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resource, target)
        subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    stamp.write_text(digest)
    return True


def _for_package(sources: list[Path], package: str, out: Path) -> list[Path]:
    """``sources``, those importing CheckpointFileManager copied under ``out`` with its import from
    ``package``; the others (and all of them where ``package`` is the sources' own) as they are.
    A source outside ``HERE`` (a test's Java driver) is copied to ``out`` by its name."""
    chosen = []
    for src in sources:
        text = src.read_text()
        rewritten = _IMPORT.sub(f"import {package}.", text)
        if rewritten == text:
            chosen.append(src)
            continue
        copy = out / (src.relative_to(HERE) if src.is_relative_to(HERE) else src.name)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(rewritten)
        chosen.append(copy)
    return chosen


def _digest(sources: list[Path], classpath: list[str], package: str) -> str:
    h = hashlib.sha256()
    h.update(package.encode())
    for entry in classpath:
        h.update(entry.encode())
    for src in sources:
        h.update(str(src.relative_to(HERE) if src.is_relative_to(HERE) else src.name).encode())
        h.update(src.read_bytes())
    return h.hexdigest()
