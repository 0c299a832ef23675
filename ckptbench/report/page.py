"""The report: one self-contained HTML page (``results/report/index.html``) with the
recommendation per store x workload and its reasons, the tables behind it and the figures.

Reads the records in ``results/raw`` (``ckptbench.record``: the latest ``streaming``, ``levers``
(Spark's own checkpoint levers: ``report.levers``), ``store`` (with the store probe's checks),
``manifest-compaction``, ``crashlab``, ``faultlab`` and ``scale`` record per store); every number comes from
``ckptbench.metrics``, as the asv benchmarks' do, so the page and asv's HTML agree; the verdict
from ``ckptbench.decide``, which never recommends what the probe found the store cannot run; money
from ``ckptbench.metrics.cost`` and COPY projected to AWS S3 (``config.PROJECTION``), each labelled a
projection wherever it shows. The page embeds its
figures (also written as PNG files beside it) and its style, so it opens from a file share or a
CI artifact with no network; it links to asv's pages (``../html/index.html``) for history where they
were published beside the records. A store's decisions are made once per job, from every run of the
job in its streaming and levers records (``decisions_of``), and every section that shows a job's
verdict shows that one: where a ``levers`` record holds a job, the page opens with the configuration
(strategy and levers) recommended for it.
Rendered with Jinja2 (``templates/report.html``, its tables by ``report.table``'s macro), which escapes
everything it inserts.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pandas as pd

from ckptbench import config, decide, metrics
from ckptbench.metrics import cost
from ckptbench.record import disk, results
from ckptbench.report import at_scale, faults, levers, plots, probing, provenance, recommendation, stages, tables
from ckptbench.report.table import ENV, Table, cell
from ckptbench.report.tables import Box, Figure, Section, crash_tables, scale_tables
from infra.faults import PROFILES


def _where(record: results.Results) -> str:
    env = record.environment
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return (f"{env['describe']}; {_endpoint(env)}; size {env['size']}, commit {env['commit'][:8] or 'unknown'}, "
            f"{env['created']}; {versions}{provenance.foreign_said(env)}"
            f"{provenance.settings_said(env)}")




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
        tries = config.task_tries(env["spark_master"])
        said.append(f"master {env['spark_master']}" + ("" if tries is None else
                    f" (a task tried {'once' if tries == 1 else f'{tries} times'})") + ("" if executors is None else
                    ", executors in the driver JVM" if executors == 0 else f", {executors} executors"))
    if env.get("cluster"):
        said.append(env["cluster"])
    if env.get("jvm_flags"):
        said.append(f"driver JVM flags {' '.join(env['jvm_flags'])}")
    return "; ".join(said)


def _count(value: float) -> int:
    return 0 if value != value else int(value)  # NaN: none measured


def safety(record: results.Results) -> dict[str | tuple[str, str], decide.Safety]:
    """What the crash lab found per strategy, for the recommendation: exactly-once under crashes
    (its series in Spark's own configuration), the zombie two-writer runs' outcome (shown only) and
    the race, which alone says whether a second writer is refused (``metrics.refuses_second_writer``).
    Keyed ``(strategy, preset)`` too, for each other configuration of Spark's levers the lab ran the
    strategy in: its cycles and rows duplicated and lost there, which ``decide`` reads for that
    configuration (0 cycles: Spark refused it, or lacks a lever of it)."""
    out: dict[str | tuple[str, str], decide.Safety] = {}
    for strategy in dict.fromkeys([*record.crash_series.strategy, *record.races.strategy]):
        for preset in metrics.crash_presets(record, strategy):
            if preset != config.DEFAULT_PRESET:
                out[strategy, preset] = decide.Safety(
                    cycles=int(metrics.crash_cycles(record, strategy, preset=preset)),
                    duplicated=_count(metrics.duplicated_rows(record, strategy, preset=preset)),
                    lost=_count(metrics.lost_rows(record, strategy, preset=preset)))
        two = record.two_writers[record.two_writers.strategy == strategy]
        if "race" in two:
            two = two[two.race.isna()]
        outcomes = set(two.outcome)
        verdict = ("silent-damage" if "silent-damage" in outcomes else
                   "clean-error" if outcomes == {"clean-error"} else next(iter(outcomes), None))
        out[strategy] = decide.Safety(cycles=int(metrics.crash_cycles(record, strategy)),
                                      duplicated=_count(metrics.duplicated_rows(record, strategy)),
                                      lost=_count(metrics.lost_rows(record, strategy)), two_writer=verdict,
                                      race_rounds=int(metrics.race_rounds(record, strategy)),
                                      race_two_winners=int(metrics.race_two_winners(record, strategy)),
                                      race_one_winner=int(metrics.race_one_winner(record, strategy)),
                                      refuses=metrics.refuses_second_writer(record, strategy))
    return out


def outages(record: results.Results) -> dict[str | None, dict[str, dict[str, decide.Outage]]]:
    """What the fault lab's store outages did, for the recommendation: per workload (None: every one),
    strategy and outage profile, its runs whose outage began (``metrics.outage_runs``) beside Spark's."""
    out: dict[str | None, dict[str, dict[str, decide.Outage]]] = {}
    joined = record.runs.merge(record.fault_runs, on="run")
    for workload in [*dict.fromkeys(joined.workload), None]:
        for strategy, profile in dict.fromkeys(zip(joined.strategy, joined.profile, strict=True)):
            try:
                runs_ = metrics.outage_runs(record, strategy, profile, workload)
            except KeyError:  # not run on this workload
                continue
            if len(runs_):
                out.setdefault(workload, {}).setdefault(strategy, {})[profile] = decide.Outage(
                    profile, float(pd.to_numeric(runs_.outage_s).median()), len(runs_),
                    int((runs_.outcome == "completed").sum()),
                    metrics.time_to_death(record, strategy, profile, workload),
                    metrics.worse_than(record, strategy, config.SPARK_DEFAULT[0], profile, workload))
    return out


def _crashes(name: str, record: results.Results, checked: bool) -> Section:
    """The crash lab's section of ``record`` (``crash_record``; ``checked``: it holds bench's crash check)."""
    env = record.environment
    return Section(f"{name}: crashes", [
        f"Measured on {_where(record)}.",
        f"Each cycle kills a driver (SIGKILL to its process group, JVM included) at a crash point "
        f"({', '.join(env['points'])}, in turn; seed {env['seed']}), restarts it on the same checkpoint and "
        "output and checks the output read through Spark against commits/ after the restart's first commit; "
        "duplicated and lost rows are from the check at rest after each series' clean stop. Recovery runs from "
        "the restarted query's start (its SparkSession already up) to its first stored commits/N.",
        "Whether a strategy refuses a second writer is the race's to say (its table, last): a zombie driver meets "
        "Spark's own checks first, so its clean error is no evidence about the strategy.",
        *(["The series include bench's crash check: the configurations each job's decision led with that the "
           "crash lab had not run, each in the crash lab's job of that kind, since nothing untested is "
           "recommended."] if checked else [])],
        crash_tables(record))


def runnable(record: results.Results) -> dict[str, str | None] | None:
    """What the store probe recorded in ``record`` (a ``store`` record) says of each strategy, for
    the recommendation: None if it can run, else why not; None for a record with no probe."""
    checks = metrics.recorded_checks(record)
    if not checks:
        return None
    return {name: "; ".join(v["reasons"]) or None for name, v in metrics.verdicts(checks).items()}


def _probe(name: str, record: results.Results) -> Section:
    checks = metrics.recorded_checks(record)
    said = record.environment.get("probe", {})
    verdicts = metrics.verdicts(checks)
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
               [[strategy, metrics.can_run(v), ", ".join(v["depends_on"]),
                 "; ".join(v["reasons"] + v["notes"]) or "-"] for strategy, v in verdicts.items()])])


