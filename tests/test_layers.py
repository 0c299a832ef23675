"""Imports point one way: benchmarks -> ckptbench -> ckpt_impls, infra; and inside ckptbench, down
the data flow: settings -> harness (stores and Spark) -> experiments -> record -> metrics -> decision
-> report and CLI, so that what presents a record (``report``) or derives its figures (``metrics``)
never loads the code that runs Spark. Read from the source with ast, so an import inside a function
counts too."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("benchmarks", "ckptbench", "ckpt_impls", "infra")
#: What each package may import of the others.
ALLOWED = {
    "benchmarks": {"ckptbench", "ckpt_impls", "infra"},
    "ckptbench": {"ckpt_impls", "infra"},
    "ckpt_impls": set(),
    "infra": set(),
}
#: Inside ckptbench: each layer (a subpackage, or a top-level module) and the layers it may import
#: besides itself. ``progress`` (bars) and ``config`` (plans, settings) are read by every layer that runs.
LAYERS = {
    "config": set(),
    "progress": set(),
    "harness": {"config", "progress", "record"},
    "record": {"config"},
    "metrics": {"config", "record"},
    "experiments": {"config", "progress", "harness", "record", "metrics"},
    "decide": {"config", "record", "metrics"},
    "deploy": set(),
    "report": {"config", "record", "metrics", "decide"},
    "cli": {"config", "progress", "harness", "experiments", "record", "metrics", "decide", "deploy", "report"},
    "install": {"report"},
    "__main__": {"cli"},
    "__init__": set(),
}
#: At most this many modules at ckptbench's top level, and this many lines in any product module.
MOST_TOP_MODULES = 8
MOST_LINES = 500


def imports(path: Path) -> list[tuple[str, int]]:
    """Every absolute module ``path`` imports (``from X import a`` gives X.a too: ``a`` may be a
    module), with its line. Relative imports are resolved against the file's package."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def wrong_way(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name, line in imports(path):
            top = name.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    return sorted(set(out))


def layer_of(path: Path) -> str:
    """The layer of a file under ckptbench/: its subpackage, or its module's name at the top level."""
    parts = path.relative_to(ROOT / "ckptbench").parts
    return parts[0] if len(parts) > 1 else path.stem


def wrong_layer() -> list[str]:
    out = []
    for path in sorted((ROOT / "ckptbench").rglob("*.py")):
        mine = layer_of(path)
        for name, line in imports(path):
            parts = name.split(".")
            if parts[0] != "ckptbench" or len(parts) < 2 or parts[1] not in LAYERS:
                continue
            if parts[1] != mine and parts[1] not in LAYERS[mine]:
                out.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports ckptbench.{parts[1]}")
    return sorted(set(out))


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    assert wrong_way(package) == []


def test_ckptbench_imports_follow_the_data_flow():
    assert wrong_layer() == []


def test_every_ckptbench_module_has_a_layer():
    assert sorted({layer_of(p) for p in (ROOT / "ckptbench").rglob("*.py")} - set(LAYERS)) == []


def test_modules_are_small_and_the_top_level_is_short():
    top = sorted(p.name for p in (ROOT / "ckptbench").glob("*.py"))
    assert len(top) <= MOST_TOP_MODULES, top
    long = [f"{p.relative_to(ROOT)}: {n}" for package in ("ckptbench", "ckpt_impls", "infra")
            for p in sorted((ROOT / package).rglob("*.py")) if (n := len(p.read_text().splitlines())) > MOST_LINES]
    assert long == []


def test_the_check_sees_a_wrong_import(tmp_path, monkeypatch):
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "x.py").write_text("def f():\n    from ckptbench import results\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert wrong_way("infra") == ["infra/x.py:2 imports ckptbench"]


@pytest.mark.parametrize("source", ["from ckptbench.harness import spark\n",
                                    "from ckptbench import experiments\n",
                                    "def f():\n    from ..experiments.crashlab import verify\n"])
def test_the_check_sees_the_report_reach_for_what_runs_spark(tmp_path, monkeypatch, source):
    (tmp_path / "ckptbench" / "report").mkdir(parents=True)
    (tmp_path / "ckptbench" / "report" / "x.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    [line] = wrong_layer()
    assert line.startswith("ckptbench/report/x.py:")
    assert line.endswith(("(report) imports ckptbench.harness", "(report) imports ckptbench.experiments"))
