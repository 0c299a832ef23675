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
from pathlib import Path

from tqdm import tqdm

ENV = "CKPT_BENCH_PROGRESS"


def bar(**kwargs) -> tqdm:
    """A tqdm bar on stderr: redrawn every second on a terminal, every 30 s into a log."""
    return tqdm(mininterval=1 if sys.stderr.isatty() else 30, **kwargs)


class Recorder:
    """The child's side, with the two calls of a tqdm bar that the experiments make:
    ``update(n)`` and ``set_postfix_str(label)``. Records nothing when ``$CKPT_BENCH_PROGRESS``
    is unset (asv run by hand, or a test)."""

    def __init__(self, desc: str, total: int, unit: str) -> None:
        self.path = Path(os.environ[ENV]) if os.environ.get(ENV) else None
        self.state = {"desc": desc, "total": total, "unit": unit, "done": 0, "label": ""}

    def update(self, n: int = 1) -> None:
        self.state["done"] += n
        self._write()

    def set_postfix_str(self, label: str) -> None:
        self.state["label"] = label
        self._write()

    def _write(self) -> None:
        if self.path is not None:
            # One line per call, appended in one write: the reader takes whole lines, in order.
            with open(self.path, "a") as out:
                out.write(json.dumps(self.state) + "\n")


@contextlib.contextmanager
def shown(path: Path):
    """While the block runs, show what each ``Recorder`` writes to ``path`` as a bar on stderr."""
    stop = threading.Event()

    def follow() -> None:
        shown_bar, offset, pending = None, 0, b""
        while True:
            finished = stop.wait(0.5)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            offset += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                state = json.loads(line)
                if shown_bar is None or shown_bar.desc != state["desc"]:
                    if shown_bar is not None:
                        shown_bar.close()
                    shown_bar = bar(total=state["total"], unit=state["unit"], desc=state["desc"])
                shown_bar.set_postfix_str(state["label"], refresh=False)
                shown_bar.update(state["done"] - shown_bar.n)
            if finished:
                break
        if shown_bar is not None:
            shown_bar.close()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def shown_for(env):
    """While the block runs, ``Recorder``s of processes started with ``env`` (``os.environ``: this
    one and its children) write to a file of the block's own, ``shown`` as a bar; ``env`` loses
    the setting after it."""
    with tempfile.TemporaryDirectory(prefix="ckptbench-progress-") as tmp:
        path = Path(tmp, "progress")
        env[ENV] = str(path)
        try:
            with shown(path):
                yield
        finally:
            env.pop(ENV, None)
