"""Which runs of a store's records measured which job: a job (``config.Shape``'s name) is measured
by the levers experiment's runs of its shape, and by the streaming experiment's runs of the
workloads ``config.job_of`` names for it; ``job_record`` gathers them into one record, so that a
job is decided once from all of them (``decide.per_job``); ``halves`` cuts a record in two by its
runs' repeats, for the decision on each half (``decide.halves``)."""

from __future__ import annotations

from ckptbench.config import DEFAULT_PRESET, FAULT_WORKLOADS, job_of
from ckptbench.record import disk, results


def _job_runs(record: results.Results):
    """``record.runs`` that a decision reads, each under its job's name and the configuration it
    measured the job in (``config.job_of``): a workload's runs at its first keys, as ``decide`` takes
    them (a state sweep's other sizes are no candidates)."""
    runs = record.runs
    runs = runs[runs["keys"] == runs.groupby("workload", sort=False)["keys"].transform("first")]
    named = [job_of(w, int(k), p) for w, k, p in zip(runs.workload, runs["keys"],
                                                      runs.preset.fillna(DEFAULT_PRESET), strict=True)]
    return runs.assign(workload=[job for job, _ in named], preset=[preset for _, preset in named])


def jobs(records: list[results.Results]) -> list[str]:
    """The jobs the runs of ``records`` measured, in the order they first appear."""
    return list(dict.fromkeys(job for record in records for job in _job_runs(record).workload))


def fault_workload(job: str) -> str:
    """The fault lab's workload (``config.FAULT_WORKLOADS``) closest to ``job`` (a name ``jobs``
    gives: a ``config.Shape``'s, ``kind-[provider-]sink-Np``, or a workload's of its own): the file
    sink for a job that writes files, as an outage meets its tasks' data writes as well as the
    checkpoint's; else the one of the job's kind."""
    if job in FAULT_WORKLOADS:
        return job
    if job.startswith("file_") or "-file-" in job:
        return "file_sink"
    return "stateless" if job.startswith("stateless") else "stateful"


def job_record(records: list[results.Results], job: str) -> results.Results:
    """One record of every run of ``job`` in ``records`` (one store's: its streaming, levers or
    recommend records), each run under the job's name in the configuration it measured it in, with
    its rows of every table, numbered as ``record.disk.merge`` numbers a record's parts (a later
    record's runs after an earlier one's); tables of no run as they are, the environment the first
    record's. KeyError where no record ran the job."""
    parts = []
    for record in records:
        runs = _job_runs(record)
        runs = runs[runs.workload == job]
        if not runs.empty:
            parts.append(_only(record, runs))
    if not parts:
        raise KeyError(f"no run of job {job} in these records")
    return disk.merge(parts)


def _only(record: results.Results, runs) -> results.Results:
    """``record`` with ``runs`` (rows of its ``runs``, maybe renamed) for its runs, and of every
    other table the rows of those runs; tables of no run as they are."""
    return results.Results(record.environment, {
        name: runs if name == "runs" else frame[frame.run.isin(set(runs.run))] if "run" in frame else frame
        for name, frame in record.tables.items()})


def halves(record: results.Results) -> tuple[results.Results, results.Results]:
    """``record`` cut in two independent measurements of the same configurations: the runs of the
    first half of the repeats (``runs.repeat`` below half the record's count, ``config.Plan.repeats``),
    and the rest; a refused run in both (Spark's refusal is run once: it is the same every time).
    ValueError where the record ran one query per configuration."""
    runs = record.runs
    cut = (int(runs.repeat.max()) + 1) // 2 if len(runs) else 0
    if cut == 0:
        raise ValueError("the record has one query per configuration (runs.repeat): no two halves to compare")
    first = runs.repeat < cut
    return _only(record, runs[first | runs.refused]), _only(record, runs[~first | runs.refused])
