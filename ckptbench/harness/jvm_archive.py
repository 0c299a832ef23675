"""A class data sharing archive for the driver JVMs ckptbench starts.

A driver JVM spends most of its start loading and verifying Spark's, Hadoop's and the AWS SDK's
classes from their jars; the crash lab starts a fresh one per cycle, and every experiment, test and
``query_process`` child starts its own. A dynamic AppCDS archive (JDK 13+:
``-XX:ArchiveClassesAtExit`` writes one at a JVM's exit, ``-XX:SharedArchiveFile`` maps it) holds
those classes already parsed, so a JVM started from it maps them instead.

One archive per Spark version, JDK, class path and JVM options (``key``): made once, at set-up
(``python -m ckptbench.install``) or lazily on first use (``options``), under a file lock so that
processes starting together make it once, by a short run of what a driver of
``harness.spark.session`` does (``python -m ckptbench.harness.archive_workload``: a session on the
embedded store, a stateful query checkpointed through S3A, a Parquet write). A changed jar (path,
size or time), JDK or option gives another key, so the archive is made again and the older ones of
that Spark and those options are removed.

Limits: the JVM maps the archive only where its class path begins with the one the archive was made
on (the driver of a local master with the strategies' jars, ``spark.driver.extraClassPath``); a JVM on
another (a user's jar, a cluster's driver, another Spark) or with an archive that does not match
loads from the jars as before. ``-Xlog:cds=off`` keeps it from saying so on stdout, where callers
read a command's output. Whether a JVM did map it: ``mapped``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ckpt_impls import jars
from ckptbench.config import ROOT
from infra.net import archives_mapped

#: Where the archives are kept, beside the build they are made from.
ARCHIVES = jars.BUILD / "jvm-archives"
#: The option that starts a JVM from an archive, and the one that makes one at its exit.
USE = "-XX:SharedArchiveFile="
MAKE = "-XX:ArchiveClassesAtExit="
#: Quiet about an archive a JVM cannot map (or a class it cannot archive): callers read stdout.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: Options an archive does not depend on (which JIT compilers and collector run: the archive holds
#: classes, parsed): left out of its key, so a driver run with them maps the archive made without.
UNKEYED = ("-XX:TieredStopAtLevel=", "-XX:+UseSerialGC")
#: How long making an archive may take (a session, a query's batches, a write, the dump).
MAKE_LIMIT_S = 600


def jvm_options(submit_opts: str | None) -> list[str]:
    """The JVM options (``-X...``) of ``submit_opts`` (a ``SPARK_SUBMIT_OPTS``) that a driver runs
    with, its archive's options and ``UNKEYED`` left out: what an archive is made and keyed with."""
    return [o for o in shlex.split(submit_opts or "") if o.startswith("-X")
            and not o.startswith((USE, MAKE, "-Xlog:cds", "-Xshare", *UNKEYED))]


def java() -> str:
    """The ``java`` a driver runs (``$JAVA_HOME/bin/java``, else the first on ``PATH``), resolved."""
    home = os.environ.get("JAVA_HOME")
    return os.path.realpath(shutil.which("java", path=home and os.path.join(home, "bin")) or "java")


def key(opts: list[str]) -> str:
    """What an archive depends on, hashed: the JDK, every jar of the driver's class path (path, size,
    modification time) and the JVM options."""
    paths = [java(), *map(str, jars.spark_jars()), *sorted(map(str, jars.pyspark_jars_dir().glob("*.jar")))]
    stats = [(p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths if os.path.exists(p)]
    return hashlib.sha256(json.dumps([stats, opts]).encode()).hexdigest()[:16]


def path(opts: list[str]) -> Path:
    """The archive for JVM options ``opts`` on this Spark, JDK and class path (it may not exist yet)."""
    tag = hashlib.sha256(json.dumps(opts).encode()).hexdigest()[:8]
    return ARCHIVES / f"spark{jars.spark_version()}-{tag}-{key(opts)}.jsa"


def make(opts: list[str]) -> Path:
    """The archive for ``opts`` (``path``), made now unless it exists; older archives of this Spark
    and these options are removed. RuntimeError (with the maker's last words) if it was not made."""
    archive = path(opts)
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    with open(ARCHIVES / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process making it: wait, then find it made
        if archive.exists():
            return archive
        for stale in ARCHIVES.glob(archive.name.rsplit("-", 1)[0] + "-*.jsa"):
            stale.unlink()
        made = archive.with_suffix(f".{os.getpid()}.tmp")
        env = {**os.environ, "SPARK_SUBMIT_OPTS": shlex.join([*opts, f"{MAKE}{made}", "-Xlog:cds=off"]),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        try:
            done = subprocess.run([sys.executable, "-m", "ckptbench.harness.archive_workload"], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=MAKE_LIMIT_S)
            failed = done.returncode != 0 or not made.exists()
            said = done.stderr[-3000:]
        except subprocess.TimeoutExpired:
            failed, said = True, f"not made within {MAKE_LIMIT_S} s"
        if failed:
            made.unlink(missing_ok=True)
            raise RuntimeError(f"the driver JVMs' class archive was not made: {said}")
        made.rename(archive)
    return archive


def options(submit_opts: str | None = None) -> str:
    """The JVM options that start a driver run with ``submit_opts`` (default: this process's
    ``SPARK_SUBMIT_OPTS``) from its archive, made first if need be; "" (and a line on stderr) if it
    cannot be made: a driver without it only starts slower."""
    opts = jvm_options(os.environ.get("SPARK_SUBMIT_OPTS") if submit_opts is None else submit_opts)
    try:
        archive = make(opts)
    except (RuntimeError, OSError) as e:
        print(f"ckptbench: driver JVMs start without a class archive: {str(e)[:500]}", file=sys.stderr)
        return ""
    return f"{USE}{archive} {QUIET}"


def with_archive(submit_opts: str | None) -> str:
    """``submit_opts`` (a ``SPARK_SUBMIT_OPTS``) with the options of its archive (``options``) added,
    unless it names an archive already (a test suite's, a caller's own choice)."""
    submit_opts = submit_opts or ""
    if USE in submit_opts or MAKE in submit_opts:
        return submit_opts
    return " ".join(filter(None, [submit_opts, options(submit_opts)]))


def mapped(pid: int) -> str | None:
    """The class archive process ``pid`` (a JVM on this host) has mapped, None if none or it is gone."""
    return next((a for a in archives_mapped(pid) if str(ARCHIVES) in a), None)
