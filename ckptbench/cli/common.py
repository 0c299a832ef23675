"""What the commands share: bad input as one line (``UsageError``, exit status 2), where results
go, re-running under another Spark version's venv, and option parsers."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ckpt_impls import jars
from ckptbench.config import ROOT, check_master

RESULTS = ROOT / "results"
#: The Spark versions measure and bench run on (--spark), each in a venv of its own: (venv, the make
#: target that makes it). The first is the default.
SPARK_VENVS = {"4.3": (ROOT / ".venv", "setup"), "3.5": (ROOT / ".venv-spark35", "setup-spark35")}
#: The asv benchmarks (name prefixes) that need the metering proxy: the crash and failure labs, the
#: log histories (``stores.started_store(needs_proxy=...)``), the proxy's own overhead and the COPY
#: projected through its ``aws-projection`` profile. ``bench`` leaves them out on a store it cannot front.
PROXY_BENCHMARKS = ("failures.", "fault_rates.", "outages.", "manifest_compaction.", "floor.ProxyOverhead",
                    "rename_cost.ProjectedCopy")
#: Set in a command that re-ran itself under another venv, so that it never does so twice.
_REEXEC_ENV = "CKPT_SPARK_REEXEC"


class UsageError(Exception):
    """Bad input found by ckptbench itself."""


class ContractFailed(Exception):
    """``contract``: a strategy broke a check (the input was fine): exit status 1; str() names them."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error here."""

    def error(self, message: str):
        self.exit(2, f"ckptbench: error: {message} (see {self.prog} --help)\n")


def parse_names(text: str, valid, kind: str) -> list[str]:
    """The comma-separated names in ``text``, each one of ``valid``; else UsageError naming the
    unknown ones and listing the valid ones (``kind``, such as "strategy", names them)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        plural = kind.removesuffix("y") + "ies" if kind.endswith("y") else kind + "s"
        raise UsageError(f"unknown {kind} '{','.join(unknown) or text}'; valid {plural}: {', '.join(valid)}")
    return names


def parse_proxy_profile(text: str) -> str:
    """One fault profile the metering proxy can inject for a whole run: not one that restarts the
    store's gateway, which only the fault lab can do."""
    from infra.faults import PROFILES

    [name] = parse_names(text, PROFILES, "fault profile")
    outage = PROFILES[name].outage
    if outage is not None and outage.restart:
        raise UsageError(f"fault profile {name} restarts the store's gateway: only faultlab --store ceph runs it")
    return name


def results_root() -> Path:
    """Where a command writes by default: ``results/`` on the default Spark, ``results-spark<v>/`` on
    another, so that two Spark versions' raw records and reports never replace each other."""
    version = jars.spark_version()
    return RESULTS if version == next(iter(SPARK_VENVS)) else ROOT / f"results-spark{version}"


def rerun_under_spark(args, argv: list[str]) -> None:
    """Re-run this command with the python of the venv of the Spark version ``--spark`` asks for,
    unless it already runs that Spark (and with its own python then: the venv decides the Spark)."""
    wanted = getattr(args, "spark", None)
    if wanted is None or wanted == jars.spark_version():
        return
    venv, target = SPARK_VENVS[wanted]
    python = venv / "bin" / "python"
    if os.environ.get(_REEXEC_ENV):
        raise UsageError(f"{python} runs pyspark {jars.spark_version()}, not {wanted}: "
                         f"remake it (rm -r {venv.name}; make {target})")
    if not python.is_file():
        raise UsageError(f"Spark {wanted} runs in {venv.name}, which is not made: run `make {target}`")
    sys.stdout.flush()
    os.execve(python, [str(python), "-m", "ckptbench", *argv], {**os.environ, _REEXEC_ENV: wanted})


def parse_master(master: str) -> str:
    """``--master`` checked (``config.check_master``); UsageError in one line for one the lab cannot run on."""
    try:
        return check_master(master)
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_part(text: str | None, most: int | None = None, what: str = "") -> tuple[int, int]:
    """``--part K/N`` as (K, N), (1, 1) when not given; N at most ``most`` (``what`` there are)."""
    if text is None:
        return 1, 1
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n) <= (most or int(n))):
        bound = f" <= {most}, {what}" if most else ""
        raise UsageError(f"--part takes K/N with 1 <= K <= N{bound} (say 2/2), not {text!r}")
    return int(k), int(n)
