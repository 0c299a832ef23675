"""What the commands share: bad input as one line (``UsageError``, exit status 2), the store a
command uses (``store_of``), the records it reads (``read_records``), where results go
(``results_root``), re-running under another Spark version's venv, option parsers, and the
options and help texts several commands take."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from ckptbench.config import CLUSTER, DEFAULT_MASTER, ROOT, SPARK_DEFAULT, Settings, check_master, default_store

#: The results directory on the default Spark version; ``results_root`` is the one a command uses.
RESULTS = ROOT / "results"
#: The Spark versions measure and bench run on (--spark), each in a venv of its own: (venv, the make
#: target that makes it). The first is the default.
SPARK_VENVS = {"4.3": (ROOT / ".venv", "setup"), "3.5": (ROOT / ".venv-spark35", "setup-spark35")}
#: Set in a command that re-ran itself under another venv, so that it never does so twice.
_REEXEC_ENV = "CKPT_SPARK_REEXEC"

#: ``--store`` of every command that runs on one store (``store_of``).
STORE_HELP = (f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where it can start here, "
              "else embedded)")
BUCKET_HELP = "an existing bucket (needed for s3/endpoint/external MinIO)"
MASTER_HELP = (f"the Spark master: local[N] (default {DEFAULT_MASTER}), spark://HOST:PORT (a standalone "
               f"cluster whose executors reach the store), or {CLUSTER}: a master and two workers started on "
               "this machine for the run, executors in JVMs of their own")
SPARK_HELP = (f"the Spark version to run on: {', '.join(SPARK_VENVS)} (default: the running pyspark's); the "
              "command re-runs itself in that version's venv. Results go to results/ on "
              f"{next(iter(SPARK_VENVS))}, to results-spark<version>/ on another")


class UsageError(Exception):
    """Bad input found by ckptbench itself."""


class ContractFailed(Exception):
    """``contract``: a strategy broke a check (the input was fine): exit status 1; str() names them."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error here."""

    def error(self, message: str):
        self.exit(2, f"ckptbench: error: {message} (see {self.prog} --help)\n")


def fault_options(p: argparse.ArgumentParser, default: str) -> None:
    """``--fault-profile`` (checked by ``parse_proxy_profile``) and ``--fault-seed`` on ``p``."""
    from infra.faults import PROFILES

    p.add_argument("--fault-profile", default=default, metavar="NAME",
                   help=f"faults the metering proxy injects, one of: {', '.join(PROFILES)} (default {default}; "
                        "`fault-profiles` describes them)")
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the fault profile's randomness (default 0)")


def parse_names(text: str, valid, kind: str) -> list[str]:
    """The comma-separated names in ``text``, each one of ``valid``; else UsageError naming the
    unknown ones and listing the valid ones (``kind``, such as "strategy", names them)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        plural = kind.removesuffix("y") + "ies" if kind.endswith("y") else kind + "s"
        raise UsageError(f"unknown {kind} '{','.join(unknown) or text}'; valid {plural}: {', '.join(valid)}")
    return names


#: ``--strategies``' help where it defaults to ``strategies_of``'s.
STRATEGIES_HELP = "comma-separated (default: every one the loaded S3A can run)"


def strategies_of(text: str | None) -> list[str]:
    """The strategies a command runs: those ``text`` names (comma-separated, checked by
    ``parse_names``; one the loaded S3A cannot run is a UsageError saying why), else every one it
    can run (``ckpt_impls.runnable``)."""
    if not text:
        return ckpt_impls.runnable()
    names = parse_names(text, ckpt_impls.STRATEGIES, "strategy")
    refused = next(filter(None, map(ckpt_impls.unavailable, names)), None)
    if refused:
        raise UsageError(refused)
    return names


def chosen_strategies(text: str | None) -> tuple[str, ...]:
    """``strategies_of(text)`` with Spark's default first, always, as every verdict is against it."""
    default = SPARK_DEFAULT[0]
    return (default, *dict.fromkeys(s for s in strategies_of(text) if s != default))


def known_store(name: str) -> str:
    """``name`` if it is one of ``infra.STORES``, else UsageError in one line listing them."""
    if name not in infra.STORES:
        raise UsageError(f"unknown store '{name}'; valid stores: {', '.join(infra.STORES)}")
    return name


def store_of(args) -> str:
    """The store a command runs on: ``--store``, else ``$CKPT_STORE``, else ``config.default_store()``
    (ceph where it can start here, else embedded), checked by ``known_store``."""
    return known_store(args.store or os.environ.get(Settings.ENV["store"]) or default_store())


def raw_root() -> Path:
    """Where a command writes its raw records and reads them by default: ``$CKPT_BENCH_RAW`` where
    set (``config.Settings.ENV``, as ``bench`` hands asv's processes), else ``results_root()/raw``."""
    named = os.environ.get(Settings.ENV["raw"])
    return Path(named) if named else results_root() / "raw"


def shown(path: Path) -> Path:
    """``path`` as a command prints it: relative to the checkout where it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def read_records(paths: list[str] | None, kind: str | None = None, run: str = "`make bench`") -> list:
    """The records a command reads (``record.Results``): those at ``paths`` (``--record DIR ...``),
    else every ``<store>-<kind>`` record under ``raw_root()``. UsageError in one line when one is
    not a record, or when none is found (``run`` names the command that makes one)."""
    from ckptbench.record import disk

    if paths:
        found = [Path(p) for p in paths]
    else:
        raw = raw_root()
        found = sorted(raw.glob(f"*-{kind}"))
        if not found:
            raise UsageError(f"no {kind} results in {shown(raw)}: run {run} first, or name one with --record DIR")
    try:
        return [disk.read(path) for path in found]
    except (OSError, ValueError) as e:
        raise UsageError(f"not a results record: {e}") from None


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
