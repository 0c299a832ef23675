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
from ckpt_impls.jars import JarsMissing

from .crashlab import DEFAULT_POINTS
from .runs import PLANS, Settings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


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
    raw = RESULTS / "raw"
    records = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, args.master, raw)
    text = measure.table(records)
    print(text)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"measure-{stamp}.md").write_text(text + "\n")
    written = [str(results.directory(raw, r.environment["store"], "measure").relative_to(ROOT)) for r in records]
    print(f"\nwritten: results/measure-{stamp}.md; records: {', '.join(written)} "
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
    results = Path(args.results).resolve() if args.results else RESULTS
    config = _asv_config(results)
    # asv keys results by machine: one per store keeps each store's results a series of its own.
    machine = f"{socket.gethostname()}-{store}"
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


def cmd_crashlab(args) -> None:
    from . import crashlab, report, results, runs

    store = args.store or runs.default_store()
    _names(store, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    workloads = _names(args.workloads, crashlab.WORKLOADS, "workload")
    two_writers = [] if args.two_writers in ("", "none") else _names(args.two_writers, crashlab.WORKLOADS, "workload")
    points = _names(args.points, crashlab.CRASH_POINTS, "crash point")
    if args.cycles < 1:
        raise UsageError(f"--cycles must be at least 1, not {args.cycles}")
    for workload in workloads:
        if not any(crashlab.CRASH_POINTS[p].applies_to(crashlab.WORKLOADS[workload]) for p in points):
            raise UsageError(f"no crash point of {','.join(points)} applies to workload {workload}")
    try:
        starts = tuple(int(n) for n in args.two_writer_starts.split(","))
    except ValueError:
        raise UsageError(f"--two-writer-starts takes batch counts such as 3,0, not {args.two_writer_starts!r}") from None
    if any(n < 0 for n in starts):
        raise UsageError(f"--two-writer-starts takes batch counts of 0 or more, not {args.two_writer_starts!r}")
    plan = crashlab.CrashPlan(args.cycles, tuple(workloads), tuple(two_writers), two_writer_starts=starts)
    settings = runs.Settings(store, "cli", args.bucket, RESULTS / "raw")
    record = crashlab.crashes(settings, strategies, plan, points=tuple(points), seed=args.seed)
    print("\n".join(report.crash_table(record)))
    print(f"\nrecord: {results.directory(settings.raw, store, 'crashes').relative_to(ROOT)} "
          f"(seed {args.seed}; the same table is in results/report.md after a bench run)")


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
    m.set_defaults(run=cmd_measure)
    b = sub.add_parser("bench", help="run the asv suite and publish it (HTML, report and plots under results/)")
    b.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where "
                                   "it can start here, else embedded)")
    b.add_argument("--size", choices=list(PLANS), default=os.environ.get(Settings.ENV["size"]) or "quick",
                   help="quick (default), full, or smallest (every benchmark once, tiny; for CI)")
    b.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    b.add_argument("--bench", help="only benchmarks matching this regular expression (asv run --bench)")
    b.add_argument("--results", help="results directory (default: results/ in the repository)")
    b.set_defaults(run=cmd_bench)
    c = sub.add_parser("crashlab", help="kill -9 drivers at crash points and check exactly-once, per strategy")
    c.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: ceph where it can start here, "
                                   "else embedded)")
    c.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    c.add_argument("--workloads", default="stateless,stateful",
                   help="comma-separated, of: stateless, stateful (default both); unsafe-foreach is a sink "
                        "that is not idempotent on purpose")
    c.add_argument("--cycles", type=int, default=3, help="kill/restart cycles per strategy x workload (default 3)")
    c.add_argument("--points", default=",".join(DEFAULT_POINTS),
                   help="crash points, used in turn (default: all that apply)")
    c.add_argument("--two-writers", default="stateless",
                   help="workloads of a two-writer run per strategy (default stateless; none to skip)")
    c.add_argument("--two-writer-starts", default="3,0",
                   help="batches of the first driver before the second starts, one run each (default 3,0; "
                        "0: both start together)")
    c.add_argument("--seed", type=int, default=1, help="of every random choice (default 1; recorded)")
    c.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    c.set_defaults(run=cmd_crashlab)
    d = sub.add_parser("drift", help="how far every value moved between two runs (say, of the same commit)")
    d.add_argument("a", help="a results directory (bench --results) or an asv result file")
    d.add_argument("b", help="another")
    d.set_defaults(run=cmd_drift)
    return p


def _stop_on_sigterm(signum, frame):
    # Python's default SIGTERM skips finally blocks and atexit, leaving Ceph daemons running.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
