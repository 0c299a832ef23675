"""The recommendation follows the measured numbers: fed fixed records, it picks by the documented
rule, and changing a number changes the verdict."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ckpt_impls
from ckptbench import config, decide, metrics
from ckptbench.experiments import levers, streaming
from ckptbench.harness import spark
from ckptbench.record import disk, jobs, results, schema
from ckptbench.report import page
from helpers import event, fixed_levers_record, fixed_streaming_record, progress


def record(wal_ms: dict[str, float], puts: dict[str, int], sst_puts: dict[str, int] | None = None) -> results.Results:
    """A stateful run per strategy: 3 measured batches with walCommit ``wal_ms[s]`` (commitOffsets
    half that), ``puts[s]`` PUTs per batch to offsets/ and ``sst_puts[s]`` RocksDB SST uploads."""
    sst_puts = sst_puts or {}
    recorder = results.Recorder()
    for strategy, wal in wal_ms.items():
        run = recorder.add_run(strategy, "stateful", 10, "p")
        batches = [progress(b, wal) for b in (1, 2, 3)]
        recorder.add_batches(run, "measured", batches)
        recorder.add_requests(run, [event(b + 0.01 * (i + 1), "PUT", f"p/offsets/{b}")
                                    for b in (1, 2, 3) for i in range(puts[strategy])]
                               + [event(b + 0.001 * (i + 1), "PUT", f"p/state/0/1/SSTs/{b}-{i}.sst")
                                  for b in (1, 2, 3) for i in range(sst_puts.get(strategy, 0))], batches)
    return recorder.results({"store": "ceph", "plan": {"keys": [10]}})


BASE = {"rename": 120.0, "direct": 34.0, "conditional": 12.0, "manifest": 16.0}
PUTS = {"rename": 25, "direct": 5, "conditional": 2, "manifest": 3}


def raced(**refuses: bool | None) -> dict[str, decide.Safety]:
    """The crash lab's findings with a race of 10 rounds per strategy named: True, one winner in
    every round; False, two winners in 9 of them."""
    return {s: decide.Safety(cycles=10, race_rounds=10, race_two_winners=0 if r else 9,
                             race_one_winner=10 if r else 1, refuses=r) for s, r in refuses.items()}


RACED = raced(rename=False, direct=False, conditional=True, manifest=True)


def outage(profile: str, rode: bool, died_after_s: float = float("nan")) -> decide.Outage:
    return decide.Outage(profile, 5.0 if profile == "outage-5s" else 30.0, 2, 2 if rode else 0, died_after_s)


def test_a_strategy_that_died_where_sparks_default_rode_the_outage_out_comes_after_those_that_rode_it_out():
    rode = {"rename": {"outage-5s": outage("outage-5s", True), "outage-30s": outage("outage-30s", True)},
            "conditional": {"outage-5s": outage("outage-5s", False, 1.4), "outage-30s": outage("outage-30s", True)},
            "manifest": {"outage-5s": outage("outage-5s", True), "outage-30s": outage("outage-30s", True)}}
    d = decide.decide(record(BASE, PUTS), "stateful", safety=RACED, outages=rode)
    assert d.recommended == "manifest"  # slower than conditional, but it rode out what Spark's default rode out
    notes = {c.strategy: c.note for c in d.candidates}
    assert notes["conditional"] == ("its queries died after 1.4 s in outage-5s (store away 5 s), which Spark's "
                                    "default rode out")
    shown = {c.strategy: c.outage for c in d.candidates}
    assert shown == {"rename": "rode it out", "direct": "not measured", "conditional": "rode it out",
                     "manifest": "rode it out"}
    assert ("its queries rode out every store outage Spark's default rode out (outage-5s: rode it out, "
            "outage-30s: rode it out)") in d.reasons
    # An outage Spark's default died in too is no reason to rank a strategy lower; nor one it was not run under.
    both = {**rode, "rename": {"outage-5s": outage("outage-5s", False, 2.0)}}
    d = decide.decide(record(BASE, PUTS), "stateful", safety=RACED, outages=both)
    assert d.recommended == "conditional"
    assert {c.strategy: c.outage for c in d.candidates}["rename"] == "died after 2.0 s (outage-5s)"
    # Every one that refuses a second writer died: rule 2 comes first, and the reasons say so.
    dead = {**rode, "manifest": rode["conditional"]}
    d = decide.decide(record(BASE, PUTS), "stateful", safety=RACED, outages=dead)
    assert d.recommended == "conditional"
    assert ("its queries died after 1.4 s in outage-5s (store away 5 s), which Spark's default rode out: those that "
            "rode them out were not measured to refuse a second writer, which comes first") in d.reasons


def test_the_fastest_that_refuses_a_second_writer():
    d = decide.decide(record(BASE, PUTS), "stateful", safety=RACED)
    assert d.recommended == "conditional"
    # p95 19: three walCommits of 12 ms read as 12 +- 0.5 (metrics.whole_ms_percentile), p95 12.4, and 6.4 more.
    assert d.reasons[0].startswith("commits a batch in 18 ms (p50; p95 19 ms), the fastest of the strategies that "
                                   "refuse a second writer")
    notes = {c.strategy: c.note for c in d.candidates}
    # Three batches each, every one alike: the intervals are points, and 6 ms is clear and over 2 ms.
    assert notes["manifest"] == ("slower: 24.0 ms [24.0, 24.0] against 18.0 ms [18.0, 18.0] per batch's commits; "
                                 "the difference 6.0 ms [6.0, 6.0] is clear and at least 2.0 ms")
    assert notes["direct"] == notes["rename"] == "the race let a second writer through"
    assert "a second writer is refused (race: 1 winner in 10/10 rounds)" in d.reasons
    shown = {c.strategy: c.second_writer for c in d.candidates}
    assert shown["conditional"] == "refused (race: 1 winner in 10/10 rounds)"
    assert shown["direct"] == "NOT refused (race: 2 winners in 9/10)"


def test_rename_and_direct_are_never_refusing_unless_the_race_says_so():
    fast_direct = {**BASE, "direct": 10.0}
    # The zombie run ended in a clean error for every strategy (Spark's own checks caught it): no refusal.
    zombie = {s: decide.Safety(cycles=10, two_writer="clean-error") for s in BASE}
    for safety in (None, zombie):
        d = decide.decide(record(fast_direct, PUTS), "stateful", safety=safety)
        assert {c.strategy: c.refuses_second_writer for c in d.candidates} == dict.fromkeys(BASE)
        shown = {c.strategy: c.second_writer for c in d.candidates}
        assert shown["rename"] == shown["direct"] == "not measured (no race run; promises nothing)"
        assert shown["conditional"] == shown["manifest"] == "promised, not measured (no race run)"
        # Nothing measured to refuse: no strategy is preferred for it, the fastest wins, and the reasons say why.
        assert d.recommended == "direct"
        assert d.reasons[-3] == ("whether a second writer is refused was not measured on this store (the race was "
                                 "not run), so no strategy was preferred for it")
        assert d.reasons[-2] == "store outages were not measured on this store (the fault lab's outage profiles)"
    # The race measured conditional refusing: it goes first although direct is faster.
    d = decide.decide(record(fast_direct, PUTS), "stateful", safety={**zombie, **raced(conditional=True)})
    assert d.recommended == "conditional"
    assert {c.strategy: c.note for c in d.candidates}["direct"] == "not measured to refuse a second writer"
    # Only a race can make direct refusing.
    d = decide.decide(record(fast_direct, PUTS), "stateful", safety=raced(direct=True, conditional=True))
    assert d.recommended == "direct"
    assert {c.strategy: c.second_writer for c in d.candidates}["direct"] == "refused (race: 1 winner in 10/10 rounds)"


def test_the_race_in_a_record_decides_refusal(tmp_path):
    """``page.safety`` on a crash lab record built here, written and read back: a strategy refuses
    only when every round met with one winner; a race not run is None, whatever the zombie said."""
    recorder = results.Recorder()
    rounds = {"direct": [(2, True)] * 3, "conditional": [(1, True)] * 3, "manifest": [(1, True), (1, False), (1, True)]}
    for strategy, played in rounds.items():
        for n, (winners, paired) in enumerate(played):
            recorder.rows["races"].append({
                "strategy": strategy, "kind": "offsets", "round": n, "winners": winners, "outcome_0": "won",
                "outcome_1": "won" if winners == 2 else "org.apache.hadoop.fs.FileAlreadyExistsException",
                "content": "writer-0", "paired": paired, "seconds": 0.2})
    recorder.rows["two_writers"].append({"strategy": "rename", "workload": "stateless", "head_start": 3, "seed": 1,
                                         "outcome": "clean-error", "overwritten_logs": 0, "race": None})
    env = {"schema_version": schema.SCHEMA_VERSION, "store": "ceph", "experiment": "crashlab"}
    found = page.safety(disk.read(disk.write(recorder.results(env), tmp_path / "ceph-crashlab")))
    assert {s: f.refuses for s, f in found.items()} == {"direct": False, "conditional": True, "manifest": False}
    assert (found["direct"].race_rounds, found["direct"].race_two_winners) == (3, 3)
    assert found["manifest"].race_one_winner == 2  # the round that did not meet proves nothing
    d = decide.decide(record(BASE, PUTS), "stateful", safety=found)
    assert d.recommended == "conditional"
    shown = {c.strategy: c.second_writer for c in d.candidates}
    assert shown["manifest"] == "NOT refused (race: 1 winner in only 2/3 rounds that met)"
    assert shown["rename"] == "not measured (no race run; promises nothing)"


def test_within_the_tie_the_cheaper_wins():
    d = decide.decide(record({**BASE, "manifest": 12.5}, {**PUTS, "conditional": 4}), "stateful")
    assert d.recommended == "manifest"
    # 18.75 ms against 18: clear, but under Spark's resolution of 2 ms (the record has no store floor).
    assert "as fast as the fastest within the noise" in d.reasons[0]
    assert d.reasons[0].endswith("it won on cost among the 2 as fast: $3.89 [3.89, 3.89] a month, the others dearer")
    conditional = next(c for c in d.candidates if c.strategy == "conditional")
    assert conditional.note == (
        "as fast: 18.0 ms [18.0, 18.0] against 18.8 ms [18.8, 18.8], the difference -0.8 ms [-0.8, -0.8] is clear but "
        "within 2.0 ms (10% of the fastest's median, at least one store round trip: Spark's resolution, 2 ms, as the "
        "record has no store floor), but dearer: $5.18 [5.18, 5.18] against $3.89 [3.89, 3.89] a month")


def test_a_strategy_that_broke_exactly_once_is_out():
    safety = {"conditional": decide.Safety(cycles=50, lost=3), "manifest": decide.Safety(cycles=50)}
    d = decide.decide(record(BASE, PUTS), "stateful", safety=safety)
    assert d.recommended == "manifest"
    assert next(c for c in d.candidates if c.strategy == "conditional").out == (
        "it broke exactly-once in the crash lab: 0 rows duplicated, 3 lost in 50 crash cycles")
    assert "exactly-once held through 50 crash cycles (0 rows lost or duplicated)" in d.reasons


def test_what_the_store_cannot_run_is_never_recommended():
    refused = "it ignores If-None-Match: * (a second PUT of a key got 200)"
    runnable = {"rename": None, "direct": None, "conditional": refused, "manifest": refused}
    d = decide.decide(record(BASE, PUTS), "stateful", runnable=runnable, safety=RACED)
    assert d.recommended == "direct"
    assert "no strategy here was measured to refuse a second writer" in " ".join(d.reasons)
    assert {c.strategy: c.out for c in d.candidates}["manifest"] == f"the store cannot run it: {refused}"


def test_a_race_lost_outranks_the_promise():
    assert decide.decide(record(BASE, PUTS), "stateful",
                         safety=raced(conditional=False, manifest=True)).recommended == "manifest"


def test_no_candidate_left():
    runnable = dict.fromkeys(BASE, "the bucket is read-only")
    d = decide.decide(record(BASE, PUTS), "stateful", runnable=runnable)
    assert d.recommended is None and d.reasons[0].startswith("no configuration can be recommended")


def test_cost_is_a_labelled_projection():
    d = decide.decide(record(BASE, PUTS), "stateful", trigger_s=10)
    # 2 PUTs a batch, $0.005 per 1,000, 259,200 batches a month.
    assert d.reasons[1] == ("2.0 billable requests per batch through the strategy: $2.59 a month at one batch "
                            "every 10 s (projection at AWS S3 list prices)")
    assert next(c for c in d.candidates if c.strategy == "conditional").dollars_per_month == pytest.approx(2.592)


def test_requests_the_strategy_never_made_are_not_credited_to_it():
    # conditional makes 4 requests a batch, manifest 3 plus 10 SST uploads RocksDB makes with the
    # FileSystem: the tie goes to manifest, and the SST uploads are named as the same for all.
    d = decide.decide(record({**BASE, "manifest": 12.5}, {**PUTS, "conditional": 4}, {"manifest": 10}), "stateful")
    assert d.recommended == "manifest"
    manifest = next(c for c in d.candidates if c.strategy == "manifest")
    # The SST uploads are charged to the configuration, the mean of its four strategies' (2.5 a batch), to each.
    assert (manifest.requests_per_batch, manifest.other_requests_per_batch) == (3, 2.5)
    assert manifest.dollars_per_month == pytest.approx(5.5 * 5e-6 * 259_200)
    assert " and 2.5 that Spark's settings and the sink decide (data files" in d.reasons[1]


def probed(tmp_path, failed: dict[str, str]) -> results.Results:
    """A store record whose probe found every capability but ``failed`` (capability -> what the store
    did), written and read back as ``make bench`` records the probe."""
    recorder = results.Recorder()
    recorder.add_capabilities({c: {"ok": c not in failed, "detail": failed.get(c, "fine"), "seconds": 0.1}
                               for c in ckpt_impls.CAPABILITIES})
    env = {"schema_version": schema.SCHEMA_VERSION, "store": "ceph", "experiment": "store"}
    return disk.read(disk.write(recorder.results(env), tmp_path / "ceph-store"))


def test_the_recorded_probe_keeps_what_the_store_cannot_run_out(tmp_path):
    honest = page.runnable(probed(tmp_path, {}))
    assert decide.decide(record(BASE, PUTS), "stateful", runnable=honest).recommended == "conditional"
    ignores = "a second If-None-Match: * PUT of an existing key was accepted"
    d = decide.decide(record(BASE, PUTS), "stateful",
                      runnable=page.runnable(probed(tmp_path, {"conditional_put": ignores})))
    assert d.recommended == "direct"
    outs = {c.strategy: c.out for c in d.candidates}
    assert outs["conditional"].startswith(f"the store cannot run it: conditional_put: {ignores} (needed: ")
    assert outs["manifest"].startswith("the store cannot run it: conditional_put: ")
    # A store that cannot list what it just wrote runs only manifest, whose listings are its manifest's.
    d = decide.decide(record(BASE, PUTS), "stateful",
                      runnable=page.runnable(probed(tmp_path, {"list_after_write": "a LIST missed a new key"})))
    assert d.recommended == "manifest"
    assert all(c.out.startswith("the store cannot run it: list_after_write: ") for c in d.candidates
               if c.strategy != "manifest")


def test_a_record_without_a_probe_says_so():
    recorder = results.Recorder()
    assert page.runnable(recorder.results({"store": "ceph"})) is None
    assert "the store was not probed" in decide.decide(record(BASE, PUTS), "stateful").reasons


def configured(presets: dict[tuple[str, str], float]) -> results.Results:
    """A stateful run per (strategy, preset), walCommit as given and 2 PUTs a batch."""
    recorder = results.Recorder()
    for (strategy, preset), wal in presets.items():
        run = recorder.add_run(strategy, "stateful", 10, "p", preset=preset)
        batches = [progress(b, wal) for b in (1, 2, 3)]
        recorder.add_batches(run, "measured", batches)
        recorder.add_requests(run, [event(b + 0.01 * (i + 1), "PUT", f"p/offsets/{b}") for b in (1, 2, 3)
                                    for i in range(2)], batches)
    return recorder.results({"store": "ceph", "plan": {"keys": [10]}})


def test_a_lever_that_broke_exactly_once_is_out_with_every_strategy():
    # async progress lost rows with rename in the crash lab: conditional with it is out too, and the
    # fastest configuration left wins; it was crash-tested in Spark's settings only, and says so.
    record = configured({("rename", "default"): 120, ("rename", "async-progress"): 1,
                         ("conditional", "default"): 12, ("conditional", "async-progress"): 1})
    safety = {**raced(rename=False, conditional=True),
              ("rename", "async-progress"): decide.Safety(cycles=2, duplicated=600)}
    d = decide.decide(record, "stateful", safety=safety)
    assert d.recommended == "conditional"
    out = {c.label: c.out for c in d.candidates}
    assert out["conditional + async-progress"] == ("Spark's levers async-progress broke exactly-once in the crash lab, "
                                                   "whatever the strategy (with rename: 600 rows duplicated, 0 lost "
                                                   "in 2 cycles)")
    assert out["rename + async-progress"].startswith("it broke exactly-once in the crash lab: 600 rows duplicated")
    assert d.baseline.label == "rename"
    # Without that finding the lever is the fastest, but the crash lab never ran it while it ran
    # rename and conditional in Spark's settings: nothing untested is recommended.
    d = decide.decide(record, "stateful", safety=raced(rename=False, conditional=True))
    assert d.recommended == "conditional"
    out = {c.label: c.out for c in d.candidates}
    assert out["conditional + async-progress"] == out["rename + async-progress"] == (
        "not crash-tested in this configuration on this store, unlike 2 others: nothing untested is recommended")
    assert "exactly-once held through 10 crash cycles (0 rows lost or duplicated)" in d.reasons
    # Asked as a crash check asks it (nothing out for want of a test), the lever leads: the one to check.
    assert decide.decide(record, "stateful", safety=raced(rename=False, conditional=True),
                         untested_out=False).recommended == "conditional + async-progress"
    # Once the crash lab has run it, in that configuration, it is recommended, and says so.
    d = decide.decide(record, "stateful", safety={**raced(rename=False, conditional=True),
                                                  ("conditional", "async-progress"): decide.Safety(cycles=2)})
    assert d.recommended == "conditional + async-progress"
    assert {c.label: c.crash_cycles for c in d.candidates} == {
        "rename": 10, "rename + async-progress": 0, "conditional": 10, "conditional + async-progress": 2}
    assert "exactly-once held through 2 crash cycles (0 rows lost or duplicated)" in d.reasons
    # Where no configuration measured was crash-tested as it is, none is out for it, and the
    # reasons name the crash-lab evidence as what it is.
    levers_only = configured({("rename", "async-progress"): 120, ("conditional", "async-progress"): 1})
    d = decide.decide(levers_only, "stateful", safety=raced(rename=False, conditional=True))
    assert d.recommended == "conditional + async-progress"
    assert ("exactly-once held through 10 crash cycles in Spark's own settings; with async-progress it was not "
            "crash-tested on this store") in d.reasons
    untested = {**raced(rename=False, conditional=True), "conditional": decide.Safety(cycles=0, refuses=True),
                "rename": decide.Safety(cycles=0, refuses=False)}
    d = decide.decide(record, "stateful", safety=untested)
    assert d.recommended == "conditional + async-progress"
    assert "exactly-once under crashes was not measured on this store" in d.reasons


def test_a_configuration_at_more_task_slots_carries_the_crash_lab_findings_of_its_one_slot_self():
    record = configured({("rename", "default"): 120, ("conditional", "changelog"): 12,
                         ("conditional", "changelog+slots-2"): 1, ("conditional", "async-progress+slots-2"): 1})
    safety = {**raced(rename=False, conditional=True), ("conditional", "changelog"): decide.Safety(cycles=2),
              ("conditional", "async-progress"): decide.Safety(cycles=2, duplicated=5)}
    d = decide.decide(record, "stateful", safety=safety)
    crash = {c.label: (c.crash_cycles, c.out) for c in d.candidates}
    # Crash-tested as its one-slot self, so not out as untested; it is the fastest, and says how it was tested.
    assert crash["conditional + changelog+slots-2"] == (2, None)
    assert d.recommended == "conditional + changelog+slots-2"
    assert ("exactly-once held through 2 crash cycles (0 rows lost or duplicated), crash-tested at one task slot "
            "per core (as changelog)") in d.reasons
    # What broke exactly-once at one slot is out at two.
    assert crash["conditional + async-progress+slots-2"][1].startswith("it broke exactly-once in the crash lab")
    # And a lever that broke it with one strategy at one slot is out with every strategy at two.
    record = configured({("rename", "default"): 120, ("rename", "async-progress+slots-2"): 1,
                         ("conditional", "async-progress+slots-2"): 1})
    d = decide.decide(record, "stateful", safety=safety, untested_out=False)
    assert {c.label: c.out for c in d.candidates if "slots-2" in c.preset} == dict.fromkeys(
        ["rename + async-progress+slots-2"], "Spark's levers async-progress+slots-2 broke exactly-once in the crash "
        "lab, whatever the strategy (with conditional: 5 rows duplicated, 0 lost in 2 cycles)") | {
        "conditional + async-progress+slots-2": "it broke exactly-once in the crash lab: 5 rows duplicated, 0 lost in "
                                                "2 crash cycles"}


# -- the statistics a verdict rests on: whole-millisecond jitter, as Spark's clocks give it --------

#: Commits (walCommit + commitOffsets, whole ms) of 10 batches about 7 ms, 8 ms and 14 ms apart.
SEVEN = [7, 6, 7, 8, 7, 7, 6, 7, 8, 7]
EIGHT = [8, 7, 8, 9, 8, 8, 7, 8, 9, 8]
FOURTEEN = [14, 13, 14, 15, 14, 14, 13, 14, 15, 14]
#: conditional (the faster in both pairs) is the dearer: 3 PUTs a batch against manifest's 2.
DEARER_FASTER = {"conditional": 3, "manifest": 2}


def jittered(tmp_path, commits, puts: dict[str, int], name: str = "ceph-streaming") -> results.Results:
    """A stateful run per strategy (``commits``: strategy -> values, or (strategy, values) pairs, a
    strategy named twice run twice, or (strategy, values, repeat) triples), a measured batch per value
    (walCommit that less 1 ms, commitOffsets 1 ms) with ``puts[s]`` PUTs each, written and read back."""
    recorder = results.Recorder()
    for strategy, values, *repeat in (commits.items() if isinstance(commits, dict) else commits):
        run = recorder.add_run(strategy, "stateful", 10, "p", repeat=repeat[0] if repeat else 0)
        batches = []
        for b, value in enumerate(values, start=1):
            batches.append(progress(b, value - 1.0))
            batches[-1]["durationMs"]["commitOffsets"] = 1.0
        recorder.add_batches(run, "measured", batches)
        recorder.add_requests(run, [event(b + 0.01 * (i + 1), "PUT", f"p/offsets/{b}")
                                    for b in range(1, len(values) + 1) for i in range(puts[strategy])], batches)
    env = {"schema_version": schema.SCHEMA_VERSION, "experiment": "streaming", "store": "ceph",
           "plan": {"keys": [10]}}
    return disk.read(disk.write(recorder.results(env), tmp_path / name))


def replaced_rule(record: results.Results) -> str:
    """The rule this module replaced, kept here to show what it got wrong: the lowest commit p50 of
    one run, within 10% of it the cheapest (to the cent)."""
    figures = {}
    for strategy in record.strategies():
        run = record.run(strategy, "stateful", 10)
        p50 = metrics.duration_percentile(run, "walCommit", 50) + metrics.duration_percentile(run, "commitOffsets", 50)
        figures[strategy] = (p50, round(metrics.mean(metrics.dollars_per_batch([run])), 8))
    fastest = min(p50 for p50, _ in figures.values())
    return min((s for s, (p50, _) in figures.items() if p50 <= fastest * 1.1), key=lambda s: figures[s][1])


def test_a_millisecond_of_jitter_is_a_tie_settled_by_cost(tmp_path):
    d = decide.decide(jittered(tmp_path, {"conditional": SEVEN, "manifest": EIGHT}, DEARER_FASTER), "stateful")
    assert d.recommended == "manifest"
    conditional = next(c for c in d.candidates if c.strategy == "conditional")
    assert conditional.commit_median == metrics.Interval(7.0, 6.5, 7.5)
    # 3 PUTs in every batch: the interval of the mean is a point. $0.005 per 1,000, 259,200 batches a month.
    assert dataclasses.astuple(conditional.dollars_interval) == pytest.approx((3.888,) * 3)
    # The difference is clear, but 1 ms is under Spark's 2 ms resolution (no store floor in this record).
    assert conditional.note == (
        "as fast: 7.0 ms [6.5, 7.5] against 8.0 ms [7.5, 8.5], the difference -1.0 ms [-1.5, -0.5] is clear but "
        "within 2.0 ms (10% of the fastest's median, at least one store round trip: Spark's resolution, 2 ms, as the "
        "record has no store floor), but dearer: $3.89 [3.89, 3.89] against $2.59 [2.59, 2.59] a month")
    assert d.reasons[0] == ("commits a batch in 8 ms (p50; p95 9 ms), as fast as the fastest within the noise: its "
                            "batches' walCommit + commitOffsets have a median of 8.0 ms [7.5, 8.5] over 10 batches; it "
                            "won on cost among the 2 as fast: $2.59 [2.59, 2.59] a month, the others dearer")


def test_a_clear_and_large_difference_is_slower_with_its_interval(tmp_path):
    d = decide.decide(jittered(tmp_path, {"conditional": SEVEN, "manifest": FOURTEEN}, DEARER_FASTER), "stateful")
    assert d.recommended == "conditional"
    assert d.reasons[0].endswith("a median of 7.0 ms [6.5, 7.5] over 10 batches; it won on latency")
    manifest = next(c for c in d.candidates if c.strategy == "manifest")
    assert manifest.note == ("slower: 14.0 ms [13.5, 14.5] against 7.0 ms [6.5, 7.5] per batch's commits; the "
                             "difference 7.0 ms [6.5, 7.5] is clear and at least 2.0 ms")
    assert manifest.commit_difference == metrics.Interval(7.0, 6.5, 7.5)


def test_one_batch_moved_flipped_the_replaced_rule_and_not_this_one(tmp_path):
    """The broken case: 7 ms against 8 ms, where the replaced rule called manifest slower on 1 ms.
    Swap one batch between the two (conditional's 6 ms, manifest's 9 ms) and its answer flips;
    this rule's stays the tie settled by cost."""
    before = jittered(tmp_path, {"conditional": SEVEN, "manifest": EIGHT}, DEARER_FASTER, "before")
    seven, eight = list(SEVEN), list(EIGHT)
    seven[1], eight[3] = eight[3], seven[1]
    after = jittered(tmp_path, {"conditional": seven, "manifest": eight}, DEARER_FASTER, "after")
    assert (replaced_rule(before), replaced_rule(after)) == ("conditional", "manifest")
    assert [decide.decide(r, "stateful").recommended for r in (before, after)] == ["manifest", "manifest"]


