"""The report: one self-contained HTML page (``results/report/index.html``) with the
recommendation per store x workload and its reasons, the tables behind it and the figures.

Reads the records in ``results/raw`` (``ckptbench.results``: the latest ``streaming``, ``store``
(with the store probe's checks), ``manifest-compaction``, ``crashes``, ``faults`` and ``scale``
record per store); every number comes from
``ckptbench.metrics``, as the asv benchmarks' do, so the page and asv's HTML agree; the verdict
from ``ckptbench.decide``, which never recommends what the probe found the store cannot run; money
from ``ckptbench.cost`` and COPY projected to AWS S3 (``runs.PROJECTION``), each labelled a
projection wherever it shows. The page embeds its
figures (also written as PNG files beside it) and its style, so it opens from a file share or a
CI artifact with no network; it links to asv's pages (``../html/index.html``) for history.
Rendered with Jinja2 (``templates/report.html``), which escapes everything it inserts.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import math
from pathlib import Path

import jinja2
import pandas as pd

from infra.faults import PROFILES

from . import cost, decide, faultlab, metrics, plots, probe, results, runs

TEMPLATES = Path(__file__).resolve().parent / "templates"
TRIGGER_S = 10.0  # the trigger interval money per month is shown at


@dataclasses.dataclass
class Table:
    caption: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""

    def markdown(self) -> str:
        """The table as Markdown, for a terminal (``python -m ckptbench crashlab``)."""
        def cells(row):
            return "| " + " | ".join(str(c).replace("|", "/") for c in row) + " |"

        lines = [cells(self.header), "|" + "---|" * len(self.header), *map(cells, self.rows)]
        return "\n".join([f"{self.caption}:", "", *lines] + (["", self.note] if self.note else []))


@dataclasses.dataclass
class Figure:
    path: Path
    caption: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.path.read_bytes()).decode()


@dataclasses.dataclass
class Section:
    title: str
    text: list[str] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    figures: list[Figure] = dataclasses.field(default_factory=list)
    decisions: list[decide.Decision] = dataclasses.field(default_factory=list)


def cell(value, spec: str = ".0f") -> str:
    """A table cell of the report and of `measure`: a failed run's metric says so; NaN is n/a."""
    if value is None:
        return "failed"
    return "n/a" if value != value else format(value, spec)


def _where(record: results.Results) -> str:
    env = record.environment
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return (f"{env['describe']}; {_endpoint(env)}; size {env['size']}, commit {env['commit'][:8] or 'unknown'}, "
            f"{env['created']}; {versions}")


def _counted_by(record: results.Results) -> str:
    """Who counted the record's requests: the metering proxy (and every record before ``where``), or
    Spark's JVMs alone where no proxy could front the store."""
    where = record.environment.get("where")
    return "Spark's JVMs (no proxy fronts an https store)" if where and "proxy" not in where["counted_by"] \
        else "the metering proxy"


def _timed_by(record: results.Results, experiment: str) -> str:
    return {"proxy": "the proxy", "client": "the client (boto3)"}[metrics.timed_by(record, experiment)]


def _endpoint(env: dict) -> str:
    """Where the requests went and who counted them, the Spark master, its executors and the driver
    JVM's flags, as far as the record says (``results.environment``; older records say less)."""
    where = env.get("where")
    said = ([f"{where['scheme']}, {where['location']} endpoint, requests counted by "
             f"{' and '.join({'proxy': 'the metering proxy', 'jvm': 'Spark JVMs'}[c] for c in where['counted_by'])}"]
            if where else ["endpoint kind not recorded"])
    if "spark_master" in env:
        executors = env.get("executors")
        said.append(f"master {env['spark_master']}" + ("" if executors is None else
                    ", executors in the driver JVM" if executors == 0 else f", {executors} executors"))
    if env.get("cluster"):
        said.append(env["cluster"])
    if env.get("jvm_flags"):
        said.append(f"driver JVM flags {' '.join(env['jvm_flags'])}")
    return "; ".join(said)


def crash_tables(record: results.Results) -> list[Table]:
    """The crash lab's failure table, one row per strategy x workload, and its two-writer table."""
    rows = []
    for strategy, workload in record.crash_series[["strategy", "workload"]].drop_duplicates().itertuples(index=False):
        def m(metric, *args, spec=".0f", strategy=strategy, workload=workload):
            return cell(metrics.or_none(metric, record, strategy, *args, workload), spec)

        rows.append([strategy, workload, f"{m(metrics.crash_cycles)} ({m(metrics.kills_inside_a_batch)})",
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
                    " ".join(f"{row.strategy} x {row.workload} stopped early: {row.error}."
                             for row in errors.itertuples()))]
    if len(record.two_writers):
        tables.append(Table("Two drivers on one checkpoint (a zombie after a failover)",
                            ["strategy", "workload", "second started", "outcome", "first driver's error",
                             "second driver's error", "duplicated / lost rows", "log files written twice"],
                            [_two_writer_row(row) for row in record.two_writers.itertuples()]))
    return tables


