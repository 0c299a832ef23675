"""A one-page summary and plots of the benchmark results, for people who would rather look.

Reads the raw measurements the asv suite leaves in ``results/raw`` (``<store>-streaming.json``,
``<store>-store.json`` and ``<store>-manifest-compaction.json``, the latest run per store) and
computes every number with the benchmarks' own ``track_*`` methods, so the report and asv's HTML
agree. Writes
``results/report.md`` and ``results/plots/*.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from . import metrics  # noqa: E402


KINDS = ("store", "streaming", "manifest-compaction")


def _load(raw: Path) -> dict[str, dict[str, dict]]:
    """``{store: {kind: data}}`` for every store with raw results, kinds as in ``KINDS``."""
    stores: dict[str, dict[str, dict]] = {}
    for kind in KINDS:
        for path in sorted(raw.glob(f"*-{kind}.json")):
            stores.setdefault(path.name[:-len(f"-{kind}.json")], {})[kind] = json.loads(path.read_text())
    return stores


def _value(track, *args) -> float | None:
    """A benchmark's number, or None where its run failed (the HTML says why)."""
    try:
        return track(*args)
    except (RuntimeError, KeyError, IndexError, ZeroDivisionError):
        return None


def _fmt(value, spec: str = ".0f") -> str:
    if value is None:
        return "failed"
    return "n/a" if value != value else format(value, spec)


def _title(data: dict) -> str:
    return (f"{data['describe']}; size {data['size']}, commit {data['commit'][:8] or 'unknown'}, "
            f"{data['created']}")


def _strategies(data: dict) -> list[str]:
    """The strategies of the streaming runs, in the registry's order."""
    return list(dict.fromkeys(r["strategy"] for r in data["runs"]))


