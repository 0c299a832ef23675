"""The race (``ckptbench.experiments.race``) on Ceph RGW: two managers of one strategy create one
file at once, the metering proxy holding both writes until they meet. It catches a manager that
checks and then writes (``direct``: both writers win every round) and passes an atomic create
(``conditional``: exactly one wins, the other gets FileAlreadyExistsException, the winner's
content stays). The rendezvous keys never include a writer's own temp or staged keys."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid

import pytest

from ckptbench import metrics
from ckptbench.experiments import race
from ckptbench.experiments.crashlab import RACE_WAIT_S
from ckptbench.record import results
from helpers import bucket_of, crash_lab
from infra.metered import MeteredStore

ROUNDS = 3
ALREADY_EXISTS = "org.apache.hadoop.fs.FileAlreadyExistsException"


@pytest.fixture(scope="module")
def proxied_ceph(suite_stores):
    store = suite_stores.get("ceph")
    with MeteredStore(store) as metered:
        yield metered, bucket_of(store)


def raced(spark, proxied, strategy: str, kinds) -> results.Results:
    store, bucket = proxied
    prefix = f"race-{strategy}-{uuid.uuid4().hex[:8]}"
    recorder = results.Recorder()
    recorder.rows["races"] = race.race(spark, store, bucket, prefix, strategy, kinds, ROUNDS)
    store.inner.empty_bucket(bucket, prefix + "/")
    return recorder.results({})


@pytest.mark.ceph
def test_the_race_catches_a_check_then_write_manager(spark, proxied_ceph):
    record = raced(spark, proxied_ceph, "direct", ("offsets", "state"))
    assert len(record.races) == 2 * ROUNDS
    assert record.races.paired.all(), record.races
    assert (record.races.winners == 2).all(), record.races
    assert metrics.race_two_winners(record, "direct") == 2 * ROUNDS
    assert metrics.refuses_second_writer(record, "direct") is False


@pytest.mark.ceph
def test_the_race_passes_an_atomic_create(spark, proxied_ceph):
    record = raced(spark, proxied_ceph, "conditional", ("commits", "_spark_metadata"))
    assert record.races.paired.all(), record.races
    assert (record.races.winners == 1).all(), record.races
    for row in record.races.itertuples():
        outcomes = {row.outcome_0, row.outcome_1}
        assert outcomes == {"won", ALREADY_EXISTS}, outcomes
        winner = 0 if row.outcome_0 == "won" else 1
        assert row.content == f"writer-{winner}", row  # the loser did not replace it
    assert metrics.race_one_winner(record, "conditional") == 2 * ROUNDS
    assert metrics.refuses_second_writer(record, "conditional") is True


def test_the_rendezvous_keys_are_the_ones_both_writers_write():
    key = "p/checkpoint/offsets/7"
    mirror, manifest = race.key_pattern(key, True), race.key_pattern(key, False)
    assert re.fullmatch(mirror, key) and re.fullmatch(manifest, key)
    assert re.fullmatch(manifest, "p/checkpoint/offsets/_manifest/r/00000000000000000003")
    for own in ("p/checkpoint/offsets/.7.0b3c-41d2.tmp", "p/checkpoint/offsets/_manifest/s/0b3c-41d2",
                "p/checkpoint/offsets/70", "p/checkpoint/offsets/_manifest/c/00000000000000000010"):
        assert not re.fullmatch(mirror, own) and not re.fullmatch(manifest, own), own
    with pytest.raises(ValueError, match="unknown file kind"):
        race.file_of("sources", 0)


# -- two drivers held at one file (the crash lab's two-writer run), in the suite's own process: --------
# beside it, niced, the two drivers can be too starved to meet.

def test_two_drivers_held_at_offsets_both_write_it_through_direct(spark, suite_stores):
    """Started together, each driver's write of offsets/0 held by the proxy until the other's came:
    through ``direct`` (check, then write) both pass their checks and both store it, damage the
    zombie run never shows; the rendezvous met, so the run tested the window.

    Starved of CPU, one driver can end before its write or reach it after the other's wait ran out
    (``RACE_WAIT_S``, bounded by S3A's own request timeout): the row says so (``race_met``), and the
    run is tried once more. A held
    write whose pair never came is recorded when its wait ends, which can be during the next run,
    so the injections are told apart by their run's key, not by when they came."""
    rows = []
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        seen = len(crash.store.proxy.injections())
        while len(rows) < 2 and not (rows and rows[-1]["race_met"]):
            rows.append(crash.two_writers("direct", head_start=0))
        met = [i for i in crash.store.proxy.injections()[seen:] if i.fault == "rendezvous"]
    assert len(met) == sum(row["race_met"] for row in rows), (rows, met)
    assert all(i.key.endswith("/checkpoint/offsets/0") for i in met), met
    row = rows[-1]
    assert row["race"] == "offsets" and row["race_met"], rows
    assert row["outcome"] == "silent-damage", row
    assert "checkpoint/offsets/0" in row["overwritten_files"].split(","), row


def when_the_second_is_ready(crash, act) -> threading.Thread:
    """A thread that calls ``act(driver)`` on the second driver of the lab's next two-writer run as
    soon as its session is up (its ``ready`` event), before or as the lab lets its query start."""
    first = len(crash.drivers)

    def watch() -> None:
        while len(crash.drivers) < first + 2:
            time.sleep(0.05)
        second = crash.drivers[first + 1]
        while second.first("ready") is None and second.alive():
            time.sleep(0.05)
        act(second)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def run_faults(crash, seen: int, strategy: str) -> list[str]:
    """The rendezvous injections of the two-writer runs of ``strategy`` since ``seen``."""
    return [i.fault for i in crash.store.proxy.injections()[seen:]
            if i.fault.startswith("rendezvous") and f"crash/two-{strategy}-" in i.key]


def raced_with_second(spark, suite_stores, act, look_s: float = 0.0) -> tuple[dict, list[str]]:
    """A raced two-writer run of ``direct`` on the embedded store, ``act(driver)`` done to its second
    driver as that driver's session comes up: the run's row and its rendezvous injections, looked for
    until one is seen or ``look_s`` has passed."""
    with crash_lab(spark, suite_stores.get("embedded")) as (crash, _):
        seen = len(crash.store.proxy.injections())
        watcher = when_the_second_is_ready(crash, act)
        row = crash.two_writers("direct", head_start=0)
        watcher.join(60)
        deadline = time.monotonic() + look_s
        while not (faults := run_faults(crash, seen, "direct")) and time.monotonic() < deadline:
            time.sleep(1)
    return row, faults


def test_two_drivers_meet_when_the_second_is_slow_to_start(spark, suite_stores):
    """The second driver frozen (SIGSTOP, its JVM too) as its session comes up, for longer than a
    write takes, then let go: the first's write of offsets/0 waits for it, and they meet. The
    rendezvous is released only once a driver has ended, never because the other is slow."""
    def slow(driver) -> None:
        os.killpg(driver.pid, signal.SIGSTOP)
        time.sleep(10)
        os.killpg(driver.pid, signal.SIGCONT)

    row, faults = raced_with_second(spark, suite_stores, slow)
    assert row["race_met"], (row, faults)
    assert faults == ["rendezvous"], faults
    assert row["second_started"], row


def test_a_round_whose_second_driver_dies_ends_unmet_without_waiting_out_the_rendezvous(spark, suite_stores):
    """The second driver frozen as its session comes up (so that the first reaches its held write
    alone), then killed: it never writes. The lab releases the first's held write as soon as it
    sees the second gone (``rendezvous-released``), never leaving it to wait out its limit
    (``rendezvous-timeout``, recorded when that wait ends: looked for until it would have), and
    the row says the race did not meet."""
    def dies(driver) -> None:
        os.killpg(driver.pid, signal.SIGSTOP)
        time.sleep(15)
        os.killpg(driver.pid, signal.SIGKILL)

    row, faults = raced_with_second(spark, suite_stores, dies, look_s=RACE_WAIT_S + 30)
    assert row["race_met"] is False, row
    assert faults in ([], ["rendezvous-released"]), faults  # released held, or never held: never timed out
    assert not row["second_started"], row
