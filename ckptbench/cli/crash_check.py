"""``bench``'s crash check: after the suite, the configurations each job's decision leads with, run
in the crash lab where it has not run them (``experiments.crash_check``), so that the report
recommends nothing untested; every store's in a process of its own, beside each other."""

from __future__ import annotations

from pathlib import Path

from ckptbench import config
from ckptbench.experiments import registry


def crash_check_plan(kinds: dict, bench_run: str) -> list[config.Shape]:
    """The jobs whose leaders ``bench`` crash-checks, of a store's records (``kinds``): those of its
    levers record, where bench run ``bench_run`` wrote it; none where it did not (``--bench`` left the
    levers out: the older record keeps the crash check of its own run)."""
    levers = kinds.get("levers")
    if levers is None or levers.environment.get("bench_run") != bench_run:
        return []
    return [config.Shape(**{k: v for k, v in shape.items() if k != "name"}) for shape in levers.environment["shapes"]]


def job_leaders(kinds: dict, count: int):
    """The decision as the crash check asks it (``experiments.crash_check.JobLeaders``): the first
    ``count`` configurations leading for a job (``page.leaders``) on the store's records ``kinds``,
    with the crash check's rows so far in place of an earlier run's crash check record, ranked as if
    nothing were out for want of a crash test (``untested_out`` False)."""
    from ckptbench.record import results, schema
    from ckptbench.report import page

    def leaders(job: str, rows: dict[str, list[dict]]):
        check = results.Results({"experiment": config.CRASH_CHECK},
                                {name: schema.frame(name, found) for name, found in rows.items()})
        decision = page.decisions_of({**kinds, config.CRASH_CHECK: check}, untested_out=False).get(job)
        return page.leaders(decision)[:count] if decision else []

    return leaders


def check(settings: config.Settings, say=print) -> None:
    """Crash-check the leaders of the jobs ``settings``' store's levers experiment of this bench run
    measured (``crash_check_plan``), as many a round and of as many cycles as the size's plan says
    (``Plan.crash_check_leaders``, ``Plan.crash_check_cycles``), so that the report recommends
    nothing the crash lab has not run (``experiments.crash_check.check_jobs``, whose record says
    whether it failed)."""
    from ckptbench.experiments import crash_check
    from ckptbench.record import disk

    kinds = disk.read_all(settings.raw).get(settings.store, {})
    plan = settings.plan
    crash_check.check_jobs(settings, tuple(crash_check_plan(kinds, settings.bench_run)),
                           job_leaders(kinds, plan.crash_check_leaders), plan.crash_check_cycles, say=say)


def main() -> None:
    """``check`` of the settings in the environment (``config.Settings.from_env``): a crash check's
    process, beside the other stores' (``run``)."""
    check(config.Settings.from_env())


def run(benches: list[tuple[config.Settings, dict[str, str]]], proxied: dict[str, bool],
        timeline: registry.Timeline, logs: Path) -> list[str]:
    """After the suite: ``check`` on each store of ``benches`` (its settings, and the environment
    asv's processes get) whose levers experiment this bench run measured, each in a process of its
    own, beside each other (``cli.untimed.beside``). Returns why each check that failed did."""
    from ckptbench.cli import untimed
    from ckptbench.record import disk

    jobs = []
    for settings, env in benches:
        if (not crash_check_plan(disk.read_all(settings.raw).get(settings.store, {}), settings.bench_run)
                or disk.of_this_run(settings, config.CRASH_CHECK) is not None):  # none, or done before a --resume
            continue
        if not proxied[settings.store]:
            print(f"crash check on {settings.store}: not run, as the crash lab needs the metering proxy: the "
                  "report says which recommendations were not crash-tested")
            continue
        plan = settings.plan
        what = "configuration" if plan.crash_check_leaders == 1 else "configurations"
        print(f"crash check on {settings.store} of the {what} each job's decision leads with "
              f"({plan.crash_check_leaders} a round), where the crash lab has not run them: "
              f"{plan.crash_check_cycles} cycle{'s' if plan.crash_check_cycles != 1 else ''} each", flush=True)
        jobs.append(untimed.Job(settings, registry.CRASH_CHECK, "from ckptbench.cli import crash_check; "
                                "crash_check.main()", env))
    failed = untimed.beside(timeline, jobs, logs, print, "crash checks")
    errors = []
    for job in jobs:
        for line in job.log(logs).read_text().splitlines():  # what check_jobs said of each job
            if line.startswith("crash check, "):
                print(line)
        where = disk.directory(job.settings.raw, job.settings.store, config.CRASH_CHECK)
        said = disk.read(where).environment if (where / "environment.json").exists() else {}
        if failed.get(job) or said.get("bench_run") != job.settings.bench_run:
            errors.append(f"the crash check on {job.settings.store} ended with no record "
                          f"({'; '.join(failed.get(job, [])) or 'exit 0'})")
        elif said["error"]:
            errors.append(f"{job.settings.store}: {said['error']}")
    return errors
