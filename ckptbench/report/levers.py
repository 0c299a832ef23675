"""The report's "configurations side by side" section, from a ``levers`` record
(``ckptbench.experiments.levers``): per job the record measured (``config.Shape``, as its
environment names them), a decision naming a configuration, a strategy with Spark's defaults or
with Spark's own checkpoint levers (the job's one decision, ``decide.per_job`` over the store's
records: the streaming section shows the same for the jobs it measured too), and a table
of every configuration: commit and batch p50, billable requests per batch (the strategy's own and
the others'), dollars per month (a projection at the report's trigger interval, ``tables.TRIGGER_S``)
and, where Spark refused it, Spark's reason. ``summary`` gives the page's top lines, one per job.

Numbers come from the decision's candidates, so the table, the verdict and the asv tracks
(``benchmarks/levers.py``, through the same ``ckptbench.metrics``) agree. Reads a record only.
"""

from __future__ import annotations

from ckptbench import config, decide
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.report.provenance import counted_by, measured_said
from ckptbench.report.table import Table, cell
from ckptbench.report.tables import BATCH_COLUMN, OUTAGE_COLUMN, TRIGGER_S, Box, Section, batch_cell

TITLE = "configurations side by side"
HEADER = ["configuration", "commits p50 (ms)", BATCH_COLUMN,
          "billable requests per batch: the strategy's / others'",
          f"$ per month at one batch every {TRIGGER_S:g} s (projection)", "a second writer", OUTAGE_COLUMN, "verdict"]


def shapes(record: results.Results) -> list[dict]:
    """The jobs ``record`` measured (its environment's ``shapes``, each with its ``name``), those with
    runs only, in the order it ran them."""
    ran = set(record.runs.workload)
    return [shape for shape in record.environment.get("shapes", []) if shape["name"] in ran]


def anchor(store: str, shape: dict) -> str:
    """The page's id of a job's decision, for the top summary's links."""
    return f"levers-{store}-{shape['name']}"


def job_said(shape: dict) -> str:
    """The job ``shape`` describes, in one sentence."""
    what = (f"stateful: an aggregation over {shape['keys']:,} keys, {shape['provider']} state store"
            if shape["kind"] == "stateful" else "stateless")
    return (f"The job: {what}, {shape['sink']} sink, {shape['partitions']} shuffle partitions, one batch every "
            f"{shape['trigger_s']:g} s.")


def _verdict(d: decide.Decision, c: decide.Candidate) -> str:
    if c is d.chosen:
        return decide.recommended_said(c)
    if c.out:
        return c.out if c.refused else f"out: {c.out}"
    return c.note


def table(d: decide.Decision, shape: dict, not_measured: dict[str, str] | None = None) -> Table:
    """Every configuration of ``d``'s candidates, one row each; the configurations a staged run did
    not measure (``not_measured``: why, per configuration) in its note."""
    rows = []
    for c in d.candidates:
        label = c.label + (" (Spark's default)" if (c.strategy, c.preset) == config.SPARK_DEFAULT else "")
        if c.refused:
            rows.append([label, "-", "-", "-", "-", "-", "-", _verdict(d, c)])
            continue
        rows.append([label, cell(c.commit_p50_ms), batch_cell(c),
                     f"{cell(c.requests_per_batch, '.1f')} / {cell(c.other_requests_per_batch, '.1f')}",
                     cell(c.dollars_per_month, ",.2f"), c.second_writer, c.outage, _verdict(d, c)])
    note = "; ".join(f"{preset}: not crossed with the other strategies ({why})"
                     for preset, why in (not_measured or {}).items())
    return Table(f"{shape['name']}: every configuration", list(HEADER), rows, note + ("." if note else ""))


def _against_default(d: decide.Decision) -> str:
    """The chosen configuration against Spark's default, in one sentence ("" where either is missing)."""
    chosen, base = d.chosen, d.baseline
    if chosen is None or base is None or base.out:
        return ""
    if chosen is base:
        return "Spark's default configuration is the one recommended."
    return (f"Against Spark's default ({base.label} with Spark's settings): commits {cell(base.commit_p50_ms)} ms "
            f"against {cell(chosen.commit_p50_ms)} ms p50, batches {cell(base.batch_p50_ms)} ms against "
            f"{cell(chosen.batch_p50_ms)} ms, ${base.dollars_per_month:,.2f} against ${chosen.dollars_per_month:,.2f} "
            f"a month ({cost.LABEL}).")


