"""Nothing is recommended untested: on fixed records, the report's decision reads ``bench``'s crash
check beside the crash lab, and ``bench`` asks the decision for the configurations to check (those
leading that the crash lab has not run in that configuration), again after each check, until the
chosen one has been checked. The smallest bench's own crash check is ``test_benchmarks.py``'s."""

from __future__ import annotations

from ckptbench import config
from ckptbench.cli import crash_check as bench
from ckptbench.experiments import crash_check
from ckptbench.report import page
from helpers import fixed_crash_record, fixed_levers_record

JOB = config.Shape().name
#: conditional with changelog checkpointing is the fastest, then with no-checksum, then Spark's settings.
WAL_MS = {"rename": 40.0, "conditional": 20.0, ("conditional", "no-checksum"): 10.0,
          ("conditional", "changelog"): 1.0}
#: The crash lab ran both strategies in Spark's own settings, and none of the levers.
CRASHLAB = {("rename", "default"): (2, 0), ("conditional", "default"): (2, 0)}


def kinds(check: dict[tuple[str, str], tuple[int, int]] | None = None) -> dict:
    """A store's records: the levers record of ``WAL_MS``, the crash lab's of ``CRASHLAB`` and, where
    given, bench's crash check of ``check``."""
    found = {"levers": fixed_levers_record(WAL_MS), config.CRASHLAB: fixed_crash_record(CRASHLAB)}
    if check is not None:
        found[config.CRASH_CHECK] = fixed_crash_record(check, config.CRASH_CHECK)
    return found


def rows(check: dict[tuple[str, str], tuple[int, int]]) -> dict[str, list[dict]]:
    """The crash check's rows of ``check``, as ``crash_check.check_leaders`` gathers them."""
    record = fixed_crash_record(check, config.CRASH_CHECK)
    return {name: record.tables[name].to_dict("records") for name in crash_check.TABLES}


def test_the_report_reads_the_crash_check_beside_the_crash_lab():
    # Before any check of the levers, the fastest configurations are out: the crash lab ran others.
    decision = page.decisions_of(kinds())[JOB]
    assert decision.recommended == "conditional"
    out = {c.label: c.out for c in decision.candidates}
    assert out["conditional + changelog"] == ("not crash-tested in this configuration on this store, unlike 2 "
                                              "others: nothing untested is recommended")
    # bench's crash check ran it: recommended, with the check's cycles as its evidence.
    decision = page.decisions_of(kinds({("conditional", "changelog"): (1, 0)}))[JOB]
    assert decision.recommended == "conditional + changelog"
    assert "exactly-once held through 1 crash cycles (0 rows lost or duplicated)" in decision.reasons
    # The check saw it lose rows: out, and the next one the crash lab ran wins, never an untested one.
    decision = page.decisions_of(kinds({("conditional", "changelog"): (1, 4)}))[JOB]
    assert decision.recommended == "conditional"
    assert {c.label: c.out for c in decision.candidates}["conditional + changelog"].startswith(
        "it broke exactly-once in the crash lab: 0 rows duplicated, 4 lost")


def test_bench_checks_the_leaders_of_the_jobs_its_levers_experiment_measured():
    records = kinds()
    records["levers"].environment["bench_run"] = "this-run"
    # The levers record this run wrote: its jobs, as it ran them.
    assert bench.crash_check_plan(records, "this-run") == [config.Shape()]
    # One an earlier run wrote (--bench left the levers out), or none: nothing to check.
    assert bench.crash_check_plan(records, "another-run") == []
    assert bench.crash_check_plan({config.CRASHLAB: records[config.CRASHLAB]}, "this-run") == []


def test_bench_asks_again_after_each_check_until_the_chosen_one_is_checked():
    leaders = bench.job_leaders(kinds(), 2)
    checked: set[tuple[str, str]] = set()

    def ask(found: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
        leading = crash_check.to_check(leaders(JOB, rows(found)), checked)
        return [f"{c.strategy}+{c.preset}" for c in leading]

    # Ranked as if nothing were out for want of a test: the two fastest, neither run by the crash lab.
    assert ask({}) == ["conditional+changelog", "conditional+no-checksum"]
    # Both checked and held: the chosen one is checked, nothing more to ask for.
    assert ask({("conditional", "changelog"): (1, 0), ("conditional", "no-checksum"): (1, 0)}) == []
    # The chosen one lost rows and the runner-up held: the runner-up leads, checked; nothing more.
    assert ask({("conditional", "changelog"): (1, 2), ("conditional", "no-checksum"): (1, 0)}) == []
    # Both lost rows: those leading now were run by the crash lab (conditional, rename): nothing more.
    assert ask({("conditional", "changelog"): (1, 2), ("conditional", "no-checksum"): (1, 2)}) == []
    # Checked once in this run (Spark lacked a lever: no cycle), it is not asked for again.
    checked.add(("conditional", "changelog"))
    assert ask({}) == ["conditional+no-checksum"]
    # One leader a round (the smallest size's plan): the chosen one alone.
    assert [c.preset for c in bench.job_leaders(kinds(), 1)(JOB, rows({}))] == ["changelog"]
