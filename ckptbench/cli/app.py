"""ckptbench's command line: `python -m ckptbench COMMAND` (see --help).

Bad input (an unknown strategy or store, an unreachable endpoint, rejected credentials,
a missing bucket, missing jars) ends with one line on stderr saying what is wrong and
what to do, and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import ckpt_impls
import infra
from ckpt_impls import foreign, jars
from ckpt_impls.jars import JarsMissing
from ckptbench.cli import recommend
from ckptbench.cli.commands import (
    cmd_bench,
    cmd_clean,
    cmd_contract,
    cmd_cost,
    cmd_counting,
    cmd_crashlab,
    cmd_deploy,
    cmd_drift,
    cmd_faultlab,
    cmd_faults,
    cmd_measure,
    cmd_probe,
    cmd_report,
    cmd_scale,
    cmd_strategies,
)
from ckptbench.cli.common import SPARK_VENVS, ContractFailed, Parser, UsageError, rerun_under_spark
from ckptbench.cli.continuous import DEFAULT_FACTOR, Regression
from ckptbench.config import CLUSTER, DEFAULT_MASTER, PLANS, Settings
from ckptbench.experiments.crashlab import DEFAULT_POINTS
from ckptbench.experiments.crashlab import PLANS as CRASH_PLANS
from ckptbench.harness.stores import RUNS_ROOT
from infra.faults import PROFILES

SPARK_HELP = (f"the Spark version to run on: {', '.join(SPARK_VENVS)} (default: the running pyspark's); the "
              "command re-runs itself in that version's venv. Results go to results/ on "
              f"{next(iter(SPARK_VENVS))}, to results-spark<version>/ on another")


MASTER_HELP = (f"the Spark master: local[N] (default {DEFAULT_MASTER}), spark://HOST:PORT (a standalone "
               f"cluster whose executors reach the store), or {CLUSTER}: a master and two workers started on "
               "this machine for the run, executors in JVMs of their own")


def _fault_options(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--fault-profile", default=default, metavar="NAME",
                   help=f"faults the metering proxy injects, one of: {', '.join(PROFILES)} (default {default}; "
                        "`faults` describes them)")
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the fault profile's randomness (default 0)")


STORE_HELP = f"one of: {', '.join(infra.STORES)} (default: ceph where it can start here, else embedded)"
BUCKET_HELP = "an existing bucket (needed for s3/endpoint/external MinIO)"
#: Options before the command that add strategies from outside (``ckpt_impls.foreign``).
FOREIGN_HELP = ("a strategy from outside, measured like ours: NAME=CLASS@JAR[,JAR...] (any Spark "
                "CheckpointFileManager; checked before anything runs); repeat for several")


def _foreign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", action="append", default=[], metavar="NAME=CLASS@JAR[,JAR...]", help=FOREIGN_HELP)
    p.add_argument("--strategies-file", metavar="FILE", help="strategies from outside, one NAME=CLASS@JAR[,JAR...] "
                                                              "a line (# comments)")


def register_foreign(argv: list[str]) -> None:
    """Register the strategies from outside that ``argv`` names before its command (``--strategy``,
    ``--strategies-file``), so that every command and its default strategy lists know them."""
    commands = set(parser_commands())
    head = next((i for i, arg in enumerate(argv) if arg in commands), len(argv))
    pre = argparse.ArgumentParser(add_help=False)
    _foreign_options(pre)
    known, _ = pre.parse_known_args(argv[:head])
    try:
        specs = [*known.strategy, *(foreign.read_file(known.strategies_file) if known.strategies_file else [])]
        for spec in specs:
            ckpt_impls.register(*foreign.parse(spec))
    except foreign.ForeignStrategyError as e:
        raise UsageError(str(e)) from None


def parser_commands() -> list[str]:
    return list(parser()._subparsers._group_actions[0].choices)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ckptbench", description=__doc__.splitlines()[0])
    _foreign_options(p)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("strategies", help="list the checkpoint strategies").set_defaults(run=cmd_strategies)
    sub.add_parser("faults", help="list the fault profiles the metering proxy can inject").set_defaults(run=cmd_faults)
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
    m.add_argument("--master", default=DEFAULT_MASTER, help=MASTER_HELP)
    m.add_argument("--record", nargs="+", metavar="DIR",
                   help="print the table of recorded results (results/raw/<store>-measure) instead of measuring")
    m.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    _fault_options(m, "none")
    m.set_defaults(run=cmd_measure)
    b = sub.add_parser("bench", help="run the asv suite and publish it (HTML, report and plots under results/)")
    b.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where "
                                   "it can start here, else embedded)")
    b.add_argument("--size", choices=list(PLANS), default=os.environ.get(Settings.ENV["size"]) or "quick",
                   help="quick (default), full, or smallest (every benchmark once, tiny; for CI)")
    b.add_argument("--bucket", help=BUCKET_HELP)
    b.add_argument("--bench", "-b", help="only benchmarks matching this regular expression (asv run --bench)")
    b.add_argument("--continuous", nargs=2, metavar=("BASE", "HEAD"),
                   help="asv continuous: build and measure both commits (each in asv's virtualenv, not this tree), "
                        "print what changed, publish, and exit with status 1 when a benchmark got worse by more "
                        "than --factor at HEAD (docs/regression-tracking.md)")
    b.add_argument("--commits", metavar="A..B",
                   help="asv run A..B: build and measure every commit after A up to B, publish the history and "
                        "print asv's regressions page")
    b.add_argument("--factor", help=f"with --continuous: worse means above BASE's value x this (default "
                                    f"{DEFAULT_FACTOR}; 1 flags any increase)")
    b.add_argument("--results", help="results directory (default: results/ in the repository; results-spark<v>/ "
                                     "on another Spark than the default)")
    b.add_argument("--master", default=os.environ.get(Settings.ENV["master"]) or DEFAULT_MASTER,
                   help=MASTER_HELP)
    b.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    _fault_options(b, os.environ.get(Settings.ENV["fault_profile"]) or "none")
    b.set_defaults(run=cmd_bench)
    c = sub.add_parser("cost", help="what the measured requests would cost on AWS S3 (a projection)")
    c.add_argument("--trigger", default="10s", help="the query's trigger interval (default 10s)")
    c.add_argument("--record", nargs="+", metavar="DIR",
                   help="streaming records (default: every results/raw/*-streaming; with --partitions, every "
                        "results/raw/*-scale)")
    c.add_argument("--partitions", type=int, metavar="N",
                   help="project to N shuffle partitions from the slopes in the recorded scale results")
    c.add_argument("--strategy", help="with --partitions: comma-separated strategies (default: all recorded)")
    c.set_defaults(run=cmd_cost)
    s = sub.add_parser("scale", help="cost against shuffle partitions, stateful operators and batch count, "
                                     "per strategy (the scale experiment)")
    s.add_argument("--store", help=STORE_HELP)
    s.add_argument("--size", choices=list(PLANS), default="quick", help="the axes' defaults (default quick)")
    s.add_argument("--partitions", help="shuffle partitions, comma-separated (default: the size's, quick 2,20,200)")
    s.add_argument("--operators", help="stateful operators, of 1,2 (default both)")
    s.add_argument("--batches", type=int, help="measured batches of the long query, the batch-count axis "
                                               "(default: the size's, quick 100, full 10,000)")
    s.add_argument("--axes", default="partitions,operators,batches",
                   help="the axes to run, of partitions,operators,batches (default all; `--size full --axes "
                        "batches` is the 10,000-batch memory run alone)")
    s.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    s.add_argument("--part", metavar="K/N",
                   help="run every N-th strategy from the K-th, in a process of its own beside the others "
                        "(results/raw/<store>-scale/part-K-of-N; report and this command read the parts merged)")
    s.add_argument("--bucket", help=BUCKET_HELP)
    s.set_defaults(run=cmd_scale)
    co = sub.add_parser("counting", help="what counting S3 requests inside Spark's JVMs adds to walCommit, "
                                         "counting switched on and off batch by batch (no proxy)")
    co.add_argument("--store", help=STORE_HELP)
    co.add_argument("--size", choices=list(PLANS), default="quick",
                    help="batches per query and queries per strategy (default quick: 6 queries of 20 batches; "
                         "full: 20 of 100, ~1,000 batches an arm)")
    co.add_argument("--queries", type=int, help="queries per strategy (default: the size's)")
    co.add_argument("--strategies", default="rename,conditional",
                    help="comma-separated (default rename,conditional: the most and the fewest requests per walCommit)")
    co.add_argument("--bucket", help=BUCKET_HELP)
    co.set_defaults(run=cmd_counting)
    f = sub.add_parser("faultlab", help="failure rates per strategy under the fault profiles (the failure lab)")
    f.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where it "
                                   "can start here, else embedded)")
    f.add_argument("--size", choices=["smallest", "quick", "full"], default="quick",
                   help="quick (default: the profiles make bench runs), full (every profile, 2 seeds), smallest")
    f.add_argument("--profiles", help=f"comma-separated, of: {', '.join(PROFILES)} (default: the size's)")
    f.add_argument("--workloads", help="comma-separated, of: stateful, file_sink (default: the size's)")
    f.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    f.add_argument("--batches", type=int, help="batches per run under faults (default: the size's)")
    f.add_argument("--seeds", type=int,
                   help="runs per strategy x workload x profile, seeds 0..N-1 (default: the size's)")
    f.add_argument("--bucket", help=BUCKET_HELP)
    f.add_argument("--record", metavar="DIR",
                   help="print the table of a recorded failure lab (results/raw/<store>-faults)")
    f.set_defaults(run=cmd_faultlab)
    r = sub.add_parser("report", help="the HTML report (recommendation, tables, figures) from the recorded results")
    r.add_argument("--results", help="results directory (default: results/ in the repository)")
    r.set_defaults(run=cmd_report)
    c = sub.add_parser("crashlab", help="kill -9 drivers at crash points and check exactly-once, per strategy")
    c.add_argument("--store", help=STORE_HELP)
    c.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    c.add_argument("--size", choices=list(CRASH_PLANS),
                   help="a named plan: smallest, quick (what bench runs) or full (25 cycles per strategy x "
                        "workload, stateless and stateful, plus 3 multipart-upload cycles and the two-writer runs); "
                        "the options below change it. Default: 3 cycles of each workload")
    c.add_argument("--part", metavar="K/N",
                   help="run part K of N of the plan (its share of every series' cycles and of the two-writer "
                        "runs, its own seed); the parts' records (results/raw/<store>-crashes/part-K-of-N) are "
                        "read merged by report and by this command")
    c.add_argument("--workloads", help="comma-separated, of: stateless, stateful, wide (the multipart-upload "
                                       "point's); unsafe-foreach is a sink that is not idempotent on purpose")
    c.add_argument("--cycles", type=int, help="kill/restart cycles per strategy x workload")
    c.add_argument("--points", default=",".join(DEFAULT_POINTS),
                   help="crash points, used in turn (default: all that apply)")
    c.add_argument("--two-writers", help="workloads of a two-writer run per strategy (none to skip)")
    c.add_argument("--two-writer-starts",
                   help="batches of the first driver before the second starts, one run each (such as 3,0; "
                        "0: both start together)")
    c.add_argument("--seed", type=int, default=1, help="of every random choice (default 1; recorded)")
    c.add_argument("--bucket", help=BUCKET_HELP)
    c.set_defaults(run=cmd_crashlab)
    d = sub.add_parser("drift", help="how far every value moved between two runs (say, of the same commit)")
    d.add_argument("a", help="a results directory (bench --results) or an asv result file")
    d.add_argument("b", help="another")
    d.set_defaults(run=cmd_drift)
    pr = sub.add_parser("probe", help="check what each strategy needs from a store, and say which it can run")
    pr.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE, else ceph where "
                                    "it can start here, else embedded)")
    pr.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO); a store the "
                                     "probe starts gets a bucket of its own. Only keys under ckptbench-probe/<run>/ "
                                     "are written, and removed at the end")
    pr.add_argument("--json", action="store_true", help="print the data as JSON instead of tables")
    pr.set_defaults(run=cmd_probe)
    cl = sub.add_parser("clean", help=f"remove what ended runs left in a bucket ({RUNS_ROOT}<run>/ of a run killed "
                                       "before its clean-up); nothing else in the bucket is touched")
    cl.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: $CKPT_STORE)")
    cl.add_argument("--bucket", help="the bucket the runs wrote in (it must exist)")
    cl.set_defaults(run=cmd_clean)
    de = sub.add_parser("deploy", help="the jars, spark-submit flags and SparkSession settings to run a strategy")
    de.add_argument("strategy", help=f"one of: {', '.join(ckpt_impls.STRATEGIES)}")
    de.add_argument("--store", help=f"the kind of store: one of {', '.join(infra.STORES)}; all but s3 at the URL in "
                                    "$CKPT_S3_ENDPOINT (default: endpoint if that is set, else s3)")
    de.add_argument("--bucket", help="the checkpoints' bucket (it must exist)")
    de.add_argument("--no-check", action="store_true",
                    help="do not contact the store (by default the bucket is checked with the default credentials)")
    de.set_defaults(run=cmd_deploy)
    ct = sub.add_parser("contract", help="Spark's checkpoint contract, checked on each strategy against a store "
                                         "(PASS/FAIL per check; status 1 when one fails)")
    ct.add_argument("--store", help=STORE_HELP)
    ct.add_argument("--bucket", help=BUCKET_HELP)
    ct.add_argument("--strategies", default=",".join(ckpt_impls.STRATEGIES))
    ct.set_defaults(run=cmd_contract)
    recommend.register(sub)
    return p


def _stop_on_sigterm(signum, frame):
    # Python's default SIGTERM skips finally blocks and atexit, leaving Ceph daemons running.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        register_foreign(argv)
    except UsageError as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        rerun_under_spark(args, argv)
        if getattr(args, "continuous", None) or getattr(args, "commits", None):
            jars.s3a_jars()  # bench on other commits: each builds its own managers' jar, the S3A jars are shared
        elif hasattr(args, "spark"):  # measure, bench: a missing jar is said before any store starts
            jars.spark_jars()
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except ContractFailed as e:  # contract: the input was fine, a strategy broke a check
        print(f"ckptbench: contract broken by: {e}", file=sys.stderr)
        return 1
    except Regression as e:  # bench --continuous: the input was fine, a benchmark got worse
        print(f"ckptbench: regression: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