@pytest.mark.parametrize("slower, winner", [(EIGHT, "manifest"), (FOURTEEN, "conditional")])
def test_resampled_batches_give_the_same_answer(tmp_path, slower, winner):
    """The batches of a fixed record resampled (with replacement, 20 seeds): where the data cannot
    separate the two the answer is the same tie settled by cost every time, where they can the same
    winner; the replaced rule flips between the two on the tie. So does each half of a record of two
    repeats resampled apart (``decide.halves``, what the reproducibility figure compares, 10 seeds)."""
    answers, replaced, halves = set(), set(), set()
    for seed in range(20):
        rng = np.random.default_rng(seed)
        record = jittered(tmp_path, {"conditional": list(rng.choice(SEVEN, len(SEVEN))),
                                     "manifest": list(rng.choice(slower, len(slower)))}, DEARER_FASTER, f"s{seed}")
        answers.add(decide.decide(record, "stateful").recommended)
        replaced.add(replaced_rule(record))
        if seed < 10:
            repeats = [(s, list(rng.choice(values, len(values))), r)
                       for r, (s, values) in config.interleaved([("conditional", SEVEN), ("manifest", slower)], 2)]
            halves.add(tuple(d.recommended for d in decide.halves([jittered(tmp_path, repeats, DEARER_FASTER,
                                                                             f"h{seed}")], "stateful")))
    assert answers == {winner}
    assert halves == {(winner, winner)}
    if slower is EIGHT:
        assert replaced == {"conditional", "manifest"}