def _two_writer_row(row) -> list[str]:
    check = "unreadable" if isinstance(row.verify_error, str) else f"{row.duplicates} / {row.lost}"
    if pd.isna(row.head_start):  # a record from before head starts were recorded
        start = "n/a"
    else:
        start = "together" if row.head_start == 0 else f"after {row.head_start} batches"
    twice = f"{row.overwritten_logs} ({row.overwritten_files})" if row.overwritten_logs else "0"
    return [row.strategy, row.workload, start, row.outcome, _cell(row.first_error), _cell(row.second_error),
            check, twice]


def _cell(text) -> str:
    return "-" if not isinstance(text, str) else text[:160]


def safety(record: results.Results) -> dict[str, decide.Safety]:
    """What the crash lab found per strategy, for the recommendation."""
    out = {}
    for strategy in dict.fromkeys(record.crash_series.strategy):
        two = record.two_writers[record.two_writers.strategy == strategy]
        outcomes = set(two.outcome)
        verdict = ("silent-damage" if "silent-damage" in outcomes else
                   "clean-error" if outcomes == {"clean-error"} else next(iter(outcomes), None))
        out[strategy] = decide.Safety(cycles=int(metrics.crash_cycles(record, strategy)),
                                      duplicated=int(metrics.duplicated_rows(record, strategy) or 0),
                                      lost=int(metrics.lost_rows(record, strategy) or 0), two_writer=verdict)
    return out


def _crashes(name: str, record: results.Results) -> Section:
    env = record.environment
    return Section(f"{name}: crashes", [
        f"Measured on {_where(record)}.",
        f"Each cycle kills a driver (SIGKILL to its process group, JVM included) at a crash point "
        f"({', '.join(env['points'])}, in turn; seed {env['seed']}), restarts it on the same checkpoint and "
        "output and checks the output read through Spark against commits/ after the restart's first commit; "
        "duplicated and lost rows are from the check at rest after each series' clean stop. Recovery runs from "
        "the restarted query's start (its SparkSession already up) to its first stored commits/N."],
        crash_tables(record))


def runnable(record: results.Results) -> dict[str, str | None] | None:
    """What the store probe recorded in ``record`` (a ``store`` record) says of each strategy, for
    the recommendation: None if it can run, else why not; None for a record with no probe."""
    checks = probe.recorded_checks(record)
    if not checks:
        return None
    return {name: "; ".join(v["reasons"]) or None for name, v in probe.verdicts(checks).items()}


def _probe(name: str, record: results.Results) -> Section:
    checks = probe.recorded_checks(record)
    said = record.environment.get("probe", {})
    verdicts = probe.verdicts(checks)
    return Section(f"{name}: what the store can do (the probe)", [
        f"Probed on {_where(record)}.",
        f"python -m ckptbench probe's checks, sent with boto3 straight to the store (not through the metering "
        f"proxy), all under {said.get('prefix', 'its own prefix')} ({said.get('cleanup', 'clean-up not recorded')} "
        "afterwards). A strategy the store cannot run is never recommended."],
        [Table("What each strategy needs, checked against the store",
               ["capability", "what is needed", "result", "what the store did"],
               [[capability, check["what"], "ok" if check["ok"] else "FAIL", check["detail"]]
                for capability, check in checks.items()]),
         Table("Which strategies the store can run", ["strategy", "can run", "depends on", "why not, or notes"],
               [[strategy, probe.can_run(v), ", ".join(v["depends_on"]),
                 "; ".join(v["reasons"] + v["notes"]) or "-"] for strategy, v in verdicts.items()])])


