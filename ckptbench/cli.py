"""ckptbench's command line: `python -m ckptbench COMMAND` (see --help).

Bad input (an unknown strategy or store, an unreachable endpoint, rejected credentials,
a missing bucket, missing jars) ends with one line on stderr saying what is wrong and
what to do, and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from ckpt_impls.jars import JarsMissing
from infra.faults import PROFILES, describe_profiles

from .crashlab import DEFAULT_POINTS
from .crashlab import PLANS as CRASH_PLANS
from .runs import CLUSTER, DEFAULT_MASTER, PLANS, RUNS_ROOT, Settings, check_master

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
#: The Spark versions measure and bench run on (--spark), each in a venv of its own: (venv, the make
#: target that makes it). The first is the default.
SPARK_VENVS = {"4.3": (ROOT / ".venv", "setup"), "3.5": (ROOT / ".venv-spark35", "setup-spark35")}
#: The asv benchmarks (name prefixes) that need the metering proxy: the crash and failure labs, the
#: log histories (``runs.started_store(needs_proxy=...)``), the proxy's own overhead and the COPY
#: projected through its ``aws-projection`` profile. ``bench`` leaves them out on a store it cannot front.
PROXY_BENCHMARKS = ("failures.", "fault_rates.", "manifest_compaction.", "floor.ProxyOverhead",
                    "rename_cost.ProjectedCopy")
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
        plural = kind.removesuffix("y") + "ies" if kind.endswith("y") else kind + "s"
        raise UsageError(f"unknown {kind} '{','.join(unknown) or text}'; valid {plural}: {', '.join(valid)}")
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


def _master(master: str) -> str:
    try:
        return check_master(master)
    except ValueError as e:
        raise UsageError(str(e)) from None


def cmd_strategies(args) -> None:
    print(ckpt_impls.describe())


def cmd_faults(args) -> None:
    print(describe_profiles())


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
    [fault_profile] = _names(args.fault_profile, PROFILES, "fault profile")
    if args.batches < 20 and not args.allow_few_batches:
        raise UsageError("--batches below 20 gives unstable percentiles; pass --allow-few-batches to insist")
    master = _master(args.master)
    out = results_root()
    raw = out / "raw"
    records = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, master, raw,
                          fault_profile, args.fault_seed)
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
    from . import progress, publish, report, runs

    store = args.store or os.environ.get(runs.Settings.ENV["store"]) or runs.default_store()
    _names(store, infra.STORES, "store")
    _names(args.size, runs.PLANS, "size")
    [fault_profile] = _names(args.fault_profile, PROFILES, "fault profile")
    master = _master(args.master)
    # Fail here, in one line, on a store that cannot start or be metered (an https endpoint,
    # wrong keys, a missing bucket), not after asv has spent minutes on it.
    with runs.started_stores([store], args.bucket, say=lambda line: None, fault_profile=fault_profile) as started:
        if not started:
            raise infra.StoreUnavailable(infra.store_class(store).unavailable_reason())
        proxied = getattr(started[store][0], "proxy", None) is not None
    bench = args.bench
    if not proxied:
        print(f"store {store} is not plain http://, so no metering proxy can front it: requests are counted in "
              f"Spark's JVMs, and the benchmarks that need the proxy are left out ({', '.join(PROXY_BENCHMARKS)})")
        bench = "^(?!{})".format("|".join(map(re.escape, PROXY_BENCHMARKS))) + (f"(?=.*(?:{bench}))" if bench else "")
    if infra.store_class(store).emulator:
        print(f"store: {store}, an emulator: its timings are not a real store's "
              "(Ceph RGW, the default where it can start, gives real ones)")
    else:
        print(f"store: {store}, a real store")
    results = Path(args.results).resolve() if args.results else results_root()
    config = _asv_config(results)
    # asv keys results by machine: one per store and Spark version keeps each a series of its own.
    machine = f"{socket.gethostname()}-{store}-spark{jars.spark_version()}"
    settings = runs.Settings(store, args.size, args.bucket, results / "raw", fault_profile, args.fault_seed, master)
    # asv drops PYTHONPATH from its benchmark processes, which would then import whichever checkout
    # the venv points at (a worktree's runs benched main's code): this checkout's, always.
    env = {**os.environ, **settings.env(), "ASV_PYTHONPATH": str(ROOT)}
    if fault_profile != "none":
        print(f"fault profile: {fault_profile} (seed {args.fault_seed}), injected by the metering proxy")
    asv = [sys.executable, "-m", "asv"]
    print(f"running the {args.size} suite", flush=True)
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(config)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with progress.shown_for(env):
        run = subprocess.run([*asv, "run", "--config", str(config), "--python=same", "--set-commit-hash", "HEAD",
                              "--machine", machine, "--show-stderr", *(["--bench", bench] if bench else [])],
                             env=env)
    subprocess.run([*asv, "publish", "--config", str(config)], check=True, env=env)
    try:  # asv's pages load their scripts from CDNs: local copies, so that they open offline
        publish.offline(results / "html")
        offline_error = None
    except publish.NotOffline as e:
        offline_error = e
    written = report.write(results)
    publish.link_report(results / "html")
    print(f"\nHTML: {results / 'html' / 'index.html'}  (opens with no network, as a file or served; "
          f"asv machine {machine}; "
          f"raw results in {results / 'asv'} and {results / 'raw'})")
    print(f"report: {written[0]} ({len(written) - 1} figures beside it)")
    if offline_error is not None:
        raise UsageError(f"the HTML needs the network to open: {offline_error}")
    if run.returncode:
        raise UsageError("some benchmarks failed: they are marked failed in the HTML; asv's output above says why")


def cmd_cost(args) -> None:
    from . import cost, metrics, results

    try:
        trigger = cost.parse_interval(args.trigger)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.partitions is not None:
        _cost_at_scale(args, trigger)
        return
    if args.strategy:
        raise UsageError("--strategy goes with --partitions (the projection from the scale results)")
    paths = [Path(p) for p in args.record] if args.record else sorted((RESULTS / "raw").glob("*-streaming"))
    if not paths:
        raise UsageError("no streaming results in results/raw: run `make bench` first, or name one with --record DIR")
    try:
        records = [results.read(path) for path in paths]
    except (OSError, ValueError) as e:
        raise UsageError(f"not a results record: {e}") from None
    print(f"Cost per month, one query, a batch every {args.trigger}: {cost.caption()}.\n")
    print("| store | strategy | workload | billable requests per batch | $ per million batches | "
          "requests per month | $ per month |")
    print("|---|---|---|---|---|---|---|")
    for record in records:
        for strategy in record.strategies():
            for workload in dict.fromkeys(record.runs.workload):
                try:
                    by_op = metrics.billable_requests_by_op(record.run(strategy, workload))
                except (results.RunFailed, KeyError):
                    continue
                per_batch, dollars = sum(by_op.values()), cost.dollars(by_op)
                print(f"| {record.environment['store']} | {strategy} | {workload} | {per_batch:.1f} | "
                      f"{dollars * 1e6:,.2f} | {cost.per_month(per_batch, trigger):,.0f} | "
                      f"{cost.per_month(dollars, trigger):,.2f} |")


def _cost_at_scale(args, trigger: float) -> None:
    """``cost --partitions N``: the requests of one batch at N shuffle partitions, from each operation's
    fit against partitions in the recorded scale results, per month and in dollars."""
    from . import cost, metrics, results

    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    strategies = _names(args.strategy, ckpt_impls.STRATEGIES, "strategy") if args.strategy else None
    paths = [Path(p) for p in args.record] if args.record else sorted((results_root() / "raw").glob("*-scale"))
    if not paths:
        raise UsageError("no scale results in results/raw: run `python -m ckptbench scale` or `make bench` first, "
                         "or name one with --record DIR")
    try:
        records = [results.read(path) for path in paths]
    except (OSError, ValueError) as e:
        raise UsageError(f"not a results record: {e}") from None
    others = [r.environment["experiment"] for r in records if r.environment["experiment"] != "scale"]
    if others:
        raise UsageError(f"--partitions needs scale records (results/raw/<store>-scale), not {', '.join(others)}")
    print(f"Cost per month, one query with {args.partitions:,} shuffle partitions and one stateful operator, a batch "
          f"every {args.trigger}: a PROJECTION from the measured slopes ({cost.caption()}).\n")
    print("| store | strategy | measured partitions | requests per partition (fit) | billable requests per batch "
          "(projected) | requests per month | $ per month |")
    print("|---|---|---|---|---|---|---|")
    shown, notes = 0, []
    for record in records:
        for strategy in strategies or record.strategies():
            try:
                points = metrics.scale_points(record, "partitions", strategy)
                by_op = metrics.projected_requests_by_op(record, strategy, args.partitions)
                _, slope, r2 = metrics.scale_fit(record, "partitions", strategy, "requests")
            except (results.RunFailed, KeyError, TypeError, ValueError) as e:
                print(f"| {record.environment['store']} | {strategy} | no fit: {e} | | | | |")
                continue
            measured = ", ".join(f"{x:,.0f}" for x, _ in points)
            beyond = " (extrapolated)" if args.partitions > max(x for x, _ in points) else ""
            per_batch = sum(by_op.values())
            print(f"| {record.environment['store']} | {strategy} | {measured} | {slope:.2f} (r² {r2:.2f}) | "
                  f"{per_batch:,.1f}{beyond} | {cost.per_month(per_batch, trigger):,.0f} | "
                  f"{cost.per_month(cost.dollars(by_op), trigger):,.2f} |")
            shown += 1
            listings, files = metrics.or_none(metrics.maintenance_rates, record, strategy) or (math.nan, math.nan)
            if not math.isnan(listings):
                month = cost.maintenance_per_month(listings, 0.0 if math.isnan(files) else files, args.partitions,
                                                   trigger)
                by_batch = (f"snapshots and deletes {files:.2f} per state partition and batch over the long query"
                            if not math.isnan(files) else "snapshots and deletes not measured (no long query in the "
                            "record: a point's few batches stay under the retention)")
                notes.append(f"{record.environment['store']} {strategy}: listings {listings:.2f} requests per state "
                             f"partition and round over its scale runs; {by_batch}; about "
                             f"{month:,.0f} requests a month more")
    if not shown:
        raise UsageError("no strategy asked for has a partitions fit in the scale results")
    if notes:
        print(f"\nNot in these figures: the state store's maintenance (listings every round, snapshots and deletes "
              f"past retention with the batches), which runs on its own schedule. Measured, and PROJECTED to "
              f"{args.partitions:,} partitions at Spark's default interval of {cost.SPARK_MAINTENANCE_INTERVAL_S} s:")
        print("\n".join(f"- {note}" for note in notes))


def _part(text: str | None, most: int | None = None, what: str = "") -> tuple[int, int]:
    """``--part K/N`` as (K, N), (1, 1) when not given; N at most ``most`` (``what`` there are)."""
    if text is None:
        return 1, 1
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n) <= (most or int(n))):
        bound = f" <= {most}, {what}" if most else ""
        raise UsageError(f"--part takes K/N with 1 <= K <= N{bound} (say 2/2), not {text!r}")
    return int(k), int(n)


def cmd_scale(args) -> None:
    from . import report, results, runs, scale

    store = args.store or runs.default_store()
    _names(store, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    default = scale.AXES[args.size]

    def counts(text: str | None, fallback: tuple[int, ...], option: str) -> tuple[int, ...]:
        if text is None:
            return fallback
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not values or not all(v.isdigit() and int(v) > 0 for v in values):
            raise UsageError(f"{option} takes whole numbers above 0, comma-separated (such as 2,20,200), not {text!r}")
        return tuple(sorted({int(v) for v in values}))

    operators = counts(args.operators, default.operators, "--operators")
    if set(operators) - {1, 2}:
        raise UsageError(f"--operators takes 1 and/or 2 (the stateful workload has at most two), not {args.operators}")
    long_batches = default.long_batches if args.batches is None else args.batches
    if long_batches < default.windows:
        raise UsageError(f"--batches must be at least {default.windows} (one per window), not {long_batches}")
    names = tuple(a.strip() for a in args.axes.split(",") if a.strip())
    if not names or set(names) - set(scale.AXIS_NAMES):
        raise UsageError(f"--axes takes some of {','.join(scale.AXIS_NAMES)}, comma-separated, not {args.axes!r}")
    axes = scale.only(dataclasses.replace(default, operators=operators, long_batches=long_batches,
                                          partitions=counts(args.partitions, default.partitions, "--partitions")),
                      names)
    part = _part(args.part, len(strategies), "the strategies asked for")
    settings = runs.Settings(store, args.size, args.bucket, results_root() / "raw")
    record = scale.scale(settings, strategies, axes, part)
    where = results.directory(settings.raw, store, "scale")
    if part != (1, 1):
        record = results.read(where)  # every part written so far, merged
        print(f"the parts written so far: {', '.join(p.name for p in results.parts_of(where))}")
    print("\n\n".join(table.markdown() for table in report.scale_tables(record)))
    print(f"\nrecord: {where} "
          "(python -m ckptbench cost --partitions N projects from it; the report shows it after a bench or report run)")


def cmd_counting(args) -> None:
    from . import counting_overhead, progress, results, runs

    store = args.store or runs.default_store()
    _names(store, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    if args.queries is not None and args.queries < 2:
        raise UsageError(f"--queries must be at least 2 (each query's first arm is the other's in the next), "
                         f"not {args.queries}")
    settings = runs.Settings(store, args.size, args.bucket, results_root() / "raw")
    with progress.shown_for(os.environ):  # the experiment's bar, shown on stderr
        overhead = counting_overhead.experiment(settings, tuple(strategies), args.queries)
    print(counting_overhead.table(overhead, strategies))
    print(f"\nhandler alone: {overhead.handler['on_ns'] / 1000:.1f} µs per HTTP attempt counting, "
          f"{overhead.handler['off_ns'] / 1000:.2f} µs switched off")
    print(f"record: {results.directory(settings.raw, store, 'jvm_counting')}")


def cmd_faultlab(args) -> None:
    from . import faultlab, progress, results, runs

    if args.record:
        try:
            print(faultlab.table(results.read(Path(args.record))))
        except (OSError, ValueError) as e:
            raise UsageError(f"not a results record: {e}") from None
        return
    store = args.store or os.environ.get(runs.Settings.ENV["store"]) or runs.default_store()
    _names(store, infra.STORES, "store")
    plan = faultlab.PLANS[args.size]
    changes = {}
    if args.profiles:
        changes["profiles"] = tuple(_names(args.profiles, PROFILES, "fault profile"))
    if args.workloads:
        changes["workloads"] = tuple(_names(args.workloads, ("stateful", "file_sink"), "workload"))
    if args.batches is not None:
        if args.batches < 1:
            raise UsageError(f"--batches must be at least 1, not {args.batches}")
        changes["batches"] = args.batches
    if args.seeds is not None:
        if args.seeds < 1:
            raise UsageError(f"--seeds must be at least 1, not {args.seeds}")
        changes["seeds"] = tuple(range(args.seeds))
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    settings = runs.Settings(store, args.size, args.bucket, RESULTS / "raw")
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = faultlab.faultlab(settings, dataclasses.replace(plan, **changes), strategies)
    print(faultlab.table(record))
    print(f"\nrecord: {results.directory(settings.raw, store, 'faults').relative_to(ROOT)} "
          "(python -m ckptbench faultlab --record DIR prints its table again)")


def cmd_report(args) -> None:
    from . import report, results

    out = Path(args.results).resolve() if args.results else RESULTS
    if not results.record_dirs(out / "raw"):
        raise UsageError(f"no records in {out / 'raw'}: run `make bench` first (or name --results DIR)")
    written = report.write(out)
    print(f"report: {written[0]} ({len(written) - 1} figures beside it)")


def cmd_drift(args) -> None:
    from . import drift

    try:
        print(drift.compare(Path(args.a), Path(args.b)))
    except drift.NoResults as e:
        raise UsageError(str(e)) from None


def cmd_probe(args) -> None:
    from . import probe, runs

    name = args.store or os.environ.get(runs.Settings.ENV["store"]) or runs.default_store()
    _names(name, infra.STORES, "store")
    reason = infra.store_class(name).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with infra.store_class(name)() as store:
        data = probe.on_store(store, args.bucket)
    print(json.dumps(data, indent=1) if args.json else probe.table(data))


def cmd_clean(args) -> None:
    from . import runs

    name = args.store or os.environ.get(runs.Settings.ENV["store"]) or runs.default_store()
    _names(name, infra.STORES, "store")
    if not args.bucket:
        raise UsageError("clean needs --bucket: the bucket whose ended runs' prefixes to remove")
    reason = infra.store_class(name).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with infra.store_class(name)() as store:
        store.check_bucket(args.bucket)
        removed = runs.remove_stale_runs(store, args.bucket)
    for prefix in removed:
        print(f"removed {prefix} in {args.bucket}")
    print(f"{len(removed)} ended run(s) removed from {args.bucket}; nothing outside {RUNS_ROOT} was "
          "listed or touched, nor a run still going")


def cmd_deploy(args) -> None:
    from . import deploy

    ckpt_impls.get(args.strategy)
    name = args.store or ("endpoint" if os.environ.get(deploy.ENDPOINT_ENV) else "s3")
    _names(name, infra.STORES, "store")
    if not args.bucket:
        raise UsageError("deploy needs --bucket: the S3A settings it prints are per bucket (fs.s3a.bucket.B.*)")
    store = deploy.target(name)
    if not args.no_check:
        store.check_bucket(args.bucket)
    print(deploy.text(deploy.plan(args.strategy, store, args.bucket)))


def cmd_crashlab(args) -> None:
    from . import crashlab, progress, report, results, runs

    store = args.store or runs.default_store()
    _names(store, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    plan = crashlab.PLANS[args.size] if args.size else crashlab.CrashPlan(3, ("stateless", "stateful"), ("stateless",),
                                                                           two_writer_starts=(3, 0))
    changes = {}
    if args.workloads is not None:
        changes["workloads"] = tuple(_names(args.workloads, crashlab.WORKLOADS, "workload"))
    if args.two_writers is not None:
        changes["two_writers"] = () if args.two_writers in ("", "none") else tuple(
            _names(args.two_writers, crashlab.WORKLOADS, "workload"))
    points = _names(args.points, crashlab.CRASH_POINTS, "crash point")
    if args.cycles is not None:
        if args.cycles < 1:
            raise UsageError(f"--cycles must be at least 1, not {args.cycles}")
        changes["cycles"] = args.cycles
    for workload in changes.get("workloads", plan.workloads):
        if not any(crashlab.CRASH_POINTS[p].applies_to(crashlab.WORKLOADS[workload]) for p in points):
            raise UsageError(f"no crash point of {','.join(points)} applies to workload {workload}")
    if args.two_writer_starts is not None:
        try:
            changes["two_writer_starts"] = starts = tuple(int(n) for n in args.two_writer_starts.split(","))
        except ValueError:
            raise UsageError(
                f"--two-writer-starts takes batch counts such as 3,0, not {args.two_writer_starts!r}") from None
        if any(n < 0 for n in starts):
            raise UsageError(f"--two-writer-starts takes batch counts of 0 or more, not {args.two_writer_starts!r}")
    plan = dataclasses.replace(plan, **changes)
    plan = plan.in_part(*_part(args.part))
    settings = runs.Settings(store, args.size or "cli", args.bucket, RESULTS / "raw")
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = crashlab.crashes(settings, strategies, plan, points=tuple(points), seed=args.seed)
    where = results.directory(settings.raw, store, "crashes")
    if plan.part != (1, 1):
        record = results.read(where)  # every part written so far, merged
        print(f"the parts written so far: {', '.join(p.name for p in results.parts_of(where))}")
    print("\n\n".join(table.markdown() for table in report.crash_tables(record)))
    print(f"\nrecord: {where.relative_to(ROOT)} (seed {args.seed}; the same tables are in "
          "results/report/index.html after a bench run or `python -m ckptbench report`)")


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


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ckptbench", description=__doc__.splitlines()[0])
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
    b.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    b.add_argument("--bench", help="only benchmarks matching this regular expression (asv run --bench)")
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
    s.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: ceph where it can start here, "
                                   "else embedded)")
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
    s.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    s.set_defaults(run=cmd_scale)
    co = sub.add_parser("counting", help="what counting S3 requests inside Spark's JVMs adds to walCommit, "
                                         "counting switched on and off batch by batch (no proxy)")
    co.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: ceph where it can start here, "
                                    "else embedded)")
    co.add_argument("--size", choices=list(PLANS), default="quick",
                    help="batches per query and queries per strategy (default quick: 6 queries of 20 batches; "
                         "full: 20 of 100, ~1,000 batches an arm)")
    co.add_argument("--queries", type=int, help="queries per strategy (default: the size's)")
    co.add_argument("--strategies", default="rename,conditional",
                    help="comma-separated (default rename,conditional: the most and the fewest requests per walCommit)")
    co.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
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
    f.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
    f.add_argument("--record", metavar="DIR",
                   help="print the table of a recorded failure lab (results/raw/<store>-faults)")
    f.set_defaults(run=cmd_faultlab)
    r = sub.add_parser("report", help="the HTML report (recommendation, tables, figures) from the recorded results")
    r.add_argument("--results", help="results directory (default: results/ in the repository)")
    r.set_defaults(run=cmd_report)
    c = sub.add_parser("crashlab", help="kill -9 drivers at crash points and check exactly-once, per strategy")
    c.add_argument("--store", help=f"one of: {', '.join(infra.STORES)} (default: ceph where it can start here, "
                                   "else embedded)")
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
    c.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO)")
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
        if hasattr(args, "spark"):  # measure, bench: a missing jar is said before any store starts
            jars.spark_jars()
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
