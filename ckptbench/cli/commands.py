"""One function per command of ``python -m ckptbench``; each parses nothing itself (``main`` does)
and reports bad input as ``UsageError``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls import jars
from ckptbench.cli import continuous
from ckptbench.cli.common import (
    PROXY_BENCHMARKS,
    RESULTS,
    ContractFailed,
    UsageError,
    parse_master,
    parse_names,
    parse_part,
    parse_proxy_profile,
    results_root,
)
from ckptbench.config import ROOT
from ckptbench.harness.stores import RUNS_ROOT
from infra.faults import PROFILES, describe_profiles


def cmd_strategies(args) -> None:
    print(ckpt_impls.describe())


def cmd_faults(args) -> None:
    print(describe_profiles())


def cmd_measure(args) -> None:
    from ckptbench.experiments import measure
    from ckptbench.record import disk
    from ckptbench.report import tables

    if args.record:
        try:
            records = [disk.read(Path(path)) for path in args.record]
        except (OSError, ValueError) as e:
            raise UsageError(f"not a results record: {e}") from None
        print(tables.measure_table(records))
        return
    stores = parse_names(args.stores, infra.STORES, "store")
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    fault_profile = parse_proxy_profile(args.fault_profile)
    if args.batches < 20 and not args.allow_few_batches:
        raise UsageError("--batches below 20 gives unstable percentiles; pass --allow-few-batches to insist")
    master = parse_master(args.master)
    out = results_root()
    raw = out / "raw"
    records = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, master, raw,
                          fault_profile, args.fault_seed)
    text = tables.measure_table(records)
    print(text)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (out / f"measure-{stamp}.md").write_text(text + "\n")
    written = [str(disk.directory(raw, r.environment["store"], "measure").relative_to(ROOT)) for r in records]
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
    from ckptbench import config, progress
    from ckptbench.harness import stores
    from ckptbench.report import page, publish

    store = args.store or os.environ.get(config.Settings.ENV["store"]) or config.default_store()
    parse_names(store, infra.STORES, "store")
    parse_names(args.size, config.PLANS, "size")
    fault_profile = parse_proxy_profile(args.fault_profile)
    master = parse_master(args.master)
    commits = continuous.checked(args)  # --continuous, --commits
    # Fail here, in one line, on a store that cannot start or be metered (an https endpoint,
    # wrong keys, a missing bucket), not after asv has spent minutes on it.
    with stores.started_stores([store], args.bucket, say=lambda line: None, fault_profile=fault_profile) as started:
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
    # asv keys results by machine: one per store and Spark version keeps each a series of its own.
    machine = f"{socket.gethostname()}-{store}-spark{jars.spark_version()}"
    settings = config.Settings(store, args.size, args.bucket, results / "raw", fault_profile, args.fault_seed, master)
    if fault_profile != "none":
        print(f"fault profile: {fault_profile} (seed {args.fault_seed}), injected by the metering proxy")
    if commits:  # asv builds and measures other commits (ckptbench.cli.continuous)
        env = {**os.environ, **settings.env()}
        print(f"running the {args.size} suite on each commit", flush=True)
        with progress.shown_for(env):
            continuous.run(args, env, machine, results, bench, config.Settings.ENV["raw"])
        return
    asv_conf = _asv_config(results)
    # asv drops PYTHONPATH from its benchmark processes, which would then import whichever checkout
    # the venv points at (a worktree's runs would bench main's code): this checkout's, always.
    env = {**os.environ, **settings.env(), "ASV_PYTHONPATH": str(ROOT)}
    asv = [sys.executable, "-m", "asv"]
    print(f"running the {args.size} suite", flush=True)
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(asv_conf)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with progress.shown_for(env):  # the tree as it is, in this venv: asv's existing environment
        run = subprocess.run([*asv, "run", "--config", str(asv_conf), "--python=same", "--set-commit-hash", "HEAD",
                              "--machine", machine, "--show-stderr", *(["--bench", bench] if bench else [])],
                             env=env)
    subprocess.run([*asv, "publish", "--config", str(asv_conf)], check=True, env=env)
    try:  # asv's pages load their scripts from CDNs: local copies, so that they open offline
        publish.offline(results / "html")
        offline_error = None
    except publish.NotOffline as e:
        offline_error = e
    written = page.write(results)
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
    from ckptbench import metrics
    from ckptbench.metrics import cost
    from ckptbench.record import disk, results

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
        records = [disk.read(path) for path in paths]
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
    from ckptbench import metrics
    from ckptbench.metrics import cost
    from ckptbench.record import disk, results

    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    strategies = parse_names(args.strategy, ckpt_impls.STRATEGIES, "strategy") if args.strategy else None
    paths = [Path(p) for p in args.record] if args.record else sorted((results_root() / "raw").glob("*-scale"))
    if not paths:
        raise UsageError("no scale results in results/raw: run `python -m ckptbench scale` or `make bench` first, "
                         "or name one with --record DIR")
    try:
        records = [disk.read(path) for path in paths]
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


def cmd_scale(args) -> None:
    from ckptbench import config
    from ckptbench.experiments import scale
    from ckptbench.record import disk
    from ckptbench.report import tables

    store = args.store or config.default_store()
    parse_names(store, infra.STORES, "store")
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
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
    part = parse_part(args.part, len(strategies), "the strategies asked for")
    settings = config.Settings(store, args.size, args.bucket, results_root() / "raw")
    record = scale.scale(settings, strategies, axes, part)
    where = disk.directory(settings.raw, store, "scale")
    if part != (1, 1):
        record = disk.read(where)  # every part written so far, merged
        print(f"the parts written so far: {', '.join(p.name for p in disk.parts_of(where))}")
    print("\n\n".join(table.markdown() for table in tables.scale_tables(record)))
    print(f"\nrecord: {where} "
          "(python -m ckptbench cost --partitions N projects from it; the report shows it after a bench or report run)")


def cmd_counting(args) -> None:
    from ckptbench import config, progress
    from ckptbench.experiments import counting
    from ckptbench.record import disk

    store = args.store or config.default_store()
    parse_names(store, infra.STORES, "store")
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    if args.queries is not None and args.queries < 2:
        raise UsageError(f"--queries must be at least 2 (each query's first arm is the other's in the next), "
                         f"not {args.queries}")
    settings = config.Settings(store, args.size, args.bucket, results_root() / "raw")
    with progress.shown_for(os.environ):  # the experiment's bar, shown on stderr
        overhead = counting.experiment(settings, tuple(strategies), args.queries)
    print(counting.table(overhead, strategies))
    print(f"\nhandler alone: {overhead.handler['on_ns'] / 1000:.1f} µs per HTTP attempt counting, "
          f"{overhead.handler['off_ns'] / 1000:.2f} µs switched off")
    print(f"record: {disk.directory(settings.raw, store, 'jvm_counting')}")


def cmd_faultlab(args) -> None:
    from ckptbench import config, progress
    from ckptbench.experiments import faultlab
    from ckptbench.record import disk
    from ckptbench.report import tables

    if args.record:
        try:
            print(tables.fault_table(disk.read(Path(args.record))))
        except (OSError, ValueError) as e:
            raise UsageError(f"not a results record: {e}") from None
        return
    store = args.store or os.environ.get(config.Settings.ENV["store"]) or config.default_store()
    parse_names(store, infra.STORES, "store")
    plan = faultlab.PLANS[args.size]
    changes = {}
    if args.profiles:
        changes["profiles"] = tuple(parse_names(args.profiles, PROFILES, "fault profile"))
    if args.workloads:
        changes["workloads"] = tuple(parse_names(args.workloads, ("stateful", "file_sink"), "workload"))
    if args.batches is not None:
        if args.batches < 1:
            raise UsageError(f"--batches must be at least 1, not {args.batches}")
        changes["batches"] = args.batches
    if args.seeds is not None:
        if args.seeds < 1:
            raise UsageError(f"--seeds must be at least 1, not {args.seeds}")
        changes["seeds"] = tuple(range(args.seeds))
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    settings = config.Settings(store, args.size, args.bucket, RESULTS / "raw")
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = faultlab.faultlab(settings, dataclasses.replace(plan, **changes), strategies)
    print(tables.fault_table(record))
    print(f"\nrecord: {disk.directory(settings.raw, store, 'faults').relative_to(ROOT)} "
          "(python -m ckptbench faultlab --record DIR prints its table again)")


def cmd_report(args) -> None:

    from ckptbench.record import disk
    from ckptbench.report import page
    out = Path(args.results).resolve() if args.results else RESULTS
    if not disk.record_dirs(out / "raw"):
        raise UsageError(f"no records in {out / 'raw'}: run `make bench` first (or name --results DIR)")
    written = page.write(out)
    print(f"report: {written[0]} ({len(written) - 1} figures beside it)")


def cmd_drift(args) -> None:
    from ckptbench.metrics import drift

    try:
        print(drift.compare(Path(args.a), Path(args.b)))
    except drift.NoResults as e:
        raise UsageError(str(e)) from None


def cmd_probe(args) -> None:

    from ckptbench import config
    from ckptbench.experiments import probe
    from ckptbench.report import tables
    name = args.store or os.environ.get(config.Settings.ENV["store"]) or config.default_store()
    parse_names(name, infra.STORES, "store")
    reason = infra.store_class(name).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with infra.store_class(name)() as store:
        data = probe.on_store(store, args.bucket)
    print(json.dumps(data, indent=1) if args.json else tables.probe_table(data))


def cmd_clean(args) -> None:

    from ckptbench import config
    from ckptbench.harness import stores
    name = args.store or os.environ.get(config.Settings.ENV["store"]) or config.default_store()
    parse_names(name, infra.STORES, "store")
    if not args.bucket:
        raise UsageError("clean needs --bucket: the bucket whose ended runs' prefixes to remove")
    reason = infra.store_class(name).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    with infra.store_class(name)() as store:
        store.check_bucket(args.bucket)
        removed = stores.remove_stale_runs(store, args.bucket)
    for prefix in removed:
        print(f"removed {prefix} in {args.bucket}")
    print(f"{len(removed)} ended run(s) removed from {args.bucket}; nothing outside {RUNS_ROOT} was "
          "listed or touched, nor a run still going")


def cmd_deploy(args) -> None:
    from ckptbench import deploy

    ckpt_impls.get(args.strategy)
    name = args.store or ("endpoint" if os.environ.get(deploy.ENDPOINT_ENV) else "s3")
    parse_names(name, infra.STORES, "store")
    if not args.bucket:
        raise UsageError("deploy needs --bucket: the S3A settings it prints are per bucket (fs.s3a.bucket.B.*)")
    store = deploy.target(name)
    if not args.no_check:
        store.check_bucket(args.bucket)
    print(deploy.text(deploy.plan(args.strategy, store, args.bucket)))


def cmd_contract(args) -> None:
    """Spark's checkpoint contract on each strategy, against the store; status 1 when a check fails."""
    from ckptbench import config
    from ckptbench.experiments import contract
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session
    from ckptbench.report import tables

    name = args.store or os.environ.get(config.Settings.ENV["store"]) or config.default_store()
    parse_names(name, infra.STORES, "store")
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    settings = config.Settings(name, "smallest", args.bucket, results_root() / "raw")
    with stores.started_store(settings) as (store, bucket):
        spark = session(strategies[0], {bucket: store})
        try:
            found = {s: contract.run(spark, s, store, bucket, store.run_prefix) for s in strategies}
        finally:
            spark.stop()
    print(tables.contract_table(found))
    if not all(ok for checks in found.values() for _, ok, _ in checks):
        raise ContractFailed(", ".join(s for s, checks in found.items() if not all(ok for _, ok, _ in checks)))


