"""The commands that measure each strategy against stores there and then, in one run and one
table: ``measure`` (commit latency and requests beside each store's floor) and ``contract``
(Spark's checkpoint contract, PASS/FAIL per check)."""

from __future__ import annotations

import argparse
import datetime as dt

import infra
from ckptbench.cli.common import (
    BUCKET_HELP,
    MASTER_HELP,
    SPARK_HELP,
    SPARK_VENVS,
    STORE_HELP,
    STRATEGIES_HELP,
    ContractFailed,
    UsageError,
    fault_options,
    parse_master,
    parse_names,
    parse_proxy_profile,
    raw_root,
    read_records,
    shown,
    store_of,
    strategies_of,
)
from ckptbench.config import DEFAULT_MASTER, PLANS


def register(sub) -> None:
    """Add this module's commands to the app's subcommands (``sub``, argparse's)."""
    m = sub.add_parser("measure", help="walCommit/commitOffsets per strategy x store, beside the store's floor")
    m.add_argument("--stores", default="embedded,ceph",
                   help=f"comma-separated, of: {', '.join(infra.STORES)} (default: embedded,ceph; "
                        "stores that cannot start here are skipped with the reason)")
    m.add_argument("--strategies", help=STRATEGIES_HELP)
    m.add_argument("--batches", type=int, default=20, help="measured batches per run (default 20)")
    m.add_argument("--warmup", type=int, default=5, help="batches run first and left out (default 5)")
    m.add_argument("--size", choices=list(PLANS), default="quick",
                   help="the JVM's warm-up and the floor's samples of this run size: "
                        + ", ".join(f"{k} {p.floor_samples} floor samples" for k, p in PLANS.items())
                        + " (default quick)")
    m.add_argument("--allow-few-batches", action="store_true", help=argparse.SUPPRESS)
    m.add_argument("--bucket", help="an existing bucket (needed for s3/endpoint/external MinIO); "
                                    "local stores get a fresh one")
    m.add_argument("--master", default=DEFAULT_MASTER, help=MASTER_HELP)
    m.add_argument("--record", nargs="+", metavar="DIR",
                   help="print the table of recorded results (results/raw/<store>-measure) instead of measuring")
    m.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    fault_options(m, "none")
    m.set_defaults(run=cmd_measure)
    ct = sub.add_parser("contract", help="Spark's checkpoint contract, checked on each strategy against a store "
                                         "(PASS/FAIL per check; status 1 when one fails)")
    ct.add_argument("--store", help=STORE_HELP)
    ct.add_argument("--bucket", help=BUCKET_HELP)
    ct.add_argument("--strategies", help=STRATEGIES_HELP)
    ct.set_defaults(run=cmd_contract)


def cmd_measure(args) -> None:
    from ckptbench.experiments import measure
    from ckptbench.record import disk
    from ckptbench.report import tables

    if args.record:
        print(tables.measure_table(read_records(args.record)))
        return
    stores = parse_names(args.stores, infra.STORES, "store")
    strategies = strategies_of(args.strategies)
    fault_profile = parse_proxy_profile(args.fault_profile)
    if args.batches < 20 and not args.allow_few_batches:
        raise UsageError("--batches below 20 gives unstable percentiles; pass --allow-few-batches to insist")
    master = parse_master(args.master)
    raw = raw_root()
    out = raw.parent
    records = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, master, raw,
                          fault_profile, args.fault_seed, args.size)
    text = tables.measure_table(records)
    print(text)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (out / f"measure-{stamp}.md").write_text(text + "\n")
    written = [str(shown(disk.directory(raw, r.environment["store"], "measure"))) for r in records]
    print(f"\nwritten: {shown(out)}/measure-{stamp}.md; records: {', '.join(written)} "
          f"(python -m ckptbench measure --record DIR prints a record's table again)")


def cmd_contract(args) -> None:
    """Spark's checkpoint contract on each strategy, against the store; status 1 when a check fails."""
    from ckptbench import config
    from ckptbench.experiments import contract
    from ckptbench.harness import stores
    from ckptbench.harness.spark import session
    from ckptbench.report import tables

    name = store_of(args)
    strategies = strategies_of(args.strategies)
    settings = config.Settings(name, "smallest", args.bucket, raw_root())
    with stores.started_store(settings) as (store, bucket):
        spark = session(strategies[0], {bucket: store})
        try:
            found = {s: contract.run(spark, s, store, bucket, store.run_prefix) for s in strategies}
        finally:
            spark.stop()
    print(tables.contract_table(found))
    if not all(ok for checks in found.values() for _, ok, _ in checks):
        raise ContractFailed(", ".join(s for s, checks in found.items() if not all(ok for _, ok, _ in checks)))
