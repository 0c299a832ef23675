"""The asv suite's values worked out once per experiment (``benchmarks.common.values``) and looked up
by each benchmark's process: the same numbers as each track worked out from the record, a track that
raised raising again where asv runs it, and no parameter cell of the levers' grid that can hold no
value. The suite run through asv itself, every benchmark giving a number, is ``test_benchmarks.py``'s."""

from __future__ import annotations

import math

import pytest

from benchmarks import common, levers
from benchmarks.commit_latency import CommitLatency
from benchmarks.requests import Requests
from ckptbench import config
from helpers import fixed_streaming_record


@pytest.fixture(scope="module")
def streaming():
    """A fixed streaming record and the suite's values worked out from it."""
    record = fixed_streaming_record()
    return record, common.values(common.streaming, record)


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_every_value_looked_up_is_the_one_its_track_works_out_from_the_record(streaming):
    record, values = streaming
    classes = {key[:2] for key in values}
    assert ("benchmarks.requests", "Requests") in classes and ("benchmarks.floor", "ClientFloor") in classes
    assert not any(cls == "Floor" for _, cls, _, _ in values)  # the store alone's, another experiment
    numbers = 0
    for cls in common._suite():
        if cls.setup_cache is not common.streaming:
            continue
        for name in (n for n in dir(cls) if n.startswith("track_")):
            for cell in common._cells(cls):
                value = values[common._key(cls, name, cell)]
                try:
                    direct = getattr(cls(), name)(record, *cell)
                except Exception as e:  # the same failure, kept for asv's process to raise
                    assert isinstance(value, common.Failed) and type(e).__name__ in value.trace, (name, cell)
                    continue
                assert _same(getattr(cls(), name)(values, *cell), direct), (cls.__name__, name, cell)
                numbers += not math.isnan(direct)
    assert numbers > 100, numbers


def test_a_looked_up_value_is_the_records_own_and_a_failed_one_raises_where_asv_runs_it(streaming):
    record, values = streaming
    latency = CommitLatency()
    assert latency.track_wal_commit_p50(values, "conditional", "stateful") == \
        latency.track_wal_commit_p50(record, "conditional", "stateful")
    # A changed record changes the value looked up: the table is the record's, not a constant.
    other = common.values(common.streaming, fixed_streaming_record({s: 50.0 for s in
                                                                     ("rename", "direct", "conditional", "manifest")}))
    assert latency.track_wal_commit_p50(other, "conditional", "stateful") != \
        latency.track_wal_commit_p50(values, "conditional", "stateful")
    # No run of this workload in the record: the record's KeyError, raised again at look-up.
    with pytest.raises(KeyError):
        Requests().track_total_per_batch(record, "conditional", "windowed")
    if "windowed" in common.WORKLOADS:
        with pytest.raises(RuntimeError, match=r"(?s)Requests\.track_total_per_batch.*KeyError"):
            Requests().track_total_per_batch(values, "conditional", "windowed")


def test_the_levers_grid_holds_only_the_configurations_each_job_is_offered():
    offered = {(shape.name, preset) for shape in common.LEVER_SHAPES for preset in config.presets_for(shape)
               if common.LEVER_CHOSEN is None or preset in common.LEVER_CHOSEN}
    assert set(levers.CONFIGURATIONS.values()) == offered
    [configurations, strategies] = levers.Levers.params
    assert len(configurations) == len(offered) and strategies == common.LEVER_STRATEGIES
    # changelog is a RocksDB lever: the HDFS-backed and stateless jobs have no cell for it.
    assert all(preset != "changelog" or "rocksdb" in job for job, preset in levers.CONFIGURATIONS.values())
