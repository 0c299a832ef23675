"""ckptbench's command line: `python -m ckptbench COMMAND` (see --help).

Bad input (an unknown strategy or store, an unreachable endpoint, rejected credentials,
a missing bucket, missing jars) ends with one line on stderr saying what is wrong and
what to do, and exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from ckpt_impls.jars import JarsMissing

from .runs import PLANS, Settings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
#: The Spark versions measure and bench run on (--spark), each in a venv of its own: (venv, the make
#: target that makes it). The first is the default.
SPARK_VENVS = {"4.3": (ROOT / ".venv", "setup"), "3.5": (ROOT / ".venv-spark35", "setup-spark35")}
#: Set in a command that re-ran itself under another venv, so that it never does so twice.
_REEXEC_ENV = "CKPT_SPARK_REEXEC"


class UsageError(Exception):
    """Bad input found by ckptbench itself."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error here."""

    def error(self, message: str):
        self.exit(2, f"ckptbench: error: {message} (see {self.prog} --help)\n")


def _names(text: str, valid, kind: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        raise UsageError(f"unknown {kind} '{','.join(unknown) or text}'; valid {kind}s: {', '.join(valid)}")
    return names


def results_root() -> Path:
    """Where a command writes by default: ``results/`` on the default Spark, ``results-spark<v>/`` on
    another, so that two Spark versions' raw records and reports never replace each other."""
    version = jars.spark_version()
    return RESULTS if version == next(iter(SPARK_VENVS)) else ROOT / f"results-spark{version}"


def _under_spark(args, argv: list[str]) -> None:
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


def cmd_strategies(args) -> None:
    print(ckpt_impls.describe())


def cmd_measure(args) -> None:
    from . import measure, results

    if args.record:
        try:
            records = [results.read(Path(path)) for path in args.record]
        except (OSError, ValueError) as e:
            raise UsageError(f"not a results record: {e}") from None
        print(measure.table(records))
        return
    stores = _names(args.stores, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    if args.batches < 20 and not args.allow_few_batches:
        raise UsageError("--batches below 20 gives unstable percentiles; pass --allow-few-batches to insist")
    out = results_root()
    raw = out / "raw"
    records = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, args.master, raw)
    text = measure.table(records)
    print(text)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (out / f"measure-{stamp}.md").write_text(text + "\n")
    written = [str(results.directory(raw, r.environment["store"], "measure").relative_to(ROOT)) for r in records]
    print(f"\nwritten: {out.relative_to(ROOT)}/measure-{stamp}.md; records: {', '.join(written)} "
          f"(python -m ckptbench measure --record DIR prints a record's table again)")


def _asv_config(results: Path) -> Path:
    """The top-level asv.conf.json, or, for another results directory, a copy writing there."""
    config = ROOT / "asv.conf.json"
    if results == RESULTS:
        return config
    from asv import util

    conf = util.load_json(str(config), js_comments=True)
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"),
                results_dir=str(results / "asv"), html_dir=str(results / "html"))
    results.mkdir(parents=True, exist_ok=True)
    derived = results / "asv.conf.json"
    derived.write_text(json.dumps(conf, indent=1))
    return derived