def test_the_same_record_decided_twice_gives_the_same_notes(tmp_path):
    written = jittered(tmp_path, {"conditional": SEVEN, "manifest": EIGHT, "rename": FOURTEEN},
                       {**DEARER_FASTER, "rename": 5})
    first, second = (decide.decide(disk.read(tmp_path / "ceph-streaming"), "stateful") for _ in range(2))
    assert [c.note for c in first.candidates] == [c.note for c in second.candidates]
    assert first.reasons == second.reasons
    assert [c.note for c in decide.decide(written, "stateful").candidates] == [c.note for c in first.candidates]


def test_the_repeats_of_a_configuration_are_pooled(tmp_path):
    """Two runs of conditional: its verdict rests on both runs' batches, where ``Results.run`` is the last."""
    record = jittered(tmp_path, [("conditional", FOURTEEN), ("manifest", EIGHT), ("conditional", SEVEN)],
                      {"conditional": 2, "manifest": 3})
    assert [len(r.batches) for r in record.runs_of("conditional", "stateful", 10)] == [10, 10]
    assert record.runs_of("direct", "stateful", 10) == []
    d = decide.decide(record, "stateful")
    conditional = next(c for c in d.candidates if c.strategy == "conditional")
    assert (conditional.runs, len(conditional.commit_samples)) == (2, 20)
    assert conditional.commit_median.value == metrics.median(SEVEN + FOURTEEN) == 10.5
    # conditional's figures pool both runs, the tables' p50 too; manifest's interval overlaps: a tie, by cost.
    assert (d.recommended, conditional.commit_p50_ms) == ("conditional", 10.5)
    assert d.reasons[0] == ("commits a batch in 10 ms (p50; p95 15 ms), as fast as the fastest within the noise: its "
                            "batches' walCommit + commitOffsets have a median of 10.5 ms [7.0, 14.0] over 20 batches "
                            "of 2 runs; it won on cost among the 2 as fast: $2.59 [2.59, 2.59] a month, the others "
                            "dearer")


