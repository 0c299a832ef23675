"""How far two runs of the suite moved apart: every number of one against the same number of the other.

``python -m ckptbench drift A B``, where A and B are results directories written by
``python -m ckptbench bench --results DIR`` (or asv result files). Run the same commit twice and
this says how much of a difference between two commits is noise; it says so when A and B ran on
different stores or Spark versions (asv machines), sizes or commits. A value's move is
``|a - b| / mean(|a|, |b|)`` (0 when both are 0); values that failed or are NaN in either run
are left out. Request counts are shown apart: a batch's own, which ought to be equal (any change is
listed, ``own_requests_changed``), and those no batch made, whose moves are their spread. Where the
records of A and B lie beside them, it also says, per (store, job), what each recommends and
whether that changed (``recommendations``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from pathlib import Path

from ckpt_impls import settings
from ckptbench.record import disk

#: The move the suite aims to stay within, run to run.
AIM = 0.15
#: The asv module of request counts: a batch's own requests, the same in every run of one commit on
#: one store (``ckptbench.record.attribution``), but for ``TIMING_DRIVEN``.
OWN_REQUESTS = "requests."
#: The benchmarks (by method name) that count requests no batch made (state store maintenance's,
#: those between batches): where they land is timing, so they move run to run by design.
TIMING_DRIVEN = ("track_timing_driven_", "track_outside_batches")


class NoResults(Exception):
    """A path holds no asv result."""


def result_file(path: Path) -> Path:
    """``path`` itself if it is a file, else the newest asv result file under ``path``."""
    if path.is_file():
        return path
    files = [p for p in path.glob("**/*.json") if p.parent.parent.name == "asv" and p.name != "machine.json"]
    if not files:
        raise NoResults(f"no asv results under {path}; give a directory written by "
                        f"`python -m ckptbench bench --results DIR`, or an asv result file")
    return max(files, key=lambda p: p.stat().st_mtime)


def values(path: Path) -> dict[str, float]:
    """``{"module.Class.track_x[param, ...]": value}`` for every finite number of an asv result file."""
    data = json.loads(path.read_text())
    columns = data["result_columns"]
    out = {}
    for name, row in data["results"].items():
        result, params = row[columns.index("result")], row[columns.index("params")]
        labels = [", ".join(combo) for combo in itertools.product(*params)] if params else [""]
        results = result if isinstance(result, list) else [result]
        for label, value in zip(labels, results, strict=True):
            if isinstance(value, (int, float)) and math.isfinite(value):
                out[f"{name}[{label}]" if label else name] = value
    return out


def provenance(path: Path) -> dict[str, str]:
    """What a result file was run on: the asv machine (``<host>-<store>-spark<version>``, or
    ``<host>-<store>`` before Spark versions were named), the commit and, where the raw measurements
    lie beside it (``bench --results DIR``), the run's size, the builds of the strategies from outside
    it measured (their jars' SHA-256: two builds of one manager under one name are not one series)
    and the user's settings it ran with."""
    data = json.loads(path.read_text())
    machine = data["params"]["machine"]
    store = re.sub(r"-spark[\d.]+$", "", machine).rsplit("-", 1)[-1]
    raw = disk.directory(raw_beside(path), store, "streaming")
    try:
        env = json.loads((raw / "environment.json").read_text())
    except (OSError, ValueError):
        env = {}
    builds = ", ".join(f"{name} {'+'.join(j['sha256'][:12] for j in found['jars'])}"
                       for name, found in sorted((env.get("foreign_strategies") or {}).items()))
    return {"machine": machine, "commit": data["commit_hash"][:8], "size": env.get("size", "unknown"),
            "strategies from outside": builds or "none", "settings": settings.said(env.get("settings")) or "none"}


def raw_beside(path: Path) -> Path:
    """The records of the run ``path`` names: ``raw/`` in a results directory, or beside the asv
    result file's ``asv/`` directory (``bench --results DIR`` writes both)."""
    return path.parent.parent.parent / "raw" if path.is_file() else path / "raw"


def recommendations(a: dict[tuple[str, str], str | None], b: dict[tuple[str, str], str | None]) -> str:
    """A text summary of the recommendation per (store, job) in A and in B (``report.page``'s
    ``recommendations`` of each), each "changed" where they differ, else "same"."""
    def said(found: dict, key: tuple[str, str]) -> str:
        return "not measured" if key not in found else found[key] or "none (every configuration is out)"

    lines = ["recommendation per store and job, A -> B:"]
    for key in sorted(a.keys() | b.keys()):
        first, second = said(a, key), said(b, key)
        lines.append(f"  {'same   ' if first == second else 'changed'}  {key[0]} {key[1]}: {first} -> {second}")
    return "\n".join(lines)


def move(a: float, b: float) -> float:
    return abs(a - b) / ((abs(a) + abs(b)) / 2) if a or b else 0.0


def timing_driven(name: str) -> bool:
    """Whether the value ``name`` (``values``' key) counts requests no batch made (``TIMING_DRIVEN``)."""
    return any(f".{method}" in name for method in TIMING_DRIVEN)


def own_requests_changed(first: dict[str, float], second: dict[str, float]) -> dict[str, tuple[float, float]]:
    """The values of a batch's own requests (``OWN_REQUESTS``, not ``timing_driven``) found in both
    runs' ``values`` that are not equal: between two runs of one commit on one store each is a
    change in what a batch sends or a request told to the wrong batch, never noise."""
    return {name: (first[name], second[name]) for name in sorted(first.keys() & second.keys())
            if name.startswith(OWN_REQUESTS) and not timing_driven(name)
            and not math.isclose(first[name], second[name], rel_tol=1e-9, abs_tol=1e-12)}


def _requests_apart(first: dict[str, float], second: dict[str, float]) -> list[str]:
    """The lines on request counts: a batch's own, which ought not to change, and the timing-driven
    ones, whose moves are their spread."""
    both = first.keys() & second.keys()
    own = [n for n in both if n.startswith(OWN_REQUESTS) and not timing_driven(n)]
    lines = []
    if own:
        changed = own_requests_changed(first, second)
        lines.append(f"a batch's own requests: {len(own)} values, {len(changed)} changed"
                     + (" (the same commit on one store sends the same):" if changed else ""))
        lines += [f"  {name}: {a:.4g} -> {b:.4g}" for name, (a, b) in changed.items()]
    apart = sorted(n for n in both if timing_driven(n))
    if apart:
        lines.append("requests no batch made (state store maintenance, between batches), apart; their moves are "
                     "their spread:")
        lines += [f"  {move(first[n], second[n]):6.1%}  {n}: {first[n]:.4g} -> {second[n]:.4g}" for n in apart]
    return lines


def compare(a: Path, b: Path, worst: int = 10) -> str:
    """A text summary: overall and per benchmark class, the median move and the share within the
    aim; the request counts apart (a batch's own, which ought not to change, and those no batch
    made: ``_requests_apart``); then the ``worst`` values that moved most."""
    files = result_file(a), result_file(b)
    first, second = (values(f) for f in files)
    moves = {name: move(first[name], second[name]) for name in first.keys() & second.keys()}
    if not moves:
        raise NoResults(f"{files[0]} and {files[1]} share no benchmark value")
    by_class: dict[str, list[float]] = {}
    for name, m in moves.items():
        by_class.setdefault(name.split("[", 1)[0].rsplit(".", 1)[0], []).append(m)

    def line(label: str, ms: list[float]) -> str:
        within = sum(m <= AIM for m in ms) / len(ms)
        return (f"{label:45} {len(ms):5} values  median move {statistics.median(ms):6.1%}  "
                f"within {AIM:.0%}: {within:4.0%}")

    runs = [provenance(f) for f in files]
    lines = [f"{label}: {f} ({', '.join(f'{k} {v}' for k, v in run.items())})"
             for label, f, run in zip("AB", files, runs, strict=True)]
    differ = [k for k in runs[0] if runs[0][k] != runs[1][k]]
    if differ:
        lines.append(f"A and B differ in {', '.join(differ)}: what moved below is not run-to-run noise alone")
    lines.append(line("all", list(moves.values())))
    lines += [line(f"  {cls}", ms) for cls, ms in sorted(by_class.items())]
    lines += _requests_apart(first, second)
    lines.append("moved most:")
    for name in sorted(moves, key=moves.get, reverse=True)[:worst]:
        lines.append(f"  {moves[name]:6.1%}  {name}: {first[name]:.4g} -> {second[name]:.4g}")
    return "\n".join(lines)
