"""Docstrings and comments state contracts, limits and why: no dates, commit hashes, load averages or
run logs (findings live in ``docs/findings/`` with their command and record; history in commit
messages), and no path outside the repository. Read from the source of the product's packages and
of the tests: Python's comments (tokenize) and docstrings (ast), Java's ``//`` and ``/* */``
comments."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ckptbench", "ckpt_impls", "infra", "benchmarks", "tests")
#: What a contract never holds, each with what it is.
FORBIDDEN = {
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "a time of day in UTC": re.compile(r"\b\d\d:\d\d(?:-\d\d:\d\d)? UTC\b"),
    "a load average": re.compile(r"\bload(?: average)? \d", re.IGNORECASE),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "a path outside the repository":
        re.compile(r"(?:/work/|/root/|/home/|/tmp/|\.\./shared\b|(?<!/)shared/notes\b)\S*"),
}
JAVA_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def python_prose(source: str) -> list[tuple[int, str]]:
    """Each comment and docstring of a Python source, with its first line."""
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0].lineno, body[0].value.value))
    return out


def java_prose(source: str) -> list[tuple[int, str]]:
    return [(source.count("\n", 0, m.start()) + 1, m.group(0)) for m in JAVA_COMMENT.finditer(source)]


def findings_in(path: Path) -> list[str]:
    source = path.read_text()
    prose = python_prose(source) if path.suffix == ".py" else java_prose(source)
    return [f"{path.relative_to(ROOT)}:{line} holds {what}: {m.group(0)!r}"
            for line, text in prose for what, pattern in FORBIDDEN.items() for m in pattern.finditer(text)]


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for suffix in ("*.py", "*.java") for p in (ROOT / package).rglob(suffix))


def test_docstrings_and_comments_hold_no_run_log():
    assert [f for path in sources() for f in findings_in(path)] == []


@pytest.mark.parametrize(("text", "what"), [
    ('"""Measured 2026-11-24 on Ceph."""\n', "a date"),
    ("x = 1  # 17:58-18:15 UTC\n", "a time of day in UTC"),
    ('def f():\n    """At load average 15-19 it took 3 ms."""\n', "a load average"),
    ("# fixed in 5d71fcf\n", "a commit hash"),
    ('"""See /work/shared/notes/environment.md."""\n', "a path outside the repository"),
    ("# its log: /tmp/ci-h/output.txt\n", "a path outside the repository"),
])
def test_the_check_sees_a_run_log(tmp_path, monkeypatch, text, what):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    path = tmp_path / "x.py"
    path.write_text(text)
    found = findings_in(path)
    assert len(found) == 1 and what in found[0]


def test_the_check_reads_the_tests_too(tmp_path, monkeypatch):
    """A run log in a test's docstring is found like one in the product's."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text('def test_x():\n    """It took 9 minutes (2026-11-24)."""\n')
    assert [f for path in sources() for f in findings_in(path)] == ["tests/test_x.py:2 holds a date: '2026-11-24'"]


def test_the_check_reads_java_comments(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    path = tmp_path / "X.java"
    path.write_text('/** Two writers, 2026-11-23. */\nclass X { String s = "2026-11-23"; // ok: code\n}\n')
    assert findings_in(path) == ["X.java:1 holds a date: '2026-11-23'"]


def test_a_contract_passes(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    path = tmp_path / "x.py"
    path.write_text('"""Exactly one of two racing writers wins; the other gets 412 (SPARK-12345)."""\n'
                    'SHA = "0123abcd"\n')
    assert findings_in(path) == []
