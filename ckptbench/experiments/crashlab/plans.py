"""The crash lab's plans: how many series, cycles, two-writer runs and race rounds a run holds,
in which configurations of Spark's own checkpoint levers, and how long that is expected to take."""

from __future__ import annotations

import dataclasses

from ckptbench import metrics
from ckptbench.experiments import race as race_experiment
from ckptbench.experiments.crashlab.points import MEASURED_WORKLOADS
from ckptbench.record import results


@dataclasses.dataclass(frozen=True)
class CrashPlan:
    cycles: int  # kill/restart cycles per strategy x workload
    workloads: tuple[str, ...]
    two_writers: tuple[str, ...]  # workloads of the two-writer runs
    two_writer_strategies: tuple[str, ...] | None = None  # of the two-writer runs, raced ones too; None: every one
    #: The first driver's batches before the second starts; 0: both start together.
    two_writer_starts: tuple[int, ...] = (3,)
    rows_per_batch: int = 100
    multipart_cycles: int = 0  # cycles of the ``wide`` workload (the multipart-upload point) per strategy
    #: (K, N): this run is part K of N of the plan: its share of each series' cycles, of the
    #: two-writer runs and of the race's rounds (``part``); the parts' records merge on reading
    #: (``disk.read``).
    part: tuple[int, int] = (1, 1)
    #: File kinds (``race.KINDS``) of the raced two-writer runs: both drivers started together,
    #: each held by the proxy at its write of that file until the other's came; one run per
    #: kind x ``two_writers`` workload x strategy (of ``two_writer_strategies``).
    two_writer_races: tuple[str, ...] = ()
    #: Rounds per strategy x file kind of the managers' race (``race.race``) and its kinds.
    race_rounds: int = 10
    race_kinds: tuple[str, ...] = tuple(race_experiment.KINDS)
    #: Series in a configuration of Spark's own levers, each (workload, preset, state store provider):
    #: a ``config.LEVERS`` preset, and a ``config.PROVIDERS`` name or None (the session's); each run
    #: with ``configuration_cycles`` cycles per strategy of ``configuration_strategies`` (None: every
    #: one measured). Where this Spark lacks a lever or refuses the configuration, the series records
    #: why and runs no cycle (``CrashLab.series``).
    configurations: tuple[tuple[str, str, str | None], ...] = ()
    configuration_cycles: int = 1
    configuration_strategies: tuple[str, ...] | None = None
    #: Their crash points, in turn (those that apply to the workload); None: the run's.
    configuration_points: tuple[str, ...] | None = None

    def series_cycles(self) -> list[tuple[str, int]]:
        """(workload, cycles) of each strategy's series in this part."""
        k, n = self.part
        share = [(w, c // n + (k <= c % n)) for w, c in
                 [*((w, self.cycles) for w in self.workloads), ("wide", self.multipart_cycles)]]
        return [(w, c) for w, c in share if c > 0]

    def configured_series(self, strategies: list[str]) -> list[tuple[str, str, str, str | None, int]]:
        """(strategy, workload, preset, provider, cycles) of this part's series in a configuration:
        each one's share of ``configuration_cycles``, as ``series_cycles``."""
        k, n = self.part
        cycles = self.configuration_cycles // n + (k <= self.configuration_cycles % n)
        chosen = [s for s in strategies if self.configuration_strategies is None or s in self.configuration_strategies]
        return [(strategy, workload, preset, provider, cycles) for workload, preset, provider in self.configurations
                for strategy in chosen] if cycles > 0 else []

    def two_writer_strategies_of(self, strategies: list[str]) -> list[str]:
        """Those of ``strategies`` the two-writer runs take, raced or not."""
        return [s for s in strategies if self.two_writer_strategies is None or s in self.two_writer_strategies]

    def two_writer_runs(self, strategies: list[str]) -> list[tuple[str, str, int]]:
        every = [(strategy, workload, start) for start in self.two_writer_starts for workload in self.two_writers
                 for strategy in self.two_writer_strategies_of(strategies)]
        k, n = self.part
        return every[k - 1::n]

    def race_runs(self, strategies: list[str]) -> list[tuple[str, str, str]]:
        """(strategy, workload, file kind) of this part's raced two-writer runs."""
        every = [(strategy, workload, kind) for kind in self.two_writer_races for workload in self.two_writers
                 for strategy in self.two_writer_strategies_of(strategies)]
        k, n = self.part
        return every[k - 1::n]

    def race_round_range(self) -> range:
        """The race's round numbers in this part (its share of ``race_rounds``)."""
        k, n = self.part
        shares = [self.race_rounds // n + (j <= self.race_rounds % n) for j in range(1, n + 1)]
        return range(sum(shares[:k - 1]), sum(shares[:k]))

    def in_part(self, k: int, n: int) -> CrashPlan:
        if not 1 <= k <= n:
            raise ValueError(f"a part is K/N with 1 <= K <= N, not {k}/{n}")
        return dataclasses.replace(self, part=(k, n))


#: The configurations whose levers change what a checkpoint holds or when it is written: async
#: progress tracking (offsets and commits written at intervals, off the batch; Spark takes it with a
#: foreach sink, not a stateful query nor the file sink), and RocksDB's state with checkpoint format
#: v2 (unique file names per batch attempt, their ids in the commit log) or changelog checkpointing.
CONFIGURATIONS = (("stateless-foreach", "async-progress", None), ("stateful", "format-v2", "rocksdb"),
                  ("stateful", "changelog", "rocksdb"))
#: Their crash points, in turn of those that apply: first the window where async progress
#: tracking's replay differs from Spark's own (a random kill lands in it only now and then), or
#: inside a state upload (format v2 and changelog change what it writes); then anywhere; then
#: inside the write of a commit.
CONFIGURATION_POINTS = ("after-skipped-offsets", "during-state-upload", "random", "inside-commit")
PLANS = {
    # CI: every benchmark once. Few two-writer runs, on one strategy: each costs two JVM starts, a
    # raced one more (the race of managers, in the lab's own JVM, costs a second or so a round). No
    # configuration series: each costs two JVM starts however few its cycles; bench's crash check
    # runs one in a configuration, and tests/test_crashlab_levers.py runs each.
    "smallest": CrashPlan(1, ("stateless",), ("stateless",), ("conditional",), two_writer_races=("offsets",),
                          race_rounds=3),
    # quick: what the decision reads, a series and the race per strategy; the two-writer runs the
    # candidate tables show on one strategy, as smallest; a configuration of Spark's levers is
    # crash-tested where a decision leads with it (bench's crash check), the rest are full's.
    "quick": CrashPlan(1, ("stateless",), ("stateless",), ("conditional",), two_writer_races=("offsets",),
                       race_rounds=5),
    "full": CrashPlan(25, MEASURED_WORKLOADS, MEASURED_WORKLOADS, two_writer_races=("offsets",), multipart_cycles=3,
                      race_rounds=30, configurations=CONFIGURATIONS, configuration_cycles=5,
                      configuration_points=CONFIGURATION_POINTS),
}
#: Wall time per crash cycle, per series beyond its cycles (the first driver's start, the clean
#: stop, the checks at rest) and per two-writer run, in seconds: medians of a quick-size run on Ceph
#: RGW (measured: docs/findings/crash-lab.md), an estimate only: ``expected_seconds`` uses them
#: when no earlier record of the store says better.
CYCLE_S = 46.0
SERIES_OVERHEAD_S = 60.0
TWO_WRITERS_S = 70.0
#: Per round of the managers' race, an estimate (both writes meet at once; a round that cannot
#: meet ends when a writer is done, ``race.race``).
RACE_ROUND_S = 2.0
#: How long a raced two-writer run holds one driver's write for the other's at most: both queries
#: start once both sessions are up, but each plans its first batch in a JVM of its own on shared
#: cores. A driver that ends first releases the wait (``CrashLab.two_writers``); the writer's own
#: client bounds it too (S3A's request timeout, 60 s by default), which is why it is no longer.
RACE_WAIT_S = 60.0


def measured_times(previous: results.Results | None) -> tuple[float, float, float, str]:
    """(seconds per cycle, per series beyond its cycles, per two-writer run, where they come from):
    medians of an earlier record, else the constants above."""

    if previous is not None and len(previous.cycles) and "seconds" in previous.crash_series:
        cycles = previous.cycles.groupby("series").seconds.sum()
        series = previous.crash_series.set_index("series").seconds
        overhead = metrics.median((series - cycles.reindex(series.index, fill_value=0)).dropna())
        two = metrics.median(previous.two_writers.seconds) if len(previous.two_writers) else TWO_WRITERS_S
        return (metrics.median(previous.cycles.seconds), overhead, two,
                f"as measured by the run of {previous.environment.get('created', '?')}")
    return CYCLE_S, SERIES_OVERHEAD_S, TWO_WRITERS_S, "as measured when the lab was written"


def expected_seconds(plan: CrashPlan, strategies: list[str], previous: results.Results | None = None) -> float:
    cycle, overhead, two, _ = measured_times(previous)
    per_strategy = sum(cycles * cycle + overhead for _, cycles in plan.series_cycles())
    configured = sum(cycles * cycle + overhead for *_, cycles in plan.configured_series(strategies))
    races = len(strategies) * len(plan.race_kinds) * len(plan.race_round_range()) * RACE_ROUND_S
    return (len(strategies) * per_strategy + configured
            + (len(plan.two_writer_runs(strategies)) + len(plan.race_runs(strategies))) * two + races)
