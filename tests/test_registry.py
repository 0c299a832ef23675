"""The bench's plan from the registry of experiments (``ckptbench.experiments.registry``): which stages a
``--bench`` expression runs, what each is planned at, their times as the experiments' ``progress.stage``
events report them through the progress file, and the report's table of them. The plan of a real
bench, and its record, are ``test_benchmarks.py``'s."""

from __future__ import annotations

import math
import re
import threading
import time

import pandas as pd

from benchmarks import common
from ckptbench import config, progress
from ckptbench.cli import bench
from ckptbench.experiments import registry
from ckptbench.record import results
from ckptbench.report import stages as report_stages


def test_every_set_up_of_the_suite_is_an_experiment_of_the_registry_and_back():
    suite = common.listing()
    assert set(suite) == {e.setup for e in registry.EXPERIMENTS}
    assert "requests.Requests.track_total_per_batch" in suite["streaming"]
    assert "jvm_counting.JvmCountingHandler.track_ns_per_attempt_off" in suite["jvm_counting.overhead"]
    assert all(set(e.minutes) == set(config.PLANS) for e in registry.EXPERIMENTS)


def test_a_bench_expression_plans_the_experiments_whose_benchmarks_it_selects():
    suite = common.listing()
    every = [s.name for s in registry.plan("quick", suite, None)]
    assert every == [*(e.name for e in registry.EXPERIMENTS), registry.TRACKS, registry.CRASH_CHECK, registry.PAGES]
    streaming = [s.name for s in registry.plan("quick", suite, r"^(requests|commit_latency)\.")]
    assert streaming == ["streaming", registry.TRACKS, registry.PAGES]  # no levers: no crash check
    # An emulator beside a real store runs classes within modules two experiments share: the store
    # alone's only, however asv names them (a parameterised one as name(values)).
    emulator = bench._expression(None, [], registry.emulator_row(suite))
    assert [s.name for s in registry.plan("quick", suite, emulator)][:-2] == ["store"]
    named = [n for names in suite.values() for n in names]
    chosen = {n for n in named + [f"{n}(1, 'x')" for n in named] if re.search(emulator, n)}
    assert chosen == {*suite["store_alone"], *(f"{n}(1, 'x')" for n in suite["store_alone"])}
    assert "rename_cost.CopyTime.track_copy_ms" in chosen and not any(n.startswith("levers.") for n in chosen)
    # And with --bench, of those only the ones it selects.
    floor_only = bench._expression(r"^floor\.", [], registry.emulator_row(suite))
    assert {n for n in named if re.search(floor_only, n)} == {n for n in suite["store_alone"] if n.startswith("floor.")}


def test_a_stage_is_planned_at_the_last_benchs_minutes_else_at_the_estimate():
    suite = common.listing()
    planned = {s.name: s.planned for s in registry.plan("smallest", suite, None, {"crashlab": 7.5})}
    assert planned["crashlab"] == 7.5
    assert planned["streaming"] == registry.BY_NAME["streaming"].minutes["smallest"]
    assert planned[registry.TRACKS] == registry.OTHER_MINUTES[registry.TRACKS]["smallest"]


def test_the_timeline_takes_each_stages_minutes_from_its_events_and_asvs_tracks_from_the_rest():
    clock = [1000.0]
    stages = registry.plan("smallest", common.listing(), r"^(requests|levers)\.")
    timeline = registry.Timeline(stages, clock=lambda: clock[0])
    said = []
    timeline.event({"stage": "streaming", "event": "start", "at": 1000.0}, said.append)
    planned = registry.BY_NAME["streaming"].minutes["smallest"]
    assert f"streaming queries: started, {planned:.1f} min planned" in said[-1]
    timeline.event({"stage": "streaming", "event": "end", "at": 1180.0}, said.append)
    assert f"streaming queries: 3.0 min ({planned:.1f} planned)" in said[-1]
    timeline.event({"stage": "levers", "event": "start", "at": 1200.0}, said.append)
    timeline.event({"stage": "levers", "event": "end", "at": 1440.0}, said.append)
    timeline.tracks(10.0)  # asv ran 10 minutes, the experiments 7
    rows = {row["stage"]: row for row in timeline.rows()}
    assert rows["streaming"]["actual_min"] == 3.0 and rows["levers"]["actual_min"] == 4.0
    assert rows[registry.TRACKS]["actual_min"] == 3.0
    assert math.isnan(rows[registry.CRASH_CHECK]["actual_min"]) and math.isnan(rows[registry.PAGES]["started"])
    # The ETA: what is left of every stage not ended, from now.
    clock[0] = 1440.0
    left = sum(s.planned for s in stages if s.name in (registry.CRASH_CHECK, registry.PAGES)) * 60
    assert timeline.eta(1440.0) == time.strftime("%H:%M UTC", time.gmtime(1440.0 + left))
    record = results.Recorder()
    record.add("stages", timeline.rows())  # the rows are the schema's
    assert "the plan (" in timeline.planned_text() and "streaming queries" in timeline.planned_text()


