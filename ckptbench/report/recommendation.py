"""The recommendation for one job on one store (``python -m ckptbench recommend``), as text for a
terminal and as one self-contained HTML page, both from the same record and decision.

The record is the command's (``results/recommend/<store>-<job>/``): the levers experiment's runs
for the job's shape, the race's rounds (``races``), the store probe's checks (``capabilities``) and,
under ``environment["recommend"]``, what the command was asked and did: the job's shape and
trigger, the strategies it left out and why, the race's file kinds and rounds, and the deploy
plan (``ckptbench.deploy.plan``'s data, computed by the CLI: this layer never imports deploy) of
the chosen manager. Every figure comes from ``ckptbench.decide``'s candidates, which read the
record through ``ckptbench.metrics``; nothing here measures. Money is a projection at AWS S3
list prices (``metrics.cost.LABEL``) wherever it shows.

The page embeds its style and loads nothing (no script, no font, no CDN), so it opens offline;
long settings and jar paths wrap, so it fits a 1024-pixel window. Rendered with Jinja2, which
escapes everything it inserts.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from pathlib import Path

import pandas as pd

from ckptbench import config, decide, metrics
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.report import provenance, tables
from ckptbench.report.table import ENV, Table, cell

#: The page's file name, beside the record in the command's output directory.
PAGE = "index.html"
#: Said before the flags when the command started the store it measured (it is gone now).
FRESH = ("(the endpoint and bucket below are those of the store this command started and stopped: for your "
         "server, run that deploy command with its URL and your bucket)")


def _count(value) -> str:
    return "n/a" if pd.isna(value) else f"{int(value):,}"


def crash_lines(record: results.Results) -> list[str]:
    """One line per crash series in the record: the configuration, the crash lab's workload and
    what its check found."""
    lines = []
    for row in record.crash_series.itertuples():
        label = config.configuration_label(row.strategy, row.preset)
        found = (f"{row.cycles} crash cycle{'s' if row.cycles != 1 else ''}, {_count(row.duplicates)} rows "
                 f"duplicated, {_count(row.lost)} lost")
        lines.append(f"{label} (the crash lab's {row.workload} job): {found}"
                     + (f"; {row.error}" if isinstance(row.error, str) else ""))
    return lines


def total_requests(c: decide.Candidate) -> float:
    """Billable requests per batch: the strategy's and those Spark's settings and the sink make."""
    return c.requests_per_batch + c.other_requests_per_batch


def _times(chosen: float, base: float, fewer: str, more: str) -> str:
    """How ``chosen`` compares with ``base``: "N times fewer" (or more), or "the same"."""
    if math.isnan(chosen) or math.isnan(base):
        return "not comparable"
    if round(chosen, 1) == round(base, 1):
        return "the same"
    if chosen == 0 or base == 0:
        return fewer if chosen < base else more
    ratio = base / chosen if chosen < base else chosen / base
    return f"{ratio:,.1f} times {fewer if chosen < base else more}"


def comparison(decision: decide.Decision) -> Table:
    """The recommended configuration against Spark's default on the same store, a row per figure:
    the figure, the recommended's, the default's, the difference; no rows where there is no default
    to compare with, or it is the one recommended. A default out only for want of a crash test here
    (``Candidate.untested``) is compared with all the same: it is what the user runs today."""
    c, b = decision.chosen, decision.baseline
    header = ["figure", "recommended", f"Spark's default ({b.label if b else '-'})", "difference"]
    if c is None or b is None or (b.out is not None and not b.untested) or b is c:
        return Table("", header, [])
    dollars = c.dollars_per_month - b.dollars_per_month
    return Table("", header, [
        ["commit latency p50 (ms)", cell(c.commit_p50_ms, ",.0f"), cell(b.commit_p50_ms, ",.0f"),
         f"{abs(c.commit_p50_ms - b.commit_p50_ms):,.0f} ms {'less' if c.commit_p50_ms <= b.commit_p50_ms else 'more'}"
         f" ({_times(c.commit_p50_ms, b.commit_p50_ms, 'faster', 'slower')})"],
        ["batch time p50 (ms)", cell(c.batch_p50_ms, ",.0f"), cell(b.batch_p50_ms, ",.0f"),
         f"{abs(c.batch_p50_ms - b.batch_p50_ms):,.0f} ms {'less' if c.batch_p50_ms <= b.batch_p50_ms else 'more'}"
         f" ({_times(c.batch_p50_ms, b.batch_p50_ms, 'faster', 'slower')})"],
        ["requests per batch (billable)", cell(total_requests(c), ",.1f"), cell(total_requests(b), ",.1f"),
         _times(total_requests(c), total_requests(b), "fewer requests", "more requests")],
        [f"$ per month ({cost.LABEL})", f"${c.dollars_per_month:,.2f}", f"${b.dollars_per_month:,.2f}",
         f"${abs(dollars):,.2f} a month {'less' if dollars <= 0 else 'more'}"],
    ])


@dataclasses.dataclass
class Summary:
    """What the text and the page show, worked out once."""

    title: str
    measured_on: str
    decision: decide.Decision
    runner_up: decide.Candidate | None
    comparison: Table
    options: dict[str, str]  # the chosen configuration's query options, for writeStream
    submit: list[str]  # spark-submit's lines: the deploy plan's, then the levers' --conf
    slots: str  # how to run the chosen configuration's task slots per core ("": it sets none)
    deploy_command: str
    lost: list[tuple[str, str]]  # (configuration, why it lost or is out)
    not_measured: list[tuple[str, str]]
    candidates: Table
    notes: list[str]
    fresh: bool  # the store ran for the command only: its endpoint and bucket in ``submit`` are gone
    crashes: list[str]  # ``crash_lines``
    ranked: list[str]  # ``ranked_lines``


def ranked_lines(record: results.Results) -> list[str]:
    """Where the job was ranked at fewer partitions than its own (``experiments.recommend.RANKED_AT``):
    what ran where, then per configuration its requests per batch at the job's partitions as
    projected and, where it was measured there too, as measured (``environment["recommend"]["projection"]``)."""
    projection = record.environment["recommend"].get("projection")
    if not projection:
        return []
    ranked, own = projection["from_partitions"], projection["to_partitions"]
    lines = [f"Every configuration ran at {ranked} partitions and was ranked there (the crash check too); Spark's "
             f"default, the leading ones and the first of them at more task slots per core ran at {own}, where "
             f"this decision is made. Requests per batch at {own}: projected from {ranked} (a projection: a state "
             "file per partition each batch), and as measured where it ran there:"]
    for row in projection["configurations"]:
        label = config.configuration_label(row["strategy"], row["preset"])
        measured = row["measured"]
        said = (f"{measured:,.1f} measured ({(row['projected'] - measured) / measured:+.1%} off)" if measured
                else "not measured there")
        lines.append(f"{label}: {row['projected']:,.1f} projected, {said}")
    return lines


def _lost(decision: decide.Decision, second: decide.Candidate | None) -> list[tuple[str, str]]:
    return [(c.label, f"out: {c.out}" if c.out else c.note or "not chosen")
            for c in decision.candidates if c is not decision.chosen and c is not second]


def _not_measured(record: results.Results, name: str, first: str) -> list[tuple[str, str]]:
    """The configurations and strategies the command did not measure, with why."""
    said = record.environment["recommend"]
    others = [s for s in said["strategies"] if s != first]
    out = [(f"{preset} with {', '.join(others)}", f"{why} (with {first})" if why == "Spark refused it" else why)
           for preset, why in (record.environment.get("not_measured") or {}).get(name, {}).items() if others]
    out += [(strategy, why) for strategy, why in said.get("skipped", {}).items()]
    return out


def _submit(record: results.Results, chosen: decide.Candidate, conf: dict[str, str]) -> tuple[list[str], str]:
    """spark-submit's lines: the deploy plan's ``--jars`` and ``--conf`` (the manager, the S3A
    settings), then one ``--conf`` per lever setting; and the deploy command that prints the plan."""
    said = record.environment["recommend"]
    plan = said.get("deploy")
    endpoint, bucket = said.get("endpoint") or "", said.get("bucket") or "BUCKET"
    if said.get("fresh"):  # the store ran for the command only: the user's own endpoint and bucket
        endpoint, bucket = "URL", "BUCKET"
    command = (f"{f'CKPT_S3_ENDPOINT={endpoint} ' if endpoint else ''}python -m ckptbench deploy {chosen.strategy} "
               f"--store {said['store']} --bucket {bucket}")
    if not plan or plan["strategy"] != chosen.strategy:
        return [f"--conf {key}={value}" for key, value in conf.items()], command
    argv = plan["submit"][1:-1]
    lines = [f"{argv[i]} {shlex.quote(argv[i + 1])}" for i in range(0, len(argv), 2)]
    lines += [f"--conf {shlex.quote(f'{key}={value}')}" for key, value in conf.items()]
    return ["spark-submit", *lines, plan["submit"][-1]], command


def summary(record: results.Results, decision: decide.Decision) -> Summary:
    said, env = record.environment["recommend"], record.environment
    shape = said["shape"]
    second = decide.runner_up(decision)
    chosen = decision.chosen
    conf, options = config.preset(chosen.preset) if chosen else ({}, {})
    slots = int(conf.pop(config.SLOTS_PER_CORE, "1"))  # not a setting: where executors start (``slots``)
    submit, command = _submit(record, chosen, conf) if chosen else ([], "")
    first = config.SPARK_DEFAULT[0] if config.SPARK_DEFAULT[0] in said["strategies"] else said["strategies"][0]
    rows = []
    for c in decision.candidates:
        verdict = (decide.recommended_said(c) if c is chosen else f"runner-up: {c.note}" if c is second
                   else f"out: {c.out}" if c.out else c.note)
        rows.append([c.label + (" (Spark's default)" if c is decision.baseline else ""),
                     f"{cell(c.commit_p50_ms)} / {cell(c.commit_p95_ms)}",
                     tables.batch_cell(c),
                     f"{cell(c.requests_per_batch, '.1f')} + {cell(c.other_requests_per_batch, '.1f')}",
                     cell(c.dollars_per_month, ",.2f"), c.second_writer, c.outage, verdict])
    candidates = Table(
        "Every configuration measured", ["configuration", "commit p50 / p95 (ms)", tables.BATCH_COLUMN,
                                         "requests per batch: strategy + others", f"$ per month ({cost.LABEL})",
                                         "a second writer", tables.OUTAGE_COLUMN, "verdict"], rows,
        "Commit: walCommit + commitOffsets; batch: triggerExecution; both p50 over "
        f"{provenance.measured_said(env['plan'])}; the batch over the benchmark floor's in the same configuration "
        "(Spark's checkpoint files in the JVM's memory; RocksDB's own uploads still go to the store); CPU: the "
        "driver JVM's per measured batch, its tasks' too on a local master (n/a on a cluster)"
        ". The verdicts compare medians over every measured batch, each "
        "with its 95% bootstrap interval, and call a difference only where the interval of the difference excludes "
        "zero and it is large enough (the rule: ckptbench.decide). Requests are billable ones counted by "
        f"{provenance.counted_by(record)}; \"others\" are those Spark's settings and the sink make (data files, "
        f"RocksDB's uploads, checksum files), the mean of the strategies in that configuration. {cost.caption()}.")
    notes = [said.get("race_note") or "", said.get("crash_note") or ""]
    return Summary(
        title=f"{shape['name']} on {said['store']}: a batch every {said['trigger']}",
        measured_on=f"{env['describe']}; {provenance.runtime_said(env)}{provenance.foreign_said(env)}"
                    f"{provenance.settings_said(env)}",
        decision=decision, runner_up=second, comparison=comparison(decision), options=options,
        submit=submit, slots=config.slots_said(slots) if slots > 1 else "", deploy_command=command,
        lost=_lost(decision, second),
        not_measured=_not_measured(record, shape["name"], first), candidates=candidates,
        notes=[n for n in notes if n], fresh=bool(said.get("fresh")), crashes=crash_lines(record),
        ranked=ranked_lines(record))


def _option_lines(options: dict[str, str]) -> list[str]:
    return [f'.option("{key}", "{value}")' for key, value in options.items()]


def text(record: results.Results, decision: decide.Decision) -> str:
    """The recommendation for a terminal: the configuration and how to run it, its figures against
    Spark's default configuration, the runner-up, why every other configuration lost, what was not
    measured, and the candidates' table."""
    s = summary(record, decision)
    d, c = s.decision, s.decision.chosen
    lines = [f"Recommendation for {s.title}", f"(measured on {s.measured_on})", ""]
    if c is None:
        lines += ["No configuration can be recommended: every one is out.", ""]
    else:
        levers = c.preset if c.levers else "none (Spark's defaults)"
        lines += [f"  run: {c.label}", f"  manager: {c.strategy}", f"  Spark's levers: {levers}", ""]
        lines += [f"Against Spark's default configuration ({config.SPARK_DEFAULT[0]}, no levers) on the same store:"]
        width = max((len(row[0]) for row in s.comparison.rows), default=0)
        if d.baseline is c:
            lines += ["  it is Spark's default configuration: nothing to change"]
        elif not s.comparison.rows:
            lines += [f"  not comparable: {d.baseline.out if d.baseline else 'it was not measured'}"]
        lines += [f"  {row[0]:<{width}}  {row[1]} against {row[2]}: {row[3]}" for row in s.comparison.rows]
    lines += ["", "Why:", *(f"  - {r}" for r in d.reasons), *(f"  - {n}" for n in s.notes)]
    if s.ranked:
        lines += ["", s.ranked[0], *(f"  - {line}" for line in s.ranked[1:])]
    if s.crashes:
        lines += ["", "Crash check (kill -9 and restart, exactly-once checked):", *(f"  - {c}" for c in s.crashes)]
    if s.runner_up:
        lines += ["", f"Runner-up: {s.runner_up.label}: {s.runner_up.note}"]
    if s.lost:
        lines += ["", "Why each other configuration lost:", *(f"  - {label}: {why}" for label, why in s.lost)]
    if s.not_measured:
        lines += ["", "Not measured:", *(f"  - {label}: {why}" for label, why in s.not_measured)]
    if c is not None:
        lines += ["", f"How to run it: the manager's settings as `{s.deploy_command}` prints them, then Spark's "
                      "levers:", *([FRESH] if s.fresh else []), " \\\n  ".join(s.submit)]
        lines += [f"and {s.slots}"] if s.slots else []
        if s.options:
            lines += ["", "and on writeStream (query options):", *(f"  {line}" for line in _option_lines(s.options))]
    lines += ["", s.candidates.markdown()]
    return "\n".join(lines)


def html(record: results.Results, decision: decide.Decision, created: str) -> str:
    """The same as ``text``, as one self-contained HTML page."""
    s = summary(record, decision)
    extra = [tables.race_table(record)] if len(record.races) else []
    checks = metrics.recorded_checks(record)
    if checks:
        extra.append(Table("Which strategies the store can run (the probe)",
                           ["strategy", "can run", "why not, or notes"],
                           [[name, metrics.can_run(v), "; ".join(v["reasons"] + v["notes"]) or "-"]
                            for name, v in metrics.verdicts(checks).items()]))
    return ENV.get_template("recommendation.html").render(
        s=s, created=created, cost_caption=cost.caption(), decide_doc=decide.__doc__, tables=extra, fresh=FRESH,
        option_lines=_option_lines(s.options), submit="\n  ".join(s.submit))


def write(out: Path, record: results.Results, decision: decide.Decision, created: str) -> Path:
    """Write the page beside the record in ``out``; its path."""
    path = out / PAGE
    path.write_text(html(record, decision, created))
    return path
