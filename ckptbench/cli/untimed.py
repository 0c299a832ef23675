"""``bench``'s first phase: the experiments that time nothing (``registry.Experiment.timed`` False),
of every store of the plan, each in a process of its own, all beside each other (on 2 cores they
mostly wait: on a killed driver's restart, on a store outage's end). Each runs the asv suite's own
set-up function, so its record is the one asv's would make; asv's set-up then takes that record
(``disk.of_this_run``) instead of running the experiment again. One that fails here is run again by
asv, alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ckptbench import config, progress
from ckptbench.experiments import registry
from ckptbench.record import disk


def _code(setup: str) -> str:
    """Python that runs set-up function ``setup`` (``Experiment.setup``) of the asv suite, unwrapped
    (its record saved, no tracks worked out)."""
    module, _, function = setup.rpartition(".")
    return f"from benchmarks import {module or 'common'} as m; m.{function}.__wrapped__()"


def run(timeline: registry.Timeline, benches: list[tuple[config.Settings, dict[str, str]]], logs: Path,
        say) -> list[str]:
    """Every untimed stage of ``timeline`` on each store of ``benches`` (its settings, and the
    environment asv's processes get) whose record this bench run lacks, beside each other, their
    output in ``logs``; ``timeline`` told of each start and end (``say``: a line to the user).
    Returns a line for each that failed."""
    jobs = [(settings, env, e) for settings, env in benches for e in registry.EXPERIMENTS
            if not e.timed and (settings.store, e.name) in timeline.stages
            and disk.of_this_run(settings, e.name) is None]
    if not jobs:
        return []
    timeline.together([(settings.store, e.name) for settings, _, e in jobs])
    logs.mkdir(parents=True, exist_ok=True)
    running = []
    with tempfile.TemporaryDirectory(prefix="ckptbench-untimed-") as tmp:
        for settings, env, e in jobs:
            beside = timeline.stages[(settings.store, e.name)].beside
            log = logs / f"{settings.store}-{e.name}.log"
            child = {**env, **dataclasses.replace(settings, beside=beside).env(),
                     progress.ENV: str(Path(tmp, f"{settings.store}-{e.name}"))}
            timeline.start(e.name, say, store=settings.store)
            with open(log, "w") as out:
                running.append((settings.store, e, log, subprocess.Popen(
                    [sys.executable, "-c", _code(e.setup)], cwd=config.ROOT, env=child, stdout=out,
                    stderr=subprocess.STDOUT)))
        failed = []
        with progress.summed([Path(tmp, f"{store}-{e.name}") for store, e, _, _ in running],
                             "untimed stages") as above:
            while running:
                time.sleep(1)
                for job in [job for job in running if job[3].poll() is not None]:
                    store, e, log, process = job
                    running.remove(job)
                    timeline.end(e.name, above, store=store)
                    if process.returncode:
                        failed.append(f"{e.title} on {store} failed beside the others (exit {process.returncode}; "
                                      f"its output: {log}): asv runs it again, alone")
    return failed