def cmd_crashlab(args) -> None:
    from ckptbench import config, progress
    from ckptbench.experiments import crashlab
    from ckptbench.record import disk
    from ckptbench.report import tables

    store = args.store or config.default_store()
    parse_names(store, infra.STORES, "store")
    strategies = parse_names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    plan = crashlab.PLANS[args.size] if args.size else crashlab.CrashPlan(3, ("stateless", "stateful"), ("stateless",),
                                                                           two_writer_starts=(3, 0))
    changes = {}
    if args.workloads is not None:
        changes["workloads"] = tuple(parse_names(args.workloads, crashlab.WORKLOADS, "workload"))
    if args.two_writers is not None:
        changes["two_writers"] = () if args.two_writers in ("", "none") else tuple(
            parse_names(args.two_writers, crashlab.WORKLOADS, "workload"))
    points = parse_names(args.points, crashlab.CRASH_POINTS, "crash point")
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
    plan = plan.in_part(*parse_part(args.part))
    settings = config.Settings(store, args.size or "cli", args.bucket, RESULTS / "raw")
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = crashlab.crashes(settings, strategies, plan, points=tuple(points), seed=args.seed)
    where = disk.directory(settings.raw, store, "crashes")
    if plan.part != (1, 1):
        record = disk.read(where)  # every part written so far, merged
        print(f"the parts written so far: {', '.join(p.name for p in disk.parts_of(where))}")
    print("\n\n".join(table.markdown() for table in tables.crash_tables(record)))
    print(f"\nrecord: {where.relative_to(ROOT)} (seed {args.seed}; the same tables are in "
          "results/report/index.html after a bench run or `python -m ckptbench report`)")
