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
        planned, actual = stages.planned_min.sum(), stages.actual_min.fillna(0).sum()
        tables.append(Table(
            f"{name}: bench at size {record.environment['size']}, {actual:.1f} min of {planned:.1f} planned",
            ["stage", "planned (min)", "took (min)"],
            [[row.title, f"{row.planned_min:.1f}", _minutes(row.actual_min)] for row in stages.itertuples()]))
    return Section("How long the bench took", [
        "Each stage of each store's bench: the minutes planned (the last bench's of that store and size, else the "
        "plan's estimate) and the minutes it took. asv's tracks are the time asv ran outside every experiment; "
        "the pages and the report are timed after this page was written, so they show as not run here."], tables)
