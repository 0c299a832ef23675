"""Money from request counts: the price file's tiers, what is billed, and the month arithmetic, on
fixed inputs (a projection at AWS list prices: nothing here is measured)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from ckptbench import metrics
from ckptbench.metrics import cost
from ckptbench.record import disk, results
from ckptbench.report import costs
from helpers import ROOT, event, progress
from infra.s3ops import OPS


def test_every_operation_has_a_price_tier():
    assert set(cost.prices()["tiers"]) == set(OPS)


def test_dollars_by_tier():
    assert cost.dollars({"PUT": 1000}) == pytest.approx(0.005)
    assert cost.dollars({"LIST": 1000, "COPY": 1000}) == pytest.approx(0.010)
    assert cost.dollars({"GET": 1000, "HEAD": 1000}) == pytest.approx(0.0008)
    assert cost.dollars({"DELETE": 1000, "MPU_ABORT": 5}) == 0
    # A 10-request batch every 10 s: 259,200 batches in 30 days.
    assert cost.per_month(10, 10) == 2_592_000


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("500ms", 0.5), ("1min", 60), ("2h", 7200), ("3", 3)])
def test_trigger_intervals(text, seconds):
    assert cost.parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "ten seconds", "-1s"])
def test_bad_trigger_intervals_say_what_is_expected(text):
    with pytest.raises(ValueError, match="interval"):
        cost.parse_interval(text)


def test_5xx_answers_are_not_billed_4xx_are():
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 1, "p")
    batches = [progress(1, 10.0), progress(2, 10.0)]
    recorder.add_batches(run, "measured", batches)
    events = [event(1.01, "PUT", "p/offsets/1"),
              dataclasses.replace(event(1.02, "PUT", "p/offsets/1"), status=503),
              dataclasses.replace(event(2.01, "PUT", "p/offsets/2"), status=412)]
    recorder.add_requests(run, events, batches)
    by_op = metrics.billable_requests_by_op(recorder.results({}).run("conditional", "stateful", 1))
    assert by_op == {"PUT": 1.0}  # batch 1: one billed (not the 503); batch 2: the 412 is billed


# The committed sample's records (docs/sample-report/raw): fixed inputs whose tables are known.
SAMPLE = ROOT / "docs" / "sample-report" / "raw"


def cost_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptbench", "cost", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_cost_prints_the_cost_table_of_the_records():
    table = costs.cost_table([disk.read(SAMPLE / "ceph-streaming")], "10s", 10.0)
    assert table.caption == f"Cost per month, one query, a batch every 10s: {cost.caption()}."
    assert len(table.rows) == 12  # 4 strategies x 3 workloads, in the record's order
    assert ["ceph", "conditional", "stateful", "4.0", "20.00", "1,036,800", "5.18"] in table.rows
    done = cost_cli("--record", str(SAMPLE / "ceph-streaming"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == table.markdown() + "\n"
    assert "| ceph | conditional | stateful | 4.0 | 20.00 | 1,036,800 | 5.18 |" in done.stdout.splitlines()


def test_cost_at_scale_prints_the_projection_and_the_maintenance_apart():
    records = [disk.read(SAMPLE / "ceph-scale")]
    table, fitted = costs.cost_at_scale_table(records, 200, "10s", 10.0)
    assert fitted == 4 and table.rows[0] == ["ceph", "rename", "2, 20", "23.81 (r² 1.00)", "4,813.5 (extrapolated)",
                                             "1,247,659,200", "3,097.05"]
    assert table.note.startswith("Not in these figures: the state store's maintenance")
    assert table.note.splitlines()[1].startswith("- ceph rename: listings 2.14 requests per state partition")
    done = cost_cli("--partitions", "200", "--record", str(SAMPLE / "ceph-scale"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == table.markdown() + "\n"
    # A strategy with no fit says why in its row; with none fitted, nothing is projected.
    table, fitted = costs.cost_at_scale_table(records, 20, "1min", 60.0, ["conditional", "bogus"])
    assert fitted == 1 and table.rows[1][:2] == ["ceph", "bogus"] and table.rows[1][2].startswith("no fit: ")
    assert table.rows[0][4] == "22.0"  # at a measured point: not extrapolated
    assert costs.cost_at_scale_table(records, 200, "10s", 10.0, ["bogus"])[1] == 0
