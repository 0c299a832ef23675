"""``python -m ckptbench measure``: Spark's commit latencies per strategy x store, beside the
store's floor, as one table.

For each store: the stateful workload for each strategy (warm-up, then measured batches), and
the store's own PUT/HEAD latency measured in the same run (``ckptbench.runs.streaming`` with a
plan of one workload). Every number in the table comes from ``ckptbench.metrics``, the same
definitions the asv suite and the report use, so a record shows the same figures in all three.
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
import infra

from . import metrics, results, runs
from .report import cell


def plan(batches: int, warmup: int) -> runs.Plan:
    """The measure command's plan: the stateful workload at the suite's first key count."""
    quick = runs.PLANS["quick"]
    return dataclasses.replace(quick, warmup=warmup, batches=batches, keys=quick.keys[:1], sweep=(),
                               workloads=("stateful",))


def run(store_names: list[str], strategies: list[str], batches: int = 20, warmup: int = 5,
        bucket: str | None = None, master: str = runs.DEFAULT_MASTER, raw=None, fault_profile: str = "none",
        fault_seed: int = 0) -> list[results.Results]:
    """One record per store that could start (the others are skipped, saying why), with the metering
    proxy injecting ``fault_profile``."""
    for name in strategies:
        ckpt_impls.get(name)  # an unknown name fails here, before anything starts
    records = []
    for name in store_names:
        reason = infra.store_class(name).unavailable_reason()
        if reason:
            print(f"skipping {reason}")
            continue
        settings = runs.Settings(name, "quick", bucket, raw or runs.Settings.from_env().raw, fault_profile, fault_seed,
                                 master)
        records.append(runs.streaming(settings, strategies, plan=plan(batches, warmup), experiment="measure"))
    if not records:
        raise infra.StoreUnavailable("no store could start; see the reasons above")
    return records


def rows(record: results.Results) -> list[dict]:
    """The table's rows for one record: a dict per strategy."""
    out = []
    put, head = (metrics.floor_percentile(record, op, 50) for op in ("PUT", "HEAD"))
    jvm_put = metrics.put_floor_ms(record)
    for strategy in record.strategies():
        run = record.run(strategy, "stateful")
        out.append({
            "store": record.environment["store"], "emulator": record.environment["emulator"], "strategy": strategy,
            "wal_commit_p50": metrics.duration_percentile(run, "walCommit", 50),
            "wal_commit_p95": metrics.duration_percentile(run, "walCommit", 95),
            "commit_offsets_p50": metrics.duration_percentile(run, "commitOffsets", 50),
            "commit_offsets_p95": metrics.duration_percentile(run, "commitOffsets", 95),
            "requests_per_batch": metrics.requests_per_batch(run), "requests_by_op": metrics.requests_by_op(run),
            "put_p50": put, "head_p50": head, "temp_objects": int(run.info.temp_objects),
            "jvm_put_p50": jvm_put,
            # None in a record made before the benchmark floor ran beside the strategies.
            "spark_share_p50": metrics.or_none(metrics.spark_share_ms, record, "stateful"),
            "overhead_ms": metrics.or_none(metrics.strategy_overhead_ms, record, run),
            "overhead_of_put": metrics.or_none(metrics.strategy_overhead_of_put, record, run),
            "checkpoint_files_per_batch": metrics.or_none(metrics.checkpoint_files_per_batch, record, "stateful"),
            "requests_per_checkpoint_file": metrics.or_none(metrics.requests_per_checkpoint_file, record, run)})
    return out


def table(records: list[results.Results]) -> str:
    """The records as a Markdown table. Spark's share is walCommit p50 through the benchmark floor
    (files in the JVM's memory, no store); the overhead is walCommit p50 minus that share minus a
    PUT's p50 as Spark's own S3 client makes it (``metrics.put_floor_ms``; the store's own, timed at
    the store, beside it)."""
    head = ("| store | strategy | walCommit p50 / p95 (ms) | commitOffsets p50 / p95 (ms) | "
            "walCommit / (HEAD+PUT) | Spark's share of walCommit p50 (ms) | overhead: ms / x PUT | "
            "S3 requests per batch (mean) | checkpoint files per batch | "
            "requests per checkpoint file (a batch's own) | PUT p50 in Spark's JVM (ms) | "
            "store PUT / HEAD p50 (ms) | temp objects |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in (row for record in records for row in rows(record)):
        ops = ", ".join(f"{op} {n:.3g}" for op, n in r["requests_by_op"].items())
        store = r["store"] + (" (emulator)" if r["emulator"] else "")
        lines.append(
            f"| {store} | {r['strategy']} | {r['wal_commit_p50']:.1f} / {r['wal_commit_p95']:.1f} | "
            f"{r['commit_offsets_p50']:.1f} / {r['commit_offsets_p95']:.1f} | "
            f"{r['wal_commit_p50'] / (r['put_p50'] + r['head_p50']):.1f}x | {cell(r['spark_share_p50'], '.1f')} | "
            f"{cell(r['overhead_ms'], '.1f')} / {cell(r['overhead_of_put'], '.2f')} | "
            f"{r['requests_per_batch']:.3g} ({ops}) | {cell(r['checkpoint_files_per_batch'], '.3g')} | "
            f"{cell(r['requests_per_checkpoint_file'], '.2f')} | "
            f"{cell(r['jvm_put_p50'], '.1f')} | {r['put_p50']:.1f} / {r['head_p50']:.1f} | {r['temp_objects']} |")
    return "\n".join(lines)
