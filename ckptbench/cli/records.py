"""The commands that read recorded results and run nothing: ``report`` (the HTML report),
``cost`` (what the recorded requests would cost on AWS S3) and ``drift`` (how far two runs' values
moved apart)."""

from __future__ import annotations

import math
from pathlib import Path

import ckpt_impls
from ckptbench.cli.common import UsageError, parse_names, read_records, results_root


def register(sub) -> None:
    """Add this module's commands to the app's subcommands (``sub``, argparse's)."""
    r = sub.add_parser("report", help="the HTML report (recommendation, tables, figures) from the recorded results")
    r.add_argument("--results", help="results directory (default: results/ in the repository; results-spark<v>/ "
                                     "on another Spark than the default)")
    r.set_defaults(run=cmd_report)
    c = sub.add_parser("cost", help="what the measured requests would cost on AWS S3 (a projection)")
    c.add_argument("--trigger", default="10s", help="the query's trigger interval (default 10s)")
    c.add_argument("--record", nargs="+", metavar="DIR",
                   help="streaming records (default: every results/raw/*-streaming; with --partitions, every "
                        "results/raw/*-scale)")
    c.add_argument("--partitions", type=int, metavar="N",
                   help="project to N shuffle partitions from the slopes in the recorded scale results")
    c.add_argument("--strategy", help="with --partitions: comma-separated strategies (default: all recorded)")
    c.set_defaults(run=cmd_cost)
    d = sub.add_parser("drift", help="how far every value moved between two runs (say, of the same commit)")
    d.add_argument("a", help="a results directory (bench --results) or an asv result file")
    d.add_argument("b", help="another")
    d.set_defaults(run=cmd_drift)


def cmd_report(args) -> None:
    from ckptbench.record import disk
    from ckptbench.report import page

    out = Path(args.results).resolve() if args.results else results_root()
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


def cmd_cost(args) -> None:
    from ckptbench import metrics
    from ckptbench.metrics import cost
    from ckptbench.record import results

    try:
        trigger = cost.parse_interval(args.trigger)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.partitions is not None:
        _cost_at_scale(args, trigger)
        return
    if args.strategy:
        raise UsageError("--strategy goes with --partitions (the projection from the scale results)")
    records = read_records(args.record, "streaming")
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
    from ckptbench.record import results

    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    strategies = parse_names(args.strategy, ckpt_impls.STRATEGIES, "strategy") if args.strategy else None
    records = read_records(args.record, "scale", "`python -m ckptbench scale` or `make bench`")
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