def _lever_said(lever: config.Lever) -> str:
    """A lever's settings and options as ``key=value``; task slots per core as what they are."""
    said = {**lever.conf, **lever.options}
    if config.SLOTS_PER_CORE in said:
        return f"{said[config.SLOTS_PER_CORE]} task slots per core, in a session of their own"
    return ", ".join(f"{k}={v}" for k, v in said.items())


def section(store: str, record: results.Results, where: str, decisions: dict[str, decide.Decision]) -> Section:
    """The section for ``record`` (a ``levers`` record on ``store``, measured as ``where`` says), per
    job its decision (``decisions``: ``decide.per_job`` over the store's records, the runs of this
    job in other records included) and a table of it."""
    plan, env = record.environment["plan"], record.environment
    levers = "; ".join(f"{name} ({_lever_said(lever)})" for name, lever in config.LEVERS.items())
    text = [
        f"Measured on {where}.",
        "A configuration is a checkpoint strategy with Spark's own settings, or with some of Spark's checkpoint "
        f"levers (joined by +): {levers}. Each ran as queries of the job, {measured_said(plan)}"
        + (", every strategy in Spark's defaults and in the cheapest configurations Spark's default strategy "
           "found (a staged run: the others are named under each table)" if env.get("staged") else "")
        + ". Async progress tracking's checkpoint interval is scaled to the measured trigger, so that the share of "
        "batches whose offsets and commits are written is the job's (a batch slower than the measured trigger "
        "writes them more often than the job would).",
        "commits: Spark's walCommit + commitOffsets, each a p50 over the measured batches; batch: triggerExecution "
        "p50, and that over the benchmark floor's in the same configuration (Spark's checkpoint files in the JVM's "
        "memory; RocksDB's own uploads still go to the store), where it ran: in Spark's defaults and at each task "
        "slots per core alone; CPU: what the driver's JVM spent per "
        "measured batch, its tasks' too on a local master (n/a on a cluster), so that more task slots show their "
        "price. Requests: "
        "every billable request per measured batch, "
        f"counted by {counted_by(record)}, those that "
        "started between batches while the query ran too (async progress's log writes, the state store's "
        "maintenance): the strategy's own, then the others' (a sink's files, RocksDB's uploads, checksum files: the "
        "mean over the strategies run in that configuration, as the decision charges them). Dollars: "
        f"{cost.LABEL}, at one batch every {TRIGGER_S:g} s. A configuration Spark refuses for the job, or lacks a "
        "lever of, is never recommended: Spark's reason is shown."]
    out = Section(f"{store}: {TITLE}", text)
    for shape in shapes(record):
        d = decisions[shape["name"]]
        said = [job_said(shape)]
        if shape["trigger_s"] != TRIGGER_S:
            said.append(f"Priced at the report's one batch every {TRIGGER_S:g} s; the job's own trigger is "
                        f"{shape['trigger_s']:g} s.")
        said.append(_against_default(d))
        out.boxes.append(Box(d, table(d, shape, (env.get("not_measured") or {}).get(shape["name"])),
                             [line for line in said if line], anchor(store, shape)))
    return out


def summary(store: str, section: Section, emulator: bool = False) -> list[tuple[str, str]]:
    """The top of the page's lines for ``section`` (``section``'s result for ``store``; ``emulator``:
    the store is one): per job, the configuration to run and what it costs against Spark's default,
    each with the id of its decision to link to."""
    lines = []
    where = f"{store} (an emulator: its latencies say nothing about a real store)" if emulator else store
    for box in section.boxes:
        d = box.decision
        if d.chosen is None:
            lines.append((box.anchor, f"{d.workload} on {where}: no configuration can be recommended"))
            continue
        c = d.chosen
        line = (f"{d.workload} on {where}: run {d.recommended}: commits {cell(c.commit_p50_ms)} ms p50, "
                f"${c.dollars_per_month:,.2f} a month (projection)")
        base = d.baseline
        if base is not None and base is not c and not base.out:
            line += f"; Spark's default ({base.label}): {cell(base.commit_p50_ms)} ms, ${base.dollars_per_month:,.2f}"
        lines.append((box.anchor, line))
    return lines
