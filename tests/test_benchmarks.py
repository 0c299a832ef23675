"""Every asv benchmark, in its smallest form, produces a number (not how fast: that is the suite's job).

Runs the README's main command, `python -m ckptbench bench`, on the embedded store with
CKPT_BENCH_SIZE=smallest into a temporary results directory, so a broken benchmark, a broken
setup_cache or a broken publish fails CI. The labs (crash cycles, faults) make it the longest test, so
it starts with the session and runs beside the others (conftest.py ``beside_the_suite``); the timeout
only guards against a hang.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import browser  # tests/browser.py
import pytest

from benchmarks.scale import ScaleByOperators, ScaleByPartitions, ScaleMemory, ScaleSlopes
from ckptbench import config, metrics
from ckptbench.experiments import crashlab, registry, scale
from ckptbench.record import disk
from ckptbench.report import page as report
from helpers import ended_beside, skip_unless_ci
from infra.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parent.parent
#: Against a hang only: well above the run's own time on 2 cores.
TIMEOUT_S = 2400
#: The strategies the smallest bench measures: one of each kind (rename-based, one PUT), as every
#: benchmark and lab runs per strategy alike; the suite's own tests run each strategy.
STRATEGIES = ("rename", "conditional")


def smallest_bench(workdir: Path) -> subprocess.Popen:
    """`python -m ckptbench bench --store embedded --size smallest --strategies ...` into ``workdir``,
    output to a file.

    HOME is ``workdir``: asv keeps its machine file in ~/.asv-machine.json.
    """
    log = (workdir / "output.txt").open("w")
    return subprocess.Popen([sys.executable, "-m", "ckptbench", "bench", "--store", "embedded", "--size", "smallest",
                             "--strategies", ",".join(STRATEGIES), "--results", str(workdir / "results")],
                            cwd=ROOT, env={**os.environ, "HOME": str(workdir)}, stdout=log, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


# The run starts with the session and goes on beside the other tests (conftest.py), checked last.
# The longest of the children, it is niced less than the others so that it ends with the suite.
pytestmark = [pytest.mark.slow, pytest.mark.beside_the_suite.with_args(smallest_bench, niceness=5)]


def _values(result) -> list:
    """A benchmark's numbers: one, or one per parameter combination."""
    return result if isinstance(result, list) else [result]


@pytest.fixture(scope="module")
def bench(request) -> tuple[Path, str]:
    """The smallest bench's results directory and output, once it has ended well."""
    if EmbeddedStore.unavailable_reason() is not None:
        pytest.skip(str(EmbeddedStore.unavailable_reason()))
    returncode, workdir, output = ended_beside(request.config, smallest_bench, TIMEOUT_S, "the smallest bench")
    assert returncode == 0, output[-5000:]
    return workdir / "results", output


