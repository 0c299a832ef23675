"""The machine's CPU beside a measurement (``ckptbench.harness.machine``), read from Linux's ``/proc``
around real processes that burn a known amount of CPU time:

- a process the benchmark started (a child) counts as its own, not as another's load;
- a process outside its tree (a daemon, reparented away) counts as another's load, not its own;
- the share is NaN where a reading is missing or no time passed.

Each burner spins until its own CPU clock has run ``BURN_S``: the ticks asserted are CPU time, the
same however many other processes share the cores.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptbench.harness import machine

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc")

BURN_S = 1.0
TICKS = BURN_S * 100  # USER_HZ, /proc's clock ticks per second
BURNER = f"import time\nwhile time.process_time() < {BURN_S}: pass\n"


def test_a_process_the_benchmark_started_is_its_own_while_it_runs_and_once_it_ended():
    before = machine.reading()
    child = subprocess.Popen([sys.executable, "-c", BURNER + "print(flush=True)\ntime.sleep(60)\n"],
                             stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()  # it burned its share and sleeps, alive: a descendant, not yet reaped
        running = machine.reading()
    finally:
        child.kill()
        child.wait()
    ended = machine.reading()  # reaped: its ticks are its parent's cutime
    for after in (running, ended):
        assert after.own - before.own >= 0.9 * TICKS
        assert after.busy - before.busy >= after.own - before.own - 0.1 * TICKS


def test_a_process_outside_the_benchmarks_tree_is_anothers_load(tmp_path):
    done = tmp_path / "done"
    # The tree measured is a shell of its own, not this test process, whose session's stores and JVMs
    # burn CPU of their own. On a line from us it starts the burner in a subshell that ends at once:
    # the burner is orphaned, no descendant of the shell's.
    burner = f'{sys.executable} -c "{BURNER}open(\'{done}\', \'w\').close()"'
    shell = subprocess.Popen(["sh", "-c", f"read go; ({burner} &); sleep 60"], stdin=subprocess.PIPE, text=True)
    try:
        before = machine.reading(shell.pid)
        shell.stdin.write("go\n")
        shell.stdin.flush()
        deadline = time.monotonic() + 120
        while not done.exists():
            assert time.monotonic() < deadline, "the burner never ended"
            time.sleep(0.05)
        time.sleep(0.1)  # its last ticks into /proc/stat
        after = machine.reading(shell.pid)
    finally:
        shell.kill()
        shell.wait()
    others = (after.busy - before.busy) - (after.own - before.own)
    assert others >= 0.9 * TICKS
    assert after.own - before.own < 0.5 * TICKS  # the shell's and its subshell's, not the burner's second
    assert 0 < machine.others_share(before, after) <= 1


def test_no_share_without_two_readings_a_tick_apart():
    now = machine.reading()
    assert machine.others_share(None, now) != machine.others_share(None, now)  # NaN
    assert machine.others_share(now, now) != machine.others_share(now, now)
