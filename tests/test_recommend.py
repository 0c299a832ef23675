"""``python -m ckptbench recommend``: end to end on the embedded store (probe, race, staged levers,
the printed configuration and comparison, the page in Chromium, no keys anywhere), and the printed
comparison worked out from the record alone: a fixed record gives known lines, and a number
planted in it changes them. Bad input is in ``test_bad_input.py``."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import browser  # tests/browser.py
import pytest

import ckpt_impls
from ckptbench import config, decide, metrics
from ckptbench.experiments import recommend as experiment
from ckptbench.record import disk, results, schema
from ckptbench.report import page as report_page
from ckptbench.report import recommendation
from helpers import FIXED_ENV, ROOT, event, progress, skip_unless_ci

SHAPE = config.Shape("stateful", "hdfs", partitions=2, trigger_s=10.0)
REFUSED = "Stateful streaming queries does not support async progress tracking at this moment."


def fixed(puts: dict[str, int] | None = None) -> results.Results:
    """A recommend record for ``SHAPE`` on ceph: rename and conditional in Spark's defaults and with
    no-checksum, 3 measured batches each (walCommit 120 ms for rename, 12 for conditional;
    commitOffsets half that; batches of 900 and 300 ms), ``puts`` PUTs a batch to offsets/; async
    progress refused; rename let a second writer through the race, conditional did not."""
    puts = puts or {"rename": 25, "conditional": 2}
    recorder = results.Recorder()
    for strategy, wal, trigger in (("rename", 120.0, 900.0), ("conditional", 12.0, 300.0)):
        for preset in ("default", "no-checksum"):
            run = recorder.add_run(strategy, SHAPE.name, SHAPE.keys, "p", preset=preset)
            batches = [progress(b, wal, trigger) for b in (1, 2, 3)]
            recorder.add_batches(run, "measured", batches)
            recorder.add_requests(run, [event(b + 0.01 * (i + 1), "PUT", f"p/offsets/{b}")
                                        for b in (1, 2, 3) for i in range(puts[strategy])], batches)
    recorder.fail_run(recorder.add_run("rename", SHAPE.name, SHAPE.keys, "p", preset="async-progress"), REFUSED,
                      refused=True)
    for strategy, winners in (("rename", 2), ("conditional", 1)):
        recorder.rows["races"] += [{"strategy": strategy, "kind": "offsets", "round": n, "winners": winners,
                                    "outcome_0": "won", "outcome_1": "won" if winners == 2 else "FileAlreadyExists",
                                    "content": "writer-0", "paired": True, "seconds": 0.5} for n in range(3)]
    said = {"shape": {"name": SHAPE.name}, "trigger": "10s", "trigger_s": 10.0, "store": "ceph", "bucket": "b",
            "endpoint": "http://127.0.0.1:1", "fresh": True, "strategies": ["rename", "conditional"],
            "skipped": {"direct": "the store cannot run it (the probe): multipart_abort: no"}, "deploy": None}
    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": "recommend", "store": "ceph",
           "describe": "ceph at http://127.0.0.1:1 (real store)",
           "versions": {"spark": "4.3.0", "hadoop_aws": "3.5.0", "aws_sdk": "v2 2.35.4"},
           "plan": {"keys": [SHAPE.keys], "batches": 3, "warmup": 0},
           "not_measured": {SHAPE.name: {"async-progress": "Spark refused it"}}, "recommend": said}
    return recorder.results(env)


def comparison_lines(lines: list[str]) -> list[str]:
    """The text's lines comparing the chosen configuration with Spark's default (the verdicts, which
    say "against" too, are reasons, list items or the runner-up's line)."""
    return [line for line in lines if " against " in line and line.startswith("  ") and not line.startswith("  - ")]


def test_the_comparison_is_worked_out_from_the_record(tmp_path):
    record = disk.read(disk.write(fixed(), tmp_path / "ceph-recommend"))
    decision = report_page.recommend_decision(record)
    text = recommendation.text(record, decision)
    lines = text.splitlines()
    assert "  run: conditional" in lines and "  Spark's levers: none (Spark's defaults)" in lines
    assert lines[1].endswith("; Spark 4.3.0, hadoop-aws 3.5.0 on AWS SDK v2 2.35.4)")  # what ran the checkpoints
    # rename: commit 120 + 60 ms, 25 PUTs a batch; conditional 12 + 6 ms, 2 PUTs. A PUT costs $0.005 per
    # 1,000, and a batch every 10 s is 259,200 batches in 30 days: $32.40 and $2.59 a month.
    assert comparison_lines(lines) == [
        "  commit latency p50 (ms)                         18 against 180: 162 ms less (10.0 times faster)",
        "  batch time p50 (ms)                             300 against 900: 600 ms less (3.0 times faster)",
        "  requests per batch (billable)                   2.0 against 25.0: 12.5 times fewer requests",
        "  $ per month (projection at AWS S3 list prices)  $2.59 against $32.40: $29.81 a month less"]
    assert ("Runner-up: conditional + no-checksum: as fast: 18.0 ms [18.0, 18.0] against 18.0 ms [18.0, 18.0], the "
            "difference [0.0, 0.0] ms is inside the noise, and as cheap: $2.59 [2.59, 2.59] against $2.59 [2.59, 2.59] "
            "a month, with more of Spark's levers to set") in lines
    # The chosen's verdict cell shows the median and cost, with intervals, the others' notes compare with.
    assert "recommended: 18.0 ms [18.0, 18.0], $2.59 [2.59, 2.59] a month |" in text
    assert f"  - rename + async-progress: out: Spark refuses it: {REFUSED}" in lines
    assert "  - rename: the race let a second writer through" in lines
    assert "  - async-progress with conditional: Spark refused it (with rename)" in lines
    assert "  - direct: the store cannot run it (the probe): multipart_abort: no" in lines
    assert recommendation.FRESH in lines  # the flags name a store that is gone: the text says so
    assert "CKPT_S3_ENDPOINT=URL python -m ckptbench deploy conditional --store ceph --bucket BUCKET" in text
    page = recommendation.html(record, decision, "now")
    assert all(cell in page for cell in ("12.5 times fewer requests", "$29.81 a month less", "$32.40"))

    # Numbers planted in the record change the lines: rename's walCommit 60 ms (commitOffsets 60), 20 PUTs.
    renamed = record.runs.run[record.runs.strategy == "rename"]
    batches = record.batches.copy()
    batches.loc[batches.run.isin(renamed), ["walCommit", "commitOffsets"]] = 60.0
    requests = record.requests
    nth = requests.groupby(["run", "batch_id"]).cumcount()
    planted = results.Results(record.environment, {**record.tables, "batches": batches,
                                                   "requests": requests[~(requests.run.isin(renamed) & (nth >= 20))]})
    changed = recommendation.text(planted, report_page.recommend_decision(planted)).splitlines()
    assert comparison_lines(changed) == [
        "  commit latency p50 (ms)                         18 against 120: 102 ms less (6.7 times faster)",
        "  batch time p50 (ms)                             300 against 900: 600 ms less (3.0 times faster)",
        "  requests per batch (billable)                   2.0 against 20.0: 10.0 times fewer requests",
        "  $ per month (projection at AWS S3 list prices)  $2.59 against $25.92: $23.33 a month less"]


def test_spark_defaults_chosen_say_there_is_nothing_to_change(tmp_path):
    record = fixed({"rename": 1, "conditional": 2})
    record.tables["races"] = record.races[record.races.strategy != "conditional"]  # no race: no preference
    record.tables["batches"].loc[:, ["walCommit", "commitOffsets"]] = 10.0
    text = recommendation.text(record, report_page.recommend_decision(record))
    assert "  run: rename" in text.splitlines()
    assert "  it is Spark's default configuration: nothing to change" in text.splitlines()


def test_a_configuration_that_lost_rows_in_the_crash_check_is_out(tmp_path):
    record = fixed()
    record.tables["crash_series"] = schema.frame("crash_series", [
        {"series": 0, "strategy": "conditional", "workload": "stateful", "cycles": 2, "seed": 1, "preset": "default",
         "duplicates": 0, "lost": 3, "error": None}])
    record.tables["cycles"] = schema.frame("cycles", [
        {"series": 0, "strategy": "conditional", "workload": "stateful", "cycle": n, "crash_point": "random",
         "restart_ok": True, "duplicates": 0, "lost": 0} for n in (0, 1)])
    decision = report_page.recommend_decision(disk.read(disk.write(record, tmp_path / "ceph-recommend")))
    lines = recommendation.text(record, decision).splitlines()
    assert "  run: rename" in lines  # conditional broke exactly-once: only rename is left
    assert ("  - conditional (the crash lab's stateful job): 2 crash cycles, 0 rows duplicated, 3 lost"
            in lines)
    assert ("  - conditional: out: it broke exactly-once in the crash lab: 0 rows duplicated, 3 lost in 2 crash "
            "cycles") in lines


def run_recommend(*args: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptbench", "recommend", *args, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.spark
def test_recommend_end_to_end_on_the_embedded_store(tmp_path):
    out = tmp_path / "out"
    # A job of 3 partitions ranked at 2 (--ranked-at; 8 by default): every configuration at 2, the
    # finalists at 3, where the decision is made.
    done = run_recommend("--store", "embedded", "--workload", "stateless", "--partitions", "3", "--trigger", "10s",
                         "--batches", "3", "--crash-cycles", "1", "--strategies", "conditional,rename",
                         "--ranked-at", "2", out=out)
    assert done.returncode == 0, done.stderr[-3000:]
    record = disk.read(out)
    said = record.environment["recommend"]
    assert said["strategies"] == ["rename", "conditional"]  # Spark's default first, the baseline
    # Each configuration in two queries (experiments.recommend.REPEATS) of 2 measured batches (--batches
    # 3 split over them), in mirrored rounds per stage and session (experiments.levers: a session per
    # task slots per core, one slot first); one Spark refused, once.
    stateless, ranked = config.Shape("stateless", partitions=3), config.Shape("stateless", partitions=2)
    assert said["ranked"]["name"] == ranked.name
    runs = record.runs[record.runs.workload == ranked.name]
    refused = set(zip(runs.strategy[runs.refused], runs.preset[runs.refused], strict=True))
    # Ranked on Spark's levers alone: task slots and the floor are the final stage's.
    presets = [p for p in config.presets_for(stateless) if config.slots_of(p) == 1]
    floor = ckpt_impls.FLOOR.name
    stages = [[(p, "rename") for p in presets],
              [(p, "conditional") for p in presets if ((runs.strategy == "conditional") & (runs.preset == p)).any()]]
    assert list(zip(runs.strategy, runs.preset, runs.repeat, strict=True)) == [
        (s, p, r) for stage in stages for r, (p, s) in config.interleaved(stage, 2) if r == 0 or (s, p) not in refused]
    assert {len(record.run(s, ranked.name, preset=p).batches) for p, s in stages[1]} == {2}
    # At the job's own 3 partitions: Spark's default, the two leading at 2 and the first of them at 2
    # and 4 task slots per core, with the floor at each slots, after every run at 2.
    final = record.runs[record.runs.workload == stateless.name]
    assert final.run.min() > runs.run.max()
    # The leaders as the decision named them when the final stage began: after the crash check at 2, so
    # none of them is one the check put out.
    leading = report_page.recommend_decision(record, untested_out=False, job=ranked.name)
    first = leading.chosen
    checked = record.crash_series.set_index(["strategy", "preset"])
    for c in filter(None, (first, decide.runner_up(leading))):
        assert (c.strategy, c.preset) in checked.index, checked
        assert (checked.loc[[(c.strategy, c.preset)]][["duplicates", "lost"]] == 0).all().all()
    assert set(zip(final.preset, final.strategy, strict=True)) == {
        ("default", "rename"), (first.preset, first.strategy),
        *((config.at_slots(first.preset, n), first.strategy) for n in (2, 4)),
        (decide.runner_up(leading).preset, decide.runner_up(leading).strategy)} | {
        (config.at_slots(first.preset, n), floor) for n in (1, 2, 4)}
    assert (final.groupby(["preset", "strategy"]).size() == 2).all()
    # There Spark's default measures its share of the batches (experiments.recommend.BASELINE_SHARE: --batches
    # 3 of 2 queries, at least one a query: one each), every other configuration its 2 a query.
    measured = {run: len(record.rows_of("batches", run).query("phase == 'measured'")) for run in final.run}
    assert {measured[run] for run, s, p in zip(final.run, final.strategy, final.preset, strict=True)
            if (p, s) == ("default", "rename")} == {1}
    assert {measured[run] for run, s, p in zip(final.run, final.strategy, final.preset, strict=True)
            if (p, s) != ("default", "rename")} == {2}
    # Each query there and at the ranked count after one warm-up batch, as the record's plan says.
    assert record.environment["plan"]["warmup"] == experiment.WARMUP == 1
    assert {len(record.rows_of("batches", run).query("phase == 'warmup'"))
            for run in record.runs.run[~record.runs.refused]} == {experiment.WARMUP}
    # Requests per batch projected from 2 partitions to 3 for every configuration, and measured for those
    # that ran at 3: a stateless job's do not grow with partitions.
    projection = said["projection"]
    assert (projection["from_partitions"], projection["to_partitions"]) == (2, 3)
    rows = {(row["preset"], row["strategy"]): row for row in projection["configurations"]}
    assert set(rows) == set(zip(runs.preset[~runs.refused], runs.strategy[~runs.refused], strict=True))
    for key in set(zip(final.preset, final.strategy, strict=True)) & set(rows):
        assert rows[key]["measured"] == pytest.approx(rows[key]["projected"], abs=1), rows[key]
    assert any(line.startswith("Every configuration ran at 2 partitions") for line in done.stdout.splitlines())
    # Each session ran the tasks its slots say on the 2-core local master (the final stage's: a session
    # per task slots per core, mirrored rounds in each), and its runs' CPU was read.
    for slots in (1, 2, 4):
        session = final[final.preset.map(config.slots_of) == slots]
        assert list(zip(session.strategy, session.preset, session.repeat, strict=True)) == [
            (s, p, r) for r, (p, s) in config.interleaved(list(dict.fromkeys(
                zip(session.preset[session.repeat == 0], session.strategy[session.repeat == 0], strict=True))), 2)]
    # The sessions in mirrored order (experiments.levers.visits): each slots' first repeat going up, then
    # the second coming down.
    visited = [slots for i, slots in enumerate(final.preset.map(config.slots_of)) if i == 0
               or slots != config.slots_of(final.preset.iloc[i - 1])]
    assert visited == [1, 2, 4, 2, 1], visited
    ran = record.runs[~record.runs.refused]
    assert set(ran.preset.map(config.slots_of)) == {1, 2, 4}
    assert all(slots == 2 * config.slots_of(p) for p, slots in zip(ran.preset, ran.task_slots, strict=True))
    assert (ran.cpu_s > 0).all(), ran.cpu_s
    # The floor (Spark's checkpoint files in memory) ran in the first leader's configuration at each task
    # slots, and each candidate in one of those presets is read against the floor in its own; others have none.
    for c in report_page.recommend_decision(record).candidates:
        floors = record.runs_of(floor, stateless.name, preset=c.preset, source="memory")
        if config.at_slots(c.preset, 1) == first.preset:
            assert c.floor_batch_p50_ms == metrics.durations_percentile(floors, "triggerExecution", 50) > 0
        else:
            assert not floors and c.floor_batch_p50_ms != c.floor_batch_p50_ms  # NaN
    assert set(record.races.strategy) == {"rename", "conditional"}
    assert set(record.races.kind) == {"offsets", "commits"} and len(record.capabilities)
    decision = report_page.recommend_decision(record)
    chosen = decision.chosen
    printed = done.stdout.splitlines()
    assert f"  run: {chosen.label}" in printed
    assert f"  manager: {chosen.strategy}" in printed
    # deploy's --conf lines for the manager, then the levers' settings and query options.
    for key, value in said["deploy"]["conf"].items():
        assert f"  --conf {key}={value} \\" in printed
    conf, options = config.preset(chosen.preset)
    for key, value in conf.items():
        assert f"  --conf {key}={value} \\" in printed
    for key, value in options.items():
        assert f'  .option("{key}", "{value}")' in printed
    # Against Spark's default configuration, as worked out from the record written.
    assert decision.baseline.label == "rename"
    rows = recommendation.comparison(decision).rows
    assert [row[0] for row in rows] == ["commit latency p50 (ms)", "batch time p50 (ms)",
                                        "requests per batch (billable)",
                                        "$ per month (projection at AWS S3 list prices)"]
    width = max(len(row[0]) for row in rows)
    for row in rows:
        assert f"  {row[0]:<{width}}  {row[1]} against {row[2]}: {row[3]}" in printed
    assert next(line for line in printed if "requests per batch (billable)" in line).endswith("times fewer requests")
    assert any(line.endswith("a month less") for line in printed)
    assert any(line.startswith("Runner-up: ") for line in printed)
    # The crash check: one cycle of each of the two leading configurations, and of each new leader
    # when the check puts one out (experiments.crash_check), said line by line.
    assert len(record.crash_series) >= 2 and (record.crash_series.cycles == 1).all()
    series = record.crash_series
    assert (chosen.strategy, chosen.preset) in set(zip(series.strategy, series.preset, strict=True))
    assert all(f"  - {line}" in printed for line in recommendation.crash_lines(record))
    page = out / recommendation.PAGE
    assert f"record: {out}; page: {page}" in done.stdout
    # No key anywhere: the embedded store's generated keys are ckpt + 16 hex digits and 40 hex digits.
    commit = record.environment["commit"]
    for text in (done.stdout, done.stderr, page.read_text(), (out / "environment.json").read_text()):
        assert not re.search(r"\bckpt[0-9a-f]{16}\b", text)
        assert set(re.findall(r"\b[0-9a-f]{40}\b", text)) <= {commit}
    if browser.executable() is None:
        skip_unless_ci("chromium not installed (python -m ckptbench.install installs Debian's as root)")
    with browser.Chromium() as chrome:
        check = chrome.check_page(page, screenshot=tmp_path / "recommendation.png")
    assert check.problems() == [], check.problems()
    assert check.requests == [page.resolve().as_uri()]  # nothing loaded: no CDN, no font, no script


def test_the_report_shows_each_recommend_record_at_its_own_partitions(tmp_path):
    """A record ``recommend`` wrote under results/recommend/ gets a section of the report: its job's
    decision, every configuration's batch over the floor's in the same configuration, a figure, a
    line at the page's top and a link to the command's own page; in Chromium the report fits its
    window and the link resolves. Without the record, no such section."""
    results_dir = tmp_path / "results"
    record = fixed()
    recorder = results.Recorder()
    for preset, trigger in (("default", 200.0), ("no-checksum", 250.0)):
        run = recorder.add_run(ckpt_impls.FLOOR.name, SHAPE.name, SHAPE.keys, "p", preset=preset)
        recorder.add_batches(run, "measured", [progress(b, 1.0, trigger) for b in (1, 2, 3)])
    record.environment.update({k: v for k, v in FIXED_ENV.items() if k not in record.environment})
    record.environment["recommend"]["shape"] = dataclasses.asdict(SHAPE) | {"name": SHAPE.name}
    record = disk.merge([record, recorder.results(record.environment)])
    out = results_dir / config.RECOMMEND / f"ceph-{SHAPE.name}"
    record = disk.read(disk.write(record, out))
    recommendation.write(out, record, report_page.recommend_decision(record), "2026-11-29T00:00:00+00:00")
    title = f"ceph: {SHAPE.name} at its own 2 partitions (recommend)"
    index = report_page.write(results_dir)[0]
    html = index.read_text()
    assert title in html and f'href="../{config.RECOMMEND}/ceph-{SHAPE.name}/index.html"' in html
    assert "(1.50x)" in html and "(4.50x)" in html  # conditional's 300 ms and rename's 900 ms over 200 ms
    assert "The recommended conditional: batch p50 300 ms against the floor&#39;s 200 ms in the same configuration, " \
        "1.50x" in html and f"{SHAPE.name} on ceph: run conditional" in html
    assert (index.parent / "plots" / f"at-scale-ceph-{SHAPE.name}.png").exists()
    if browser.executable() is None:
        skip_unless_ci("chromium not installed (python -m ckptbench.install installs Debian's as root)")
    with browser.Chromium() as chrome:
        check = chrome.check_page(index)
    assert check.problems() == [], check.problems()
    assert any(link.endswith(f"ceph-{SHAPE.name}/index.html") for link in check.links), check.links
    shutil.rmtree(results_dir / config.RECOMMEND)
    assert title not in report_page.write(results_dir)[0].read_text()


@pytest.mark.parametrize("shape, kinds", [
    (config.Shape("stateless"), ("offsets", "commits")),
    (config.Shape("stateful", "rocksdb"), ("offsets", "commits", "state")),
    (config.Shape("stateful", sink="file"), ("offsets", "commits", "state", "_spark_metadata")),
])
def test_the_race_covers_the_files_the_job_writes(shape, kinds):
    from ckptbench.experiments import recommend

    assert recommend.race_kinds(shape) == kinds


def test_a_projection_to_more_partitions_grows_the_state_files_requests_alone():
    """A batch's own requests at 2 partitions, 1 offsets PUT and 2 state PUTs (one file a partition),
    projected to 200: the offsets PUT as it is, the state's 100 times; and the page's lines say which
    figure is projected and how far off it was where the configuration ran there too."""
    recorder = results.Recorder()
    runs = []
    for partitions in (2, 200):
        run = recorder.add_run("conditional", f"stateful-hdfs-noop-{partitions}p", 1_000, "p")
        batches = [progress(b, 10.0, 100.0) for b in (1, 2, 3)]
        recorder.add_batches(run, "measured", batches)
        recorder.add_requests(run, [event(b + 0.01, "PUT", f"p/offsets/{b}") for b in (1, 2, 3)]
                              + [event(b + 0.02 + 0.0001 * n, "PUT", f"p/state/0/{n}/{b + 1}.delta")
                                 for b in (1, 2, 3) for n in range(partitions)], batches)
        runs.append(run)
    record = recorder.results({"schema_version": schema.SCHEMA_VERSION, "plan": {"keys": [1_000]}})
    at_2, at_200 = (record.runs_of("conditional", f"stateful-hdfs-noop-{p}p", 1_000) for p in (2, 200))
    assert metrics.requests_per_batch(at_2[0]) == 3 and metrics.requests_per_batch(at_200[0]) == 201
    assert metrics.projected_requests_per_batch(at_2, 2, 200) == 201
    assert metrics.projected_requests_per_batch(at_2, 2, 2) == 3
    said = {"projection": {"from_partitions": 2, "to_partitions": 200, "configurations": [
        {"strategy": "conditional", "preset": "default", "projected": 201.0, "measured": 190.0},
        {"strategy": "rename", "preset": "no-checksum", "projected": 4_000.0, "measured": None}]}}
    lines = recommendation.ranked_lines(results.Results({**record.environment, "recommend": said}, record.tables))
    assert lines[0].startswith("Every configuration ran at 2 partitions and was ranked there")
    assert "(a projection" in lines[0]
    assert lines[1:] == ["conditional: 201.0 projected, 190.0 measured (+5.8% off)",
                         "rename + no-checksum: 4,000.0 projected, not measured there"]