# -- repeats: each configuration in more than one query, in mirrored rounds -------------------------


def test_the_queries_run_in_mirrored_rounds():
    """A B C, then C B A: over a pair of rounds every configuration's mean position is the same, so a
    drift linear in time adds the same to each; the streaming experiment runs its strategies (the
    floor among them) so per workload, the plan's batches split over the repeats, then its state
    sweep once."""
    order = config.interleaved(["A", "B", "C"], 4)
    assert [c for _, c in order] == list("ABCCBAABCCBA")
    assert [r for r, _ in order] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    positions = {c: np.mean([i for i, (_, x) in enumerate(order) if x == c]) for c in "ABC"}
    assert len(set(positions.values())) == 1
    plan = config.PLANS["smallest"]
    assert (plan.repeats, plan.batches, plan.batches_per_query) == (2, 3, 2)
    assert all(p.repeats >= 2 for p in config.PLANS.values())  # the reproducibility figure cuts them in halves
    queries = streaming.queries(plan, ["rename", "conditional", ckpt_impls.FLOOR.name])
    floor = ckpt_impls.FLOOR.name
    assert queries == [
        *[(s, w, 100, 1, 2, r) for w in plan.workloads
          for r, s in ((0, "rename"), (0, "conditional"), (0, floor), (1, floor), (1, "conditional"), (1, "rename"))],
        ("rename", "stateful", 1_000, 1, 2, 0), ("conditional", "stateful", 1_000, 1, 2, 0)]
    stateless = config.Shape("stateless")
    first = levers.stage_one((stateless,), ["rename", "conditional"], staged=True)
    assert first == {stateless: [(p, "rename") for p in ("default", "async-progress", "slots-2", "slots-4")]}
    # The floor in Spark's defaults and at each task slots alone, not in every lever's.
    assert levers.stage_one((stateless,), ["rename"], staged=True, floor=True)[stateless] == [
        *first[stateless], *((p, ckpt_impls.FLOOR.name) for p in ("default", "slots-2", "slots-4"))]
    assert levers.with_floor([("changelog", "direct"), ("default", "rename"), ("changelog", "rename")]) == [
        ("changelog", "direct"), ("default", "rename"), ("changelog", "rename"),
        ("changelog", ckpt_impls.FLOOR.name), ("default", ckpt_impls.FLOOR.name)]
    # A session per task slots per core, one slot first; on a cluster every one in the one-slot session.
    assert levers.by_slots(first, "local[2]") == {
        1: {stateless: [("default", "rename"), ("async-progress", "rename")]},
        2: {stateless: [("slots-2", "rename")]}, 4: {stateless: [("slots-4", "rename")]}}
    assert levers.by_slots(first, "spark://host:7077") == {1: first}
    # The sessions are visited in mirrored order too, the last one's halves in one visit: every task
    # slots' mean position over the stage is the same, so its order does not tell them apart.
    order = levers.visits([1, 2, 4], 2)
    assert order == [(1, range(0, 1)), (2, range(0, 1)), (4, range(0, 2)), (2, range(1, 2)), (1, range(1, 2))]
    runs = [n for n, repeats in order for _ in repeats]
    assert len({np.mean([i for i, x in enumerate(runs) if x == n]) for n in (1, 2, 4)}) == 1
    assert levers.visits([1, 2, 4], 1) == [(n, range(1)) for n in (1, 2, 4)]
    assert levers.visits([1], 4) == [(1, range(4))]
    assert [n for n, _ in levers.visits([1, 4], 3)] == [1, 4, 1]
    rocksdb = config.Shape("stateful", "rocksdb")
    assert levers.stage_one((rocksdb,), ["rename", "conditional"], staged=False,
                            presets=("default", "changelog", "async-progress", "no-such")) == {
        rocksdb: [(p, s) for p in ("default", "async-progress", "changelog") for s in ("rename", "conditional")]}


