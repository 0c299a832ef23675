"""``bench --continuous BASE HEAD`` and ``bench --commits A..B``: asv builds each commit in a
virtualenv of its own (``asv.conf.json``) and measures it, then publishes the history.

``--continuous`` is ``asv continuous``: both commits measured, and a benchmark whose value grew
by more than ``--factor`` at HEAD (or that failed only at HEAD) is a regression: the command then
ends with exit status 1 (``Regression``). ``--commits`` is ``asv run A..B``: every commit after A up to
B, for the history pages and asv's regressions page, which it prints.

Why it is built this way:

- The environment (pyspark and the pins, ``asv.conf.json``'s matrix) is made once per env
  directory and reused; per commit only the project is installed, editable from asv's checkout
  of it, and that commit's managers' jar compiled there. ckptbench finds its jars through its
  package directory, so the editable install is what makes commit X run commit X's jar.
- The benchmarks come from the tree that runs the command (asv's rule): a commit is measured by
  today's suite, so two commits' numbers are comparable.
- The env directory (``.asv/env``, or ``$CKPT_ASV_ENV_DIR``) holds one checkout per environment, so
  two runs sharing it would rebuild each other's checkout: a run takes an exclusive lock on it and a
  second one waits.
- Each commit's experiments start their own store (as ``bench`` does, about a second for Ceph), so
  both commits run on a fresh store: sharing one would let the first commit's objects weigh on the
  second's numbers. The store is started once beforehand only to fail early on one that cannot run.
- Raw records go to a temporary directory: asv's results hold the numbers, and the commits'
  records would only overwrite each other (and the working tree's, which the report reads).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ckptbench.cli.common import SPARK_VENVS, UsageError
from ckptbench.config import ROOT

#: Overrides where asv keeps its environments (default ``.asv/env`` in the repository).
ENV_DIR_ENV = "CKPT_ASV_ENV_DIR"
#: asv's default factor: a value more than 10% above the base's is worse.
DEFAULT_FACTOR = 1.1


class Regression(Exception):
    """asv continuous found a benchmark worse at HEAD than at BASE (exit status 1, not 2: the input was fine)."""


def commit(name: str) -> str:
    """The full hash of commit ``name`` in this repository, or UsageError in one line."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode or not name or name.startswith("-"):
        raise UsageError(f"unknown commit {name!r} in {ROOT}")
    return done.stdout.strip()


def commit_range(text: str) -> tuple[str, str]:
    """``A..B`` with both ends known commits, as their hashes; else UsageError."""
    base, sep, head = text.partition("..")
    if not sep or head.startswith(".") or not base or not head:
        raise UsageError(f"--commits takes A..B (the commits after A up to B, as `git log A..B`), not {text!r}")
    return commit(base), commit(head)


def factor(text: str | None) -> float:
    """``--factor`` as a number of at least 1 (asv flags a value above base x factor), else UsageError."""
    if text is None:
        return DEFAULT_FACTOR
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1:
        raise UsageError(f"--factor takes a number of at least 1 (1.1: 10% worse is a regression), not {text!r}")
    return value


def checked(args) -> bool:
    """Whether ``bench`` measures other commits (``--continuous``/``--commits``), their options checked
    before anything starts: known commits, a factor of at least 1, the Spark asv's environments run."""
    from ckpt_impls import jars

    if args.continuous and args.commits:
        raise UsageError("--continuous BASE HEAD and --commits A..B are two ways to run: give one")
    if args.factor is not None and not args.continuous:
        raise UsageError("--factor goes with --continuous BASE HEAD")
    if not (args.continuous or args.commits):
        return False
    if args.continuous:
        for name in args.continuous:
            commit(name)
        factor(args.factor)
    else:
        commit_range(args.commits)
    if jars.spark_version() != next(iter(SPARK_VENVS)):
        raise UsageError(f"--continuous and --commits run on Spark {next(iter(SPARK_VENVS))} (asv.conf.json's "
                         "matrix), not with --spark")
    return True


def env_dir() -> Path:
    return Path(os.environ.get(ENV_DIR_ENV) or ROOT / ".asv" / "env").resolve()