def test_every_benchmark_produces_a_number(bench, tmp_path):
    results, output = bench
    # asv holds back the set-up's own output; its progress reaches the terminal through a file.
    for bar in ("streaming queries", "store alone", "compaction histories", "scale axes", "configurations"):
        assert re.search(rf"^{bar}: 100%", output, re.M), output[-5000:]
    # The plan, said first, and each stage as it ended; its record holds each stage's minutes.
    assert re.search(r"^the plan \(\d+ min planned\):$", output, re.M), output[:3000]
    stages = disk.read_all(results / "raw")["embedded"][config.BENCH].stages.set_index("stage")
    for experiment in registry.EXPERIMENTS:  # each stage said with its store
        assert re.search(rf"stage embedded {experiment.title}: [\d.]+ min \([\d.]+ planned\)", output), experiment
        assert stages.actual_min[experiment.name] > 0, stages
    # The labs that time nothing ran first, beside each other, once: asv's set-ups took their records.
    assert stages.beside[config.CRASHLAB] == "embedded fault lab" and stages.beside["streaming"] == "", stages
    assert output.count("stage embedded crash lab: started") == 1, output[-5000:]
    assert stages.actual_min[registry.TRACKS] > 0 and stages.actual_min[config.CRASH_CHECK] > 0, stages
    assert stages.actual_min[registry.PAGES] > 0, stages  # the record's second writing, after the pages
    # What times nothing ran its JVMs with C1 alone and the serial collector; what is timed did not.
    kinds = disk.read_all(results / "raw")["embedded"]
    for name in (config.CRASHLAB, config.FAULTLAB, config.CRASH_CHECK):
        assert "-XX:+UseSerialGC" in kinds[name].environment["jvm_flags"], (name, kinds[name].environment)
    assert "-XX:+UseSerialGC" not in kinds["streaming"].environment["jvm_flags"]

    benchmarks = json.loads((results / "asv" / "benchmarks.json").read_text())
    names = [name for name in benchmarks if name != "version"]
    assert len(names) >= 30, names
    [run] = [p for p in (results / "asv").glob("*/*.json") if p.name != "machine.json"]
    recorded = json.loads(run.read_text())
    column = recorded["result_columns"].index("result")
    value = {name: _values(recorded["results"][name][column]) if name in recorded["results"] else [None]
             for name in names}
    # COPY's throughput is n/a by design where its per-MiB cost is no real share of a PUT's
    # (metrics.copy_fit): moto's in-memory COPY can look so on a loaded machine.
    [share] = value["rename_cost.CopyThroughput.track_copy_share_of_put"]
    if share < metrics.COPY_MOVES_DATA:
        [mb_per_s] = value.pop("rename_cost.CopyThroughput.track_copy_mb_per_s")
        assert math.isnan(mb_per_s), mb_per_s
    # Spark's levers (benchmarks/levers.py): no number is the answer where Spark refused a
    # configuration (track_refused 1, the others NaN); the smallest run has both a refused
    # configuration (async progress on the RocksDB job) and measured ones, and no cell that is neither.
    refused = value["levers.Levers.track_refused"]
    assert {0, 1} == set(refused), refused
    value.update({name: [v for v, r in zip(values, refused, strict=True)
                         if r == 0 or (r == 1 and name == "levers.Levers.track_refused")]
                  for name, values in value.items() if name.startswith("levers.")})
    missing = {name: values for name, values in value.items()
               if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)}
    assert not missing, f"benchmarks without a number: {missing}\n{output[-3000:]}"

    # The run against itself: every value found in both, none moved.
    drift = subprocess.run([sys.executable, "-m", "ckptbench", "drift", str(results), str(run)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert drift.returncode == 0, drift.stderr
    numbers = sum(len(values) for values in value.values())
    assert re.search(rf"^all +{numbers} values +median move +0\.0% +within 15%: +100%$", drift.stdout, re.M), \
        drift.stdout
    assert "differ" not in drift.stdout

    # Against a run on another store: said, since what moved is then not noise.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**recorded, "params": {**recorded["params"], "machine": "elsewhere-ceph"}}))
    drift = subprocess.run([sys.executable, "-m", "ckptbench", "drift", str(run), str(other)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert drift.returncode == 0, drift.stderr
    assert "A and B differ in machine, size: what moved below is not run-to-run noise alone" in drift.stdout


#: Section titles the report of a bench on the embedded store must hold (ckptbench.report.page).
REPORT_SECTIONS = ("embedded: streaming queries", "embedded: the store on its own",
                   "embedded: what the store can do (the probe)", "embedded: crashes",
                   "embedded: failure rates under injected faults", "embedded: compaction against history",
                   "embedded: how cost grows with scale", "embedded: configurations side by side",
                   "How the recommendation is made", "How long the bench took")


def test_the_report_holds_the_decision_and_every_lab(bench):
    results, output = bench
    page = (results / "report" / "index.html").read_text()
    for workload in ("stateful", "file_sink", "file_source"):
        assert re.search(rf"{workload} on embedded:\s*<strong>run <code>\w+</code>", page), page[:3000]
    for title in REPORT_SECTIONS:
        assert f">{title}</h2>" in page, title
    assert "PROJECTED to AWS S3" in page
    # Nothing recommended untested (experiments.crash_check): bench crash-checked the leaders of each
    # job of its levers experiment that the crash lab had not run, and every job's chosen configuration
    # was run by one or the other in that very configuration on the store.
    kinds = disk.read_all(results / "raw")["embedded"]
    assert kinds[config.CRASH_CHECK].environment["finished"], kinds[config.CRASH_CHECK].environment
    for shape in kinds["levers"].environment["shapes"]:
        assert re.search(rf"^crash check, {shape['name']}: ", output, re.M), output[-5000:]
    for job, decision in report.decisions_of(kinds).items():
        assert decision.chosen is None or decision.chosen.crash_cycles > 0, (job, decision.reasons)
    assert "it was not crash-tested on this store" not in page
    assert {p.name for p in (results / "report" / "plots").glob("*.png")} >= {
        "copy.png", "embedded-compaction.png", "embedded-state.png", "embedded-manifest-compaction.png",
        "embedded-latency.png", "embedded-requests.png"}


def test_the_crash_labs_drivers_killed_anywhere_keep_exactly_once(bench):
    """The crash lab of the smallest plan kills each strategy's stateless driver at random, in
    Spark's own settings, and restarts it: every cycle's restart reaches a batch and the check after
    it finds every row once, as does the series' check at rest (``crashlab.PLANS["smallest"]``)."""
    results, _ = bench
    crash = disk.read_all(results / "raw")["embedded"][config.CRASHLAB]
    plain = crash.crash_series[crash.crash_series.preset.fillna(config.DEFAULT_PRESET) == config.DEFAULT_PRESET]
    cycles = crash.cycles[crash.cycles.series.isin(plain.series)]
    assert sorted(set(cycles.strategy)) == sorted(STRATEGIES) and set(cycles.crash_point) == {"random"}, cycles
    assert (cycles.restart_ok & cycles.landed).all(), cycles.error.tolist()
    assert (cycles[["duplicates", "lost", "partial"]] == 0).all().all(), cycles
    assert (plain[["duplicates", "lost", "partial", "unexpected"]] == 0).all().all(), plain


def test_two_writers_on_a_conditional_checkpoint_end_in_a_clean_error(bench):
    """The smallest crash lab's two-writer run on ``conditional``, the second driver started after
    the first's batches, not held at a file: one driver fails on the refused PUT, nothing is lost,
    duplicated, partial or overwritten."""
    results, _ = bench
    crash = disk.read_all(results / "raw")["embedded"][config.CRASHLAB]
    rows = crash.two_writers[(crash.two_writers.strategy == "conditional") & crash.two_writers.race.isna()]
    assert len(rows) == len(crashlab.PLANS["smallest"].two_writer_starts), crash.two_writers
    for row in rows.to_dict("records"):
        assert row["second_started"], row
        errors = [e for e in (row["first_error"], row["second_error"]) if isinstance(e, str) and e]
        assert len(errors) == 1 and crashlab.CONFLICT.search(errors[0]), errors
        assert (row["duplicates"], row["lost"], row["partial"], row["overwritten_logs"]) == (0, 0, 0, 0), row
        assert row["outcome"] == "clean-error", row


def test_the_scale_axes_through_spark(bench):
    """Every strategy along every axis of the smallest scale run: each partition's state store writes
    a file a batch, so there is at least one state request per partition a batch; a second stateful
    operator writes more; the managers' objects are found in the heap; ``cost --partitions``
    projects from the record."""
    results, _ = bench
    where = disk.directory(results / "raw", "embedded", "scale")
    record = disk.read(where)
    axes = scale.AXES["smallest"]
    assert sorted(record.strategies()) == sorted(STRATEGIES)
    assert record.environment["finished"] and record.runs.error.isna().all(), record.runs.error.dropna().tolist()
    for strategy in record.strategies():
        # At least one request per partition a batch, and more partitions more requests. (Not a
        # fitted slope >= 1: manifest sends exactly one PUT per state file, so requests that come
        # only in some batches at some size, such as its view reloads, tip a two-point slope.)
        points = metrics.scale_values(record, "partitions", strategy, "requests_state")
        assert all(requests >= partitions for partitions, requests in points), (strategy, points)
        assert points[-1][1] > points[0][1], (strategy, points)
        if strategy == "conditional":  # one request per state file, maintenance's left out request by request
            assert all(requests == partitions for partitions, requests in points), points
            # A LIST per listing, over all its runs: a point of a few batches may end before a round.
            assert metrics.maintenance_rates(record, strategy)[0] >= 1
        (_, one), (_, two) = metrics.scale_values(record, "operators", strategy, "requests_state")
        assert two > one, strategy
        memory = metrics.memory_readings(record, strategy)
        assert len(memory) == axes.windows and (memory.heap_mib > 0).all()
        if strategy != "rename":  # Spark's own manager; the JVM-wide count may hold earlier queries' managers
            assert (memory.manager_objects > 0).all(), (strategy, memory)
        for cls, at in ((ScaleByPartitions, axes.partitions[-1]), (ScaleByOperators, axes.operators[-1])):
            assert cls().track_requests_state(record, strategy, at) > 0
        assert ScaleSlopes().track_requests_per_partition(record, strategy) > 0  # a fit: see above
        assert ScaleMemory().track_driver_heap_peak(record, strategy) > 0

    done = subprocess.run([sys.executable, "-m", "ckptbench", "cost", "--partitions", "200", "--strategy",
                           "conditional,rename", "--record", str(where)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "PROJECTION" in done.stdout and "| embedded | rename |" in done.stdout
    assert "(extrapolated)" in done.stdout  # 200 partitions, beyond the axis measured
    assert "Not in these figures: the state store's maintenance" in done.stdout


def test_the_report_and_asvs_pages_open_offline_in_a_browser(bench, tmp_path):
    """What `make bench` leaves, opened as a person would: Chromium with networking off sees no
    console error, failed request, broken image or broken local link, on the report and asv's grid."""
    results, _ = bench
    if browser.executable() is None:
        skip_unless_ci("chromium not installed (python -m ckptbench.install installs Debian's as root)")
    with browser.Chromium() as chrome:
        report = chrome.check_page(results / "report" / "index.html", screenshot=tmp_path / "report.png",
                                   ready="document.querySelectorAll('.decision').length >= 3 && "
                                         "[...document.images].every(i => i.complete && i.naturalWidth > 0)")
        assert report.problems() == [], f"screenshot {report.screenshot}"
        assert report.value is True, report.screenshot
        grid = chrome.check_page(results / "html" / "index.html", screenshot=tmp_path / "asv.png",
                                 ready="$('#summarygrid-display canvas.flot-base').length > 0")
        assert grid.problems() == [], f"screenshot {grid.screenshot}"
        assert grid.value is True, grid.screenshot