def cmd_bench(args) -> None:
    from . import progress, report, runs

    store = args.store or os.environ.get(runs.Settings.ENV["store"]) or runs.default_store()
    _names(store, infra.STORES, "store")
    _names(args.size, runs.PLANS, "size")
    # Fail here, in one line, on a store that cannot start or be metered (an https endpoint,
    # wrong keys, a missing bucket), not after asv has spent minutes on it.
    with runs.started_stores([store], args.bucket, say=lambda line: None) as started:
        if not started:
            raise infra.StoreUnavailable(infra.store_class(store).unavailable_reason())
    if infra.store_class(store).emulator:
        print(f"store: {store}, an emulator: its timings are not a real store's "
              "(Ceph RGW, the default where it can start, gives real ones)")
    else:
        print(f"store: {store}, a real store")
    results = Path(args.results).resolve() if args.results else results_root()
    config = _asv_config(results)
    # asv keys results by machine: one per store and Spark version keeps each a series of its own.
    machine = f"{socket.gethostname()}-{store}-spark{jars.spark_version()}"
    env = {**os.environ, **runs.Settings(store, args.size, args.bucket, results / "raw").env()}
    asv = [sys.executable, "-m", "asv"]
    print(f"running the {args.size} suite (the README gives measured run times)", flush=True)
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(config)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="ckptbench-progress-") as tmp, progress.shown(Path(tmp, "progress")):
        env[progress.ENV] = str(Path(tmp, "progress"))
        run = subprocess.run([*asv, "run", "--config", str(config), "--python=same", "--set-commit-hash", "HEAD",
                              "--machine", machine, "--show-stderr", *(["--bench", args.bench] if args.bench else [])],
                             env=env)
    subprocess.run([*asv, "publish", "--config", str(config)], check=True, env=env)
    written = report.write(results)
    print(f"\nHTML: {results / 'html' / 'index.html'}  (asv machine {machine}; "
          f"raw results in {results / 'asv'} and {results / 'raw'})")
    print(f"report: {written[0]}")
    for path in written[1:]:
        print(f"plot: {path}")
    if run.returncode:
        raise UsageError("some benchmarks failed: they are marked failed in the HTML; asv's output above says why")


def cmd_drift(args) -> None:
    from . import drift

    try:
        print(drift.compare(Path(args.a), Path(args.b)))
    except drift.NoResults as e:
        raise UsageError(str(e)) from None


SPARK_HELP = (f"the Spark version to run on: {', '.join(SPARK_VENVS)} (default: the running pyspark's); the "
              "command re-runs itself in that version's venv. Results go to results/ on "
              f"{next(iter(SPARK_VENVS))}, to results-spark<version>/ on another")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ckptbench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("strategies", help="list the checkpoint strategies").set_defaults(run=cmd_strategies)
    m = sub.add_parser("measure", help="walCommit/commitOffsets per strategy x store, beside the store's floor")
    m.add_argument("--stores", default="embedded,ceph",
                   help=f"comma-separated, of: {', '.join(infra.STORES)} (default: embedded,ceph; "
                        "stores that cannot start here are skipped with the reason)")
    m.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    m.add_argument("--batches", type=int, default=20, help="measured batches per run (default 20)")
    m.add_argument("--warmup", type=int, default=5, help="batches run first and left out (default 5)")
    m.add_argument("--allow-few-batches", action="store_true", help=argparse.SUPPRESS)
    m.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO); "
                                    "local stores get a fresh one")
    m.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    m.add_argument("--record", nargs="+", metavar="DIR",
                   help="print the table of recorded results (results/raw/<store>-measure) instead of measuring")
    m.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    m.set_defaults(run=cmd_measure)
    b = sub.add_parser("bench", help="run the asv suite and publish it (HTML, report and plots under results/)")
    b.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where "
                                   "it can start here, else embedded)")
    b.add_argument("--size", choices=list(PLANS), default=os.environ.get(Settings.ENV["size"]) or "quick",
                   help="quick (default), full, or smallest (every benchmark once, tiny; for CI)")
    b.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    b.add_argument("--bench", help="only benchmarks matching this regular expression (asv run --bench)")
    b.add_argument("--results", help="results directory (default: results/ in the repository; results-spark<v>/ "
                                     "on another Spark than the default)")
    b.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    b.set_defaults(run=cmd_bench)
    d = sub.add_parser("drift", help="how far every value moved between two runs (say, of the same commit)")
    d.add_argument("a", help="a results directory (bench --results) or an asv result file")
    d.add_argument("b", help="another")
    d.set_defaults(run=cmd_drift)
    return p


def _stop_on_sigterm(signum, frame):
    # Python's default SIGTERM skips finally blocks and atexit, leaving Ceph daemons running.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        _under_spark(args, argv)
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