def _streaming(name: str, record: results.Results, figures: Path,
               found: dict[str, decide.Safety] | None = None,
               can_run: dict[str, str | None] | None = None) -> Section:
    plan = record.environment["plan"]
    largest, interval = plan["keys"][-1], plan["compact_interval"]
    section = Section(f"{name}: streaming queries", [
        f"Measured on {_where(record)}.",
        f"{plan['batches']} measured batches after {plan['warmup']} warm-up per query; state keys "
        f"{plan['keys'][0]:,} unless said; the store's own 1 KiB PUT p50 is "
        f"{metrics.floor_percentile(record, 'PUT', 50):.1f} ms (timed by {_timed_by(record, 'floor')}, same run), "
        f"{cell(metrics.put_floor_ms(record), '.1f')} ms as Spark's own S3 client makes it in the driver JVM "
        "(the client's work included), each after the store sat idle for "
        f"{runs.FLOOR_PAUSE_S * 1000:.0f} ms, as a checkpoint's PUT comes."])
    section.decisions = [decide.decide(record, workload, TRIGGER_S, safety=found, runnable=can_run)
                         for workload in plan["workloads"]
                         if workload in set(record.runs.workload)]
    rows = []
    for strategy in record.strategies():
        def stateful(metric, *args, keys=None, strategy=strategy):
            return metrics.of_run(record, strategy, "stateful", metric, *args, keys=keys)

        rows.append([
            strategy,
            f"{cell(stateful(metrics.duration_percentile, 'walCommit', 50), '.1f')} / "
            f"{cell(stateful(metrics.duration_percentile, 'walCommit', 95), '.1f')}",
            f"{cell(stateful(metrics.duration_percentile, 'commitOffsets', 50), '.1f')} / "
            f"{cell(stateful(metrics.duration_percentile, 'commitOffsets', 95), '.1f')}",
            f"{cell(stateful(lambda run: metrics.wal_commit_in_store_puts(record, run)), '.1f')}x",
            cell(metrics.or_none(metrics.spark_share_ms, record, "stateful"), ".1f"),
            f"{cell(stateful(lambda run: metrics.strategy_overhead_ms(record, run)), '.1f')} / "
            f"{cell(stateful(lambda run: metrics.strategy_overhead_of_put(record, run)), '.2f')}",
            cell(stateful(metrics.requests_per_batch), ".1f"),
            cell(stateful(lambda run: metrics.requests_per_checkpoint_file(record, run)), ".2f"),
            cell(stateful(metrics.per_put, "COPY"), ".2f"),
            f"{cell(metrics.of_run(record, strategy, 'file_sink', metrics.compaction_ratio, interval), '.1f')}x",
            cell(stateful(metrics.state_commit_percentile, 50, keys=largest))])
    section.tables.append(Table(
        "The stateful workload, per strategy",
        ["strategy", "walCommit p50 / p95 (ms)", "commitOffsets p50 / p95 (ms)", "walCommit / store PUT",
         "Spark's share of walCommit p50 (ms)", "overhead: ms / x PUT", "requests per batch",
         "requests per checkpoint file", "COPY per PUT", "file-sink compaction batch / others",
         f"state commit at {largest:,} keys (ms)"], rows,
        f"Latencies are Spark's own (progress durationMs, whole milliseconds, each read as the millisecond it "
        f"stands for); requests are counted by {_counted_by(record)}, a mean "
        "over the measured batches. Spark's share is walCommit p50 through the benchmark floor, a manager keeping "
        "files in the JVM's memory with no store (not a strategy); a strategy's overhead is its walCommit p50 minus "
        "that share minus a 1 KiB PUT's p50 in Spark's JVM (0: one PUT round trip per file). Requests per checkpoint "
        "file: requests in the checkpoint's areas over the files Spark wrote, as the floor counted them, a batch's "
        "own on both sides: the batches a call of the state store's maintenance overlapped are left out (it runs "
        "on its own schedule, a snapshot and a LIST of each partition's directory)."))
    section.figures = [
        Figure(plots.latency(name, record, "stateful", figures / f"{name}-latency.png"),
               "Commit latency per batch, every measured batch (log scale)."),
        Figure(plots.requests_by_area(name, record, "stateful", figures / f"{name}-requests.png"),
               "Requests per batch by checkpoint area and by operation."),
        Figure(plots.compaction(name, record, figures / f"{name}-compaction.png"),
               "Compacted logs: N.compact size and batch time against batch number."),
        Figure(plots.state(name, record, figures / f"{name}-state.png"),
               "State checkpoint cost against the state written per batch.")]
    return section


