"""``bench``'s crash check: after the suite, the configurations each job's decision leads with, run
in the crash lab where it has not run them (``experiments.crash_check``), so that the report
recommends nothing untested."""

from __future__ import annotations

import os

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


def run(settings: config.Settings, proxied: bool, timeline: registry.Timeline) -> str | None:
    """After the suite: crash-check the leaders of the jobs its levers experiment measured
    (``crash_check_plan``), as many a round and of as many cycles as the size's plan says
    (``Plan.crash_check_leaders``, ``Plan.crash_check_cycles``), so that the report recommends
    nothing the crash lab has not run (``experiments.crash_check.check_jobs``). Returns why the
    check failed, or None."""
    from ckptbench import progress
    from ckptbench.experiments import crash_check
    from ckptbench.record import disk

    kinds = disk.read_all(settings.raw).get(settings.store, {})
    shapes = crash_check_plan(kinds, settings.bench_run)
    if not shapes:
        return None
    if not proxied:
        print("crash check: not run, as the crash lab needs the metering proxy: the report says which "
              "recommendations were not crash-tested")
        return None
    plan = settings.plan
    what = "configuration" if plan.crash_check_leaders == 1 else "configurations"
    print(f"crash check on {settings.store} of the {what} each job's decision leads with "
          f"({plan.crash_check_leaders} a round), where the crash lab has not run them: "
          f"{plan.crash_check_cycles} cycle{'s' if plan.crash_check_cycles != 1 else ''} each", flush=True)
    timeline.start(registry.CRASH_CHECK, print, store=settings.store)
    with progress.shown_for(os.environ) as say:
        record = crash_check.check_jobs(settings, tuple(shapes), job_leaders(kinds, plan.crash_check_leaders),
                                        plan.crash_check_cycles, say=say)
    timeline.end(registry.CRASH_CHECK, print, store=settings.store)
    return record.environment["error"]