def asv_config(results: Path, envs: Path) -> Path:
    """``asv.conf.json`` with absolute paths: this repository, its suite, ``envs``, results under ``results``."""
    from asv import util

    conf = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), env_dir=str(envs),
                results_dir=str(results / "asv"), html_dir=str(results / "html"))
    results.mkdir(parents=True, exist_ok=True)
    derived = results / "asv-commits.conf.json"
    derived.write_text(json.dumps(conf, indent=1))
    return derived


@contextlib.contextmanager
def locked(envs: Path):
    """An exclusive lock on the env directory for the run (a second run waits, saying so)."""
    envs.mkdir(parents=True, exist_ok=True)
    with (envs / ".ckptbench.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another run using {envs} to end", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run(args, env: dict[str, str], machine: str, results: Path, bench: str | None, raw_env: str) -> None:
    """Run asv continuous (``args.continuous``) or asv run over a range (``args.commits``) with the
    store settings in ``env``, then publish; raise ``Regression`` or UsageError when asv found one
    or failed. ``raw_env`` names the variable of the raw records' directory."""
    from ckpt_impls import jars
    from ckptbench.report import publish

    if args.continuous:
        base, head = (commit(name) for name in args.continuous)
        spec = [base, head]
    else:
        base, head = commit_range(args.commits)
        spec = [f"{base}..{head}"]
    threshold = factor(args.factor)
    envs = env_dir()
    config = asv_config(results, envs)
    asv = [sys.executable, "-m", "asv"]
    # The S3A jars are no commit's: the running tree's (or the user's), so that no commit fetches them.
    s3a = ",".join(str(p) for p in jars.s3a_jars())
    with tempfile.TemporaryDirectory(prefix="ckptbench-commits-raw-") as raw, locked(envs):
        env = {**env, raw_env: raw, jars.USER_JARS_ENV: s3a}
        env.pop("ASV_PYTHONPATH", None)  # the commit's installed code, never this tree's
        subprocess.run([*asv, "machine", "--yes", "--machine", machine, "--config", str(config)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        common = ["--config", str(config), "--machine", machine, "--show-stderr",
                  *(["--bench", bench] if bench else [])]
        print(f"asv environments in {envs} (made once, then reused: only the project is installed per commit)",
              flush=True)
        if args.continuous:
            returncode, output = _shown([*asv, "continuous", *common, "--factor", str(threshold), *spec], env)
        else:
            returncode, output = _shown([*asv, "run", *common, *spec], env)
        subprocess.run([*asv, "publish", "--config", str(config)], check=True, env=env)
    try:  # asv's pages load their scripts from CDNs: local copies, so that they open offline
        publish.offline(results / "html")
        if (results / "report" / "index.html").is_file():  # a bench of this tree wrote one
            publish.link_report(results / "html")
        offline_error = None
    except publish.NotOffline as e:
        offline_error = e
    print(f"\nHTML: {results / 'html' / 'index.html'} (history per commit; regressions: "
          f"{results / 'html' / 'index.html'}#regressions; asv machine {machine}; results in {results / 'asv'})")
    if args.commits:
        _print_regressions(results / "html" / "regressions.json", bench)
    if args.continuous and returncode == 1 and "PERFORMANCE DECREASED" in output:
        raise Regression(f"a benchmark got worse by more than a factor {threshold:g} (or failed) at "
                         f"{args.continuous[1]} against {args.continuous[0]}: see asv's table above")
    if offline_error is not None:
        raise UsageError(f"the HTML needs the network to open: {offline_error}")
    if returncode:
        raise UsageError(f"asv {'continuous' if args.continuous else 'run'} failed (exit status {returncode}): "
                         "its output above says why")


def _shown(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``command``, its output shown as it comes and returned with its exit status."""
    lines = []
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    return proc.returncode, "".join(lines)


def _print_regressions(path: Path, bench: str | None) -> None:
    """The regressions asv's publish found in the history (its regressions page), one line each."""
    found = json.loads(path.read_text()).get("regressions", []) if path.is_file() else []
    found = [r for r in found if not bench or re.search(bench, r[0])]
    print(f"asv's regressions page lists {len(found)} regression(s)" + (f" of benchmarks matching {bench!r}"
                                                                          if bench else ""))
    for name, _graph, params, *_ in found:
        print(f"  {name} {params if params else ''}".rstrip())