def _timing_driven(record: results.Results, strategy: str) -> str:
    """The stateful workload's requests no batch made, per measured batch of every run of
    ``strategy``: the mean and (the fewest-the most) in one batch (``metrics.timing_driven_spread``)."""
    mean, fewest, most = metrics.timing_driven_spread(record.runs_of(strategy, "stateful"))
    return "n/a" if mean != mean else f"{mean:.1f} ({fewest:.0f}-{most:.0f})"


def _streaming(name: str, record: results.Results, figures: Path, decisions: dict[str, decide.Decision]) -> Section:
    """The streaming record's section: per job its workloads measured, that job's one decision
    (``decisions``: ``decide.per_job`` over the store's records), then the tables of measurements."""
    plan = record.environment["plan"]
    largest, interval = plan["keys"][-1], plan["compact_interval"]
    section = Section(f"{name}: streaming queries", [
        f"Measured on {_where(record)}.",
        f"{provenance.measured_said(plan)}; state keys "
        f"{plan['keys'][0]:,} unless said; the store's own 1 KiB PUT p50 is "
        f"{metrics.floor_percentile(record, 'PUT', 50):.1f} ms (timed by {_timed_by(record, 'floor')}, same run), "
        f"{cell(metrics.put_floor_ms(record), '.1f')} ms as Spark's own S3 client makes it in the driver JVM "
        "(the client's work included), each after the store sat idle for "
        f"{config.FLOOR_PAUSE_S * 1000:.0f} ms, as a checkpoint's PUT comes."])
    section.boxes = [Box(decisions[job], tables.candidates_table(decisions[job]), said)
                     for job, said in _jobs_measured(record, plan["workloads"]).items()]
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
            jvm_timed(record.runs_of(strategy, "stateful")),
            f"{cell(stateful(lambda run: metrics.wal_commit_in_store_puts(record, run)), '.1f')}x",
            cell(metrics.or_none(metrics.spark_share_ms, record, "stateful"), ".1f"),
            f"{cell(stateful(lambda run: metrics.strategy_overhead_ms(record, run)), '.1f')} / "
            f"{cell(stateful(lambda run: metrics.strategy_overhead_of_put(record, run)), '.2f')}",
            cell(stateful(metrics.requests_per_batch), ".1f"),
            _timing_driven(record, strategy),
            cell(stateful(lambda run: metrics.requests_per_checkpoint_file(record, run)), ".2f"),
            cell(stateful(metrics.per_put, "COPY"), ".2f"),
            f"{cell(metrics.of_run(record, strategy, 'file_sink', metrics.compaction_ratio, interval), '.1f')}x",
            cell(stateful(metrics.state_commit_percentile, 50, keys=largest))])
    section.tables.append(Table(
        "The stateful workload, per strategy",
        ["strategy", "walCommit p50 / p95 (ms)", "commitOffsets p50 / p95 (ms)", JVM_TIMED, "walCommit / store PUT",
         "Spark's share of walCommit p50 (ms)", "overhead: ms / x PUT", "requests per batch",
         "requests no batch made, per batch: mean (fewest-most)",
         "requests per checkpoint file", "COPY per PUT", "file-sink compaction batch / others",
         f"state commit at {largest:,} keys (ms)"], rows,
        f"Latencies are Spark's own (progress durationMs, whole milliseconds, each read as the millisecond it "
        "stands for), but for the JVM clock's column: it times each checkpoint file from its create to its close, "
        "sub-millisecond (a batch's own files, summed; state files are written side by side by the batch's tasks, "
        "so their sum is time spent, not waited; n/a: not timed, off local mode or before schema 11); "
        f"requests are counted by {provenance.counted_by(record)}, a mean "
        "over the measured batches of each batch's own, told by the checkpoint file each touches, not by when it "
        "came, so neither maintenance's schedule nor the batches' windows move it. Those no batch made (the state "
        "store's maintenance, on its own schedule: a snapshot, a LIST of each partition's directory; requests "
        "between batches) are counted apart, with how many landed in one batch at the fewest and the most. "
        "Spark's share is walCommit p50 through the benchmark floor, a manager keeping "
        "files in the JVM's memory with no store (not a strategy); a strategy's overhead is its walCommit p50 minus "
        "that share minus a 1 KiB PUT's p50 in Spark's JVM (0: one PUT round trip per file). Requests per checkpoint "
        "file: requests in the checkpoint's areas over the files Spark wrote, as the floor counted them, a batch's "
        "own on both sides."))
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