def _streaming_section(data: dict) -> list[str]:
    from benchmarks.commit_latency import CommitLatency
    from benchmarks.compaction import Compaction
    from benchmarks.rename_cost import StateCheckpointCost
    from benchmarks.requests import Requests

    largest = data["plan"]["keys"][-1]
    c, q, k, s = CommitLatency(), Requests(), Compaction(), StateCheckpointCost()
    lines = [f"### Streaming ({_title(data)})", "",
             f"Workload stateful ({data['plan']['keys'][0]} keys), {data['plan']['batches']} measured batches "
             f"after {data['plan']['warmup']} warm-up; the store's 1 KiB PUT p50 is {data['floor']['PUT']:.1f} ms.",
             "",
             "| strategy | walCommit p50 / p95 (ms) | commitOffsets p50 / p95 (ms) | walCommit / store PUT | "
             "requests per batch | COPY per PUT | file-sink compaction batch / others | "
             f"state commit at {largest} keys (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    for st in _strategies(data):
        args = (data, st, "stateful")
        lines.append(
            f"| {st} | {_fmt(_value(c.track_wal_commit_p50, *args))} / {_fmt(_value(c.track_wal_commit_p95, *args))} | "
            f"{_fmt(_value(c.track_commit_offsets_p50, *args))} / {_fmt(_value(c.track_commit_offsets_p95, *args))} | "
            f"{_fmt(_value(c.track_wal_commit_in_store_puts, *args), '.1f')}x | "
            f"{_fmt(_value(q.track_total_per_batch, *args), '.1f')} | {_fmt(_value(q.track_copies_per_put, *args), '.2f')} | "
            f"{_fmt(_value(k.track_batch_time_ratio, data, st, '_spark_metadata'), '.1f')}x | "
            f"{_fmt(_value(s.track_commit_ms, data, st, largest))} |")
    return lines + [""]


def _store_section(data: dict) -> list[str]:
    from benchmarks.floor import Floor, ProxyOverhead

    f, o = Floor(), ProxyOverhead()
    ops = list(data["floor"])
    fit = metrics.copy_fit(data["copy"])
    if fit["moves_data"]:
        copy = f"COPY moves the data: {fit['mb_per_s']:.0f} MB/s fitted ({fit['ms_per_mib']:.2f} ms/MiB, r² {fit['r2']:.2f})"
    else:
        copy = (f"COPY does not move the data: its per-MiB cost is {fit['share_of_put']:.0%} of a PUT's "
                f"({fit['ms_per_mib']:.2f} vs {fit['put_ms_per_mib']:.2f} ms/MiB), so no throughput is fitted")
    return [f"### The store on its own ({_title(data)})", "",
            "| | " + " | ".join(ops) + " |", "|---|" + "---|" * len(ops),
            "| p50 (ms) | " + " | ".join(_fmt(f.track_p50(data, op), ".1f") for op in ops) + " |",
            "| p95 (ms) | " + " | ".join(_fmt(f.track_p95(data, op), ".1f") for op in ops) + " |", "",
            f"Metering proxy adds {o.track_added_ms(data, 'PUT'):.2f} ms to a PUT "
            f"({o.track_added_pct_of_put(data, 'PUT'):.1f}% of the direct PUT median) and "
            f"{o.track_added_ms(data, 'HEAD'):.2f} ms to a HEAD.", "", copy + ".", ""]


def _manifest_section(data: dict) -> list[str]:
    from benchmarks.manifest_compaction import ManifestCompaction, SparkMetadataCompaction

    m, k = ManifestCompaction(), SparkMetadataCompaction()
    shape = data["shape"]
    lines = [f"### Compaction against history ({_title(data)})", "",
             f"The manifest strategy's offsets log (retaining {shape['retain']} batches) against Spark's "
             f"_spark_metadata log, compacting every {shape['interval']}; compaction time is store-side "
             f"(the proxy's), p50 of the last {shape['tail']} compactions.", "",
             "| batches | manifest compact (KiB) | live entries | pending garbage | compaction (ms) | "
             "Spark compact (KiB) | entries | compaction (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    for batches in shape["batches"]:
        lines.append(
            f"| {batches} | {_fmt(_value(m.track_compact_kib, data, batches), '.1f')} | "
            f"{_fmt(_value(m.track_live_entries, data, batches))} | "
            f"{_fmt(_value(m.track_pending_garbage, data, batches))} | "
            f"{_fmt(_value(m.track_compaction_ms, data, batches), '.1f')} | "
            f"{_fmt(_value(k.track_compact_kib, data, batches), '.1f')} | "
            f"{_fmt(_value(k.track_entries, data, batches))} | "
            f"{_fmt(_value(k.track_compaction_ms, data, batches), '.1f')} |")
    return lines + [""]


def _plot_copy(stores: dict, path: Path) -> Path | None:
    stored = {name: kinds["store"] for name, kinds in stores.items() if "store" in kinds}
    if not stored:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, data in stored.items():
        sizes = sorted(data["copy"], key=int)
        x = [int(size) / 2**20 for size in sizes]
        fit = metrics.copy_fit(data["copy"])
        note = f"{fit['mb_per_s']:.0f} MB/s" if fit["moves_data"] else "does not move the bytes"
        emulator = ", emulator" if data["emulator"] else ""
        line, = ax.plot(x, [metrics.percentile(data["copy"][s]["COPY"], 50) for s in sizes], "o-",
                        label=f"{name} COPY ({note}{emulator})")
        ax.plot(x, [metrics.percentile(data["copy"][s]["PUT"], 50) for s in sizes], "s--", color=line.get_color(),
                alpha=0.5, label=f"{name} PUT")
    ax.set(xscale="log", yscale="log", xlabel="object size (MiB)", ylabel="p50 (ms, proxy-timed)",
           title="Server-side COPY (a rename's cost) against object size")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_compaction(name: str, data: dict, path: Path) -> Path:
    from benchmarks.common import LOGS, run_of
    from benchmarks.compaction import compacts

    interval = data["plan"]["compact_interval"]
    fig, axes = plt.subplots(2, len(LOGS), figsize=(11, 7), squeeze=False)
    for col, (log, workload) in enumerate(LOGS.items()):
        size_ax, time_ax = axes[0][col], axes[1][col]
        for strategy in _strategies(data):
            run, sizes = _value(run_of, data, strategy, workload), _value(compacts, data, strategy, log)
            if run is None:
                continue
            size_ax.plot([n for n, _ in sizes], [b / 1024 for _, b in sizes], "o-", label=strategy)
            time_ax.plot([p["batchId"] for p in run["measured"]],
                         [p["durationMs"]["triggerExecution"] for p in run["measured"]], ".-", label=strategy)
        size_ax.set(title=f"{log} ({workload}): N.compact size", xlabel="batch N", ylabel="KiB")
        time_ax.set(title=f"{workload}: batch time (compaction every {interval})", xlabel="batch",
                    ylabel="triggerExecution (ms)")
        for ax in (size_ax, time_ax):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Compaction on {name}" + (" (emulator)" if data["emulator"] else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_state(name: str, data: dict, path: Path) -> Path:
    from benchmarks.rename_cost import StateCheckpointCost

    s = StateCheckpointCost()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for strategy in _strategies(data):
        points = [(_value(s.track_state_mib, data, strategy, keys), _value(s.track_commit_ms, data, strategy, keys))
                  for keys in data["plan"]["keys"]]
        points = [p for p in points if None not in p]
        if points:
            ax.plot(*zip(*points), "o-", label=strategy)
    ax.set(xscale="log", xlabel="state written per batch (MiB)", ylabel="state store commit p50 (ms, Spark)",
           title=f"State checkpoint cost against state size on {name}" + (" (emulator)" if data["emulator"] else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_manifest_compaction(name: str, data: dict, path: Path) -> Path:
    """Compact bytes and compaction time against batch number, manifest vs Spark, for the longest history."""
    from benchmarks.manifest_compaction import SPARK_LOG_STRATEGY

    run = max(data["runs"], key=lambda r: r["batches"])
    series = {f"manifest (offsets log, retains {data['shape']['retain']})": run["manifest"]["compactions"],
              f"Spark FileStreamSinkLog (_spark_metadata, on {SPARK_LOG_STRATEGY})": run["spark"]["compactions"]}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for label, compactions in series.items():
        xs = [c["batch"] for c in compactions]
        top.plot(xs, [c["bytes"] / 1024 for c in compactions], marker=".", label=label)
        bottom.plot(xs, [c["ms"] for c in compactions], marker=".", label=label)
    top.set_ylabel("compact object (KiB)")
    bottom.set_ylabel("compaction: store-side time (ms)")
    bottom.set_xlabel("batch")
    top.legend()
    kind = "an emulator" if data["emulator"] else "a real store"
    top.set_title(f"Compaction against history: {name} ({kind}), size {data['size']}", fontsize=10)
    bottom.text(0.01, 0.97, "manifest: LIST + bulk DELETE + compact PUT + hint PUT;\n"
                "Spark: every request of the compaction batch's add",
                transform=bottom.transAxes, va="top", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(results: Path) -> list[Path]:
    """Write ``results/report.md`` and the plots; returns their paths, the report first."""
    stores = _load(results / "raw")
    plots = results / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    lines = ["# ckptbench results", "",
             "Written by `python -m ckptbench bench` from the raw measurements in `results/raw`; the "
             "same numbers, with history, are in asv's HTML (`results/html`), one asv machine per store.", ""]
    paths = [p for p in [_plot_copy(stores, plots / "copy.png")] if p]
    for name, kinds in stores.items():
        lines += [f"## {name}", ""]
        if "store" in kinds:
            lines += _store_section(kinds["store"])
        if "streaming" in kinds:
            data = kinds["streaming"]
            lines += _streaming_section(data)
            paths += [_plot_compaction(name, data, plots / f"{name}-compaction.png"),
                      _plot_state(name, data, plots / f"{name}-state.png")]
        if "manifest-compaction" in kinds:
            lines += _manifest_section(kinds["manifest-compaction"])
            paths.append(_plot_manifest_compaction(name, kinds["manifest-compaction"],
                                                   plots / f"{name}-manifest-compaction.png"))
    lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in paths]
    report = results / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return [report, *paths]