def repeated(tmp_path, commits: dict[str, list[list[int]]], name: str = "ceph-streaming") -> results.Results:
    """``jittered``'s record with each strategy run once per list of ``commits[s]``, the repeats in
    mirrored rounds (``config.interleaved``), as the streaming experiment runs them."""
    order = config.interleaved(list(commits), max(map(len, commits.values())))
    return jittered(tmp_path, [(s, commits[s][r], r) for r, s in order], DEARER_FASTER, name)


def test_the_repeats_are_pooled_and_each_half_decided_apart(tmp_path):
    record = repeated(tmp_path, {"conditional": [SEVEN, FOURTEEN], "manifest": [FOURTEEN, EIGHT]})
    assert list(zip(record.runs.strategy, record.runs.repeat, strict=True)) == [
        ("conditional", 0), ("manifest", 0), ("manifest", 1), ("conditional", 1)]
    d = decide.decide(record, "stateful")
    pooled = {c.strategy: (c.runs, len(c.commit_samples)) for c in d.candidates}
    assert pooled == {"conditional": (2, 20), "manifest": (2, 20)}
    first, second = jobs.halves(record)
    assert [list(half.runs.repeat) for half in (first, second)] == [[0, 0], [1, 1]]
    assert set(first.batches.run) == set(first.runs.run) and set(second.batches.run) == set(second.runs.run)
    # The broken case: the first half says conditional (7 ms against 14), the second manifest (8
    # against 14): noise or drift decided one of them, and the figure says so.
    assert [h.recommended for h in decide.halves([record], "stateful")] == ["conditional", "manifest"]
    steady = repeated(tmp_path, {"conditional": [SEVEN, EIGHT], "manifest": [FOURTEEN, FOURTEEN]}, "steady")
    assert [h.recommended for h in decide.halves([steady], "stateful")] == ["conditional", "conditional"]


