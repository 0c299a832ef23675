"""A one-page summary and plots of the benchmark results, for people who would rather look.

Reads the records the suite leaves in ``results/raw`` (``ckptbench.results``: the latest
``streaming``, ``store``, ``manifest-compaction`` and ``crashes`` record per store) and computes every number
with ``ckptbench.metrics``, as the asv benchmarks do, so the report and asv's HTML agree. Writes
``results/report.md`` and ``results/plots/*.png``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from . import metrics, results, runs  # noqa: E402


def _value(metric, *args) -> float | None:
    """A metric, or None where its run failed (the HTML says why)."""
    try:
        return metric(*args)
    except (results.RunFailed, RuntimeError, KeyError, IndexError, ZeroDivisionError):
        return None


def _fmt(value, spec: str = ".0f") -> str:
    if value is None:
        return "failed"
    return "n/a" if value != value else format(value, spec)


def _title(record: results.Results) -> str:
    env = record.environment
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return f"{env['describe']}; size {env['size']}, commit {env['commit'][:8] or 'unknown'}, {env['created']}; {versions}"


def _streaming_section(record: results.Results) -> list[str]:
    plan = record.environment["plan"]
    largest, interval = plan["keys"][-1], plan["compact_interval"]
    lines = [f"### Streaming ({_title(record)})", "",
             f"Workload stateful ({plan['keys'][0]} keys), {plan['batches']} measured batches "
             f"after {plan['warmup']} warm-up; the store's 1 KiB PUT p50 is "
             f"{metrics.floor_percentile(record, 'PUT', 50):.1f} ms.", "",
             "| strategy | walCommit p50 / p95 (ms) | commitOffsets p50 / p95 (ms) | walCommit / store PUT | "
             "requests per batch | COPY per PUT | file-sink compaction batch / others | "
             f"state commit at {largest} keys (ms) |",
             "|---|---|---|---|---|---|---|---|"]

    def stateful(metric, *args):
        return _value(lambda: metric(record.run(strategy, "stateful"), *args))

    for strategy in record.strategies():
        lines.append(
            f"| {strategy} | {_fmt(stateful(metrics.duration_percentile, 'walCommit', 50))} / "
            f"{_fmt(stateful(metrics.duration_percentile, 'walCommit', 95))} | "
            f"{_fmt(stateful(metrics.duration_percentile, 'commitOffsets', 50))} / "
            f"{_fmt(stateful(metrics.duration_percentile, 'commitOffsets', 95))} | "
            f"{_fmt(_value(lambda: metrics.wal_commit_in_store_puts(record, record.run(strategy, 'stateful'))), '.1f')}x | "
            f"{_fmt(stateful(metrics.requests_per_batch), '.1f')} | {_fmt(stateful(metrics.per_put, 'COPY'), '.2f')} | "
            f"{_fmt(_value(lambda: metrics.compaction_ratio(record.run(strategy, 'file_sink'), interval)), '.1f')}x | "
            f"{_fmt(_value(lambda: metrics.state_commit_percentile(record.run(strategy, 'stateful', largest), 50)))} |")
    return lines + [""]


def _store_section(record: results.Results) -> list[str]:
    ops = [op for op in runs.FLOOR_OPS if len(metrics.samples(record, "floor", op))]
    fit = metrics.copy_fit(record)
    if fit["moves_data"]:
        copy = f"COPY moves the data: {fit['mb_per_s']:.0f} MB/s fitted ({fit['ms_per_mib']:.2f} ms/MiB, r² {fit['r2']:.2f})"
    else:
        copy = (f"COPY does not move the data: its per-MiB cost is {fit['share_of_put']:.0%} of a PUT's "
                f"({fit['ms_per_mib']:.2f} vs {fit['put_ms_per_mib']:.2f} ms/MiB), so no throughput is fitted")
    return [f"### The store on its own ({_title(record)})", "",
            "| | " + " | ".join(ops) + " |", "|---|" + "---|" * len(ops),
            "| p50 (ms) | " + " | ".join(_fmt(metrics.floor_percentile(record, op, 50), ".1f") for op in ops) + " |",
            "| p95 (ms) | " + " | ".join(_fmt(metrics.floor_percentile(record, op, 95), ".1f") for op in ops) + " |", "",
            f"Metering proxy adds {metrics.proxy_added_ms(record, 'PUT'):.2f} ms to a PUT "
            f"({metrics.proxy_added_pct_of_put(record, 'PUT'):.1f}% of the direct PUT median) and "
            f"{metrics.proxy_added_ms(record, 'HEAD'):.2f} ms to a HEAD.", "", copy + ".", ""]


def _manifest_section(record: results.Results) -> list[str]:
    shape = record.environment["plan"]
    lines = [f"### Compaction against history ({_title(record)})", "",
             f"The manifest strategy's offsets log (retaining {shape['retain']} batches) against Spark's "
             f"_spark_metadata log, compacting every {shape['interval']}; compaction time is store-side "
             f"(the proxy's), p50 of the last {shape['tail']} compactions.", "",
             "| batches | manifest compact (KiB) | live entries | pending garbage | compaction (ms) | "
             "Spark compact (KiB) | entries | compaction (ms) |",
             "|---|---|---|---|---|---|---|---|"]

    def last(batches, log, field, scale=1):
        return _value(lambda: metrics.history_last(record, batches, log)[field] / scale)

    for batches in shape["batches"]:
        lines.append(
            f"| {batches} | {_fmt(last(batches, 'manifest', 'bytes', 1024), '.1f')} | "
            f"{_fmt(last(batches, 'manifest', 'entries'))} | {_fmt(last(batches, 'manifest', 'garbage_staged'))} | "
            f"{_fmt(_value(metrics.history_tail_ms, record, batches, 'manifest'), '.1f')} | "
            f"{_fmt(last(batches, 'spark', 'bytes', 1024), '.1f')} | {_fmt(last(batches, 'spark', 'entries'))} | "
            f"{_fmt(_value(metrics.history_tail_ms, record, batches, 'spark'), '.1f')} |")
    return lines + [""]


def crash_table(record: results.Results) -> list[str]:
    """The crash lab's failure table (markdown), one row per strategy x workload, then the
    two-writer runs; the CLI's ``crashlab`` prints it too."""
    lines = ["| strategy | workload | cycles (killed inside a batch) | restart failures | duplicated rows | lost rows | "
             "cycles not exactly-once | recovery p50 / p95 (ms) | recovery requests p50 | JVM start p50 (ms) | "
             "left: temp / orphan data / pending MPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    pairs = record.crash_series[["strategy", "workload"]].drop_duplicates().itertuples(index=False)
    for strategy, workload in pairs:
        def m(metric, *args, spec=".0f", strategy=strategy, workload=workload):
            return _fmt(_value(metric, record, strategy, *args, workload), spec)

        left = " / ".join(m(metrics.leftover_objects, kind) for kind in metrics.LEFTOVER_KINDS)
        lines.append(
            f"| {strategy} | {workload} | {m(metrics.crash_cycles)} ({m(metrics.kills_inside_a_batch)}) | "
            f"{m(metrics.restart_failure_rate, spec='.0%')} | {m(metrics.duplicated_rows)} | "
            f"{m(metrics.lost_rows)} | {m(metrics.cycles_not_exactly_once)} | "
            f"{m(metrics.recovery_percentile, 50)} / {m(metrics.recovery_percentile, 95)} | "
            f"{m(metrics.recovery_requests)} | {m(metrics.jvm_start_percentile, 50)} | {left} |")
    errors = record.crash_series.dropna(subset=["error"])
    if len(errors):
        lines += ["", *(f"- {row.strategy} x {row.workload} stopped early: {row.error}" for row in errors.itertuples())]
    two = record.two_writers
    if len(two):
        lines += ["", "| two writers: strategy | workload | second started | outcome | first driver's error | "
                  "second driver's error | duplicated / lost rows | log files written twice |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in two.itertuples():
            check = "unreadable" if isinstance(row.verify_error, str) else f"{row.duplicates} / {row.lost}"
            start = "together" if row.head_start == 0 else f"after {row.head_start} batches"
            twice = f"{row.overwritten_logs} ({row.overwritten_files})" if row.overwritten_logs else "0"
            lines.append(f"| {row.strategy} | {row.workload} | {start} | {row.outcome} | {_cell(row.first_error)} | "
                         f"{_cell(row.second_error)} | {check} | {twice} |")
    return lines


def _cell(text) -> str:
    return "-" if not isinstance(text, str) else text.replace("|", "/")[:120]


def _crash_section(record: results.Results) -> list[str]:
    env = record.environment
    return [f"### Crashes ({_title(record)})", "",
            f"Each cycle kills a driver (SIGKILL to its process group, JVM included) at a crash point "
            f"({', '.join(env['points'])}, in turn; seed {env['seed']}), restarts it on the same checkpoint "
            "and output and checks the output read through Spark against `commits/` after the restart's "
            "first commit; duplicated and lost rows are from the check at rest after each series' clean "
            "stop. Recovery runs from the restarted query's start (its SparkSession already up) to its "
            "first stored `commits/N`.", "", *crash_table(record), ""]


def _plot_copy(stores: dict[str, dict[str, results.Results]], path: Path) -> Path | None:
    stored = {name: kinds["store"] for name, kinds in stores.items() if "store" in kinds}
    if not stored:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, record in stored.items():
        sizes = metrics.copy_sizes(record)
        x = [size / 2**20 for size in sizes]
        fit = metrics.copy_fit(record)
        note = f"{fit['mb_per_s']:.0f} MB/s" if fit["moves_data"] else "does not move the bytes"
        emulator = ", emulator" if record.environment["emulator"] else ""
        line, = ax.plot(x, [metrics.copy_percentile(record, "COPY", s, 50) for s in sizes], "o-",
                        label=f"{name} COPY ({note}{emulator})")
        ax.plot(x, [metrics.copy_percentile(record, "PUT", s, 50) for s in sizes], "s--", color=line.get_color(),
                alpha=0.5, label=f"{name} PUT")
    ax.set(xscale="log", yscale="log", xlabel="object size (MiB)", ylabel="p50 (ms, proxy-timed)",
           title="Server-side COPY (a rename's cost) against object size")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_compaction(name: str, record: results.Results, path: Path) -> Path:
    interval = record.environment["plan"]["compact_interval"]
    fig, axes = plt.subplots(2, len(runs.LOGS), figsize=(11, 7), squeeze=False)
    for col, (log, workload) in enumerate(runs.LOGS.items()):
        size_ax, time_ax = axes[0][col], axes[1][col]
        for strategy in record.strategies():
            run = _value(record.run, strategy, workload)
            if run is None:
                continue
            sizes = metrics.compacts(run, log, interval)
            size_ax.plot([n for n, _ in sizes], [b / 1024 for _, b in sizes], "o-", label=strategy)
            time_ax.plot(run.batches.batch_id, run.batches.triggerExecution, ".-", label=strategy)
        size_ax.set(title=f"{log} ({workload}): N.compact size", xlabel="batch N", ylabel="KiB")
        time_ax.set(title=f"{workload}: batch time (compaction every {interval})", xlabel="batch",
                    ylabel="triggerExecution (ms)")
        for ax in (size_ax, time_ax):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Compaction on {name}" + (" (emulator)" if record.environment["emulator"] else ""))
    return _save(fig, path)


def _plot_state(name: str, record: results.Results, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for strategy in record.strategies():
        points = [(_value(lambda: metrics.mib_sent_per_batch_median(record.run(strategy, "stateful", keys), ["state"])),
                   _value(lambda: metrics.state_commit_percentile(record.run(strategy, "stateful", keys), 50)))
                  for keys in record.environment["plan"]["keys"]]
        points = [p for p in points if None not in p]
        if points:
            ax.plot(*zip(*points), "o-", label=strategy)
    ax.set(xscale="log", xlabel="state written per batch (MiB)", ylabel="state store commit p50 (ms, Spark)",
           title=f"State checkpoint cost against state size on {name}"
                 + (" (emulator)" if record.environment["emulator"] else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _plot_manifest_compaction(name: str, record: results.Results, path: Path) -> Path:
    """Compact bytes and compaction time against batch number, manifest vs Spark, for the longest history."""
    from .histories import SPARK_LOG_STRATEGY

    shape = record.environment["plan"]
    longest = max(shape["batches"])
    series = {f"manifest (offsets log, retains {shape['retain']})": "manifest",
              f"Spark FileStreamSinkLog (_spark_metadata, on {SPARK_LOG_STRATEGY})": "spark"}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for label, log in series.items():
        compactions = metrics.history_compactions(record, longest, log)
        top.plot(compactions.batch, compactions.bytes / 1024, marker=".", label=label)
        bottom.plot(compactions.batch, compactions.ms, marker=".", label=label)
    top.set_ylabel("compact object (KiB)")
    bottom.set_ylabel("compaction: store-side time (ms)")
    bottom.set_xlabel("batch")
    top.legend()
    kind = "an emulator" if record.environment["emulator"] else "a real store"
    top.set_title(f"Compaction against history: {name} ({kind}), size {record.environment['size']}", fontsize=10)
    bottom.text(0.01, 0.97, "manifest: LIST + bulk DELETE + compact PUT + hint PUT;\n"
                "Spark: every request of the compaction batch's add",
                transform=bottom.transAxes, va="top", fontsize=8)
    return _save(fig, path)


def write(out: Path) -> list[Path]:
    """Write ``out/report.md`` and the plots from the records in ``out/raw``; returns their paths,
    the report first."""
    stores = results.read_all(out / "raw")
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    lines = ["# ckptbench results", "",
             "Written by `python -m ckptbench bench` from the records in `results/raw`; the "
             "same numbers, with history, are in asv's HTML (`results/html`), one asv machine per store.", ""]
    paths = [p for p in [_plot_copy(stores, plots / "copy.png")] if p]
    for name, kinds in stores.items():
        lines += [f"## {name}", ""]
        if "store" in kinds:
            lines += _store_section(kinds["store"])
        if "streaming" in kinds:
            record = kinds["streaming"]
            lines += _streaming_section(record)
            paths += [_plot_compaction(name, record, plots / f"{name}-compaction.png"),
                      _plot_state(name, record, plots / f"{name}-state.png")]
        if "crashes" in kinds:
            lines += _crash_section(kinds["crashes"])
        if "manifest-compaction" in kinds:
            lines += _manifest_section(kinds["manifest-compaction"])
            paths.append(_plot_manifest_compaction(name, kinds["manifest-compaction"],
                                                   plots / f"{name}-manifest-compaction.png"))
    lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in paths]
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return [report, *paths]
