"""``python -m ckptbench measure``: Spark's commit latencies per strategy x store, beside the
store's floor, as one table.

For each store: the stateful workload for each strategy (warm-up, then measured batches), and
the store's own PUT/HEAD latency measured in the same run (``ckptbench.experiments.streaming.streaming`` with a
plan of one workload). Every number in the table comes from ``ckptbench.metrics``, the same
definitions the asv suite and the report use, so a record shows the same figures in all three.
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
import infra
from ckptbench import config
from ckptbench.experiments import streaming
from ckptbench.record import results


def plan(batches: int, warmup: int, size: str = "quick") -> config.Plan:
    """The measure command's plan: the stateful workload at ``size``'s first key count, one query per
    strategy (its table reads one run per strategy); the JVM's warm-up and the floor's samples are
    ``size``'s (``config.PLANS``), the batches the caller's."""
    base = config.PLANS[size]
    return dataclasses.replace(base, warmup=warmup, batches=batches, keys=base.keys[:1], sweep=(),
                               workloads=("stateful",), repeats=1)


def run(store_names: list[str], strategies: list[str], batches: int = 20, warmup: int = 5,
        bucket: str | None = None, master: str = config.DEFAULT_MASTER, raw=None, fault_profile: str = "none",
        fault_seed: int = 0, size: str = "quick") -> list[results.Results]:
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
        raw_dir = raw or config.Settings.from_env().raw
        settings = config.Settings(name, size, bucket, raw_dir, fault_profile, fault_seed, master)
        records.append(streaming.streaming(settings, strategies, plan=plan(batches, warmup, size),
                                           experiment="measure"))
    if not records:
        raise infra.StoreUnavailable("no store could start; see the reasons above")
    return records
