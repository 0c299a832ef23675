"""Spark's own share of a commit (the benchmark floor) and a strategy's overhead above it and
above one PUT; checkpoint files per batch and requests per checkpoint file."""

from __future__ import annotations

import ckpt_impls
from ckptbench.metrics.requests import MANAGED, requests_per_batch
from ckptbench.metrics.stats import duration_percentile, durations_percentile
from ckptbench.metrics.store import put_floor_ms
from ckptbench.record.results import Results, Run

# -- Spark's own share, and the strategy's ------------------------------------------------

def floor_run(results: Results, workload: str) -> Run:
    """The benchmark floor's run of ``workload`` (``ckpt_impls.FLOOR``: files in the JVM's memory,
    no store), its "requests" being the checkpoint files it published, one ``PUT`` each."""
    return results.run(ckpt_impls.FLOOR.name, workload, source="memory")


def has_floor(results: Results) -> bool:
    """Whether the record ran the benchmark floor: only in local mode, where its files, kept in the
    driver JVM's memory, are where the tasks run (not on a cluster, ``ckptbench.experiments.streaming``)."""
    return ckpt_impls.FLOOR.name in set(results.runs.strategy)


def floor_batch_p50_ms(results: Results, workload: str, keys: int, preset: str) -> float:
    """The benchmark floor's batch (triggerExecution) p50 in ``workload`` at ``keys`` keys in
    configuration ``preset`` (its levers and task slots), its repeats pooled: the same batch with
    Spark's checkpoint files in the JVM's memory; NaN where the record has none in that preset."""
    floors = results.runs_of(ckpt_impls.FLOOR.name, workload, keys, preset, "memory")
    return durations_percentile(floors, "triggerExecution", 50) if floors else float("nan")


def spark_share_ms(results: Results, workload: str, name: str = "walCommit") -> float:
    """Spark's own share of ``name`` (walCommit, commitOffsets): its p50 through the benchmark
    floor, where no store is involved; NaN where the record has no floor (``has_floor``)."""
    if not has_floor(results):
        return float("nan")
    return duration_percentile(floor_run(results, workload), name, 50)


def strategy_overhead_ms(results: Results, run: Run, name: str = "walCommit") -> float:
    """What a strategy adds to ``name`` beyond Spark's share and one PUT round trip: its p50, minus
    the floor's p50 (``spark_share_ms``), minus a 1 KiB PUT's p50 as Spark's own client makes it
    (``put_floor_ms``, same record). 0 is one PUT per checkpoint file made after the store sat idle,
    as the stateful workload's are; where Spark's own requests come just before the commit (the file
    source lists its input in latestOffset) the store is warm and the PUT faster, and a strategy
    at one PUT per file reads below 0."""
    return (duration_percentile(run, name, 50) - spark_share_ms(results, run.info.workload, name)
            - put_floor_ms(results))


def strategy_overhead_of_put(results: Results, run: Run, name: str = "walCommit") -> float:
    """``strategy_overhead_ms`` as a fraction of that PUT's p50 (``put_floor_ms``)."""
    return strategy_overhead_ms(results, run, name) / put_floor_ms(results)


def checkpoint_files_per_batch(results: Results, workload: str) -> float:
    """Checkpoint files Spark writes or deletes per measured batch of ``workload`` (through the
    manager: offsets, commits, state, logs; past ``minBatchesToRetain`` each log's oldest file goes
    every batch), counted by the benchmark floor's manager; a mean, like requests, of a batch's own
    files (``Run.requests``: a snapshot state store maintenance wrote is not one). NaN where the
    record has no floor (``has_floor``)."""
    if not has_floor(results):
        return float("nan")
    return requests_per_batch(floor_run(results, workload), ops=["PUT", "DELETE"])


def requests_per_checkpoint_file(results: Results, run: Run) -> float:
    """The strategy's requests per batch in the manager's areas over the checkpoint files per batch
    (``checkpoint_files_per_batch``, the files Spark publishes through the manager): 1.0 is one
    request per file. Only the requests the strategy makes (``strategy_controls``): RocksDB's SST
    uploads are neither its requests nor among those files.

    A batch's own, on both sides, over every measured batch: state store maintenance's requests (a
    snapshot, a LIST of each partition's directory) are told apart request by request
    (``ckptbench.record.attribution``), so the figure does not move with where its rounds fell, and
    a run whose every batch met a round still has one."""
    return (requests_per_batch(run, areas=MANAGED, controlled=True)
            / checkpoint_files_per_batch(results, run.info.workload))
