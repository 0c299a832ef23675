"""The crash lab: does each checkpoint strategy keep exactly-once when the driver is killed?

A driver runs a streaming query in a process of its own; the lab kills it with SIGKILL at named
crash points (some inside a request: the metering proxy kills it as the request arrives),
restarts it, and checks the sink's output holds every row exactly once, also in configurations of
Spark's own checkpoint levers (``configured``). It also runs two drivers on one checkpoint, and
races two managers of a strategy to create one file (``ckptbench.experiments.race``). Needs the
metering proxy (a plain http:// store)."""

from __future__ import annotations

from .configured import (  # noqa: F401
    REFUSED,
    configuration,
    refused,
)
from .lab import (  # noqa: F401
    CrashLab,
    crashes,
)
from .plans import (  # noqa: F401
    CONFIGURATION_POINTS,
    CONFIGURATIONS,
    CYCLE_S,
    PLANS,
    RACE_ROUND_S,
    RACE_WAIT_S,
    SERIES_OVERHEAD_S,
    TWO_WRITERS_S,
    CrashPlan,
    expected_seconds,
    measured_times,
)
from .points import (  # noqa: F401
    CRASH_POINTS,
    DEFAULT_POINTS,
    FOREACH_POINTS,
    IGNORE_MISSING,
    MEASURED_WORKLOADS,
    ONLY_FOR_THEIR_WORKLOAD,
    POLL_S,
    RANDOM_DELAY_S,
    RESTART_LIMIT_S,
    SINKS,
    WAIT_LIMIT_S,
    WORKLOADS,
    WRITES,
    CrashPoint,
    Workload,
    publishes,
)
from .verify import (  # noqa: F401
    CONFLICT,
    OUTCOMES,
    Leftovers,
    Verdict,
    classify,
    judge,
    last_committed,
    leftovers,
    log_ids,
    output_counts,
    overwritten_logs,
    stored_batches,
    verify,
)
from .victim import (  # noqa: F401
    Driver,
    DriverGone,
)
