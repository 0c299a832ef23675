"""A progress bar across processes, for the suite's long set-up.

asv runs a benchmark's ``setup_cache`` (every streaming query of a run: minutes) in a child
process whose output it holds back until the child ends. So the child records its progress in
a file named by ``$CKPT_BENCH_PROGRESS`` and ``python -m ckptbench bench`` shows that file as a
bar while asv runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from tqdm import tqdm

ENV = "CKPT_BENCH_PROGRESS"


def bar(**kwargs) -> tqdm:
    """A tqdm bar on stderr: redrawn every second on a terminal, every 30 s into a log."""
    return tqdm(mininterval=1 if sys.stderr.isatty() else 30, **kwargs)


class Recorder:
    """The child's side, with the calls of a tqdm bar that the experiments make: ``update(n)``,
    ``set_postfix_str(label)``, and ``grow(n)`` where more work than planned is added. Records
    nothing when ``$CKPT_BENCH_PROGRESS`` is unset (asv run by hand, or a test)."""

    def __init__(self, desc: str, total: int, unit: str) -> None:
        self.path = Path(os.environ[ENV]) if os.environ.get(ENV) else None
        self.state = {"desc": desc, "total": total, "unit": unit, "done": 0, "label": ""}

    def update(self, n: int = 1) -> None:
        self.state["done"] += n
        self._write()

    def grow(self, n: int) -> None:
        self.state["total"] += n
        self._write()

    def set_postfix_str(self, label: str) -> None:
        self.state["label"] = label
        self._write()

    def _write(self) -> None:
        _append(self.path, self.state)


def _append(path: Path | None, state: dict) -> None:
    if path is not None:
        # One line per call, appended in one write: the reader takes whole lines, in order.
        with open(path, "a") as out:
            out.write(json.dumps(state) + "\n")


@contextlib.contextmanager
def stage(name: str):
    """The block is stage ``name`` of ``bench``'s plan (``ckptbench.experiments.registry``): its start
    and end are written where ``Recorder`` writes (nothing where ``$CKPT_BENCH_PROGRESS`` is unset),
    with the time, for ``shown``'s ``on_stage``."""
    path = Path(os.environ[ENV]) if os.environ.get(ENV) else None
    _append(path, {"stage": name, "event": "start", "at": time.time()})
    try:
        yield
    finally:
        _append(path, {"stage": name, "event": "end", "at": time.time()})


@contextlib.contextmanager
def shown(path: Path, on_stage=None):
    """While the block runs, show what each ``Recorder`` writes to ``path`` as a bar on stderr, and
    hand each ``stage`` event (a dict: ``stage``, ``event`` start or end, ``at`` epoch seconds) to
    ``on_stage(event, say)``. Yields ``say(line)``: the line on stdout, on a line of its own, after
    the bar shown so far is closed (a ``print`` in the block would land on the bar's unfinished line)."""
    stop = threading.Event()
    lock = threading.Lock()  # held by whoever reads the file or draws
    state = {"bar": None, "offset": 0, "pending": b""}

    def drain() -> None:
        """Draw what the file holds beyond what was drawn."""
        try:
            with open(path, "rb") as f:
                f.seek(state["offset"])
                chunk = f.read()
        except FileNotFoundError:
            chunk = b""
        state["offset"] += len(chunk)
        *lines, state["pending"] = (state["pending"] + chunk).split(b"\n")
        for line in lines:
            now = json.loads(line)
            if "stage" in now:
                if on_stage is not None:
                    close()
                    on_stage(now, print_line)
                continue
            shown_bar = state["bar"]
            if shown_bar is None or shown_bar.desc != now["desc"]:
                close()
                shown_bar = state["bar"] = bar(total=now["total"], unit=now["unit"], desc=now["desc"])
            shown_bar.total = now["total"]
            shown_bar.set_postfix_str(now["label"], refresh=False)
            shown_bar.update(now["done"] - shown_bar.n)

    def close() -> None:
        if state["bar"] is not None:
            state["bar"].close()
            state["bar"] = None

    def print_line(line: str) -> None:
        close()
        print(line, flush=True)

    def say(line: str) -> None:
        with lock:
            drain()
            print_line(line)

    def follow() -> None:
        while True:
            finished = stop.wait(0.5)
            with lock:
                drain()
                if finished:
                    close()
                    return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield say
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def shown_for(env, on_stage=None):
    """While the block runs, ``Recorder``s of processes started with ``env`` (``os.environ``: this
    one and its children) write to a file of the block's own, ``shown`` as a bar (``stage`` events
    to ``on_stage``); ``env`` loses the setting after it. Yields ``shown``'s ``say``."""
    with tempfile.TemporaryDirectory(prefix="ckptbench-progress-") as tmp:
        path = Path(tmp, "progress")
        env[ENV] = str(path)
        try:
            with shown(path, on_stage) as say:
                yield say
        finally:
            env.pop(ENV, None)


@contextlib.contextmanager
def summed(paths: list[Path], desc: str):
    """While the block runs, one bar of what the ``Recorder``s writing to ``paths`` (one a process,
    the processes running beside each other) have done of their totals, summed, with each one's own
    bar's description and done/total after it. Yields ``say(line)``: the line on stdout, above the bar."""
    stop = threading.Event()

    def last(path: Path) -> dict | None:
        try:
            lines = [line for line in path.read_bytes().split(b"\n")[:-1] if line]
        except FileNotFoundError:
            return None
        states = [json.loads(line) for line in lines]
        bars = [s for s in states if "desc" in s]
        return bars[-1] if bars else None

    def follow() -> None:
        shown_bar = bar(total=0, unit="step", desc=desc)
        while True:
            finished = stop.wait(1.0)
            states = [s for s in map(last, paths) if s is not None]
            shown_bar.total = sum(s["total"] for s in states)
            shown_bar.set_postfix_str("; ".join(f"{s['desc']} {s['done']}/{s['total']} {s['unit']}" for s in states),
                                      refresh=False)
            shown_bar.update(sum(s["done"] for s in states) - shown_bar.n)
            if finished:
                shown_bar.close()
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield lambda line: tqdm.write(line, file=sys.stdout)
    finally:
        stop.set()
        thread.join()
