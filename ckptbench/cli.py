"""ckptbench's command line: `python -m ckptbench COMMAND` (see --help).

Bad input (an unknown strategy or store, an unreachable endpoint, rejected credentials,
a missing bucket, missing jars) ends with one line on stderr saying what is wrong and
what to do, and exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import dataclasses
import json
import sys
from pathlib import Path

import ckpt_impls
import infra
from ckpt_impls.jars import JarsMissing

RESULTS = Path(__file__).resolve().parent.parent / "results"


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
    from . import measure

    stores = _names(args.stores, infra.STORES, "store")
    strategies = _names(args.strategies, ckpt_impls.STRATEGIES, "strategy")
    if args.batches < 20 and not args.allow_few_batches:
        raise UsageError("--batches below 20 gives unstable percentiles; pass --allow-few-batches to insist")
    rows = measure.run(stores, strategies, args.batches, args.warmup, args.bucket, args.master)
    text = measure.table(rows)
    print(text)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"measure-{stamp}.md").write_text(text + "\n")
    (RESULTS / f"measure-{stamp}.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    print(f"\nwritten: results/measure-{stamp}.md and .json")


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
    m.set_defaults(run=cmd_measure)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except (UsageError, infra.StoreUnavailable, ckpt_impls.UnknownStrategy, JarsMissing) as e:
        print(f"ckptbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ckptbench: interrupted", file=sys.stderr)
        return 130
    return 0
