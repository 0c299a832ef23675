"""The report's section on how long each store's ``bench`` took: every stage of its plan
(``ckptbench.experiments.registry``), the minutes planned and the minutes it took, from the
``stages`` table of each store's ``bench`` record (``config.BENCH``)."""

from __future__ import annotations

import math

from ckptbench import config
from ckptbench.record import results
from ckptbench.report.table import Table
from ckptbench.report.tables import Section


def _minutes(value: float) -> str:
    return "not run" if math.isnan(value) else f"{value:.1f}"


def section(stores: dict[str, dict[str, results.Results]]) -> Section | None:
    """The section, over every store with a ``bench`` record; None where none has one."""
    benched = {name: kinds[config.BENCH] for name, kinds in stores.items() if config.BENCH in kinds}
    if not benched:
        return None
    tables = []
    for name, record in benched.items():
        stages = record.stages
        alone, beside = stages[stages.beside == ""], stages[stages.beside != ""]
        planned = alone.planned_min.sum() + beside.planned_min.max() if len(beside) else stages.planned_min.sum()
        actual = alone.actual_min.fillna(0).sum() + (beside.actual_min.fillna(0).max() if len(beside) else 0.0)
        tables.append(Table(
            f"{name}: bench at size {record.environment['size']}, {actual:.1f} min of {planned:.1f} planned"
            + (" (the stages run beside others counted once, as the longest of them)" if len(beside) else ""),
            ["stage", "planned (min)", "took (min)", "ran beside"],
            [[row.title, f"{row.planned_min:.1f}", _minutes(row.actual_min), row.beside or "nothing"]
             for row in stages.itertuples()]))
    return Section("How long the bench took", [
        "Each stage of each store's bench: the minutes planned (the last bench's of that store and size, else the "
        "plan's estimate), the minutes it took, and what ran beside it: only the stages that time nothing (the "
        "crash and fault labs, whose findings are rows lost and outages ridden out) run beside others, every "
        "store's at once, before the rest; the recovery and outage seconds they also record are then shared-"
        "machine figures. asv's tracks are the time asv ran outside every experiment; "
        "the pages and the report are timed after this page was written, so they show as not run here."], tables)
