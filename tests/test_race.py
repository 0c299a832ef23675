"""The race (``ckptbench.experiments.race``) on Ceph RGW: two managers of one strategy create one
file at once, the metering proxy holding both writes until they meet. It catches a manager that
checks and then writes (``direct``: both writers win every round) and passes an atomic create
(``conditional``: exactly one wins, the other gets FileAlreadyExistsException, the winner's
content stays). The rendezvous keys never include a writer's own temp or staged keys."""

from __future__ import annotations

import re
import uuid

import pytest

from ckptbench import metrics
from ckptbench.experiments import race
from ckptbench.record import results
from helpers import bucket_of
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
