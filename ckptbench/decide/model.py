"""What a decision is made of and gives (``ckptbench.decide``): each configuration's figures
(``Candidate``), the evidence from the crash lab and the race (``Safety``) and from the fault lab's
store outages (``Outage``), the ranking of rules 2 to 5 (``Ranking``) and the decision itself."""

from __future__ import annotations

import dataclasses

from ckptbench import metrics
from ckptbench.config import DEFAULT_PRESET, configuration_label

#: Spark's resolution for walCommit + commitOffsets: 1 ms per duration. The smallest difference
#: called where the record has no store floor.
RESOLUTION_MS = 2.0


@dataclasses.dataclass
class Candidate:
    strategy: str
    preset: str = DEFAULT_PRESET  # Spark's levers (``config.presets_for``)
    batch_p50_ms: float = float("nan")  # triggerExecution, p50
    cpu_ms_per_batch: float = float("nan")  # the driver JVM's, its tasks' too in local mode (``metrics``)
    floor_batch_p50_ms: float = float("nan")  # the benchmark floor's in the same job and preset
    commit_p50_ms: float = float("nan")  # walCommit + commitOffsets, p50
    commit_p95_ms: float = float("nan")
    requests_per_batch: float = float("nan")  # billable, made by the strategy
    other_requests_per_batch: float = float("nan")  # billable, made whatever the strategy
    dollars_per_month: float = float("nan")  # a projection of all its requests: see ckptbench.metrics.cost
    other_dollars_per_month: float = float("nan")  # of other_requests_per_batch (as measured in its own run)
    refuses_second_writer: bool | None = None  # by the race; None: not measured
    second_writer_source: str = ""  # "measured", "promised" (not measured) or "" (neither)
    second_writer: str = "not measured"  # what the report shows
    out: str | None = None  # why it cannot be recommended
    untested: bool = False  # out only for want of a crash test here (rule 1's last clause): still measured
    note: str = ""  # why it was not chosen, when it could have been
    refused: bool = False  # Spark refused the configuration (``out`` holds its reason)
    outage: str = "not measured"  # its strategy's queries under the shown outage (``OUTAGE_SHOWN``)
    outage_worse: str | None = None  # the outages its strategy died in that Spark's default rode out
    crash_cycles: int = 0  # the crash lab's cycles of it in this very configuration on the store (0: none)
    runs: int = 0  # the runs (repeats, ``Results.runs_of``) every figure above pools
    # the most of the machine's CPU other processes took while one of those runs was measured
    # (``metrics.others_cpu``; NaN: not measured)
    others_cpu: float = float("nan")
    # walCommit + commitOffsets of every measured batch of every run (``metrics.commit_ms_per_batch``)
    commit_samples: tuple[float, ...] = dataclasses.field(default=(), repr=False)
    # the strategy's own billable requests of each measured batch (``metrics.dollars_per_batch``),
    # priced as a month of such batches at the trigger interval
    dollar_samples: tuple[float, ...] = dataclasses.field(default=(), repr=False)
    commit_median: metrics.Interval | None = None  # median of commit_samples, 95% interval
    # its offsets and commits files' commit per batch as the JVM timed it (``metrics.file_commit_ms_interval``):
    # shown beside the verdict, never decided on (Spark's figures above are the user's)
    jvm_commit: metrics.Interval | None = None
    dollars_interval: metrics.Interval | None = None  # dollars a month, its 95% interval (pooled runs)
    commit_difference: metrics.Interval | None = None  # ms, against the fastest (None: it is the fastest)
    dollars_difference: metrics.Interval | None = None  # $ a month, against the cheapest of those as fast

    @property
    def levers(self) -> int:
        """How many of Spark's levers the configuration sets."""
        return 0 if self.preset == DEFAULT_PRESET else len(self.preset.split("+"))

    @property
    def label(self) -> str:
        """``strategy`` and its levers, as the report and the CLI name a configuration."""
        return configuration_label(self.strategy, self.preset)


@dataclasses.dataclass
class Decision:
    store: str
    workload: str
    recommended: str | None  # the chosen configuration's label
    reasons: list[str]
    candidates: list[Candidate]
    chosen: Candidate | None = None
    baseline: Candidate | None = None  # Spark's default configuration (``SPARK_DEFAULT``), where measured
    round_trip_ms: float = RESOLUTION_MS  # rule 3's store round trip: the PUT floor, else Spark's resolution
    round_trip: str = "Spark's resolution, 1 ms per duration"  # what ``round_trip_ms`` is


@dataclasses.dataclass
class Safety:
    """What the crash lab measured for one strategy on one store (None: not measured)."""

    cycles: int = 0
    duplicated: int = 0
    lost: int = 0
    two_writer: str | None = None  # the zombie run's outcome: shown, never taken as refusing
    race_rounds: int = 0  # the race's rounds (0: not run)
    race_two_winners: int = 0  # rounds both writers won
    race_one_winner: int = 0  # rounds that met with exactly one winner
    refuses: bool | None = None  # metrics.refuses_second_writer; None: the race was not run


@dataclasses.dataclass(frozen=True)
class Outage:
    """What one store outage profile did to one strategy's queries in the fault lab: its runs whose
    outage began (``metrics.outage_runs``)."""

    profile: str
    away_s: float  # the store away, median seconds
    runs: int
    rode: int  # runs whose query completed every batch through it
    died_after_s: float  # from the outage's start to the query's death, median seconds (NaN: none died)
    # its runs beside Spark's default's under the same outage show it dying more often or sooner
    # (``metrics.Beside.worse``): false for Spark's default itself and where either ran once
    worse_than_default: bool = False

    @property
    def rode_out(self) -> bool:
        return self.rode == self.runs

    def said(self) -> str:
        """"rode it out", or "died after 2 s" (with how many runs where not all)."""
        if self.rode_out:
            return "rode it out"
        some = f" ({self.runs - self.rode} of {self.runs} runs)" if self.rode else ""
        if self.died_after_s == self.died_after_s:
            return f"died after {self.died_after_s:.1f} s{some}"
        return f"stalled{some}"


@dataclasses.dataclass
class Ranking:
    """Rules 2 to 5 over some eligible candidates: who was chosen and the sets it was chosen from."""

    chosen: Candidate
    pool: list[Candidate]  # those measured to refuse a second writer (else all), of them those that rode
    # out every outage Spark's default rode out (else all of them)
    fastest: Candidate
    tied: list[Candidate]  # as fast as the fastest (rule 3)
    cheapest: Candidate
    as_cheap: list[Candidate]  # of ``tied``, as cheap as the cheapest (rule 4)
    threshold_ms: float  # the smallest latency difference called slower (``_practical_ms``)