def test_an_experiments_stage_events_reach_the_reader_of_the_progress_file_and_no_bar(tmp_path, monkeypatch, capsys):
    path = tmp_path / "progress"
    monkeypatch.setenv(progress.ENV, str(path))
    seen = []
    with progress.shown(path, lambda event, say: seen.append(event)):
        with progress.stage("crashes"):
            progress.Recorder("crash lab", 2, "cycle").update(2)
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:  # the reader polls the file
            threading.Event().wait(0.2)
    assert [(e["stage"], e["event"]) for e in seen] == [("crashes", "start"), ("crashes", "end")]
    assert seen[0]["at"] <= seen[1]["at"]
    err = capsys.readouterr().err
    assert "crash lab" in err and "crashes" not in err  # a bar drawn from the same file; no bar of the stage


def test_the_reports_table_of_stages_shows_planned_and_taken_minutes():
    rows = [{"stage": "streaming", "title": "streaming queries", "planned_min": 12.0, "actual_min": 9.5,
             "started": 1.0, "beside": ""},
            {"stage": registry.CRASH_CHECK, "title": registry.CRASH_CHECK, "planned_min": 3.0,
             "actual_min": float("nan"), "started": float("nan"), "beside": ""}]
    record = results.Results({"experiment": config.BENCH, "size": "quick"},
                             {"stages": pd.DataFrame(rows)})
    section = report_stages.section({"ceph": {config.BENCH: record}, "seaweedfs": {}})
    [table] = section.tables
    assert table.caption == "ceph: bench at size quick, 9.5 min of 15.0 planned"
    assert table.rows == [["streaming queries", "12.0", "9.5", "nothing"],
                          [registry.CRASH_CHECK, "3.0", "not run", "nothing"]]
    assert report_stages.section({"ceph": {}}) is None


def test_stages_run_together_count_once_as_the_longest_and_each_says_what_ran_beside_it():
    suite = common.listing()
    stages = [*registry.plan("smallest", suite, None, store="ceph"),
              *registry.plan("smallest", suite, None, store="seaweedfs", first=False)]
    # The JVM's own experiment, and those the report's tables alone read, on the first store only.
    assert [s.store for s in stages if s.name in ("jvm_counting", "scale")] == ["ceph", "ceph"]
    clock = [0.0]
    timeline = registry.Timeline(stages, clock=lambda: clock[0])
    untimed = [(store, e.name) for store in ("ceph", "seaweedfs") for e in registry.EXPERIMENTS if not e.timed]
    assert {name for _, name in untimed} == {config.CRASHLAB, config.FAULTLAB}
    checks = [(store, registry.CRASH_CHECK) for store in ("ceph", "seaweedfs")]
    alone = sum(s.planned for s in stages)
    planned = [[timeline.stages[k].planned for k in group] for group in (untimed, checks)]
    together = alone - sum(sum(group) - max(group) for group in planned)
    assert timeline.planned_text().startswith(f"the plan ({together:.0f} min planned):")
    assert timeline.eta(0.0) == time.strftime("%H:%M UTC", time.gmtime(together * 60))
    said = []
    timeline.start(config.CRASHLAB, said.append, store="seaweedfs")
    assert said[-1].startswith("stage seaweedfs crash lab: started")
    rows = {row["stage"]: row for row in timeline.rows("seaweedfs")}
    assert rows[config.CRASHLAB]["beside"] == "ceph crash lab, ceph fault lab, seaweedfs fault lab"
    assert rows["streaming"]["beside"] == "" and "jvm_counting" not in rows
    assert rows[registry.CRASH_CHECK]["beside"] == f"ceph {registry.CRASH_CHECK}"  # the crash checks, after the suite
    # asv's tracks on a store are what asv ran outside the experiments it ran, not those run before it.
    timeline.store = "seaweedfs"
    timeline.end(config.CRASHLAB, said.append, at=600.0, store="seaweedfs")
    timeline.event({"stage": "streaming", "event": "start", "at": 600.0}, said.append)
    timeline.event({"stage": "streaming", "event": "end", "at": 720.0}, said.append)
    timeline.tracks(3.0)
    assert timeline.stages[("seaweedfs", registry.TRACKS)].actual == 1.0
    # A stage run beside others after all leaves its planned group: only the others still overlap.
    timeline.together([("ceph", registry.CRASH_CHECK), ("seaweedfs", "streaming")])
    assert timeline.stages[("seaweedfs", registry.CRASH_CHECK)].beside == ()
    assert timeline.stages[("ceph", registry.CRASH_CHECK)].beside == ("seaweedfs streaming queries",)
    assert timeline.stages[("ceph", config.CRASHLAB)].beside == ("ceph fault lab", "seaweedfs crash lab",
                                                                  "seaweedfs fault lab")


def test_the_benchmarks_a_plans_later_stores_leave_out_are_the_first_store_only_experiments_and_no_other():
    suite = common.listing()
    for size, first_only in {"full": ["jvm_counting.overhead"],
                             "quick": ["jvm_counting.overhead", "history", "scale_axes"]}.items():
        pattern = re.compile(f"^(?!{registry.left_out(suite, size)})")
        # As asv matches them: a parameterised benchmark as name(values), any other as its name.
        for shown in ("{}", "{}(rename, stateful)"):
            every = {name for names in suite.values() for name in names}
            left = {name for name in every if not pattern.search(shown.format(name))}
            assert left == {name for setup in first_only for name in suite[setup]}, (size, shown)