#: The stateful table's column of the files' commit time as the JVM timed it (``jvm_timed``).
JVM_TIMED = "checkpoint files' commit, JVM clock: offsets + commits p50 [95%] / all files p50 (ms per batch)"


def jvm_timed(runs: list[results.Run]) -> str:
    """``JVM_TIMED``'s cell for ``runs`` (repeats of one configuration): the median per batch of its
    offsets and commits files' JVM-timed commit, with its interval, then of all its files."""
    files = metrics.file_commit_ms_interval(runs, ["offsets", "commits"])
    if math.isnan(files.value):
        return "n/a"
    return f"{tables.jvm_ms(files)} / {metrics.file_commit_ms_interval(runs).value:.2f}"


def _jobs_measured(record: results.Results, workloads: list[str]) -> dict[str, list[str]]:
    """Per job the streaming ``record`` measured (``config.job_of``), in ``workloads``' order, the line
    naming the workloads that measured it where the job is not simply one of them."""
    named: dict[str, list[str]] = {}
    for workload in workloads:
        runs = record.runs[record.runs.workload == workload]
        if len(runs):
            job, preset = config.job_of(workload, int(runs["keys"].iloc[0]))
            named.setdefault(job, []).append(workload if preset == config.DEFAULT_PRESET
                                             else f"{workload} (as configuration {preset})")
    return {job: [] if said == [job] else
            [f"The job {job}, measured here as {', '.join(said)}: its decision is made once, from every run of the "
             "job in this store's records, and every section of this page that shows the job shows that one."]
            for job, said in named.items()}


