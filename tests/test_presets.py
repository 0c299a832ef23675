"""The configuration axis as data: which presets a job is offered, what each sets, which Spark
lacks a lever, how async progress tracking's interval is measured at a fast trigger, and the one
line a bad job description gets."""

from __future__ import annotations

import os

import pytest

from ckptbench import config
from ckptbench.config import Shape, presets_for
from ckptbench.harness import querylab

SLOTS = ("slots-2", "slots-4")


def test_a_stateless_job_is_offered_the_levers_that_act_on_it():
    assert presets_for(Shape("stateless")) == ("default", "async-progress", *SLOTS)


def test_a_stateful_job_is_offered_what_spark_will_refuse_and_combinations_of_what_acts():
    # Async progress and format v2 are offered to the HDFS-backed store so that Spark says no;
    # changelog checkpointing is RocksDB's and never offered to it; task slots alone, to every job.
    assert presets_for(Shape("stateful", "hdfs")) == ("default", "async-progress", "format-v2", "no-checksum", *SLOTS)
    rocksdb = presets_for(Shape("stateful", "rocksdb"))
    assert rocksdb[:7] == ("default", "async-progress", "changelog", "format-v2", "no-checksum", *SLOTS)
    assert set(rocksdb[7:]) == {"changelog+format-v2", "changelog+no-checksum", "format-v2+no-checksum",
                                "changelog+format-v2+no-checksum"}


def test_task_slots_per_core_are_a_local_masters_threads_and_nothing_elses():
    assert [config.slots_of(p) for p in ("default", "changelog", *SLOTS)] == [1, 1, 2, 4]
    assert config.preset("slots-2") == ({config.SLOTS_PER_CORE: "2"}, {})
    assert config.with_slots("local[2]", 4) == "local[8]"
    assert config.with_slots("local[2,4]", 2) == "local[4,4]"  # a task's tries are kept
    assert config.with_slots("local", 2) == "local[2]"
    assert config.with_slots("local[*]", 2) == f"local[{2 * (os.cpu_count() or 1)}]"
    for master in ("spark://host:7077", config.CLUSTER):
        assert config.with_slots(master, 1) == master
        assert config.with_slots(master, 2) is None
    assert "spark.executor.cores at 2 x the CPUs" in config.slots_said(2)


def test_a_preset_is_its_levers_settings_and_options():
    conf, options = config.preset("changelog+no-checksum")
    assert conf == {config.CHANGELOG: "true", config.FILE_CHECKSUM: "false"} and options == {}
    assert config.preset("async-progress") == ({}, {config.ASYNC_PROGRESS: "true", config.ASYNC_INTERVAL: "1000"})
    assert config.preset("default") == ({}, {})
    with pytest.raises(ValueError, match="unknown lever 'checksums-off': the levers are async-progress, changelog"):
        config.preset("changelog+checksums-off")


def test_spark_35_lacks_format_v2_and_checksums_and_says_so():
    assert querylab.lacks("3.5.5", "changelog") is None
    assert querylab.lacks("3.5.5", "async-progress") is None
    said = querylab.lacks("3.5.5", "changelog+format-v2")
    assert said.startswith("Spark 3.5.5 has no format-v2 (spark.sql.streaming.stateStore.checkpointFormatVersion: "
                           "Spark 4.0+)")
    assert "no-checksum" in querylab.lacks("4.0.1", "no-checksum")
    assert querylab.lacks("4.3.0", "changelog+format-v2+no-checksum") is None


def test_async_progress_interval_keeps_the_jobs_ratio_to_its_trigger():
    options = config.preset("async-progress")[1]
    # A 10 s job is measured at 1 s (querylab.TRIGGER_CAP_S); Spark's 1 s interval writes every batch's
    # logs at 10 s, and so does 100 ms at 1 s.
    assert querylab.measured_trigger_s(10.0) == 1.0
    assert querylab.measured_options(options, 10.0)[config.ASYNC_INTERVAL] == "100"
    # A 50 ms job is measured at its own trigger, one batch in 20 writing its logs.
    assert querylab.measured_trigger_s(0.05) == 0.05
    assert querylab.measured_options(options, 0.05)[config.ASYNC_INTERVAL] == "1000"
    assert querylab.measured_options({}, 10.0) == {}


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"kind": "streaming"}, "--workload must be one of stateless, stateful, not 'streaming'"),
    ({"provider": "memory"}, "--provider must be one of hdfs, rocksdb, not 'memory'"),
    ({"sink": "kafka"}, "--sink must be one of noop, foreach, file, not 'kafka'"),
    ({"partitions": 0}, "--partitions must be 1 to 10000, not 0"),
    ({"trigger_s": 0}, "--trigger must be more than 0 s and at most a day, not 0 s"),
    ({"keys": 0}, "--state-keys must be 1 to 10000000, not 0"),
])
def test_a_bad_job_description_is_one_line(kwargs, said):
    with pytest.raises(ValueError) as raised:
        Shape(**kwargs)
    assert str(raised.value) == said


def test_triggers_are_read_as_spark_writes_them():
    assert [config.parse_trigger(t) for t in ("10s", "500ms", "2m", "1h", "30")] == [10, 0.5, 120, 3600, 30]
    with pytest.raises(ValueError, match="--trigger must be a duration such as 10s, 500ms or 2m, not 'soon'"):
        config.parse_trigger("soon")


def test_a_shape_names_its_runs():
    assert Shape("stateful", "rocksdb", partitions=200).name == "stateful-rocksdb-noop-200p"
    assert Shape("stateless", sink="foreach").name == "stateless-foreach-2p"
