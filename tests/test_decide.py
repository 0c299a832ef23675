"""The recommendation follows the measured numbers: fed fixed records, it picks by the documented
rule, and changing a number changes the verdict."""

from __future__ import annotations

import pytest

import ckpt_impls
from ckptbench import config, decide
from ckptbench.harness import spark
from ckptbench.record import disk, results, schema
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


def test_the_fastest_that_refuses_a_second_writer():
    d = decide.decide(record(BASE, PUTS), "stateful", safety=RACED)
    assert d.recommended == "conditional"
    # p95 19: three walCommits of 12 ms read as 12 +- 0.5 (metrics.whole_ms_percentile), p95 12.4, and 6.4 more.
    assert d.reasons[0].startswith("commits a batch in 18 ms (p50; p95 19 ms), the fastest of the strategies that "
                                   "refuse a second writer")
    notes = {c.strategy: c.note for c in d.candidates}
    assert notes["manifest"] == "slower: 24 ms against 18 ms per batch's commits"
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
        assert d.reasons[-2] == ("whether a second writer is refused was not measured on this store (the race was "
                                 "not run), so no strategy was preferred for it")
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
    assert "within 10% of the fastest and the cheapest" in d.reasons[0]
    conditional = next(c for c in d.candidates if c.strategy == "conditional")
    assert conditional.note.startswith("as fast (within 10%) but dearer")


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
    # Without that finding the lever wins, and its crash-lab evidence is named as what it is.
    d = decide.decide(record, "stateful", safety=raced(rename=False, conditional=True))
    assert d.recommended == "conditional + async-progress"
    assert ("exactly-once held through 10 crash cycles in Spark's own settings; with async-progress it was not "
            "crash-tested on this store") in d.reasons


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
    assert decide.jobs(records) == [job, "file_sink"]
    merged = decide.job_record(records, job)
    runs = merged.runs
    assert set(runs.workload) == {job} and set(runs["keys"]) == {1000}  # the state sweep's 30,000 keys are not it
    assert list(zip(runs.strategy, runs.preset, strict=True)) == [
        ("rename", "default"), ("direct", "default"), ("conditional", "default"), ("manifest", "default"),
        ("conditional", "no-checksum"), ("rename", "default"), ("conditional", "default")]
    assert runs.run.is_unique and set(merged.batches.run) == set(runs.run)
    assert len(merged.batches) == 4 * 5 + 3 + 2 * 5
    with pytest.raises(KeyError, match="no run of job windowed"):
        decide.job_record(records, "windowed")
    # One decision per job, over all of them: the configurations of both records are its candidates.
    decisions = decide.per_job(records)
    assert list(decisions) == [job, "file_sink"]
    assert {c.label for c in decisions[job].candidates} == {"rename", "direct", "conditional", "manifest",
                                                            "conditional + no-checksum"}
    assert decisions[job].recommended == "conditional + no-checksum"
