"""``bench``'s stages that time nothing, of every store of the plan, each in a process of its own,
all beside each other (on 2 cores they mostly wait: on a killed driver's restart, on a store
outage's end). First the experiments that time nothing (``registry.Experiment.timed`` False): each
runs the asv suite's own set-up function, so its record is the one asv's would make; asv's set-up
then takes that record (``disk.of_this_run``) instead of running the experiment again, and one that
fails here is run again by asv, alone. After the suite, the crash checks (``cli.crash_check``).

Their driver JVMs run with ``harness.spark.UNTIMED_JVM_OPTS``."""

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


@dataclasses.dataclass(frozen=True, eq=False)
class Job:
    """A stage of the plan (``name``, on ``settings.store``) to run beside others: Python ``code`` run
    in ``parts`` processes (part K of N in ``registry.PART_ENV``), with ``env`` (the environment asv's
    processes get) and ``settings``'s, its output in ``log(logs, k)``."""

    settings: config.Settings
    name: str
    code: str
    env: dict[str, str]
    parts: int = 1

    def log(self, logs: Path, k: int = 1) -> Path:
        """Where part ``k``'s output goes, under ``logs``."""
        n = self.parts
        return logs / (f"{self.settings.store}-{self.name}" + (f"-part-{k}-of-{n}" if n > 1 else "") + ".log")


def _code(setup: str) -> str:
    """Python that runs set-up function ``setup`` (``Experiment.setup``) of the asv suite, unwrapped
    (its record saved, no tracks worked out)."""
    module, _, function = setup.rpartition(".")
    return f"from benchmarks import {module or 'common'} as m; m.{function}.__wrapped__()"


def submit_opts(env: dict[str, str]) -> str:
    """``env``'s ``SPARK_SUBMIT_OPTS`` with ``UNTIMED_JVM_OPTS`` added."""
    given = env.get("SPARK_SUBMIT_OPTS", "")
    return " ".join(filter(None, [given, *(o for o in UNTIMED_JVM_OPTS if o not in given.split())]))


def beside(timeline: registry.Timeline, jobs: list[Job], logs: Path, say, desc: str) -> dict[Job, list[str]]:
    """Run ``jobs`` beside each other, their output in ``logs``, one progress bar (``desc``) of them
    all; ``timeline`` told of each stage's start and end (``say``: a line to the user), its stages
    run ``together``. Returns each job's failed processes, as a line each."""
    if not jobs:
        return {}
    timeline.together([(job.settings.store, job.name) for job in jobs])
    logs.mkdir(parents=True, exist_ok=True)
    running: dict[Job, list] = {}
    failed: dict[Job, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="ckptbench-beside-") as tmp:
        for job in jobs:
            store, n = job.settings.store, job.parts
            beside_it = timeline.stages[(store, job.name)].beside
            timeline.start(job.name, say, store=store)
            for k in range(1, n + 1):
                log = job.log(logs, k)
                child = {**job.env, **dataclasses.replace(job.settings, beside=beside_it).env(),
                         "SPARK_SUBMIT_OPTS": submit_opts(job.env),
                         progress.ENV: str(Path(tmp, log.stem)), registry.PART_ENV: f"{k}/{n}"}
                with open(log, "w") as out:
                    running.setdefault(job, []).append((log, subprocess.Popen(
                        [sys.executable, "-c", job.code], cwd=config.ROOT, env=child, stdout=out,
                        stderr=subprocess.STDOUT)))
        paths = [Path(tmp, log.stem) for processes in running.values() for log, _ in processes]
        with progress.summed(paths, desc) as above:
            while running:
                time.sleep(1)
                for job, processes in list(running.items()):
                    if any(process.poll() is None for _, process in processes):
                        continue
                    del running[job]
                    timeline.end(job.name, above, store=job.settings.store)
                    failed[job] = [f"exit {process.returncode}; its output: {log}"
                                   for log, process in processes if process.returncode]
    return failed


def run(timeline: registry.Timeline, benches: list[tuple[config.Settings, dict[str, str]]], logs: Path,
        say) -> list[str]:
    """Every untimed experiment of ``timeline`` on each store of ``benches`` (its settings, and the
    environment asv's processes get) whose record this bench run lacks, ``beside`` each other, each
    in as many processes as its ``parts`` at the plan's size say. Returns a line for each process
    that failed."""
    jobs = [Job(settings, e.name, _code(e.setup), env, e.parts.get(settings.size, 1))
            for settings, env in benches for e in registry.EXPERIMENTS
            if not e.timed and (settings.store, e.name) in timeline.stages
            and disk.of_this_run(settings, e.name) is None]
    return [f"{registry.BY_NAME[job.name].title} on {job.settings.store} failed beside the others ({line}): "
            "asv runs it again, alone"
            for job, lines in beside(timeline, jobs, logs, say, "untimed stages").items() for line in lines]