def _store(name: str, record: results.Results) -> Section:
    ops = [op for op in config.FLOOR_OPS if len(metrics.samples(record, "floor", op))]
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
            f"proxy's {config.PROJECTION} profile ({PROFILES[config.PROJECTION].description}; its sources in "
            f"infra/faults/profiles.py) take {metrics.projected_copy_mb_per_s(record):.1f} MB/s fitted: there a "
            "rename's COPY grows with the bytes, whatever this store's COPY does.")
    return section


def _rename_cost(name: str, record: results.Results) -> Table:
    """COPY (a rename's server-side part) against object size: measured on the store, and projected
    to AWS S3 in columns of their own, each headed a projection."""
    measured, projected = (set(metrics.copy_sizes(record, e)) for e in (metrics.COPY, metrics.PROJECTED_COPY))
    header = ["object size", f"COPY p50 (ms), measured on {name}", f"PUT p50 (ms), measured on {name}"]
    if projected:
        header.append(f"COPY p50 (ms), PROJECTED to AWS S3 ({config.PROJECTION}): a projection")

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
    findings = faults.eventual_findings(record)
    if findings:
        text.append("Pre-2020 S3 consistency (the eventual profiles, emulated by the proxy), what this run shows: "
                    + " ".join(findings))
    if "aws-projection" in profiles:
        text.append("aws-projection is a projection to AWS S3 (latency and COPY throughput from published figures, "
                    "see infra/faults/profiles.py), not a measurement of it.")
    return Section(f"{name}: failure rates under injected faults", text, faults.tables_of(record))


#: The experiments whose runs measure jobs a decision is made for, in the order their runs are merged.
DECIDED = ("streaming", "levers")


def crash_record(kinds: dict[str, results.Results]) -> results.Results | None:
    """A store's crash lab record and ``bench``'s crash check record (``config.CRASH_CHECK``), merged
    as ``record.disk.merge`` merges parts: every crash series run on the store (None: neither)."""
    found = [kinds[kind] for kind in (config.CRASHLAB, config.CRASH_CHECK) if kind in kinds]
    return disk.merge(found) if found else None


def decisions_of(kinds: dict[str, results.Results], untested_out: bool = True) -> dict[str, decide.Decision]:
    """The one decision per job of a store's records (``kinds``: ``{experiment: record}``), from the
    runs of its ``DECIDED`` experiments at the report's trigger interval (``decide.per_job``), with its
    crash lab's and crash check's findings (``safety`` of ``crash_record``) and its probe's verdicts
    (``runnable``) and its fault lab's store outages (``outages``) where it has them; ``untested_out``
    as ``decide`` takes it."""
    crashed = crash_record(kinds)
    return decide.per_job([kinds[kind] for kind in DECIDED if kind in kinds], tables.TRIGGER_S,
                          safety=safety(crashed) if crashed is not None else None,
                          runnable=runnable(kinds["store"]) if "store" in kinds else None, untested_out=untested_out,
                          outages=outages(kinds[config.FAULTLAB]) if config.FAULTLAB in kinds else None)


def recommend_decision(record: results.Results, untested_out: bool = True, job: str | None = None) -> decide.Decision:
    """A ``recommend`` record's job's one decision at its trigger (``decide.per_job``), with the race's
    and crash check's findings and the probe's verdicts (``safety``, ``runnable``); ``untested_out``
    as ``decide`` takes it; ``job``: another job of the record's (the one it was ranked at)."""
    said = record.environment["recommend"]
    return decide.per_job([record], said["trigger_s"], safety=safety(record), runnable=runnable(record),
                          untested_out=untested_out)[job or said["shape"]["name"]]


