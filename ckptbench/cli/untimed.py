"""``bench``'s first phase: the experiments that time nothing (``registry.Experiment.timed`` False),
of every store of the plan, each in a process of its own, all beside each other (on 2 cores they
mostly wait: on a killed driver's restart, on a store outage's end). Each runs the asv suite's own
set-up function, so its record is the one asv's would make; asv's set-up then takes that record
(``disk.of_this_run``) instead of running the experiment again. One that fails here is run again by
asv, alone. Their driver JVMs run with ``harness.spark.UNTIMED_JVM_OPTS``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ckptbench import config, progress
from ckptbench.experiments import registry
from ckptbench.harness.spark import UNTIMED_JVM_OPTS
from ckptbench.record import disk


def _code(setup: str) -> str:
    """Python that runs set-up function ``setup`` (``Experiment.setup``) of the asv suite, unwrapped
    (its record saved, no tracks worked out)."""
    module, _, function = setup.rpartition(".")
    return f"from benchmarks import {module or 'common'} as m; m.{function}.__wrapped__()"


def submit_opts(env: dict[str, str]) -> str:
    """``env``'s ``SPARK_SUBMIT_OPTS`` with ``UNTIMED_JVM_OPTS`` added."""
    given = env.get("SPARK_SUBMIT_OPTS", "")
    return " ".join(filter(None, [given, *(o for o in UNTIMED_JVM_OPTS if o not in given.split())]))


def run(timeline: registry.Timeline, benches: list[tuple[config.Settings, dict[str, str]]], logs: Path,
        say) -> list[str]:
    """Every untimed stage of ``timeline`` on each store of ``benches`` (its settings, and the
    environment asv's processes get) whose record this bench run lacks, beside each other, each in as
    many processes as its ``parts`` at the plan's size say, their output in ``logs``; ``timeline``
    told of each stage's start and end (``say``: a line to the user). Returns a line for each process
    that failed."""
    jobs = [(settings, env, e) for settings, env in benches for e in registry.EXPERIMENTS
            if not e.timed and (settings.store, e.name) in timeline.stages
            and disk.of_this_run(settings, e.name) is None]
    if not jobs:
        return []
    timeline.together([(settings.store, e.name) for settings, _, e in jobs])
    logs.mkdir(parents=True, exist_ok=True)
    running: dict[tuple[str, str], list] = {}
    with tempfile.TemporaryDirectory(prefix="ckptbench-untimed-") as tmp:
        for settings, env, e in jobs:
            key, n = (settings.store, e.name), e.parts.get(settings.size, 1)
            beside = timeline.stages[key].beside
            timeline.start(e.name, say, store=settings.store)
            for k in range(1, n + 1):
                name = f"{settings.store}-{e.name}" + (f"-part-{k}-of-{n}" if n > 1 else "")
                child = {**env, **dataclasses.replace(settings, beside=beside).env(),
                         "SPARK_SUBMIT_OPTS": submit_opts(env),
                         progress.ENV: str(Path(tmp, name)), registry.PART_ENV: f"{k}/{n}"}
                with open(logs / f"{name}.log", "w") as out:
                    running.setdefault(key, []).append((logs / f"{name}.log", subprocess.Popen(
                        [sys.executable, "-c", _code(e.setup)], cwd=config.ROOT, env=child, stdout=out,
                        stderr=subprocess.STDOUT)))
        failed = []
        paths = [Path(tmp, log.stem) for processes in running.values() for log, _ in processes]
        with progress.summed(paths, "untimed stages") as above:
            while running:
                time.sleep(1)
                for (store, name), processes in list(running.items()):
                    if any(process.poll() is None for _, process in processes):
                        continue
                    del running[(store, name)]
                    timeline.end(name, above, store=store)
                    failed += [f"{registry.BY_NAME[name].title} on {store} failed beside the others (exit "
                               f"{process.returncode}; its output: {log}): asv runs it again, alone"
                               for log, process in processes if process.returncode]
    return failed
