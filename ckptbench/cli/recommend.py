"""``python -m ckptbench recommend``: which configuration (a checkpoint manager and Spark's own
checkpoint levers) one streaming job should run on the user's own store, from the smallest set of
measurements that decides it, made there and then (``ckptbench.experiments.recommend``: the
probe, the race, the staged levers and the crash check).

This module parses and checks the command line, passes the experiment the decision
(``report.page.recommend_decision``, which ranks the configurations between its stages), and
prints and writes the result: the one record and the page (``report.recommendation``) in
``--out``, only once everything has run. Bad input ends before any store starts (a missing
bucket: once the store is up, before anything runs on it), in one line and exit status 2, with
nothing written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import infra
from ckpt_impls import jars
from ckptbench import config, progress
from ckptbench.cli.common import UsageError, chosen_strategies, known_store, results_root
from ckptbench.experiments import recommend as experiment

if TYPE_CHECKING:  # imported where used: the decision and the record bring pandas to every command's start
    from ckptbench import decide


def register(sub) -> None:
    """Add ``recommend`` to the app's subcommands (``sub``, argparse's)."""
    r = sub.add_parser("recommend", help="measure the configurations of one streaming job on your store and say "
                                         "which to run, with the flags to run it (docs/recommend.md)")
    r.add_argument("--store", required=True, help=f"one of: {', '.join(infra.STORES)}")
    r.add_argument("--bucket", help="an existing bucket (needed for s3, endpoint and an external MinIO); a store "
                                    "this command starts gets a fresh one. Only keys under ckptbench-runs/<run>/ "
                                    "are written, and removed at the end")
    r.add_argument("--workload", required=True, help="stateless or stateful (an aggregation over --state-keys keys)")
    r.add_argument("--provider", help="the state store of a stateful job: hdfs (default) or rocksdb")
    r.add_argument("--partitions", type=int, required=True, help="shuffle partitions (a state file each per batch)")
    r.add_argument("--trigger", required=True, help="the job's trigger interval, such as 10s, 500ms or 2m: money "
                                                    "per month is at one batch per interval")
    r.add_argument("--state-keys", type=int, help="keys of a stateful job's state, each updated every batch "
                                                  "(default 1000)")
    r.add_argument("--sink", default="noop", help=f"one of: {', '.join(config.SINKS)} (default noop)")
    r.add_argument("--batches", type=int, default=experiment.BATCHES,
                   help=f"measured batches per configuration, split over its --repeats queries, each after "
                        f"{experiment.WARMUP} warm-up (default {experiment.BATCHES})")
    r.add_argument("--repeats", type=int, default=experiment.REPEATS,
                   help="independent queries per configuration, run in mirrored rounds so that a busy machine's "
                        f"drift reaches every configuration alike (default {experiment.REPEATS})")
    r.add_argument("--out", help="where the record and its page go (default results/recommend/<store>-<job>/)")
    r.add_argument("--strategies", help=argparse.SUPPRESS)  # tests: fewer candidates
    r.add_argument("--crash-cycles", type=int, default=experiment.CRASH_CYCLES,
                   help=argparse.SUPPRESS)  # tests: 0 skips it
    r.add_argument("--ranked-at", type=int, default=experiment.RANKED_AT,
                   help=argparse.SUPPRESS)  # tests: the two-step run at a few partitions
    r.set_defaults(run=cmd_recommend)


def shape_of(args) -> config.Shape:
    """The job ``args`` describe; UsageError in one line for a value out of range or an option
    that does not apply to the job."""
    if args.workload == "stateless":
        for option, value in (("--provider", args.provider), ("--state-keys", args.state_keys)):
            if value is not None:
                raise UsageError(f"{option} applies to a stateful job (its state store), not a stateless one: "
                                 f"leave it out or pass --workload stateful")
    try:
        return config.Shape(args.workload, args.provider or "hdfs", args.partitions, config.parse_trigger(args.trigger),
                            1_000 if args.state_keys is None else args.state_keys, args.sink)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _checked(args) -> tuple[config.Shape, list[str], Path]:
    """The job, the strategies to measure (Spark's default first) and the output directory, or
    UsageError: everything that can be said wrong before a store starts."""
    known_store(args.store)
    shape = shape_of(args)
    if not 3 <= args.batches <= 1000:
        raise UsageError(f"--batches must be 3 to 1000 (a p50 of fewer says little), not {args.batches}")
    if not 1 <= args.repeats <= args.batches:
        raise UsageError(f"--repeats must be 1 to --batches ({args.batches}: each query measures at least one "
                         f"batch), not {args.repeats}")
    if args.crash_cycles < 0:
        raise UsageError(f"--crash-cycles must be 0 (no crash check) or more, not {args.crash_cycles}")
    if args.ranked_at < 1:
        raise UsageError(f"--ranked-at must be 1 or more, not {args.ranked_at}")
    if args.bucket and experiment.fresh_store(args.store):
        raise UsageError(f"--store {args.store} starts a store of its own with a fresh bucket: leave out --bucket "
                         "(it names an existing bucket on a store you run: s3, endpoint or an external minio)")
    reason = infra.store_class(args.store).unavailable_reason()
    if reason:
        raise infra.StoreUnavailable(reason)
    strategies = list(chosen_strategies(args.strategies))
    out = Path(args.out) if args.out else results_root() / config.RECOMMEND / f"{args.store}-{shape.name}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: name a directory (it is made if missing)")
    return shape, strategies, out


def _deploy_plan(said: dict, strategy: str) -> dict:
    """deploy's plan (``ckptbench.deploy.plan``) for ``strategy`` on the measured store's endpoint
    and bucket: the same flags ``python -m ckptbench deploy`` prints, no keys."""
    from ckptbench import deploy

    target = deploy.Target(infra.store_class(said["store"]), said["endpoint"] or "")
    return deploy.plan(strategy, target, said["bucket"])


def leaders(record, job: str | None = None) -> list[decide.Candidate]:
    """The decision's chosen configuration for ``job`` (by default the one asked about) on ``record``
    and its runner-up, those there are, ranked as if nothing were out for want of a crash test
    (``untested_out`` False): what the experiment crash-checks, and measures at the job's own
    partitions when it ranked them at fewer."""
    from ckptbench.report import page

    return page.leaders(page.recommend_decision(record, untested_out=False, job=job))


def cmd_recommend(args) -> None:
    from ckptbench.record import disk
    from ckptbench.report import page, recommendation

    shape, strategies, out = _checked(args)
    jars.spark_jars()  # a missing jar is said before any store starts
    with tempfile.TemporaryDirectory(prefix="ckptbench-recommend-") as raw, progress.shown_for(os.environ):
        settings = config.Settings(args.store, config.RECOMMEND, args.bucket, Path(raw))
        record = experiment.recommend(settings, shape, strategies, leaders, args.trigger, args.batches,
                                      args.crash_cycles, args.repeats, args.ranked_at)
    said = record.environment["recommend"]
    decision = page.recommend_decision(record)
    if decision.chosen is not None:
        said["deploy"] = _deploy_plan(said, decision.chosen.strategy)
    print("\n" + recommendation.text(record, decision))
    disk.write(record, out)  # an earlier record there is replaced, nothing else in the directory
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    written = recommendation.write(out, record, decision, created)
    took = ", ".join(f"{k} {v / 60:.1f}" for k, v in said["seconds"].items())
    print(f"\nrecord: {out}; page: {written} (minutes: {took})")
