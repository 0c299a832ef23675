"""The labs: long experiments on one store, each writing one record and printing its tables:
``scale`` (cost against partitions, operators and batches), ``counting`` (what counting requests
in Spark's JVMs adds), ``faultlab`` (the fault lab: query deaths under fault profiles) and
``crashlab`` (the crash lab: exactly-once when drivers are killed)."""

from __future__ import annotations

import dataclasses
import os

from ckptbench.cli.common import (
    BUCKET_HELP,
    STORE_HELP,
    STRATEGIES_HELP,
    UsageError,
    parse_names,
    parse_part,
    raw_root,
    read_records,
    results_root,
    shown,
    store_of,
    strategies_of,
)
from ckptbench.config import CRASHLAB, FAULT_WORKLOADS, FAULTLAB, PLANS
from infra.faults import PROFILES


def register(sub) -> None:
    """Add this module's commands to the app's subcommands (``sub``, argparse's). The crash lab's
    plans and points are checked in its action, not here: the crash lab's package imports pandas
    and pyspark, which every command's start would then pay for."""
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
    s.add_argument("--strategies", help=STRATEGIES_HELP)
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
    f = sub.add_parser(FAULTLAB, help="failure rates per strategy under the fault profiles (the fault lab)")
    f.add_argument("--store", help=STORE_HELP)
    f.add_argument("--size", choices=["smallest", "quick", "full"], default="quick",
                   help="quick (default: the profiles make bench runs), full (every profile, 2 seeds), smallest")
    f.add_argument("--profiles", help=f"comma-separated, of: {', '.join(PROFILES)} (default: the size's)")
    f.add_argument("--workloads", help=f"comma-separated, of: {', '.join(FAULT_WORKLOADS)} (default: the size's)")
    f.add_argument("--strategies", help=STRATEGIES_HELP)
    f.add_argument("--batches", type=int, help="batches per run under faults (default: the size's)")
    f.add_argument("--seeds", type=int,
                   help="runs per strategy x workload x profile, seeds 0..N-1 (default: the size's)")
    f.add_argument("--part", metavar="K/N",
                   help="run part K of N of the runs (every N-th from the K-th), in a process of its own beside the "
                        "others (results/raw/<store>-faultlab/part-K-of-N; report and this command read the parts "
                        "merged)")
    f.add_argument("--bucket", help=BUCKET_HELP)
    f.add_argument("--record", metavar="DIR",
                   help="print the table of a recorded fault lab (results/raw/<store>-faultlab)")
    f.set_defaults(run=cmd_faultlab)
    c = sub.add_parser(CRASHLAB, help="kill -9 drivers at crash points and check exactly-once, per strategy")
    c.add_argument("--store", help=STORE_HELP)
    c.add_argument("--strategies", help=STRATEGIES_HELP)
    c.add_argument("--size",
                   help="a named plan: smallest, quick (what bench runs) or full (25 cycles per strategy x "
                        "workload, stateless and stateful, plus 3 multipart-upload cycles and the two-writer runs); "
                        "the options below change it. Default: 3 cycles of each workload")
    c.add_argument("--part", metavar="K/N",
                   help="run part K of N of the plan (its share of every series' cycles and of the two-writer "
                        "runs, its own seed); the parts' records (results/raw/<store>-crashlab/part-K-of-N) are "
                        "read merged by report and by this command")
    c.add_argument("--workloads", help="comma-separated, of: stateless, stateful, wide (the multipart-upload "
                                       "point's); unsafe-foreach is a sink that is not idempotent on purpose")
    c.add_argument("--cycles", type=int, help="kill/restart cycles per strategy x workload")
    c.add_argument("--points",
                   help="crash points, used in turn (default: all that apply)")
    c.add_argument("--two-writers", help="workloads of a two-writer run per strategy (none to skip)")
    c.add_argument("--two-writer-starts",
                   help="batches of the first driver before the second starts, one run each (such as 3,0; "
                        "0: both start together)")
    c.add_argument("--seed", type=int, default=1, help="of every random choice (default 1; recorded)")
    c.add_argument("--bucket", help=BUCKET_HELP)
    c.set_defaults(run=cmd_crashlab)


