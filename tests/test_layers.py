"""Imports point one way: benchmarks -> ckptbench -> ckpt_impls, infra (and ckpt_impls, infra
never into each other's internals beyond what is listed here). Read from the source with ast, so
an import inside a function counts too."""

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


def imported_packages(path: Path) -> dict[str, int]:
    """The project packages ``path`` imports, each with the line of its first import."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in PACKAGES:
                found.setdefault(top, node.lineno)
    return found


def wrong_way(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for imported, line in imported_packages(path).items():
            if imported != package and imported not in ALLOWED[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    assert wrong_way(package) == []


def test_the_check_sees_a_wrong_import(tmp_path, monkeypatch):
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "x.py").write_text("def f():\n    from ckptbench import results\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert wrong_way("infra") == ["infra/x.py:2 imports ckptbench"]