def _store(name: str, record: results.Results) -> Section:
    ops = [op for op in runs.FLOOR_OPS if len(metrics.samples(record, "floor", op))]
    fit = metrics.copy_fit(record)
    if fit["moves_data"]:
        copy = (f"COPY moves the data: {fit['mb_per_s']:.0f} MB/s fitted "
                f"({fit['ms_per_mib']:.2f} ms/MiB, r² {fit['r2']:.2f}).")
    else:
        copy = (f"COPY does not move the data: its per-MiB cost is {fit['share_of_put']:.0%} of a PUT's "
                f"({fit['ms_per_mib']:.2f} vs {fit['put_ms_per_mib']:.2f} ms/MiB), so no throughput is fitted; "
                "a rename measured on this store says nothing about AWS S3, where a COPY moves the bytes.")
    if (record.samples.experiment == "overhead").any():
        proxy = (f"The metering proxy adds {metrics.proxy_added_ms(record, 'PUT'):.2f} ms to a 1 KiB PUT "
                 f"({metrics.proxy_added_pct_of_put(record, 'PUT'):.1f}% of the direct PUT's median, paired requests "
                 f"in the same run) and {metrics.proxy_added_ms(record, 'HEAD'):.2f} ms to a HEAD.")
    else:
        proxy = ("No metering proxy fronts this store (it speaks plain HTTP only): its requests were timed by the "
                 "client, boto3, so the times include the client and, over https, TLS.")
    section = Section(f"{name}: the store on its own", [f"Measured on {_where(record)}.", proxy, copy],
        [Table(f"Latency per request, 1 KiB objects, timed by {_timed_by(record, 'floor')}", ["", *ops],
               [[f"p{q} (ms)", *(cell(metrics.floor_percentile(record, op, q), ".1f") for op in ops)]
                for q in (50, 95)])])
    section.tables.append(_rename_cost(name, record))
    if metrics.copy_sizes(record, metrics.PROJECTED_COPY):
        section.text.append(
            f"Projected to AWS S3 (a projection, not a measurement): the same COPYs sent through the metering "
            f"proxy's {runs.PROJECTION} profile ({PROFILES[runs.PROJECTION].description}; its sources in "
            f"infra/faults.py) take {metrics.projected_copy_mb_per_s(record):.1f} MB/s fitted: there a rename's "
            "COPY grows with the bytes, whatever this store's COPY does.")
    return section


def _rename_cost(name: str, record: results.Results) -> Table:
    """COPY (a rename's server-side part) against object size: measured on the store, and projected
    to AWS S3 in columns of their own, each headed a projection."""
    measured, projected = (set(metrics.copy_sizes(record, e)) for e in (metrics.COPY, metrics.PROJECTED_COPY))
    header = ["object size", f"COPY p50 (ms), measured on {name}", f"PUT p50 (ms), measured on {name}"]
    if projected:
        header.append(f"COPY p50 (ms), PROJECTED to AWS S3 ({runs.PROJECTION}): a projection")

    def p50(op, size, experiment, sizes):
        return cell(metrics.copy_percentile(record, op, size, 50, experiment), ".1f") if size in sizes else "-"

    rows = [[f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 1024:g} KiB",
             p50("COPY", size, metrics.COPY, measured), p50("PUT", size, metrics.COPY, measured),
             *([p50("COPY", size, metrics.PROJECTED_COPY, projected)] if projected else [])]
            for size in sorted(measured | projected)]
    return Table(f"Rename cost against object size: server-side COPY, timed by {_timed_by(record, metrics.COPY)}",
                 header, rows,
                 "A rename on S3 is a COPY and a DELETE. The projected column is not a measurement of AWS S3: the "
                 "proxy held each COPY to the throughput published for AWS and gave every request AWS-like latency."
                 if projected else "")


def _history(name: str, record: results.Results, figures: Path) -> Section:
    shape = record.environment["plan"]
    rows = []
    for batches in shape["batches"]:
        def last(log, field, scale=1, batches=batches):
            return metrics.or_none(lambda: metrics.history_last(record, batches, log, field) / scale)

        rows.append([f"{batches:,}", cell(last("manifest", "bytes", 1024), ".1f"), cell(last("manifest", "entries")),
                     cell(last("manifest", "garbage_staged")),
                     cell(metrics.or_none(metrics.history_tail_ms, record, batches, "manifest"), ".1f"),
                     cell(last("spark", "bytes", 1024), ".1f"), cell(last("spark", "entries")),
                     cell(metrics.or_none(metrics.history_tail_ms, record, batches, "spark"), ".1f")])
    return Section(f"{name}: compaction against history", [
        f"Measured on {_where(record)}.",
        f"The manifest strategy's offsets log (retaining {shape['retain']} batches) against Spark's _spark_metadata "
        f"log, compacting every {shape['interval']}; compaction time is store-side (the proxy's), p50 of the last "
        f"{shape['tail']} compactions."],
        [Table("Compaction at the end of each history",
               ["batches", "manifest compact (KiB)", "live entries", "pending garbage", "compaction (ms)",
                "Spark compact (KiB)", "entries", "compaction (ms)"], rows)],
        [Figure(plots.manifest_compaction(name, record, figures / f"{name}-manifest-compaction.png"),
                "Compact size and compaction time against batch number, for the longest history.")])


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
              "; ".join(axes_said[axis] for axis in ran) + f". Requests by {_counted_by(record)}, a mean per "
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


