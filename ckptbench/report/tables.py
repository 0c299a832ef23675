"""Every table the report shows and the CLI prints (``cost``'s are in ``report.costs``), each a
``report.table.Table`` built from a record through ``ckptbench.metrics`` alone (the probe's, the
contract's and counting's from a live run's plain data): the page and the terminal show the same
figures. Functions the CLI prints as they are return the Markdown text; the others, the ``Table``.
Also the page's structure the report and its levers section fill (``Section``, ``Box``, ``Figure``)."""

from __future__ import annotations

import base64
import dataclasses
import math
from pathlib import Path

import pandas as pd

from ckptbench import config, decide, metrics
from ckptbench.metrics import cost
from ckptbench.record import results
from ckptbench.report import provenance
from ckptbench.report.table import Table, cell

TRIGGER_S = 10.0  # the trigger interval money per month is shown at


@dataclasses.dataclass
class Figure:
    path: Path
    caption: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.path.read_bytes()).decode()


@dataclasses.dataclass
class Box:
    """A decision shown with a table of its candidates, lines said beneath its reasons, and the
    page id a link to it takes ("": none links to it)."""

    decision: decide.Decision
    table: Table
    said: list[str] = dataclasses.field(default_factory=list)
    anchor: str = ""


@dataclasses.dataclass
class Section:
    title: str
    text: list[str] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    figures: list[Figure] = dataclasses.field(default_factory=list)
    boxes: list[Box] = dataclasses.field(default_factory=list)
    links: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (href, what it is)


def jvm_ms(i: metrics.Interval | None) -> str:
    """A median the JVM's clock timed and its interval, to a hundredth of a millisecond:
    "1.73 [1.61, 1.90]"; n/a where nothing was timed."""
    return "n/a" if i is None or math.isnan(i.value) else i.said(".2f")


#: The candidate tables' column of what the fault lab's ``decide.OUTAGE_SHOWN`` did to the strategy's queries.
OUTAGE_COLUMN = "store away 30 s (fault lab)"


#: The configuration tables' column of a batch's time (against a batch whose checkpoint is free) and CPU.
BATCH_COLUMN = "batch p50 (x the floor's) / CPU per batch (ms)"


def batch_cell(c: decide.Candidate) -> str:
    """``BATCH_COLUMN``'s cell for ``c``: its batch p50, that over the benchmark floor's in the same
    job and configuration where the record has it, and the driver JVM's CPU per batch."""
    ratio = c.batch_p50_ms / c.floor_batch_p50_ms if c.floor_batch_p50_ms > 0 else math.nan
    against = f" ({ratio:,.2f}x)" if math.isfinite(ratio) else ""
    return f"{cell(c.batch_p50_ms)}{against} / {cell(c.cpu_ms_per_batch, ',.0f')}"


def candidates_table(d: decide.Decision) -> Table:
    """A job's decision's candidates, one row per configuration (a strategy, with Spark's levers where
    the job ran some): commit p50 / p95, beside it the offsets and commits files' commit as the JVM
    timed it (shown, not decided on), billable requests, dollars (a projection), a second writer,
    the store away (``OUTAGE_COLUMN``) and the verdict."""
    rows = [[c.label, f"{cell(c.commit_p50_ms)} / {cell(c.commit_p95_ms)}", jvm_ms(c.jvm_commit),
             cell(c.requests_per_batch, ".1f"), cell(c.dollars_per_month, ",.2f"), c.second_writer, c.outage,
             decide.recommended_said(c) if c is d.chosen else f"out: {c.out}" if c.out else c.note]
            for c in d.candidates]
    return Table("The candidates", ["strategy", "commits per batch, p50 / p95 (ms)",
                                    "offsets + commits files, JVM clock, p50 [95%] (ms; not decided on)",
                                    "billable requests per batch", "$ per month (projection)", "a second writer",
                                    OUTAGE_COLUMN, "verdict"], rows,
                 classes=("", "", "", "", "projection"))