def lab_settings(args, size: str):
    """A lab's ``config.Settings``: the store it runs on (``store_of``), ``size``, ``--bucket``, and its
    raw records under ``raw_root()``, like every command's."""
    from ckptbench import config

    return config.Settings(store_of(args), size, args.bucket, raw_root())


def _counts(text: str | None, fallback: tuple[int, ...], option: str) -> tuple[int, ...]:
    """``option``'s whole numbers above 0, comma-separated, sorted and once each; ``fallback`` when not given."""
    if text is None:
        return fallback
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or not all(v.isdigit() and int(v) > 0 for v in values):
        raise UsageError(f"{option} takes whole numbers above 0, comma-separated (such as 2,20,200), not {text!r}")
    return tuple(sorted({int(v) for v in values}))


def _merged(record, where, part: tuple[int, int]):
    """``record``, or for part K of N (``part``) of a lab split over processes, every part written
    so far under ``where``, merged (``record.disk.read``), saying which."""
    from ckptbench.record import disk

    if part == (1, 1):
        return record
    print(f"the parts written so far: {', '.join(p.name for p in disk.parts_of(where))}")
    return disk.read(where)


def cmd_scale(args) -> None:
    from ckptbench.experiments import scale
    from ckptbench.record import disk
    from ckptbench.report import tables

    settings = lab_settings(args, args.size)
    strategies = strategies_of(args.strategies)
    default = scale.AXES[args.size]
    operators = _counts(args.operators, default.operators, "--operators")
    if set(operators) - {1, 2}:
        raise UsageError(f"--operators takes 1 and/or 2 (the stateful workload has at most two), not {args.operators}")
    long_batches = default.long_batches if args.batches is None else args.batches
    if long_batches < default.windows:
        raise UsageError(f"--batches must be at least {default.windows} (one per window), not {long_batches}")
    names = tuple(a.strip() for a in args.axes.split(",") if a.strip())
    if not names or set(names) - set(scale.AXIS_NAMES):
        raise UsageError(f"--axes takes some of {','.join(scale.AXIS_NAMES)}, comma-separated, not {args.axes!r}")
    axes = scale.only(dataclasses.replace(default, operators=operators, long_batches=long_batches,
                                          partitions=_counts(args.partitions, default.partitions, "--partitions")),
                      names)
    part = parse_part(args.part, len(strategies), "the strategies asked for")
    record = scale.scale(settings, strategies, axes, part)
    where = disk.directory(settings.raw, settings.store, "scale")
    record = _merged(record, where, part)
    print("\n\n".join(table.markdown() for table in tables.scale_tables(record)))
    print(f"\nrecord: {where} "
          "(python -m ckptbench cost --partitions N projects from it; the report shows it after a bench or report run)")


def cmd_counting(args) -> None:
    from ckptbench import progress
    from ckptbench.experiments import counting
    from ckptbench.record import disk
    from ckptbench.report import tables

    settings = lab_settings(args, args.size)
    strategies = strategies_of(args.strategies)
    if args.queries is not None and args.queries < 2:
        raise UsageError(f"--queries must be at least 2 (each query's first arm is the other's in the next), "
                         f"not {args.queries}")
    with progress.shown_for(os.environ):  # the experiment's bar, shown on stderr
        overhead = counting.experiment(settings, tuple(strategies), args.queries)
    print(tables.counting_table(counting.figures(overhead, strategies)).markdown())
    print(f"\nhandler alone: {overhead.handler['on_ns'] / 1000:.1f} µs per HTTP attempt counting, "
          f"{overhead.handler['off_ns'] / 1000:.2f} µs switched off")
    print(f"record: {disk.directory(settings.raw, settings.store, 'jvm_counting')}")


