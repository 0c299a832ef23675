"""Compile the JVM checkpoint managers (and the S3 request meter) against pyspark's own jars (and the
S3A jars), with the resources of ``RESOURCES``.

Rebuilds ``build/ckpt-impls.jar`` only when a Java source, a resource or the classpath changes:
the inputs' digest is stored beside the jar.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from .jars import MANAGERS_JAR, pyspark_jars_dir, s3a_jars

SOURCES = Path(__file__).resolve().parent / "java"
#: Files packaged as they are, at their path under here: the AWS SDK's global request handler
#: list (``com/amazonaws/global/handlers/request.handler2s``) that registers the JVM's S3
#: request meter for every SDK client.
RESOURCES = Path(__file__).resolve().parent / "resources"


def build() -> bool:
    """Build the managers' jar if its inputs changed; True when it compiled."""
    sources = sorted(SOURCES.rglob("*.java"))
    classpath = [f"{pyspark_jars_dir()}/*", *map(str, s3a_jars())]
    resources = sorted(p for p in RESOURCES.rglob("*") if p.is_file())
    digest = _digest(sources + resources, classpath)
    stamp = MANAGERS_JAR.with_suffix(".sha256")
    if MANAGERS_JAR.is_file() and stamp.is_file() and stamp.read_text() == digest:
        return False
    if shutil.which("javac") is None or shutil.which("jar") is None:
        raise SystemExit("javac/jar not found: install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)")
    MANAGERS_JAR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(
            ["javac", "-nowarn", "-Xlint:none", "--release", "17", "-cp", ":".join(classpath), "-d", classes,
             *map(str, sources)],
            check=True,
        )
        for resource in resources:
            target = Path(classes) / resource.relative_to(RESOURCES)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resource, target)
        subprocess.run(["jar", "cf", str(MANAGERS_JAR), "-C", classes, "."], check=True)
    stamp.write_text(digest)
    return True


def _digest(sources: list[Path], classpath: list[str]) -> str:
    h = hashlib.sha256()
    for entry in classpath:
        h.update(entry.encode())
    for src in sources:
        h.update(str(src.relative_to(SOURCES.parent)).encode())
        h.update(src.read_bytes())
    return h.hexdigest()
