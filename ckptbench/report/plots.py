"""The figures, as PNG files: matplotlib, off screen. Each takes records (``ckptbench.record``)
and computes what it draws with ``ckptbench.metrics``, like every table."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

from ckptbench import config, decide, metrics
from ckptbench.record import results


def _emulated(record: results.Results) -> str:
    return " (emulator)" if record.environment["emulator"] else ""


def copy(stores: dict[str, dict[str, results.Results]], path: Path) -> Path | None:
    """COPY and PUT p50 against object size per store, measured; and, where the record has them,
    the same COPYs projected to AWS S3, each such series labelled a projection in its legend."""
    stored = {name: kinds["store"] for name, kinds in stores.items() if "store" in kinds}
    if not stored:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    projected_any = False
    for name, record in stored.items():
        sizes = metrics.copy_sizes(record)
        x = [size / 2**20 for size in sizes]
        fit = metrics.copy_fit(record)
        note = f"{fit['mb_per_s']:.0f} MB/s" if fit["moves_data"] else "does not move the bytes"
        emulator = ", emulator" if record.environment["emulator"] else ""
        line, = ax.plot(x, [metrics.copy_percentile(record, "COPY", s, 50) for s in sizes], "o-",
                        label=f"{name} COPY, measured ({note}{emulator})")
        ax.plot(x, [metrics.copy_percentile(record, "PUT", s, 50) for s in sizes], "s--", color=line.get_color(),
                alpha=0.5, label=f"{name} PUT, measured")
        projected = metrics.copy_sizes(record, metrics.PROJECTED_COPY)
        if projected:
            projected_any = True
            ax.plot([size / 2**20 for size in projected],
                    [metrics.copy_percentile(record, "COPY", s, 50, metrics.PROJECTED_COPY) for s in projected],
                    "^:", color=line.get_color(), linewidth=2,
                    label=f"PROJECTION to AWS S3: {name} COPY through {config.PROJECTION} "
                          f"({metrics.projected_copy_mb_per_s(record):.1f} MB/s fitted)")
    title = "Server-side COPY (a rename's cost) against object size"
    ax.set(xscale="log", yscale="log", xlabel="object size (MiB)", ylabel="p50 (ms, proxy-timed)",
           title=title + ("\nmeasured (solid, dashed) and projected to AWS S3 (dotted: a projection)"
                          if projected_any else ""))
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return save(fig, path)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def against_floor(title: str, decision: decide.Decision, path: Path) -> Path | None:
    """Each measured configuration of ``decision``: its batch p50 as a bar, the benchmark floor's in the
    same configuration as a mark on it (None: nothing measured)."""
    shown = [c for c in decision.candidates if np.isfinite(c.batch_p50_ms) and c.batch_p50_ms > 0]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(shown) + 1.5))
    rows = np.arange(len(shown))
    ax.barh(rows, [c.batch_p50_ms for c in shown], color="#6a9fc9", label="batch p50")
    floors = [(i, c.floor_batch_p50_ms) for i, c in enumerate(shown) if c.floor_batch_p50_ms > 0]
    if floors:
        ax.plot([f for _, f in floors], [i for i, _ in floors], "k|", markersize=22, markeredgewidth=3,
                label="the floor's, same configuration")
    ax.set_yticks(rows, [c.label + (" (recommended)" if c is decision.chosen else "") for c in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set(xscale="log", xlabel="triggerExecution p50 (ms, Spark)", title=title)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def compaction(name: str, record: results.Results, path: Path) -> Path:
    interval = record.environment["plan"]["compact_interval"]
    fig, axes = plt.subplots(2, len(config.LOGS), figsize=(11, 7), squeeze=False)
    for col, (log, workload) in enumerate(config.LOGS.items()):
        size_ax, time_ax = axes[0][col], axes[1][col]
        for strategy in record.strategies():
            run = metrics.or_none(record.run, strategy, workload)
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
    fig.suptitle(f"Compaction on {name}{_emulated(record)}")
    return save(fig, path)


def state(name: str, record: results.Results, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for strategy in record.strategies():
        points = [(metrics.of_run(record, strategy, "stateful", metrics.mib_sent_per_batch_median, ["state"],
                                  keys=keys),
                   metrics.of_run(record, strategy, "stateful", metrics.state_commit_percentile, 50, keys=keys))
                  for keys in record.environment["plan"]["keys"]]
        points = [p for p in points if None not in p]
        if points:
            ax.plot(*zip(*points, strict=True), "o-", label=strategy)
    ax.set(xscale="log", xlabel="state written per batch (MiB)", ylabel="state store commit p50 (ms, Spark)",
           title=f"State checkpoint cost against state size on {name}{_emulated(record)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def manifest_compaction(name: str, record: results.Results, path: Path) -> Path:
    """Compact bytes and compaction time against batch number, manifest vs Spark, for the longest history."""
    from ckptbench.config import SPARK_LOG_STRATEGY

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
    return save(fig, path)




def latency(name: str, record: results.Results, workload: str, path: Path) -> Path:
    """walCommit and commitOffsets over the measured batches, one box per strategy."""
    strategies = [s for s in record.strategies() if metrics.of_run(record, s, workload, lambda run: run) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, name_ms in zip(axes, ("walCommit", "commitOffsets"), strict=True):
        data = [record.run(s, workload).batches[name_ms].dropna().to_numpy() for s in strategies]
        ax.boxplot(data, tick_labels=strategies, showfliers=True)
        ax.set(title=f"{name_ms} ({workload})", ylabel="ms (Spark's own clock)", yscale="log")
        ax.grid(True, which="both", axis="y", alpha=0.3)
    fig.suptitle(f"Commit latency per batch on {name}{_emulated(record)}: measured batches")
    return save(fig, path)


def requests_by_area(name: str, record: results.Results, workload: str, path: Path) -> Path:
    """Mean requests per batch, stacked by checkpoint area, and by operation, per strategy."""
    from infra.s3ops import AREAS, OPS

    strategies = [s for s in record.strategies() if metrics.of_run(record, s, workload, lambda run: run) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (by, values) in zip(axes, (("area", AREAS), ("op", OPS)), strict=True):
        bottom = [0.0] * len(strategies)
        for value in values:
            heights = [metrics.requests_per_batch(record.run(s, workload), **{f"{by}s": [value]}) for s in strategies]
            if any(heights):
                ax.bar(strategies, heights, bottom=bottom, label=value)
                bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set(title=f"requests per batch by {by} ({workload})", ylabel="requests (mean per measured batch)")
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"What each strategy sends on {name}{_emulated(record)}")
    return save(fig, path)


#: What the scale figure draws against each axis: (SCALE_FIGURES name, y label).
SCALE_PANELS = (("requests", "requests per batch (mean)"), ("state_commit_p50", "state commit p50 (ms, Spark)"),
                ("wal_commit_p50", "walCommit p50 (ms, Spark)"))


def scale(name: str, record: results.Results, path: Path) -> Path:
    """Cost against each scale axis, per strategy: the measured points and the fitted line (log-log
    where the axis spans decades), with the slope in the legend."""
    axes_names = [a for a in metrics.AXIS_STEP if any(metrics.or_none(metrics.scale_points, record, a, s)
                                                      for s in record.strategies())]
    fig, grid = plt.subplots(len(SCALE_PANELS), len(axes_names), figsize=(5 * len(axes_names), 11), squeeze=False)
    for col, axis in enumerate(axes_names):
        step, unit = metrics.AXIS_STEP[axis]
        for row, (figure, label) in enumerate(SCALE_PANELS):
            ax = grid[row][col]
            spans_decades = axis == "partitions" and max(record.environment["plan"]["partitions"]) >= 100
            for strategy in record.strategies():
                points = metrics.or_none(metrics.scale_values, record, axis, strategy, figure)
                if not points:
                    continue
                xs, ys = zip(*points, strict=True)
                line, = ax.plot(xs, ys, "o", label=strategy)
                intercept, slope, r2 = metrics.scale_fit(record, axis, strategy, figure)
                grid_x = (np.geomspace if spans_decades else np.linspace)(min(xs), max(xs), 50)
                fit = intercept + slope * grid_x / step
                shown = fit > 0 if spans_decades else fit == fit  # a log axis has no room for the rest
                ax.plot(grid_x[shown], fit[shown], "-", color=line.get_color(), alpha=0.6,
                        label=f"fit: {slope:.3g} per {unit} (r² {r2:.2f})")
            if spans_decades:
                ax.set(xscale="log", yscale="log")
            ax.set(xlabel=axis, ylabel=label)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle(f"Cost against the scale axes on {name}{_emulated(record)}")
    return save(fig, path)


def memory(name: str, record: results.Results, path: Path) -> Path:
    """The long query's driver heap after a full GC, and the managers' own objects, against batches."""
    fig, (heap_ax, manager_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for strategy in record.strategies():
        memory = metrics.or_none(metrics.memory_readings, record, strategy)
        if memory is None:
            continue
        heap_ax.plot(memory.batch, memory.heap_mib, "o-", label=strategy)
        manager_ax.plot(memory.batch, memory.manager_kib, "o-", label=strategy)
    heap_ax.set(xlabel="batches", ylabel="driver heap in use after full GC (MiB)")
    manager_ax.set(xlabel="batches", ylabel="checkpoint managers' objects (KiB, shallow)")
    for ax in (heap_ax, manager_ax):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Memory over a long query on {name}{_emulated(record)}")
    return save(fig, path)