def test_halves_keep_a_refusal_and_need_two_repeats(tmp_path):
    record = repeated(tmp_path, {"conditional": [SEVEN, SEVEN], "manifest": [EIGHT, EIGHT]})
    runs = record.runs.copy()
    refused = results.Recorder()
    refused.fail_run(refused.add_run("rename", "stateful", 10, "r"), "Spark refuses it", refused=True)
    record = disk.merge([record, refused.results(record.environment)])
    assert [sorted(half.runs.strategy) for half in jobs.halves(record)] == [["conditional", "manifest", "rename"]] * 2
    for half in decide.halves([record], "stateful"):
        assert {c.strategy: c.refused for c in half.candidates}["rename"]
    once = results.Results(record.environment, {**record.tables, "runs": runs.assign(repeat=0)})
    with pytest.raises(ValueError, match="one query per configuration"):
        jobs.halves(once)


# -- one decision per job ------------------------------------------------------------------------------


def test_the_streaming_workloads_of_a_job_run_its_shape_in_its_configuration():
    # config.STREAMING_JOBS is the one place that says which workload is which job: the workload's
    # session settings must be the shape's and its configuration's, over the session's own.
    for workload, (shape, preset) in config.STREAMING_JOBS.items():
        ran = {**spark.BASE_CONF, **config.WORKLOAD_CONF.get(workload, {})}
        wanted = {**shape.conf(), **config.preset(preset)[0]}
        assert {k: ran.get(k) for k in wanted} == wanted, workload
        assert ran.get(config.CHANGELOG, "false") == wanted.get(config.CHANGELOG, "false"), workload
        assert shape.sink == "noop" and shape.kind == "stateful", workload
    assert config.job_of("stateful", 1000) == ("stateful-hdfs-noop-2p", "default")
    assert config.job_of("stateful_rocksdb_changelog", 1000) == ("stateful-rocksdb-noop-2p", "changelog")
    assert config.job_of("stateful", 100) == ("stateful", "default")  # another state size: another job
    assert config.job_of("file_sink", 1000) == ("file_sink", "default")