def crash_tables(record: results.Results) -> list[Table]:
    """The crash lab's failure table, one row per strategy x workload x configuration of Spark's
    levers (``crash_series.preset``), and its two-writer table."""
    rows = []
    series = record.crash_series.assign(preset=record.crash_series.preset.fillna(config.DEFAULT_PRESET))
    for strategy, workload, preset in series[["strategy", "workload", "preset"]].drop_duplicates().itertuples(
            index=False):
        def m(metric, *args, spec=".0f", strategy=strategy, workload=workload, preset=preset):
            return cell(metrics.or_none(metric, record, strategy, *args, workload, preset=preset), spec)

        label = strategy if preset == config.DEFAULT_PRESET else f"{strategy} + {preset}"
        rows.append([label, workload, f"{m(metrics.crash_cycles)} ({m(metrics.kills_inside_a_batch)})",
                     m(metrics.restart_failure_rate, spec=".0%"),
                     m(metrics.duplicated_rows), m(metrics.lost_rows), m(metrics.cycles_not_exactly_once),
                     f"{m(metrics.recovery_percentile, 50)} / {m(metrics.recovery_percentile, 95)}",
                     m(metrics.recovery_requests), m(metrics.jvm_start_percentile, 50),
                     " / ".join(m(metrics.leftover_objects, kind) for kind in metrics.LEFTOVER_KINDS)])
    errors = record.crash_series.dropna(subset=["error"])
    tables = [Table("Kill -9 and restart: exactly-once per strategy",
                    ["strategy", "workload", "cycles (killed inside a batch)", "restart failures", "duplicated rows",
                     "lost rows", "cycles not exactly-once", "recovery p50 / p95 (ms)", "recovery requests p50",
                     "JVM start p50 (ms)", "left: temp / orphan data / pending MPU"], rows,
                    " ".join(f"{config.configuration_label(row.strategy, row.preset)} x {row.workload} "
                             + (f"{row.error}." if str(row.error).startswith("refused: ")
                                else f"stopped early: {row.error}.") for row in errors.itertuples()))]
    if len(record.two_writers):
        tables.append(Table("Two drivers on one checkpoint (a zombie after a failover, or two started together)",
                            ["strategy", "workload", "second started", "outcome", "first driver's error",
                             "second driver's error", "duplicated / lost rows", "log files written twice"],
                            [_two_writer_row(row) for row in record.two_writers.itertuples()],
                            "A zombie started after the first's batches usually meets Spark's own checks before "
                            "two writes meet, whatever the strategy: it says nothing of whether the strategy "
                            "refuses a second writer (the race below does). \"held at\": both drivers started "
                            "together and the proxy held each one's write of that file until the other's came."))
    if len(record.races):
        tables.append(race_table(record))
    return tables


def race_table(record: results.Results) -> Table:
    """The race (``ckptbench.experiments.race``), one row per strategy x file kind: rounds, how
    many let both writers win, how many had exactly one winner, how many never met."""
    rows = []
    for strategy in dict.fromkeys(record.races.strategy):
        for kind in metrics.race_kinds(record, strategy):
            rounds = metrics.race_rows(record, strategy, kind)
            losers = sorted({o for o in [*rounds.outcome_0, *rounds.outcome_1] if o != "won"})
            rows.append([strategy, kind, f"{metrics.race_rounds(record, strategy, kind):.0f}",
                         f"{metrics.race_two_winners(record, strategy, kind):.0f}",
                         f"{metrics.race_one_winner(record, strategy, kind):.0f}",
                         f"{metrics.race_unmet(record, strategy, kind):.0f}",
                         ", ".join(c.rsplit(".", 1)[-1] for c in losers) or "-"])
    verdicts = []
    for strategy in dict.fromkeys(record.races.strategy):
        refuses = metrics.refuses_second_writer(record, strategy)
        verdicts.append(f"{strategy}: {'refuses' if refuses else 'does NOT refuse'} a second writer")
    return Table("Two writers racing to create one file (the race: what decides whether a second writer is refused)",
                 ["strategy", "file", "rounds", "two winners", "one winner", "unmet", "the loser's error"], rows,
                 "Per round two managers of the strategy (Spark's own factory, in one driver JVM) create the same "
                 "new file with overwrite off and close at once; the metering proxy holds the first write of the "
                 "file's key (for manifest, of its directory's next record) until the other's arrives, so both have "
                 "passed any existence check. Two winners: both were told the file is theirs (a second writer let "
                 "through); one winner: the strategy refused the other; unmet: a round whose writes never met at "
                 "the store (it tested nothing). " + "; ".join(verdicts) + ".")