def cmd_faultlab(args) -> None:
    from ckptbench import progress
    from ckptbench.experiments import faultlab
    from ckptbench.record import disk
    from ckptbench.report import faults

    if args.record:
        [record] = read_records([args.record])
        print(faults.fault_table(record))
        return
    settings = lab_settings(args, args.size)
    plan = faultlab.PLANS[args.size]
    changes = {}
    if args.profiles:
        changes["profiles"] = tuple(parse_names(args.profiles, PROFILES, "fault profile"))
    if args.workloads:
        changes["workloads"] = tuple(parse_names(args.workloads, FAULT_WORKLOADS, "workload"))
    if args.batches is not None:
        if args.batches < 1:
            raise UsageError(f"--batches must be at least 1, not {args.batches}")
        changes["batches"] = args.batches
    if args.seeds is not None:
        if args.seeds < 1:
            raise UsageError(f"--seeds must be at least 1, not {args.seeds}")
        changes["seeds"] = tuple(range(args.seeds))
    plan = dataclasses.replace(plan, **changes)
    strategies = strategies_of(args.strategies)
    runs = len(strategies or settings.measured_strategies) * len(plan.workloads) * len(plan.profiles) * len(plan.seeds)
    part = parse_part(args.part, runs, "the runs (strategies x workloads x profiles x seeds)")
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = faultlab.faultlab(settings, plan, strategies, part)
    where = disk.directory(settings.raw, settings.store, FAULTLAB)
    record = _merged(record, where, part)
    print(faults.fault_table(record))
    print(f"\nrecord: {shown(where)} (python -m ckptbench faultlab --record DIR prints its table again)")


def _crash_plan(args, points: list[str]):
    """The crash lab's plan (``crashlab.CrashPlan``): ``--size``'s, or 3 cycles of each workload,
    changed by the options given and cut to ``--part``; UsageError in one line for a bad option."""
    from ckptbench.experiments import crashlab

    plan = crashlab.PLANS[args.size] if args.size else crashlab.CrashPlan(3, ("stateless", "stateful"), ("stateless",),
                                                                           two_writer_starts=(3, 0))
    changes = {}
    if args.workloads is not None:
        changes["workloads"] = tuple(parse_names(args.workloads, crashlab.WORKLOADS, "workload"))
    if args.two_writers is not None:
        changes["two_writers"] = () if args.two_writers in ("", "none") else tuple(
            parse_names(args.two_writers, crashlab.WORKLOADS, "workload"))
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
    return dataclasses.replace(plan, **changes).in_part(*parse_part(args.part))


def cmd_crashlab(args) -> None:
    from ckptbench import progress
    from ckptbench.experiments import crashlab
    from ckptbench.record import disk
    from ckptbench.report import tables

    if args.size is not None and args.size not in crashlab.PLANS:
        raise UsageError(f"--size takes one of {', '.join(crashlab.PLANS)}, not {args.size!r}")
    settings = lab_settings(args, args.size or "cli")
    strategies = strategies_of(args.strategies)
    points = parse_names(args.points or ",".join(crashlab.DEFAULT_POINTS), crashlab.CRASH_POINTS, "crash point")
    plan = _crash_plan(args, points)
    with progress.shown_for(os.environ):  # the lab's bar, shown on stderr
        record = crashlab.crashes(settings, strategies, plan, points=tuple(points), seed=args.seed)
    where = disk.directory(settings.raw, settings.store, CRASHLAB)
    record = _merged(record, where, plan.part)
    print("\n\n".join(table.markdown() for table in tables.crash_tables(record)))
    print(f"\nrecord: {shown(where)} (seed {args.seed}; the same tables are in "
          f"{shown(results_root() / 'report' / 'index.html')} after a bench run or "
          "`python -m ckptbench report`)")
