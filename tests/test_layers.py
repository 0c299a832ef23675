"""Imports point one way: benchmarks -> ckptbench -> ckpt_impls, infra; and inside ckptbench, down
the data flow: settings -> harness (stores and Spark) -> experiments -> record -> metrics -> decision
-> report and CLI, so that what presents a record (``report``) or derives its figures (``metrics``)
never loads the code that runs Spark. Read from the source with ast, so an import inside a function
counts too.

Between modules, anywhere in the product packages:

* No import circle (module granularity). An import under ``if TYPE_CHECKING:`` counts: it does not
  run, but it says the importing module depends on the other's types, so a circle through it is a
  circle in the design all the same (and the usual way one is hidden rather than removed). An
  import goes to the module it names (``from pkg import mod`` to ``pkg.mod`` when that is a
  module, else to ``pkg``), not to the packages above it that Python initializes on the way:
  else every package whose ``__init__`` re-exports a submodule would close a circle with it.
* No private name (``_x``, not a dunder) of another module: neither ``from a.b import _x`` nor
  ``a.b._x`` through a module the file imported (``import a.b``, ``import a.b as c``, ``from a
  import b``). What one module shares with another is public there, and documented as such.
* No module of ``ckptbench/cli/`` over ``MOST_CLI_LINES`` lines, no other one of ckptbench,
  ckpt_impls and infra over ``MOST_LINES``.

Each check reports every offender in one message, and is shown catching a planted broken case."""

from __future__ import annotations

import ast
import subprocess
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
    "install": {"harness", "report"},
    "__main__": {"cli"},
    "__init__": set(),
}
#: At most this many modules at ckptbench's top level, this many lines in any product module, and this
#: many in a module of ckptbench/cli/.
MOST_TOP_MODULES = 8
MOST_LINES = 500
MOST_CLI_LINES = 300


def _import_statements(path: Path):
    """``(base, names, alias, line)`` per imported name in ``path``, ``base`` absolute: ``import X
    as y`` gives ``(X, None, y, line)`` (alias None without ``as``), ``from X import a as b, c``
    gives ``(X, [(a, b), (c, None)], None, line)``; relative imports resolved against the file's
    package."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, alias.asname, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            yield base, [(alias.name, alias.asname) for alias in node.names], None, node.lineno


def imports(path: Path) -> list[tuple[str, int]]:
    """Every absolute module ``path`` imports (``from X import a`` gives X.a too: ``a`` may be a
    module), with its line. Relative imports are resolved against the file's package."""
    found = []
    for base, names, _, line in _import_statements(path):
        found.append((base, line))
        found += [(f"{base}.{name}", line) for name, _ in names or ()]
    return found


