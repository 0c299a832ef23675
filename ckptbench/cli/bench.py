"""``python -m ckptbench bench``: the asv suite on one store or several, published as asv's HTML pages
and one report (``make bench`` runs it), resumable after an interruption; on other commits
(``--continuous``, ``--commits``) through ``ckptbench.cli.continuous``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import infra
from ckpt_impls import jars
from ckptbench import config
from ckptbench.cli import continuous, crash_check
from ckptbench.cli.common import (
    BUCKET_HELP,
    MASTER_HELP,
    RESULTS,
    SPARK_HELP,
    SPARK_VENVS,
    STORE_HELP,
    UsageError,
    chosen_strategies,
    fault_options,
    parse_master,
    parse_names,
    parse_proxy_profile,
    results_root,
    store_of,
)
from ckptbench.config import DEFAULT_MASTER, PLANS, ROOT, Settings
from ckptbench.experiments import registry

#: The asv benchmarks (name prefixes) that need the metering proxy: the crash and fault labs, the
#: log histories (``stores.started_store(needs_proxy=...)``), the proxy's own overhead and the COPY
#: projected through its ``aws-projection`` profile. ``bench`` leaves them out on a store it cannot front.
PROXY_BENCHMARKS = ("crashlab.", "faultlab.", "outages.", "manifest_compaction.", "floor.ProxyOverhead",
                    "rename_cost.ProjectedCopy")


def register(sub) -> None:
    """Add ``bench`` to the app's subcommands (``sub``, argparse's)."""
    b = sub.add_parser("bench", help="run the asv suite and publish it (HTML, report and plots under results/)")
    b.add_argument("--store", metavar="A,B", help="one store or several, comma-separated, each a bench of its own in "
                   "one run (the experiments that time nothing run first, every store's beside each other; an "
                   "emulator beside a real store runs only the store-alone benchmarks, its row of the report's "
                   "matrix of stores): " + STORE_HELP)
    b.add_argument("--resume", action="store_true", help="resume the interrupted bench of the same stores, size and "
                   "commit: the experiments whose records it saved are not run again")
    b.add_argument("--size", choices=list(PLANS), default=os.environ.get(Settings.ENV["size"]) or "quick",
                   help="quick (default), full, or smallest (every benchmark once, tiny; for CI)")
    b.add_argument("--bucket", help=BUCKET_HELP)
    b.add_argument("--strategies", metavar="A,B", help="measure only these strategies (comma-separated), and "
                   "Spark's default, which every verdict is against (default: every one the loaded S3A can run); "
                   "asv keeps a history of each strategy measured")
    b.add_argument("--bench", "-b", help="only benchmarks matching this regular expression (asv run --bench)")
    b.add_argument("--continuous", nargs=2, metavar=("BASE", "HEAD"),
                   help="asv continuous: build and measure both commits (each in asv's virtualenv, not this tree), "
                        "print what changed, publish, and exit with status 1 when a benchmark got worse by more "
                        "than --factor at HEAD (docs/regression-tracking.md)")
    b.add_argument("--commits", metavar="A..B",
                   help="asv run A..B: build and measure every commit after A up to B, publish the history and "
                        "print asv's regressions page")
    b.add_argument("--factor", help=f"with --continuous: worse means above BASE's value x this (default "
                                    f"{continuous.DEFAULT_FACTOR}; 1 flags any increase)")
    b.add_argument("--results", help="results directory (default: results/ in the repository; results-spark<v>/ "
                                     "on another Spark than the default)")
    b.add_argument("--master", default=os.environ.get(Settings.ENV["master"]) or DEFAULT_MASTER,
                   help=MASTER_HELP)
    b.add_argument("--spark", choices=list(SPARK_VENVS), help=SPARK_HELP)
    fault_options(b, os.environ.get(Settings.ENV["fault_profile"]) or "none")
    b.set_defaults(run=cmd_bench)


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


def _suite(env: dict) -> dict[str, list[str]]:
    """The asv suite's benchmarks by set-up function (``benchmarks.common.listing``), as asv would
    discover them with ``env``'s settings: in a process of the suite's own, as asv's."""
    listed = subprocess.run([sys.executable, "-c", "import json; from benchmarks import common; "
                             "print(json.dumps(common.listing()))"],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(listed.stdout.splitlines()[-1])


def _last_minutes(settings: config.Settings) -> dict[str, float]:
    """Each stage's actual minutes in the last bench of this store and size (its ``bench`` record under
    ``settings.raw``), where one was recorded."""
    from ckptbench.record import disk

    where = disk.directory(settings.raw, settings.store, config.BENCH)
    if not (where / "environment.json").exists():
        return {}
    last = disk.read(where)
    if last.environment.get("size") != settings.size:
        return {}
    return {row["stage"]: row["actual_min"] for row in last.stages.to_dict("records") if row["actual_min"] >= 0}


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _bench_run(settings: list[config.Settings], resume: bool) -> str:
    """The id of this bench run: a new one; with ``resume``, that of the interrupted run of the same
    stores, size and commit, whose records it then takes (UsageError where there is none)."""
    from ckptbench.record import disk

    if not resume:
        return f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{_head()[:12]}"
    found = set()
    for s in settings:
        where = disk.directory(s.raw, s.store, config.BENCH)
        env = json.loads((where / "environment.json").read_text()) if (where / "environment.json").exists() else {}
        found.add((env.get("bench_run"), env.get("size"), env.get("commit"), env.get("finished", True)))
    [(run, size, commit, finished)] = found if len(found) == 1 else [(None, None, None, True)]
    if run is None or finished or size != settings[0].size or commit != _head():
        raise UsageError(f"nothing to resume: no interrupted bench of {', '.join(s.store for s in settings)} at "
                         f"size {settings[0].size} on commit {_head()[:8]} under {settings[0].raw}; "
                         "run bench without --resume")
    return run


def _save_stages(settings: config.Settings, timeline: registry.Timeline, stores: list[str], finished: bool) -> None:
    """The ``bench`` record of this run on ``settings.store``: each stage of its plan, planned and
    actual minutes, what ran beside it; the plan's ``stores``, and whether the run ``finished``."""
    from ckptbench.record import disk, results, schema

    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": config.BENCH, "store": settings.store,
           "size": settings.size, "host": socket.gethostname(), "commit": _head(), "stores": stores,
           "finished": finished, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    recorder = results.Recorder()
    recorder.add("stages", timeline.rows(settings.store))
    disk.save(recorder.results(env), settings)


def _expression(wanted: str | None, unwanted: list[str], within: str | None = None) -> str | None:
    """asv's ``--bench``: the benchmarks ``wanted`` selects (None: all) but those ``unwanted`` selects,
    of those ``within`` selects (None: all)."""
    if not unwanted and within is None:
        return wanted
    return ("^" + "".join(f"(?!{u})" for u in unwanted) + (f"(?={within})" if within else "")
            + (f"(?=.*(?:{wanted}))" if wanted else ""))


def cmd_bench(args) -> None:
    from ckptbench import progress
    from ckptbench.cli import untimed
    from ckptbench.harness import stores
    from ckptbench.report import page, publish

    names = list(dict.fromkeys(store_of(argparse.Namespace(store=name)) for name in (args.store or "").split(",")))
    real = [store for store in names if not infra.store_class(store).emulator]
    names = [*real, *(store for store in names if store not in real)]  # an emulator beside real stores: its row, last
    parse_names(args.size, config.PLANS, "size")
    strategies = chosen_strategies(args.strategies) if args.strategies else ()
    fault_profile = parse_proxy_profile(args.fault_profile)
    master = parse_master(args.master)
    commits = continuous.checked(args)  # --continuous, --commits
    if len(names) > 1 and commits:
        raise UsageError("--continuous and --commits run on one store: name one with --store")
    # Fail here, in one line, on a store that cannot start or be metered (an https endpoint,
    # wrong keys, a missing bucket), not after asv has spent minutes on it.
    proxied = {}
    for store in names:
        with stores.started_stores([store], args.bucket, say=lambda line: None,
                                   fault_profile=fault_profile) as started:
            if not started:
                raise infra.StoreUnavailable(infra.store_class(store).unavailable_reason())
            proxied[store] = getattr(started[store][0], "proxy", None) is not None
    results = Path(args.results).resolve() if args.results else results_root()
    if fault_profile != "none":
        print(f"fault profile: {fault_profile} (seed {args.fault_seed}), injected by the metering proxy")
    benches = []
    for store in names:
        if not proxied[store]:
            print(f"store {store} is not plain http://, so no metering proxy can front it: requests are counted in "
                  f"Spark's JVMs, and the benchmarks that need the proxy are left out ({', '.join(PROXY_BENCHMARKS)})")
        print(f"store: {store}, " + ("a real store" if store in real else
                                     "an emulator: its timings are not a real store's (Ceph RGW, the default where "
                                     "it can start, gives real ones)" + (
                                         "; beside a real store it runs only the store-alone benchmarks, its row of "
                                         "the report's matrix of stores" if real else "")))
        benches.append(config.Settings(store, args.size, args.bucket, results / "raw", fault_profile, args.fault_seed,
                                       master, strategies))
    if commits:  # asv builds and measures other commits (ckptbench.cli.continuous)
        [settings] = benches
        bench = _expression(args.bench, [] if proxied[settings.store] else list(map(re.escape, PROXY_BENCHMARKS)))
        env = {**os.environ, **settings.env()}
        print(f"running the {args.size} suite on each commit", flush=True)
        with progress.shown_for(env):
            continuous.run(args, env, _machine(settings.store), results, bench, config.Settings.ENV["raw"])
        return
    run_id = _bench_run(benches, args.resume)
    benches = [dataclasses.replace(s, bench_run=run_id) for s in benches]
    asv_conf = _asv_config(results)
    # asv drops PYTHONPATH from its benchmark processes, which would then import whichever checkout
    # the venv points at (a worktree's runs would bench main's code): this checkout's, always.
    envs = {s.store: {**os.environ, **s.env(), "ASV_PYTHONPATH": str(ROOT)} for s in benches}
    suite = _suite(envs[names[0]])
    first_only = registry.left_out(suite, args.size)
    expressions = {store: _expression(args.bench, [*([] if proxied[store] else map(re.escape, PROXY_BENCHMARKS)),
                                                   *([first_only] if i and first_only else [])],
                                      registry.emulator_row(suite) if real and store not in real else None)
                   for i, store in enumerate(names)}
    asv = [sys.executable, "-m", "asv"]
    timeline = registry.Timeline([stage for i, s in enumerate(benches) for stage in registry.plan(
        args.size, suite, expressions[s.store], _last_minutes(s), s.store, first=i == 0,
        publishes=i == len(benches) - 1)])
    print(f"running the {args.size} suite (bench run {run_id})\n{timeline.planned_text()}", flush=True)
    for s in benches:
        _save_stages(s, timeline, names, finished=False)  # what --resume finds, should the run be interrupted
    for line in untimed.run(timeline, [(s, envs[s.store]) for s in benches], results / "logs", print):
        print(line)
    failed = []
    for s in benches:
        timeline.store = s.store
        machine = _machine(s.store)
        subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(asv_conf)],
                       check=True, env=envs[s.store], stdout=subprocess.DEVNULL)
        asv_began = time.time()
        bench = expressions[s.store]
        with progress.shown_for(envs[s.store], timeline.event):  # the tree as it is, in this venv
            run = subprocess.run([*asv, "run", "--config", str(asv_conf), "--python=same", "--set-commit-hash", "HEAD",
                                  "--machine", machine, "--show-stderr", *(["--bench", bench] if bench else [])],
                                 env=envs[s.store])
        timeline.tracks((time.time() - asv_began) / 60)
        failed += [s.store] if run.returncode else []
        _save_stages(s, timeline, names, finished=False)
    crash_errors = crash_check.run([(s, envs[s.store]) for s in benches], proxied, timeline, results / "logs")
    timeline.store = names[-1]
    timeline.start(registry.PAGES, print)
    subprocess.run([*asv, "publish", "--config", str(asv_conf)], check=True, env=envs[names[0]])
    try:  # asv's pages load their scripts from CDNs: local copies, so that they open offline
        publish.offline(results / "html")
        offline_error = None
    except publish.NotOffline as e:
        offline_error = e
    for s in benches:  # the report shows the stages so far: the pages' own is not yet known
        _save_stages(s, timeline, names, finished=True)
    written = page.write(results)
    publish.link_report(results / "html")
    timeline.end(registry.PAGES, print)
    _save_stages(benches[-1], timeline, names, finished=True)
    print(f"\nHTML: {results / 'html' / 'index.html'}  (opens with no network, as a file or served; "
          f"asv machines {', '.join(map(_machine, names))}; "
          f"raw results in {results / 'asv'} and {results / 'raw'})")
    print(f"report: {written[0]} ({len(written) - 1} figures beside it)")
    if offline_error is not None:
        raise UsageError(f"the HTML needs the network to open: {offline_error}")
    if failed:
        raise UsageError(f"some benchmarks failed on {', '.join(failed)}: they are marked failed in the HTML; "
                         "asv's output above says why")
    if crash_errors:
        raise UsageError(f"{'; '.join(crash_errors)}: the report leaves out the configurations it did not check")


def _machine(store: str) -> str:
    """asv's machine for ``store``: asv keys results by machine, and one per store and Spark version
    keeps each a series of its own."""
    return f"{socket.gethostname()}-{store}-spark{jars.spark_version()}"