def _two_writer_row(row) -> list[str]:
    check = "unreadable" if isinstance(row.verify_error, str) else f"{row.duplicates} / {row.lost}"
    if pd.isna(row.head_start):  # a record from before head starts were recorded
        start = "n/a"
    else:
        start = "together" if row.head_start == 0 else f"after {row.head_start} batches"
    race = getattr(row, "race", None)
    if isinstance(race, str):
        met = getattr(row, "race_met", None)
        start += f", held at {race}" + ("" if pd.isna(met) else " (met)" if met else
                                         " (did not meet: one driver stopped first)")
    twice = f"{row.overwritten_logs} ({row.overwritten_files})" if row.overwritten_logs else "0"
    return [row.strategy, row.workload, start, row.outcome, _cell(row.first_error), _cell(row.second_error),
            check, twice]


def _cell(text) -> str:
    return "-" if not isinstance(text, str) else text[:160]


PROJECTED_PARTITIONS = 200  # the partitions the report's cost projection is shown at (Spark's default)


def _maintenance_month(record: results.Results, strategy: str) -> str:
    """The state store maintenance's requests a month at ``PROJECTED_PARTITIONS``: a projection of
    ``metrics.maintenance_rates`` (its listings alone where the record has no long query)."""
    listings, files = metrics.or_none(metrics.maintenance_rates, record, strategy) or (math.nan, math.nan)
    if math.isnan(listings):
        return cell(None)
    month = cost.maintenance_per_month(listings, 0.0 if math.isnan(files) else files, PROJECTED_PARTITIONS, TRIGGER_S)
    return f"{month:,.0f}" + (" (listings only)" if math.isnan(files) else "")


