"""Money from request counts: the price file's tiers, what is billed, and the month arithmetic, on
fixed inputs (a projection at AWS list prices: nothing here is measured)."""

from __future__ import annotations

import dataclasses

import pytest

from ckptbench import metrics
from ckptbench.metrics import cost
from ckptbench.record import results
from helpers import event, progress
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
