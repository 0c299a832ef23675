"""`bench --continuous BASE HEAD` catches a regression planted on purpose, and only that one.

A scratch repository holds two commits: the code under test (this tree as it is, committed), then
the same with one LIST request more per checkpoint file in ``conditional``'s Java manager. The
command builds and measures both in asv's virtualenv (each commit its own managers' jar) on the
embedded store at the smallest size, on walCommit's requests as Spark's JVM counts them (the
counting experiment: ``rename`` and ``conditional``). conditional's must grow by exactly the LIST,
which shows commit X ran commit X's jar; asv must call conditional's worse and rename's not, the
command must end with exit status 1, and the published pages must list the regression.

The run takes minutes (the counting experiment once per commit, the environment made on the first
run in a checkout), so it starts with the session and runs beside the suite
(conftest.py ``beside_the_suite``). The environment lives in this checkout's ``.asv/env``, shared
with `bench --continuous` runs here, so later runs reuse it. The options' bad input needs no Spark.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_impls import jars
from ckptbench.cli import continuous
from ckptbench.experiments import counting
from helpers import ckptbench_here, ended_beside, one_error_line
from infra.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "ckpt_impls/java/ckptbench/checkpoint/ConditionalPutCheckpointFileManager.java"
#: conditional's close: one PUT. The plant adds a LIST of the key just written after it.
PUT = "        store.put(key, bytes, !overwriteIfPossible);\n        known.created(key);\n"
PUT_AND_LIST = ("        store.put(key, bytes, !overwriteIfPossible);\n        store.listPage(key, false, 1, null);\n"
                "        known.created(key);\n")
BENCHMARK = "jvm_counting.JvmCountingOverhead.track_wal_commit_requests"
#: The counting experiment's strategies, both: walCommit's requests as the JVM counts them, an exact
#: count per batch (offsets/N's own requests, nothing the state store's maintenance adds), and the
#: shortest experiment whose figures name a strategy's manager.
STRATEGIES = counting.STRATEGIES
SELECTED = re.escape(BENCHMARK)
#: Against a hang only: well above the run's own time on 2 cores beside the suite.
TIMEOUT_S = 1800
GIT = ["git", "-c", "user.name=ckptbench test", "-c", "user.email=test@ckptbench.invalid"]


def scratch_repo(where: Path) -> Path:
    """A clone of this repository whose HEAD~1 is this tree as it is (committed, uncommitted
    changes and new files included) and whose HEAD adds the planted request."""
    repo = where / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, repo / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.is_file():  # deleted in this tree
            target.unlink()
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-q", "--allow-empty", "-m", "the code under test"], cwd=repo, check=True)
    manager = repo / PLANTED.relative_to(ROOT)
    text = manager.read_text()
    assert text.count(PUT) == 1, f"{PLANTED.name}'s close changed: the plant needs a new place"
    manager.write_text(text.replace(PUT, PUT_AND_LIST))
    subprocess.run([*GIT, "commit", "-q", "-am", "conditional: one LIST more per checkpoint file"], cwd=repo,
                   check=True)
    if (ROOT / "node_modules").is_dir():  # the scripts asv's pages load, for the offline pages
        (repo / "node_modules").symlink_to(ROOT / "node_modules")
    return repo


def continuous_run(workdir: Path) -> subprocess.Popen:
    """`bench --continuous HEAD~1 HEAD` in the scratch repository, output to ``workdir/output.txt``.
    HOME is ``workdir`` (asv's machine file); the S3A jars are this tree's."""
    repo = scratch_repo(workdir)
    env = {**os.environ, "HOME": str(workdir), continuous.ENV_DIR_ENV: str(ROOT / ".asv" / "env"),
           jars.USER_JARS_ENV: ",".join(map(str, jars.s3a_jars()))}
    log = (workdir / "output.txt").open("w")
    return subprocess.Popen([sys.executable, "-m", "ckptbench", "bench", "--continuous", "HEAD~1", "HEAD",
                             "--store", "embedded", "--size", "smallest", "--bench", SELECTED,
                             "--results", str(workdir / "results")],
                            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _results(results: Path, commit: str) -> dict[str, float]:
    """strategy -> the benchmark's value at ``commit``, from asv's result file."""
    [path] = [p for p in (results / "asv").glob(f"*/{commit[:8]}-*.json")]
    recorded = json.loads(path.read_text())
    value, params = (recorded["results"][BENCHMARK][recorded["result_columns"].index(c)] for c in ("result", "params"))
    return dict(zip((s.strip("'") for s in params[0]), value, strict=True))


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(continuous_run)
def test_a_planted_request_is_a_regression_and_nothing_else(request):
    if EmbeddedStore.unavailable_reason() is not None:
        pytest.skip(str(EmbeddedStore.unavailable_reason()))
    returncode, workdir, output = ended_beside(request.config, continuous_run, TIMEOUT_S, "bench --continuous")
    assert returncode == 1, output[-5000:]
    assert re.search(r"^ckptbench: regression: a benchmark got worse", output, re.M), output[-3000:]
    assert "PERFORMANCE DECREASED" in output

    repo, results = workdir / "repo", workdir / "results"
    base, head = (subprocess.run(["git", "rev-parse", name], cwd=repo, check=True, capture_output=True,
                                 text=True).stdout.strip() for name in ("HEAD~1", "HEAD"))
    before, after = _results(results, base), _results(results, head)
    measured = {key for key, value in before.items() if value is not None and not math.isnan(value)}
    assert measured == {key for key, value in after.items() if value is not None and not math.isnan(value)}
    assert measured == set(STRATEGIES), measured
    # Each commit ran its own jar: at HEAD, conditional's offsets file costs its PUT and the LIST.
    assert after["conditional"] - before["conditional"] == pytest.approx(1), (before, after)
    assert after["rename"] == pytest.approx(before["rename"]), (before, after)

    # asv's table: worse (+) is conditional's; no other strategy is flagged.
    flagged = re.findall(r"^\|\s*\+\s*\|.*?" + re.escape(BENCHMARK) + r"\('(\w+)'\)", output, re.M)
    assert flagged == ["conditional"], output[-3000:]
    # The published history: asv's regressions page lists the same, and only those.
    regressions = json.loads((results / "html" / "regressions.json").read_text())["regressions"]
    assert {re.search(r"\('(\w+)'", name).group(1) for name, *_ in regressions} == {"conditional"}, regressions
    assert (results / "html" / "index.html").is_file()


def _bad(*args: str, tmp_path: Path) -> str:
    """``bench ARGS`` ends with one line on stderr, exit status 2, and writes nothing."""
    out = tmp_path / "results"
    done = ckptbench_here("bench", "--store", "embedded", "--results", str(out), *args)
    line = one_error_line(done)
    assert not out.exists() and done.stdout == ""
    return line


def test_an_unknown_commit_is_one_line(tmp_path):
    assert "unknown commit 'no-such-commit'" in _bad("--continuous", "HEAD", "no-such-commit", tmp_path=tmp_path)
    assert "unknown commit 'nope'" in _bad("--commits", "nope..HEAD", tmp_path=tmp_path)


def test_a_bad_factor_or_range_is_one_line(tmp_path):
    for factor in ("0.9", "fast", "nan", "-1"):
        assert "--factor takes a number of at least 1" in _bad("--continuous", "HEAD", "HEAD", "--factor", factor,
                                                               tmp_path=tmp_path)
    assert "--commits takes A..B" in _bad("--commits", "HEAD", tmp_path=tmp_path)
    assert "--factor goes with --continuous" in _bad("--factor", "2", tmp_path=tmp_path)
    assert "give one" in _bad("--continuous", "HEAD", "HEAD", "--commits", "HEAD..HEAD", tmp_path=tmp_path)


def test_asvs_environment_runs_the_pinned_spark():
    """asv.conf.json's matrix names the environment after the Spark the pins install: one moved
    without the other would measure a Spark the environment's name does not say."""
    from asv import util

    conf = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert conf["environment_type"] == "virtualenv"
    assert conf["matrix"]["req"] == {"pyspark": [pins["pyspark"]]}
