"""How busy the machine was beside a measurement: the share of its CPU that processes other than
the benchmark's own took while a run's batches were measured.

The benchmark's own processes are this process and every process descended from it: in local mode
Spark's JVM, and the stores and the metering proxy the harness started. The rest (another
benchmark, a test suite, a build) compete with them for the cores, and a latency measured then
may be theirs. Read from Linux's ``/proc`` (``/proc/stat``'s CPU ticks, each process's
``/proc/PID/stat``), not from a library: psutil would read the same files, as one more dependency
for two numbers. Off Linux nothing is measured (NaN).

Limits: a process of the tree that ends between the two readings is counted whole at the second
(its parent's ``cutime``), which can make the own share look larger and the others' smaller; a
store started elsewhere (``--bucket`` on a running one, a remote endpoint) counts as another
process where it runs on this machine.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

PROC = Path("/proc")


@dataclasses.dataclass(frozen=True)
class Reading:
    """CPU ticks so far: every core's in all (``total``), busy (not idle nor waiting for I/O), and
    the benchmark's own processes' (user and system, their reaped children's too)."""

    total: int
    busy: int
    own: int


def _fields(pid: str) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command's name (which may hold spaces); None if gone."""
    try:
        return (PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _own_ticks(root: int) -> int:
    """User and system ticks of ``root`` and every process descended from it, their reaped
    children's included."""
    stats = {pid: fields for pid in os.listdir(PROC) if pid.isdigit() and (fields := _fields(pid))}
    children: dict[str, list[str]] = {}
    for pid, fields in stats.items():
        children.setdefault(fields[1], []).append(pid)
    ticks, todo = 0, [str(root)]
    while todo:
        pid = todo.pop()
        if pid in stats:
            ticks += sum(int(v) for v in stats[pid][11:15])  # utime, stime, cutime, cstime
        todo += children.get(pid, [])
    return ticks


def reading(root: int | None = None) -> Reading | None:
    """The machine's CPU ticks now, with those of ``root``'s process tree (default: this process)
    as the own; None off Linux."""
    try:
        cpu = (PROC / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    ticks = [int(v) for v in cpu[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    return Reading(sum(ticks), sum(ticks) - ticks[3] - ticks[4], _own_ticks(os.getpid() if root is None else root))


def others_share(before: Reading | None, after: Reading | None) -> float:
    """The share (0 to 1, of every core) of the machine's CPU that processes outside the own tree took
    between two readings; NaN where either is missing or no tick passed."""
    if before is None or after is None or after.total <= before.total:
        return float("nan")
    others = (after.busy - before.busy) - (after.own - before.own)
    return min(1.0, max(0.0, others / (after.total - before.total)))