def _scale(name: str, record: results.Results, figures: Path) -> Section:
    return Section(f"{name}: how cost grows with scale", [
        f"Measured on {_where(record)}.",
        f"The stateful workload ({record.environment['keys']:,} keys) along three axes, every strategy: shuffle "
        "partitions (each partition's state store writes its own file each batch), stateful operators, and batch "
        "count (Spark's purge on). State store maintenance runs every "
        f"{record.environment['maintenance_interval']}, so that it happens within the runs."],
        scale_tables(record),
        [Figure(plots.scale(name, record, figures / f"{name}-scale.png"),
                "Requests per batch and commit times against each axis, with the least-squares fit."),
         Figure(plots.memory(name, record, figures / f"{name}-memory.png"),
                "Driver heap after a full GC and the checkpoint managers' objects over the long query.")])


def _faults(name: str, record: results.Results) -> Section:
    plan, profiles = record.environment["plan"], record.environment["profiles"]
    text = [f"Measured on {_where(record)}.",
            f"{plan['batches']} batches asked of each query while the metering proxy injected the profile's faults, "
            f"{len(plan['seeds'])} run(s) (seeds) per strategy x workload x profile; a query that died or stalled was "
            f"restarted with the faults off for {plan['recovery_batches']} batches.",
            "Profiles: " + "; ".join(f"{profile}: {description}" for profile, description in profiles.items()) + "."]
    findings = faultlab.eventual_findings(record)
    if findings:
        text.append("Pre-2020 S3 consistency (the eventual profiles, emulated by the proxy), what this run shows: "
                    + " ".join(findings))
    if "aws-projection" in profiles:
        text.append("aws-projection is a projection to AWS S3 (latency and COPY throughput from published figures, "
                    "see infra/faults.py), not a measurement of it.")
    return Section(f"{name}: failure rates under injected faults", text, [Table(
        "Per workload x fault profile x strategy", faultlab.HEADER, faultlab.table_rows(record),
        "died: the query stopped with an exception (its first line is the error); stalled: its batches did not come "
        "in time; failed batches: asked and not done; retried: requests repeating one answered with nothing or a "
        "5xx; recovered: restarts (faults off) that resumed; exactly-once: the file sink's output, read through "
        "_spark_metadata, holds whole batches once.")])


def write(out: Path) -> list[Path]:
    """Write ``out/report/index.html`` and its figures from the records in ``out/raw``; returns
    their paths, the page first."""
    stores = results.read_all(out / "raw")
    page = out / "report"
    figures = page / "plots"
    figures.mkdir(parents=True, exist_ok=True)
    sections = []
    copy_plot = plots.copy(stores, figures / "copy.png")
    for name, kinds in stores.items():
        found = safety(kinds["crashes"]) if "crashes" in kinds else None
        can_run = runnable(kinds["store"]) if "store" in kinds else None
        if "streaming" in kinds:
            sections.append(_streaming(name, kinds["streaming"], figures, found, can_run))
        if can_run is not None:
            sections.append(_probe(name, kinds["store"]))
        if "crashes" in kinds:
            sections.append(_crashes(name, kinds["crashes"]))
        if "store" in kinds:
            sections.append(_store(name, kinds["store"]))
        if "manifest-compaction" in kinds:
            sections.append(_history(name, kinds["manifest-compaction"], figures))
        if "faults" in kinds:
            sections.append(_faults(name, kinds["faults"]))
        if "scale" in kinds:
            sections.append(_scale(name, kinds["scale"], figures))
    if copy_plot:
        sections.append(Section("Rename cost on every store", figures=[
            Figure(copy_plot, "Server-side COPY (a rename's cost) and PUT against object size, measured on each "
                              "store; dotted: the same COPYs projected to AWS S3, a projection.")]))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    html = env.get_template("report.html").render(
        sections=sections, cost_caption=cost.caption(), trigger_s=TRIGGER_S, decide_doc=decide.__doc__,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), fmt=cell)
    index = page / "index.html"
    index.write_text(html)
    return [index, *sorted(figures.glob("*.png"))]
