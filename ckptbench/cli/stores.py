"""The commands about stores and what runs on them, rather than about measurements:
``strategies`` and ``fault-profiles`` (what can be measured, listed), ``probe`` (what a store can run),
``clean`` (what ended runs left in a bucket) and ``deploy`` (the flags to run a strategy in
production)."""

from __future__ import annotations

import json
import os

import ckpt_impls
import infra
from ckptbench.cli.common import STORE_HELP, UsageError, known_store, parse_names, store_of
from ckptbench.harness.stores import RUNS_ROOT
from infra.faults import describe_profiles


def register(sub) -> None:
    """Add this module's commands to the app's subcommands (``sub``, argparse's)."""
    sub.add_parser("strategies", help="list the checkpoint strategies").set_defaults(run=cmd_strategies)
    st = sub.add_parser("stores", help="list the stores and whether each can start or be reached here")
    st.add_argument("--bench", action="store_true",
                    help="print only the names of the real stores make bench measures here, space-separated")
    st.set_defaults(run=cmd_stores)
    # "faults" was this command's name: an alias, so that no script breaks.
    sub.add_parser("fault-profiles", aliases=["faults"],
                   help="list the fault profiles the metering proxy can inject").set_defaults(run=cmd_fault_profiles)
    pr = sub.add_parser("probe", help="check what each strategy needs from a store, and say which it can run")
    pr.add_argument("--store", help=STORE_HELP)
    pr.add_argument("--stores", help="several stores, comma-separated (as measure takes them), instead of --store: "
                                     "each is probed in turn, then all are shown side by side")
    pr.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO); a store the "
                                     "probe starts gets a bucket of its own. Only keys under ckptbench-probe/<run>/ "
                                     "are written, and removed at the end")
    pr.add_argument("--json", action="store_true", help="print the data as JSON instead of tables")
    pr.set_defaults(run=cmd_probe)
    cl = sub.add_parser("clean", help=f"remove what ended runs left in a bucket ({RUNS_ROOT}<run>/ of a run killed "
                                       "before its clean-up); nothing else in the bucket is touched")
    cl.add_argument("--store", help=STORE_HELP)
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


def cmd_strategies(args) -> None:
    print(ckpt_impls.describe())


def cmd_stores(args) -> None:
    from ckptbench.config import bench_stores
    from ckptbench.report.table import Table

    if args.bench:
        print(" ".join(bench_stores()))
        return
    rows = [[name, "emulator" if cls.emulator else "real", cls.unavailable_reason() or "yes"]
            for name, cls in infra.STORES.items()]
    print(Table("", ["store", "kind", "can start or be reached here"], rows).markdown())


def cmd_fault_profiles(args) -> None:
    print(describe_profiles())


def _available(name: str) -> None:
    """StoreUnavailable, in one line, when store ``name`` cannot start or be reached here."""
    reason = infra.store_class(name).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)


def cmd_probe(args) -> None:
    from ckptbench.experiments import probe
    from ckptbench.report import probing

    if args.store and args.stores:
        raise UsageError("probe takes --store or --stores, not both")
    names = parse_names(args.stores, infra.STORES, "store") if args.stores else [store_of(args)]
    for name in names:  # all checked before any starts
        _available(name)
    probed = {}
    for name in names:
        with infra.store_class(name)() as store:
            probed[name] = probe.on_store(store, args.bucket)
    if args.json:
        print(json.dumps(probed[names[0]] if len(names) == 1 else probed, indent=1))
        return
    print("\n\n".join(probing.probe_table(data) for data in probed.values()))
    if len(names) > 1:
        print("\n" + "\n\n".join(table.markdown() for table in probing.store_matrix({
            name: {"checks": data["checks"], "emulator": infra.store_class(name).emulator, "copy": data.get("copy")}
            for name, data in probed.items()})))


def cmd_clean(args) -> None:
    from ckptbench.harness import stores

    name = store_of(args)
    if not args.bucket:
        raise UsageError("clean needs --bucket: the bucket whose ended runs' prefixes to remove")
    _available(name)
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
    name = known_store(args.store or ("endpoint" if os.environ.get(deploy.ENDPOINT_ENV) else "s3"))
    if not args.bucket:
        raise UsageError("deploy needs --bucket: the S3A settings it prints are per bucket (fs.s3a.bucket.B.*)")
    store = deploy.target(name)
    if not args.no_check:
        store.check_bucket(args.bucket)
    print(deploy.text(deploy.plan(args.strategy, store, args.bucket)))
