"""The report's sections of the jobs ``recommend`` measured at their own shuffle partitions (its
records in ``results/recommend/<store>-<job>/``, ``config.RECOMMEND``), one per record: the job, its
decision there (the one its page shows) and every configuration measured at the job's partitions,
each batch against the benchmark floor's in the same configuration and task slots, so that the
reader sees how close each comes to a checkpoint that costs nothing; a figure of the same.

``bench`` measures configurations side by side at a few partitions; at Spark's default of 200 a
batch writes 200 state files, and only a measurement there says what a user will see. Reads a
record and its decision only: the caller (``report.page``) makes the decision as ``recommend``
made it.
"""

from __future__ import annotations

from pathlib import Path

from ckptbench import decide
from ckptbench.record import results
from ckptbench.report import levers, plots
from ckptbench.report.table import cell
from ckptbench.report.tables import Box, Figure, Section


def title(record: results.Results) -> str:
    said = record.environment["recommend"]
    return f"{said['store']}: {said['shape']['name']} at its own {said['shape']['partitions']} partitions (recommend)"


def _chosen_against_floor(decision: decide.Decision) -> str:
    """The recommended configuration's batch against the floor's, in one sentence ("" where either is
    missing). Which configuration comes nearest is not said: the ratios carry no interval, and the
    decision has already said which differences the data show."""
    c = decision.chosen
    if c is None or not c.floor_batch_p50_ms > 0:
        return ""
    return (f"The recommended {c.label}: batch p50 {cell(c.batch_p50_ms)} ms against the floor's "
            f"{cell(c.floor_batch_p50_ms)} ms in the same configuration, {c.batch_p50_ms / c.floor_batch_p50_ms:.2f}x "
            "(1.00x: a checkpoint that costs nothing).")


def section(record: results.Results, decision: decide.Decision, where: str, page: str, figures: Path) -> Section:
    """The section of ``record`` (a ``recommend`` record, measured as ``where`` says, its own page at
    ``page``, relative to the report's) with ``decision``, its job's at its own partitions; its
    figure written under ``figures``."""
    said = record.environment["recommend"]
    shape, ranked = said["shape"], said.get("ranked")
    text = [f"Measured by python -m ckptbench recommend on {where}.",
            (f"The configurations were ranked at {ranked['partitions']} partitions, and the leaders, Spark's default "
             f"and the benchmark floor measured at the job's {shape['partitions']}: only those are shown. "
             if ranked else "") +
            "batch: triggerExecution p50, and that over the benchmark floor's in the same configuration and task "
            "slots per core (Spark's checkpoint files in the JVM's memory; RocksDB's own uploads still go to the "
            "store), where the floor ran; CPU: the driver JVM's per measured batch, its tasks' too on a local master."]
    name = shape["name"]
    anchor = f"at-scale-{said['store']}-{name}"
    lines = [levers.job_said(shape), _chosen_against_floor(decision)]
    figure = plots.against_floor(title(record), decision, figures / f"{anchor}.png")
    return Section(title(record), text, boxes=[Box(decision, levers.table(decision, shape), [x for x in lines if x],
                                                   anchor)],
                   figures=[Figure(figure, "Each configuration's batch p50 beside the floor's in the same "
                                           "configuration and task slots (log scale).")] if figure else [],
                   links=[(page, f"recommend's own page for {name}: how to run the recommended configuration")])