def recommended_at_scale(out: Path, figures: Path) -> list[Section]:
    """A section per ``recommend`` record under ``out`` (``config.RECOMMEND``; each job's decision as
    its page shows it), linking to its page from the report's directory (``out/report``)."""
    found = []
    for where in disk.record_dirs(out / config.RECOMMEND):
        try:
            record = disk.read(where)
        except disk.SchemaMismatch:
            continue
        if record.environment["experiment"] == config.RECOMMEND:
            page = f"../{config.RECOMMEND}/{where.name}/{recommendation.PAGE}"
            found.append(at_scale.section(record, recommend_decision(record), _where(record), page, figures))
    return found


def leaders(decision: decide.Decision) -> list[decide.Candidate]:
    """The configurations ``decision`` leads with: the chosen one and its runner-up, those there are
    (what a crash check checks)."""
    return [c for c in (decision.chosen, decide.runner_up(decision)) if c is not None]


def recommendations(raw: Path) -> dict[tuple[str, str], str | None]:
    """What the report recommends per (store, job) from the records under ``raw`` (None: none), as ``write`` does."""
    return {(store, job): d.recommended for store, kinds in disk.read_all(raw).items()
            for job, d in decisions_of(kinds).items()}


def write(out: Path) -> list[Path]:
    """Write ``out/report/index.html`` and its figures from the records in ``out/raw``; returns
    their paths, the page first."""
    stores = disk.read_all(out / "raw")
    page = out / "report"
    figures = page / "plots"
    figures.mkdir(parents=True, exist_ok=True)
    sections, summary = [], []
    copy_plot = plots.copy(stores, figures / "copy.png")
    for name, kinds in stores.items():
        can_run = runnable(kinds["store"]) if "store" in kinds else None
        decisions = decisions_of(kinds)
        if "streaming" in kinds:
            sections.append(_streaming(name, kinds["streaming"], figures, decisions))
        if "levers" in kinds:
            sections.append(levers.section(name, kinds["levers"], _where(kinds["levers"]), decisions))
            summary += levers.summary(name, sections[-1], bool(kinds["levers"].environment.get("emulator")))
        if can_run is not None:
            sections.append(_probe(name, kinds["store"]))
        if config.CRASHLAB in kinds:
            sections.append(_crashes(name, crash_record(kinds), config.CRASH_CHECK in kinds))
        if "store" in kinds:
            sections.append(_store(name, kinds["store"]))
        if "manifest-compaction" in kinds:
            sections.append(_history(name, kinds["manifest-compaction"], figures))
        if config.FAULTLAB in kinds:
            sections.append(_faults(name, kinds[config.FAULTLAB]))
        if "scale" in kinds:
            sections.append(_scale(name, kinds["scale"], figures))
    for scaled in recommended_at_scale(out, figures):
        sections.append(scaled)
        summary += levers.summary(scaled.boxes[0].decision.store, scaled)
    probed = {name: kinds["store"] for name, kinds in stores.items()
              if "store" in kinds and metrics.recorded_checks(kinds["store"])}
    if len(probed) > 1:
        sections.append(Section("Every store side by side (the probe)", [
            "The probe's checks of each store, and the strategies each can run: a strategy a store cannot run is "
            "never recommended on it."], probing.store_matrix({
                name: {"checks": metrics.recorded_checks(record), "emulator": bool(record.environment.get("emulator")),
                       "copy": metrics.copy_fit(record)} for name, record in probed.items()})))
    if copy_plot:
        sections.append(Section("Rename cost on every store", figures=[
            Figure(copy_plot, "Server-side COPY (a rename's cost) and PUT against object size, measured on each "
                              "store; dotted: the same COPYs projected to AWS S3, a projection.")]))
    sections += filter(None, [stages.section(stores)])
    html = ENV.get_template("report.html").render(
        sections=sections, summary=summary, cost_caption=cost.caption(), trigger_s=tables.TRIGGER_S,
        decide_doc=decide.__doc__,
        asv_pages=(out / "html" / "index.html").exists(),
        runtimes=list(dict.fromkeys(provenance.runtime_said(record.environment)
                                    for kinds in stores.values() for record in kinds.values())),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    index = page / "index.html"
    index.write_text(html)
    return [index, *sorted(figures.glob("*.png"))]
