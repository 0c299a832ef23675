"""Strategies from outside: any ``CheckpointFileManager`` in jars of its own, measured like ours.

A strategy is named ``NAME=CLASS@JAR[,JAR...]`` (on the command line, ``--strategy``, or one per
line in a strategies file, ``--strategies-file``, which holds settings too:
``ckpt_impls.settings``). ``check`` refuses it in one line (``ForeignStrategyError``) before
anything runs: a name that is taken or not a plain word, a jar that is missing or not a jar, a class
that is not in the jars, was built for the other Spark version's ``CheckpointFileManager`` (its
package moved in 4.1), needs a class on no class path (named, with where it was looked for), is not
a ``CheckpointFileManager``, or has no public ``(Path, Configuration)`` constructor
(``ckptbench.tools.CheckManager`` looks, in a JVM of its own on the class path Spark gives the
manager at run time, without running any of the class's code).

A foreign strategy promises nothing: ``exclusive_create`` is False and it declares no store needs,
so whatever it guarantees is what the experiments measure (the race, the crash and fault labs).
Its jars join every session's ``spark.jars``.

Registered strategies reach every process a run starts (asv's benchmarks, the crash lab's drivers,
a re-run under another Spark's venv) through the environment variable ``ENV``, which ``export``
sets and this package reads when it is imported: a child sees the names its parent checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

from . import jars

#: The foreign strategies of this process, for its children: a JSON list of ``[name, class, [jar...]]``.
ENV = "CKPT_FOREIGN_STRATEGIES"
NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
SPEC = re.compile(r"(?P<name>[^=\s]+)=(?P<cls>[^@\s]+)@(?P<jars>\S+)")
CHECKER = "ckptbench.tools.CheckManager"
COMMENT = re.compile(r"(?:^|\s)#")


class ForeignStrategyError(ValueError):
    """A foreign strategy that cannot run; str() is one line saying why and what to do."""


@dataclasses.dataclass(frozen=True)
class Jar:
    """One jar of a foreign strategy, named fully, so two builds of one manager are never mixed up."""

    path: str
    sha256: str
    size: int
    implementation_version: str | None

    @classmethod
    def of(cls, path: Path) -> Jar:
        data = path.read_bytes()
        try:
            with zipfile.ZipFile(path) as archive:
                manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace") \
                    if "META-INF/MANIFEST.MF" in archive.namelist() else ""
        except zipfile.BadZipFile:
            raise ForeignStrategyError(f"{path} is not a jar (not a zip archive)") from None
        version = next((line.split(":", 1)[1].strip() for line in manifest.splitlines()
                        if line.startswith("Implementation-Version:")), None)
        return cls(str(path), hashlib.sha256(data).hexdigest(), len(data), version)


def parse(text: str) -> tuple[str, str, list[Path]]:
    """``NAME=CLASS@JAR[,JAR...]`` as (name, class, jar paths), or ForeignStrategyError."""
    match = SPEC.fullmatch(text.strip())
    if not match:
        raise ForeignStrategyError(f"--strategy takes NAME=CLASS@JAR[,JAR...] (e.g. mine=com.example."
                                   f"MyCheckpointFileManager@/path/mine.jar), not {text!r}")
    paths = [Path(p).expanduser().resolve() for p in match["jars"].split(",") if p]
    return match["name"], match["cls"], paths


def read_file(path: Path) -> list[str]:
    """The lines of a strategies file, blank lines and comments skipped: a ``#`` at a line's start or
    after a space starts one (a value may hold a ``#`` of its own)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ForeignStrategyError(f"cannot read the strategies file {path}: {e.strerror or e}") from None
    kept = (COMMENT.split(line, 1)[0].strip() for line in lines)
    return [line for line in kept if line]


def check(name: str, cls: str, paths: list[Path], taken) -> list[Jar]:
    """The jars of strategy ``name`` (class ``cls`` in ``paths``), once it is known to load as this
    Spark's CheckpointFileManager; ForeignStrategyError otherwise. ``taken``: names already used."""
    if not NAME.fullmatch(name):
        raise ForeignStrategyError(f"strategy name {name!r}: use a lower-case word (letters, digits, - and _)")
    if name in taken:
        raise ForeignStrategyError(f"strategy name {name!r} is taken; name yours otherwise")
    for path in paths:
        if not path.is_file():
            raise ForeignStrategyError(f"{name}: jar {path} does not exist")
        if not os.access(path, os.R_OK):
            raise ForeignStrategyError(f"{name}: jar {path} cannot be read")
    found = [Jar.of(path) for path in paths]
    spark = jars.spark_version()
    other = "3.5" if spark.startswith("4") else "4.3"
    # What Spark puts on the class path at run time: its own jars, then ours, the S3A jars in use
    # and its cloud module (``jars.spark_jars``).
    runtime = jars.spark_jars()
    classpath = [f"{jars.pyspark_jars_dir()}/*", *map(str, runtime)]
    out = subprocess.run(
        ["java", "-cp", ":".join(classpath), CHECKER, f"{jars.checkpoint_package()}.CheckpointFileManager",
         f"{jars.checkpoint_package(other)}.CheckpointFileManager", cls, *map(str, paths)],
        capture_output=True, text=True, timeout=120)
    verdict, error = out.stdout.strip().splitlines(), out.stderr.strip().splitlines()
    said = verdict[-1] if verdict else ""
    if f"Could not find or load main class {CHECKER}" in out.stderr:
        said = f"{jars.managers_jar()} has no {CHECKER}: rebuild it (`make setup`)"
    elif not verdict:  # the JVM failed before a verdict: its exception's first line says why
        said = f"the check of {cls} failed in its JVM: {error[0] if error else f'exit status {out.returncode}'}"
    elif "neither its jars nor the class path hold" in said:
        said += (f" (looked in {', '.join(p.name for p in paths)}, Spark's jars in {jars.pyspark_jars_dir()} and "
                 f"{', '.join(p.name for p in runtime)}): add the jar that has it to the strategy's jars")
    if out.returncode != 0 or said != "ok":
        raise ForeignStrategyError(f"{name}: {said} (Spark {spark})")
    return found


def export(specs: list[tuple[str, str, list[str]]]) -> None:
    """Hand the checked foreign strategies to the processes this one starts."""
    os.environ[ENV] = json.dumps(specs)


def exported() -> list[tuple[str, str, list[str]]]:
    """The foreign strategies a parent process checked and exported (``export``)."""
    text = os.environ.get(ENV)
    return [tuple(spec) for spec in json.loads(text)] if text else []