def scale_tables(record: results.Results) -> list[Table]:
    """The scale experiment's tables: every point of every axis, the fitted slopes (with a cost
    projection), and memory over the long query."""
    point_rows, slope_rows, memory_rows = [], [], []
    ran = metrics.scale_axes_run(record)
    for axis in ran:
        for strategy in record.strategies():
            for x, run in metrics.or_none(metrics.scale_points, record, axis, strategy) or []:
                def f(figure, spec=".0f", run=run):
                    return cell(metrics.or_none(metrics.SCALE_FIGURES[figure][0], run), spec)

                point_rows.append([axis, f"{x:,.0f}", strategy, f("requests", ".1f"),
                                   " / ".join(f(f"requests_{a}", ".1f") for a in metrics.STATEFUL_AREAS),
                                   f("kib", ".1f"), f"{f('wal_commit_p50')} / {f('wal_commit_p95')}",
                                   f"{f('commit_offsets_p50')} / {f('commit_offsets_p95')}",
                                   f"{f('state_commit_p50')} / {f('state_commit_p95')}",
                                   cell(metrics.or_none(metrics.maintenance_listings_per_partition_round, run),
                                        ".2f"),
                                   cell(metrics.or_none(metrics.maintenance_files_per_partition_batch, run), ".2f")])
    for strategy in record.strategies():
        def slope(axis, figure, strategy=strategy):
            if axis not in ran:
                return "not run"
            fit = metrics.or_none(metrics.scale_fit, record, axis, strategy, figure)
            return "failed" if fit is None else f"{fit[1]:.3g} (r² {fit[2]:.2f})"

        by_op = metrics.or_none(metrics.projected_requests_by_op, record, strategy, PROJECTED_PARTITIONS)
        slope_rows.append([strategy, slope("partitions", "requests"), slope("partitions", "state_commit_p50"),
                           slope("operators", "requests"), slope("batches", "requests"),
                           slope("batches", "state_commit_p50"), slope("batches", "wal_commit_p50"),
                           "not run" if "partitions" not in ran else
                           cell(by_op and cost.per_month(cost.dollars(by_op), TRIGGER_S), ",.2f"),
                           "not run" if "partitions" not in ran else _maintenance_month(record, strategy)])
        if "batches" not in ran:
            continue

        def m(metric, spec=".1f", strategy=strategy):
            return cell(metrics.or_none(metric, record, strategy), spec)

        long_run = metrics.or_none(metrics.scale_points, record, "batches", strategy)
        rss = long_run[0][1].info.peak_rss_mib if long_run else None
        memory_rows.append([strategy, cell(rss), m(metrics.heap_peak_mib), m(metrics.heap_growth_mib),
                            m(metrics.manager_kib_peak), m(metrics.manager_objects_growth)])
    plan, env = record.environment["plan"], record.environment
    axes_said = {"partitions": f"partitions: one stateful operator, {plan['batches']} measured batches per point",
                 "operators": f"operators: at {plan['operators_partitions']} partitions",
                 "batches": f"batches: one query of {plan['long_batches']:,} measured batches at "
                            f"{env['long_partitions']} partitions, purge keeping {plan['retain']}, cut into "
                            f"{plan['windows']} windows (at: batches done at a window's middle)"}
    unfinished = [p for p in env.get("parts", [env]) if p.get("finished") is False]
    return [
        Table("Per batch at each point of each scale axis",
              ["axis", "at", "strategy", "requests", "offsets / commits / state requests", "KiB sent",
               "walCommit p50 / p95 (ms)", "commitOffsets p50 / p95 (ms)", "state commit p50 / p95 (ms)",
               "maintenance listings per partition and round", "maintenance snapshots and deletes per "
               "partition and batch"],
              point_rows,
              "; ".join(axes_said[axis] for axis in ran) + f". Requests by {provenance.counted_by(record)}, a mean per "
              "batch of a batch's own: those the state store's maintenance made (every "
              f"{env['maintenance_interval']} here; Spark's default is 60 s) are left out, whenever they came, and "
              "shown in the last two columns over the whole query: its listings per state partition and round, "
              "its snapshots and deletes per state partition and batch (deletes only past the retention, so in the "
              "long query). Times are Spark's."
              + (" The run stopped before its end: these are the strategies it finished." if unfinished else "")),
        Table("Fitted slopes (least squares over the points above)",
              ["strategy", "requests per partition", "state commit ms per partition", "requests per operator",
               "requests per 1,000 batches", "state commit ms per 1,000 batches", "walCommit ms per 1,000 batches",
               f"$ per month at {PROJECTED_PARTITIONS} partitions (projection)",
               f"maintenance requests per month at {PROJECTED_PARTITIONS} partitions (projection)"], slope_rows,
              f"The dollars: {cost.caption()}; each operation's requests fitted against partitions and evaluated at "
              f"{PROJECTED_PARTITIONS}, one batch every {TRIGGER_S:g} s (`python -m ckptbench cost --partitions N` "
              "for another scale). Maintenance, apart: its listings per partition and round over every scale run "
              "every 60 s (Spark's default interval), its snapshots and deletes per partition and batch over the long "
              "query with every batch."),
        Table("Memory over the long query",
              ["strategy", "driver peak RSS (MiB)", "driver heap after full GC, peak (MiB)",
               "heap growth, second half (MiB per 1,000 batches)", "managers' objects, peak (KiB, shallow)",
               "managers' objects growth, second half (per 1,000 batches)"], memory_rows,
              "Heap read after a full GC every window; the managers' objects are the instances of the "
              "ckptbench.checkpoint classes (jcmd GC.class_histogram; shallow sizes, a floor). Growth: the median "
              "slope between readings of the query's second half, once what Spark keeps a fixed number of (SQL "
              "executions, jobs, stages) has filled; bounded means near zero against the peak.")]


def measure_rows(record: results.Results) -> list[dict]:
    """The table's rows for one record: a dict per strategy."""
    out = []
    put, head = (metrics.floor_percentile(record, op, 50) for op in ("PUT", "HEAD"))
    jvm_put = metrics.put_floor_ms(record)
    for strategy in record.strategies():
        run = record.run(strategy, "stateful")
        out.append({
            "store": record.environment["store"], "emulator": record.environment["emulator"], "strategy": strategy,
            "wal_commit_p50": metrics.duration_percentile(run, "walCommit", 50),
            "wal_commit_p95": metrics.duration_percentile(run, "walCommit", 95),
            "commit_offsets_p50": metrics.duration_percentile(run, "commitOffsets", 50),
            "commit_offsets_p95": metrics.duration_percentile(run, "commitOffsets", 95),
            "jvm_commit": metrics.file_commit_ms_interval([run], ["offsets", "commits"]),
            "requests_per_batch": metrics.requests_per_batch(run), "requests_by_op": metrics.requests_by_op(run),
            "put_p50": put, "head_p50": head, "temp_objects": int(run.info.temp_objects),
            "jvm_put_p50": jvm_put,
            # None in a record made before the benchmark floor ran beside the strategies.
            "spark_share_p50": metrics.or_none(metrics.spark_share_ms, record, "stateful"),
            "overhead_ms": metrics.or_none(metrics.strategy_overhead_ms, record, run),
            "overhead_of_put": metrics.or_none(metrics.strategy_overhead_of_put, record, run),
            "checkpoint_files_per_batch": metrics.or_none(metrics.checkpoint_files_per_batch, record, "stateful"),
            "requests_per_checkpoint_file": metrics.or_none(metrics.requests_per_checkpoint_file, record, run)})
    return out