def test_a_jobs_record_holds_its_runs_of_every_record_renumbered():
    streaming = fixed_streaming_record()
    recorder = results.Recorder()
    for keys, workload in ((1000, "stateful_no_checksum"), (30_000, "stateful")):
        run = recorder.add_run("conditional", workload, keys, "q")
        recorder.add_batches(run, "measured", [progress(b, 1.0) for b in (1, 2, 3)])
    levers = fixed_levers_record({"rename": 40.0, "conditional": 5.0})
    records = [disk.merge([streaming, recorder.results(streaming.environment)]), levers]
    job = config.Shape().name
    assert jobs.jobs(records) == [job, "file_sink"]
    merged = jobs.job_record(records, job)
    runs = merged.runs
    assert set(runs.workload) == {job} and set(runs["keys"]) == {1000}  # the state sweep's 30,000 keys are not it
    assert list(zip(runs.strategy, runs.preset, strict=True)) == [
        ("rename", "default"), ("direct", "default"), ("conditional", "default"), ("manifest", "default"),
        ("conditional", "no-checksum"), ("rename", "default"), ("conditional", "default")]
    assert runs.run.is_unique and set(merged.batches.run) == set(runs.run)
    assert len(merged.batches) == 4 * 5 + 3 + 2 * 5
    with pytest.raises(KeyError, match="no run of job windowed"):
        jobs.job_record(records, "windowed")
    # One decision per job, over all of them: the configurations of both records are its candidates.
    decisions = decide.per_job(records)
    assert list(decisions) == [job, "file_sink"]
    assert {c.label for c in decisions[job].candidates} == {"rename", "direct", "conditional", "manifest",
                                                            "conditional + no-checksum"}
    assert decisions[job].recommended == "conditional + no-checksum"


