"""The commands that read recorded results and run nothing: ``report`` (the HTML report),
``cost`` (what the recorded requests would cost on AWS S3) and ``drift`` (how far two runs' values
moved apart)."""

from __future__ import annotations

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
    d = sub.add_parser("drift", help="how far every value moved between two runs (say, of the same commit), and "
                                     "whether the recommendation per store and job changed")
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
    from ckptbench.report import page

    a, b = Path(args.a), Path(args.b)
    said, missing = [], None
    try:
        said.append(drift.compare(a, b))
    except drift.NoResults as e:
        missing = e
    recommended = [page.recommendations(drift.raw_beside(path)) for path in (a, b)]
    if any(recommended):
        said.append(drift.recommendations(*recommended))
    if not said:
        raise UsageError(str(missing))
    print("\n".join(said))


def cmd_cost(args) -> None:
    from ckptbench.metrics import cost
    from ckptbench.report import costs

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
    print(costs.cost_table(records, args.trigger, trigger).markdown())


def _cost_at_scale(args, trigger: float) -> None:
    """``cost --partitions N``: the requests of one batch at N shuffle partitions, from each operation's
    fit against partitions in the recorded scale results, per month and in dollars."""
    from ckptbench.report import costs

    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, not {args.partitions}")
    strategies = parse_names(args.strategy, ckpt_impls.STRATEGIES, "strategy") if args.strategy else None
    records = read_records(args.record, "scale", "`python -m ckptbench scale` or `make bench`")
    others = [r.environment["experiment"] for r in records if r.environment["experiment"] != "scale"]
    if others:
        raise UsageError(f"--partitions needs scale records (results/raw/<store>-scale), not {', '.join(others)}")
    table, fitted = costs.cost_at_scale_table(records, args.partitions, args.trigger, trigger, strategies)
    print(table.markdown())
    if not fitted:
        raise UsageError("no strategy asked for has a partitions fit in the scale results")
