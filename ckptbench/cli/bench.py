"""``python -m ckptbench bench``: the asv suite on one store, published as asv's HTML pages and the
report (``make bench`` runs it); on other commits (``--continuous``, ``--commits``) through
``ckptbench.cli.continuous``."""

from __future__ import annotations

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
from ckptbench.cli import continuous
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
    b.add_argument("--store", help=STORE_HELP)
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


def crash_check_plan(kinds: dict, began: dt.datetime) -> list[config.Shape]:
    """The jobs whose leaders ``bench`` crash-checks, of a store's records (``kinds``): those of its
    levers record, where this run (begun at ``began``) wrote it; none where it did not (``--bench``
    left the levers out: the older record keeps the crash check of its own run)."""
    levers = kinds.get("levers")
    if levers is None or dt.datetime.fromisoformat(levers.environment["created"]) < began:
        return []
    return [config.Shape(**{k: v for k, v in shape.items() if k != "name"}) for shape in levers.environment["shapes"]]


def job_leaders(kinds: dict, count: int):
    """The decision as the crash check asks it (``experiments.crash_check.JobLeaders``): the first
    ``count`` configurations leading for a job (``page.leaders``) on the store's records ``kinds``,
    with the crash check's rows so far in place of an earlier run's crash check record, ranked as if
    nothing were out for want of a crash test (``untested_out`` False)."""
    from ckptbench.record import results, schema
    from ckptbench.report import page

    def leaders(job: str, rows: dict[str, list[dict]]):
        check = results.Results({"experiment": config.CRASH_CHECK},
                                {name: schema.frame(name, found) for name, found in rows.items()})
        decision = page.decisions_of({**kinds, config.CRASH_CHECK: check}, untested_out=False).get(job)
        return page.leaders(decision)[:count] if decision else []

    return leaders


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


def _save_stages(settings: config.Settings, timeline: registry.Timeline) -> None:
    """The ``bench`` record of this run: each stage of its plan, planned and actual minutes."""
    from ckptbench.record import disk, results, schema

    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": config.BENCH, "store": settings.store,
           "size": settings.size, "host": socket.gethostname(),
           "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    recorder = results.Recorder()
    recorder.add("stages", timeline.rows())
    disk.save(recorder.results(env), settings)


def _crash_check(settings: config.Settings, proxied: bool, began: dt.datetime,
                 timeline: registry.Timeline) -> str | None:
    """After the suite: crash-check the leaders of the jobs its levers experiment measured
    (``crash_check_plan``), as many a round and of as many cycles as the size's plan says
    (``Plan.crash_check_leaders``, ``Plan.crash_check_cycles``), so that the report recommends
    nothing the crash lab has not run (``experiments.crash_check.check_jobs``). Returns why the
    check failed, or None."""
    from ckptbench import progress
    from ckptbench.experiments import crash_check
    from ckptbench.record import disk

    kinds = disk.read_all(settings.raw).get(settings.store, {})
    shapes = crash_check_plan(kinds, began)
    if not shapes:
        return None
    if not proxied:
        print("crash check: not run, as the crash lab needs the metering proxy: the report says which "
              "recommendations were not crash-tested")
        return None
    plan = settings.plan
    print(f"crash check of the {'configuration' if plan.crash_check_leaders == 1 else 'configurations'} each job's "
          f"decision leads with ({plan.crash_check_leaders} a round), where the crash lab has not run them: "
          f"{plan.crash_check_cycles} cycle{'s' if plan.crash_check_cycles != 1 else ''} each", flush=True)
    timeline.start(registry.CRASH_CHECK, print)
    with progress.shown_for(os.environ) as say:
        record = crash_check.check_jobs(settings, tuple(shapes), job_leaders(kinds, plan.crash_check_leaders),
                                        plan.crash_check_cycles, say=say)
    timeline.end(registry.CRASH_CHECK, print)
    return record.environment["error"]


def cmd_bench(args) -> None:
    from ckptbench import progress
    from ckptbench.harness import stores
    from ckptbench.report import page, publish

    store = store_of(args)
    parse_names(args.size, config.PLANS, "size")
    strategies = chosen_strategies(args.strategies) if args.strategies else ()
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
    settings = config.Settings(store, args.size, args.bucket, results / "raw", fault_profile, args.fault_seed, master,
                               strategies)
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
    began = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    timeline = registry.Timeline(registry.plan(args.size, _suite(env), bench, _last_minutes(settings)))
    print(f"running the {args.size} suite\n{timeline.planned_text()}", flush=True)
    subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(asv_conf)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    asv_began = time.time()
    with progress.shown_for(env, timeline.event):  # the tree as it is, in this venv: asv's existing environment
        run = subprocess.run([*asv, "run", "--config", str(asv_conf), "--python=same", "--set-commit-hash", "HEAD",
                              "--machine", machine, "--show-stderr", *(["--bench", bench] if bench else [])],
                             env=env)
    timeline.tracks((time.time() - asv_began) / 60)
    crash_error = _crash_check(settings, proxied, began, timeline)
    timeline.start(registry.PAGES, print)
    subprocess.run([*asv, "publish", "--config", str(asv_conf)], check=True, env=env)
    try:  # asv's pages load their scripts from CDNs: local copies, so that they open offline
        publish.offline(results / "html")
        offline_error = None
    except publish.NotOffline as e:
        offline_error = e
    _save_stages(settings, timeline)  # the report shows the stages so far: the pages' own is not yet known
    written = page.write(results)
    publish.link_report(results / "html")
    timeline.end(registry.PAGES, print)
    _save_stages(settings, timeline)
    print(f"\nHTML: {results / 'html' / 'index.html'}  (opens with no network, as a file or served; "
          f"asv machine {machine}; "
          f"raw results in {results / 'asv'} and {results / 'raw'})")
    print(f"report: {written[0]} ({len(written) - 1} figures beside it)")
    if offline_error is not None:
        raise UsageError(f"the HTML needs the network to open: {offline_error}")
    if run.returncode:
        raise UsageError("some benchmarks failed: they are marked failed in the HTML; asv's output above says why")
    if crash_error:
        raise UsageError(f"{crash_error}: the report leaves out the configurations it did not check")