def module_name(path: Path) -> str:
    """``path``'s dotted module name (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_imports(path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """The product modules ``path`` imports, with the line: ``import a.b.c`` names the longest of
    ``a.b.c``, ``a.b``, ``a`` that is a module; ``from X import y`` names ``X.y`` if that is a
    module, else ``X``."""
    found = []
    for base, names, _, line in _import_statements(path):
        if names is None:
            parts = base.split(".")
            found += [(".".join(parts[:n]), line) for n in range(len(parts), 0, -1)
                      if ".".join(parts[:n]) in modules][:1]
            continue
        for name, _ in names:
            target = f"{base}.{name}" if f"{base}.{name}" in modules else base
            if target in modules:
                found.append((target, line))
    return found


def import_circles() -> list[str]:
    """One line per set of modules that import one another in a circle (a strongly connected
    component of the import graph): its members, and one shortest circle through them with the
    line of each import."""
    modules = product_modules()
    edges: dict[str, dict[str, str]] = {m: {} for m in modules}
    for module, path in modules.items():
        for target, line in module_imports(path, modules):
            if target != module:
                edges[module].setdefault(target, f"{path.relative_to(ROOT)}:{line}")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan's algorithm
        index[m] = low[m] = len(index)
        stack.append(m)
        for t in edges[m]:
            if t not in index:
                visit(t)
                low[m] = min(low[m], low[t])
            elif t in stack:
                low[m] = min(low[m], index[t])
        if low[m] == index[m]:
            component = []
            while (t := stack.pop()) != m:
                component.append(t)
            components.append(sorted([m, *component]))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    out = []
    for component in components:
        if len(component) < 2:
            continue
        members, start = set(component), component[0]
        came_from, frontier = {start: None}, [start]
        while start not in [t for m in frontier for t in edges[m]]:  # breadth first, back to start
            nxt = []
            for m in frontier:
                for t in sorted(edges[m]):
                    if t in members and t not in came_from:
                        came_from[t] = m
                        nxt.append(t)
            frontier = nxt
        last = min(m for m in frontier if start in edges[m])
        path = [last]
        while path[-1] != start:
            path.append(came_from[path[-1]])
        path.reverse()
        steps = [f"{a} ({edges[a][b]}) -> {b}" for a, b in zip(path, [*path[1:], start], strict=True)]
        out.append(f"circle among {', '.join(component)}: " + "; ".join(steps))
    return out


def private_imports() -> list[str]:
    """Every use of another module's private name: ``from a.b import _x``, and ``a.b._x`` through
    a module imported by name."""
    modules = product_modules()
    out = []
    for module, path in modules.items():
        where = path.relative_to(ROOT)
        local: dict[str, str] = {}  # a name bound to a product module -> that module
        for base, names, asname, line in _import_statements(path):
            if names is None:
                if base.split(".")[0] in PACKAGES:
                    local[asname or base.split(".")[0]] = base if asname else base.split(".")[0]
                    out += [f"{where}:{line} imports {base}" for part in base.split(".") if _private(part)][:1]
                continue
            for name, alias in names:
                if f"{base}.{name}" in modules:
                    local[alias or name] = f"{base}.{name}"
                if _private(name) and base.split(".")[0] in PACKAGES and base != module:
                    out.append(f"{where}:{line} imports {name} from {base}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in local:
                owner = ".".join([local[value.id], *reversed(chain)])
                if owner in modules and owner != module:
                    out.append(f"{where}:{node.lineno} uses {owner}.{node.attr}")
    return sorted(set(out))


def long_modules() -> list[str]:
    """Every product module over ``MOST_LINES`` lines, and every module of ckptbench/cli/ over
    ``MOST_CLI_LINES``."""
    out = []
    for package in ("ckptbench", "ckpt_impls", "infra"):
        for p in sorted((ROOT / package).rglob("*.py")):
            most = MOST_CLI_LINES if ROOT / "ckptbench" / "cli" in p.parents else MOST_LINES
            if (n := len(p.read_text().splitlines())) > most:
                out.append(f"{p.relative_to(ROOT)}: {n} lines, over {most}")
    return out


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
    long = long_modules()
    assert not long, "\n".join(long)


def test_no_import_circle():
    circles = import_circles()
    assert not circles, "\n".join(circles)


def test_no_private_name_of_another_module():
    private = private_imports()
    assert not private, "\n".join(private)


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


def _plant(tmp_path, monkeypatch, files: dict[str, str]) -> None:
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)


def test_the_check_sees_an_import_circle(tmp_path, monkeypatch):
    """A circle closed by an import inside a function and one under TYPE_CHECKING; the package's
    own ``__init__`` importing its submodules is no circle, nor is a submodule importing a sibling."""
    _plant(tmp_path, monkeypatch, {
        "infra/__init__.py": "",
        "infra/p/__init__.py": "from .a import f\n",
        "infra/p/a.py": "from . import b\n",
        "infra/p/b.py": "def g():\n    from .c import h\n",
        "infra/p/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from infra.p.a import f\n",
        "infra/q.py": "import infra.p.a\n",
    })
    assert import_circles() == ["circle among infra.p.a, infra.p.b, infra.p.c: infra.p.a (infra/p/a.py:1) -> "
                                "infra.p.b; infra.p.b (infra/p/b.py:2) -> infra.p.c; "
                                "infra.p.c (infra/p/c.py:3) -> infra.p.a"]


def test_the_check_reports_every_import_circle(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {
        "infra/__init__.py": "",
        "infra/a.py": "from infra import b\n",
        "infra/b.py": "from .a import x\n",
        "ckpt_impls/__init__.py": "from .c import y\n",
        "ckpt_impls/c.py": "import ckpt_impls\n",
    })
    assert import_circles() == [
        "circle among ckpt_impls, ckpt_impls.c: ckpt_impls (ckpt_impls/__init__.py:1) -> ckpt_impls.c; "
        "ckpt_impls.c (ckpt_impls/c.py:1) -> ckpt_impls",
        "circle among infra.a, infra.b: infra.a (infra/a.py:1) -> infra.b; infra.b (infra/b.py:1) -> infra.a",
    ]


def test_the_check_sees_a_private_name_of_another_module(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {
        "infra/__init__.py": "",
        "infra/a.py": "_x = 1\n__version__ = 1\n_y = _x\n",
        "infra/b.py": ("from .a import _x, __version__\n"
                       "import infra.a\n"
                       "import infra.a as alias\n"
                       "from infra import a\n"
                       "def f():\n"
                       "    from infra.a import _y\n"
                       "    return infra.a._x, alias._y, a._x, a.__version__, a.public, infra.a.__name__\n"),
        "ckptbench/cli/__init__.py": "from .x import _z\n",
        "ckptbench/cli/x.py": "_z = 1\n",
    })
    assert private_imports() == [
        "ckptbench/cli/__init__.py:1 imports _z from ckptbench.cli.x",
        "infra/b.py:1 imports _x from infra.a",
        "infra/b.py:6 imports _y from infra.a",
        "infra/b.py:7 uses infra.a._x",
        "infra/b.py:7 uses infra.a._y",
    ]


def test_the_check_sees_a_long_cli_module(tmp_path, monkeypatch):
    _plant(tmp_path, monkeypatch, {
        "ckptbench/cli/long.py": "x = 1\n" * (MOST_CLI_LINES + 1),
        "ckptbench/cli/short.py": "x = 1\n" * MOST_CLI_LINES,
        "ckptbench/cli/sub/deep.py": "x = 1\n" * (MOST_CLI_LINES + 1),
        "ckptbench/report/x.py": "x = 1\n" * (MOST_CLI_LINES + 1),
        "infra/x.py": "x = 1\n" * (MOST_LINES + 1),
    })
    assert long_modules() == [f"ckptbench/cli/long.py: {MOST_CLI_LINES + 1} lines, over {MOST_CLI_LINES}",
                              f"ckptbench/cli/sub/deep.py: {MOST_CLI_LINES + 1} lines, over {MOST_CLI_LINES}",
                              f"infra/x.py: {MOST_LINES + 1} lines, over {MOST_LINES}"]


#: What a command's parser must not need: each costs tenths of a second of CPU to import, paid by
#: every CLI process (help, bad input) before it parses its arguments.
HEAVY = ("pandas", "pyarrow", "pyspark", "scipy", "matplotlib")


def heavy_imports(module: str) -> list[str]:
    """The ``HEAVY`` packages importing ``module`` imports, in a fresh interpreter."""
    probe = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_cli_parses_without_the_heavy_packages():
    assert heavy_imports("ckptbench.cli.app") == []


def test_the_check_sees_a_heavy_import():
    assert "pandas" in heavy_imports("ckptbench.record.results")


#: What Spark's Python workers run our code with: ``python3`` from the PATH (no ``PYSPARK_PYTHON`` is
#: set), which need not hold the project's packages, only pyspark's own zip beside it.
WORKER_SIDE = ("ckptbench.harness.spark", "ckptbench.harness.workloads")


@pytest.mark.parametrize("module", WORKER_SIDE)
def test_what_spark_workers_import_needs_no_numpy_or_pandas(module):
    probe = f"import sys; sys.modules.update(numpy=None, pandas=None, pyarrow=None); import {module}"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_worker_check_sees_numpy_in_the_chain():
    probe = "import sys; sys.modules.update(numpy=None, pandas=None, pyarrow=None); import ckptbench.record.results"
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True).returncode != 0
