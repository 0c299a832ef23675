"""asv history across a renamed benchmark module (``ckptbench.report.asv_history``), read back by asv.

On the recorded asv run of ``tests/data/asv-smallest``: its ``commit_latency`` module plays a module
renamed to ``latency`` with its code unchanged (the suite's benchmarks are the recorded ones under
the new name, each with its recorded version). asv itself (``asv.results.Results``) must pass over
the stored results before the carry-over and show every one of them, with its values, after it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from asv.results import Results

from ckptbench.report import asv_history

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "asv-smallest"
RENAMES = {"commit_latency": "latency"}


def _results_dir(tmp_path: Path) -> Path:
    """asv's results directory holding the recorded run, as ``bench --results`` lays it out."""
    asv_dir = tmp_path / "asv"
    (asv_dir / "fixture").mkdir(parents=True)
    (asv_dir / "fixture" / "machine.json").write_text(json.dumps({"machine": "fixture", "version": 1}))
    shutil.copyfile(FIXTURE / "result.json", asv_dir / "fixture" / "run.json")
    return asv_dir


def _suite() -> dict:
    """The recorded benchmarks with ``RENAMES`` applied: a rename that left their code as it was."""
    recorded = json.loads((FIXTURE / "benchmarks.json").read_text())
    return {asv_history.renamed(name, RENAMES): bench for name, bench in recorded.items() if name != "version"}


def _shown(path: Path, suite: dict) -> dict[str, list]:
    """What asv shows of the result file ``path`` for ``suite``: {name: values}."""
    results = Results.load(str(path))
    return {name: results.get_result_value(name, suite[name]["params"]) for name in results.get_result_keys(suite)}


def test_results_under_the_old_name_join_the_renamed_series(tmp_path):
    asv_dir = _results_dir(tmp_path)
    run = asv_dir / "fixture" / "run.json"
    suite = _suite()
    before = _shown(run, suite)
    moved = sorted(name for name in suite if name.startswith("latency."))
    assert moved and not set(moved) & set(before)  # asv passes over the old names

    assert asv_history.carry_over(asv_dir, RENAMES) == [run]
    after = _shown(run, suite)
    recorded = _shown(FIXTURE / "result.json", json.loads((FIXTURE / "benchmarks.json").read_text()))
    assert sorted(after) == sorted(set(before) | set(moved))
    for name in moved:
        assert after[name] == recorded[name.replace("latency.", "commit_latency.", 1)]
    for name in before:
        assert after[name] == before[name]
    assert asv_history.carry_over(asv_dir, RENAMES) == []  # once is enough; again changes nothing


def test_a_benchmark_whose_code_changed_too_is_not_carried_into_its_series(tmp_path):
    asv_dir = _results_dir(tmp_path)
    suite = _suite()
    changed = "latency.CommitLatency.track_wal_commit_p50"
    suite[changed] = {**suite[changed], "version": "0" * 64}
    asv_history.carry_over(asv_dir, RENAMES)
    shown = _shown(asv_dir / "fixture" / "run.json", suite)
    assert changed not in shown and "latency.CommitLatency.track_wal_commit_p95" in shown


def test_a_result_already_under_the_new_name_is_kept(tmp_path):
    asv_dir = _results_dir(tmp_path)
    run = asv_dir / "fixture" / "run.json"
    data = json.loads(run.read_text())
    old = "commit_latency.CommitLatency.track_wal_commit_p50"
    row = data["results"][old]
    data["results"]["latency.CommitLatency.track_wal_commit_p50"] = newer = [[1.0] * len(row[0]), *row[1:]]
    run.write_text(json.dumps(data))
    asv_history.carry_over(asv_dir, RENAMES)
    results = json.loads(run.read_text())["results"]
    assert results["latency.CommitLatency.track_wal_commit_p50"] == newer
    assert old in results and "latency.CommitLatency.track_wal_commit_p95" in results


def test_the_renames_name_the_suites_modules():
    for old, new in asv_history.RENAMED.items():
        assert (ROOT / "benchmarks" / f"{new}.py").is_file(), new
        assert not (ROOT / "benchmarks" / f"{old}.py").exists(), old


def test_a_directory_without_asv_results_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ckptbench.report.asv_history", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"no asv results in {tmp_path / 'asv'}" in done.stderr