def test_a_job_reads_the_store_outages_of_the_fault_lab_workload_closest_to_it():
    """Each job's decision weighs the outages of its own kind of fault-lab workload: the streaming
    record's stateful job (named as its shape) those of ``stateful``, the file sink those of
    ``file_sink``; every workload's only where the fault lab ran none of its kind."""
    rode = {s: {"outage-5s": outage("outage-5s", True)} for s in ("rename", "conditional")}
    died = {"rename": rode["rename"], "conditional": {"outage-5s": outage("outage-5s", False, 1.4)}}
    records = [fixed_streaming_record()]
    job = config.Shape().name
    decisions = decide.per_job(records, outages={"stateful": rode, "file_sink": died, None: died})
    worse = {j: {c.strategy for c in d.candidates if c.outage_worse} for j, d in decisions.items()}
    assert worse == {job: set(), "file_sink": {"conditional"}}
    decisions = decide.per_job(records, outages={"stateless": rode, None: died})
    assert {c.strategy for c in decisions[job].candidates if c.outage_worse} == {"conditional"}


@pytest.mark.parametrize("kind", ["stateless", "stateful"])
@pytest.mark.parametrize("sink", config.SINKS)
def test_every_job_has_a_fault_lab_workload_of_its_kind_and_sink(kind, sink):
    for provider in config.PROVIDERS:
        job = config.Shape(kind, provider, partitions=200, sink=sink).name
        wanted = "file_sink" if sink == "file" else kind
        assert jobs.fault_workload(job) == wanted, job
    for workload in (*config.FAULT_WORKLOADS, *config.STREAMING_JOBS, "windowed", "file_source"):
        job, _ = config.job_of(workload, config.Shape().keys)
        assert jobs.fault_workload(job) in config.FAULT_WORKLOADS
    assert [jobs.fault_workload(w) for w in config.FAULT_WORKLOADS] == list(config.FAULT_WORKLOADS)
    assert jobs.fault_workload("file_source") == "file_sink" and jobs.fault_workload("windowed") == "stateful"


def test_a_configuration_measured_on_a_busy_machine_says_so_first():
    quiet = record(BASE, PUTS)
    d = decide.decide(quiet, "stateful", safety=RACED)
    assert d.recommended == "conditional" and not any("busy" in r for r in d.reasons)  # not measured: nothing said
    for share, said in ((0.02, False), (0.34, True)):
        busy = record(BASE, PUTS)
        busy.runs["others_cpu"] = np.where(busy.runs.strategy == "manifest", share, 0.01)
        d = decide.decide(busy, "stateful", safety=RACED)
        assert d.recommended == "conditional"  # the rule stands; the reasons say what it rests on
        assert d.reasons[0].startswith("measured on a busy machine: other processes took up to 34% of its CPU") is said
        assert {c.strategy: c.others_cpu for c in d.candidates}["manifest"] == share
    # A configuration out of the running (its store cannot run it) is not compared: its load is not said.
    d = decide.decide(busy, "stateful", safety=RACED, runnable={"manifest": "no conditional PUT"})
    assert not any("busy" in r for r in d.reasons)