MEASURE_HEADER = ["store", "strategy", "walCommit p50 / p95 (ms)", "commitOffsets p50 / p95 (ms)",
                  "offsets + commits files, JVM clock, p50 [95%] (ms)",
                  "walCommit / (HEAD+PUT)", "Spark's share of walCommit p50 (ms)", "overhead: ms / x PUT",
                  "S3 requests per batch (mean)", "checkpoint files per batch",
                  "requests per checkpoint file (a batch's own)", "PUT p50 in Spark's JVM (ms)",
                  "store PUT / HEAD p50 (ms)", "temp objects"]


def measure_table(records: list[results.Results]) -> str:
    """The records as Markdown (``python -m ckptbench measure``), one row per store x strategy, in
    ``MEASURE_HEADER``'s columns. Spark's share is walCommit p50 through the benchmark floor (files
    in the JVM's memory, no store); the overhead is walCommit p50 minus that share minus a PUT's p50
    as Spark's own S3 client makes it (``metrics.put_floor_ms``; the store's own, timed at the store,
    beside it)."""
    rows = []
    for r in (row for record in records for row in measure_rows(record)):
        ops = ", ".join(f"{op} {n:.3g}" for op, n in r["requests_by_op"].items())
        rows.append([r["store"] + (" (emulator)" if r["emulator"] else ""), r["strategy"],
                     f"{r['wal_commit_p50']:.1f} / {r['wal_commit_p95']:.1f}",
                     f"{r['commit_offsets_p50']:.1f} / {r['commit_offsets_p95']:.1f}", jvm_ms(r["jvm_commit"]),
                     f"{r['wal_commit_p50'] / (r['put_p50'] + r['head_p50']):.1f}x", cell(r["spark_share_p50"], ".1f"),
                     f"{cell(r['overhead_ms'], '.1f')} / {cell(r['overhead_of_put'], '.2f')}",
                     f"{r['requests_per_batch']:.3g} ({ops})", cell(r["checkpoint_files_per_batch"], ".3g"),
                     cell(r["requests_per_checkpoint_file"], ".2f"), cell(r["jvm_put_p50"], ".1f"),
                     f"{r['put_p50']:.1f} / {r['head_p50']:.1f}", str(r["temp_objects"])])
    return Table("", MEASURE_HEADER, rows).markdown()


def contract_table(found: dict[str, list[tuple[str, bool, str]]]) -> str:
    """``contract``'s checks per strategy as Markdown: strategy, check, PASS or FAIL, what it saw."""
    return Table("", ["strategy", "check", "result", "what was seen"],
                 [[strategy, check, "PASS" if ok else "FAIL", seen]
                  for strategy, checks in found.items() for check, ok, seen in checks]).markdown()


COUNTING_HEADER = ["strategy", "batches counted / not", "walCommit p50 counted / not (ms)", "overhead (ms)",
                   "overhead, % of p50 (90% interval)", "bound, % of p50"]


def counting_table(figures: list[dict]) -> Table:
    """What counting in the JVM costs walCommit, a row per strategy, from
    ``experiments.counting.figures`` (plain numbers: this layer reads no experiment's objects)."""
    return Table("", COUNTING_HEADER, [
        [f["strategy"], f"{f['counted']} / {f['not_counted']}", f"{f['p50_counted']:.1f} / {f['p50_not']:.1f}",
         f"{f['overhead_ms']:+.2f}", f"{f['overhead_pct']:+.1f}% ({f['low_pct']:+.1f}% to {f['high_pct']:+.1f}%)",
         f"{f['bound_pct']:.2f}%"] for f in figures])
