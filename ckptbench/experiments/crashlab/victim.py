"""A streaming query's driver in a process of its own, seen from the crash lab, which kills it with
SIGKILL and starts it again: the victim of each crash cycle (``ckptbench.harness.query_process`` runs
inside it)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ckptbench.config import ROOT
from ckptbench.harness import jvm_archive
from ckptbench.harness.query_process import Config
from infra.net import ending_with_us, live_processes, proc_stat

# -- drivers ---------------------------------------------------------------------------------


def driver_submit_opts() -> str:
    """The ``SPARK_SUBMIT_OPTS`` every driver starts with: this process's, with the class archive's
    options (``jvm_archive.with_archive``) where it names none."""
    return jvm_archive.with_archive(os.environ.get("SPARK_SUBMIT_OPTS"))


class DriverGone(RuntimeError):
    """A driver ended (or timed out) before the event waited for."""


class Driver:
    """A ``ckptbench.harness.query_process`` child in a process group of its own (so a SIGKILL to the group takes
    its JVM too), reached through its stdin and stdout. Its stderr (Spark's log) goes to a file. Its
    JVM starts from the drivers' class archive (``harness.jvm_archive``).

    The group stays in the lab's session: where Linux schedules by session (autogroup), a session
    of its own would give each driver as much CPU as everything else, and a nice value set on the
    lab would not reach its drivers."""

    def __init__(self, config: Config, log: Path) -> None:
        self.config, self.log = config, log
        # Spark's scratch space (its copies of the jars: 185 MiB a driver) and the JVM's temp files
        # (the native libraries snappy and lz4 unpack, Spark's artifact directory) in a directory
        # of the driver's own: a killed JVM never removes them, so ``kill`` does.
        self.local_dir = Path(tempfile.mkdtemp(prefix="spark-local-", dir=log.parent))
        tmpdir = f"-Djava.io.tmpdir={self.local_dir}"
        # The class archive's options resolved here, not in the child: two drivers starting together
        # would otherwise both look for it (and, missing, wait for one to make it).
        submit_opts = " ".join(filter(None, [driver_submit_opts(), tmpdir]))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               "SPARK_LOCAL_DIRS": str(self.local_dir), "SPARK_SUBMIT_OPTS": submit_opts}
        self.spawned = time.time()
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(ending_with_us([sys.executable, "-m", "ckptbench.harness.query_process"]),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                         process_group=0, env=env)
        self.proc.stdin.write(config.to_json() + "\n")  # the keys travel here, never in argv
        self.proc.stdin.flush()
        self.events: list[dict] = []
        self._queue: queue.SimpleQueue[dict] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.events.append(event)
            self._queue.put(event)
        self._queue.put({"event": "exit", "t": time.time()})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def first(self, name: str) -> dict | None:
        return next((e for e in self.events if e["event"] == name), None)

    def wait(self, name: str, timeout: float) -> dict:
        """The next event ``name``; ``DriverGone`` (saying why) if the driver fails, ends or takes
        longer than ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DriverGone(f"no {name} within {timeout:.0f}s") from None
            if event["event"] == name:
                return event
            if event["event"] == "failed":
                raise DriverGone(event["error"])
            if event["event"] == "exit":
                raise DriverGone(f"the driver exited (status {self.proc.wait()}) before {name}: {self.stderr_tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def failure(self) -> str | None:
        event = self.first("failed")
        return event["error"] if event else None

    def stderr_tail(self, lines: int = 1) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        errors = [line for line in text if "Error" in line or "Exception" in line] or text
        return " | ".join(errors[-lines:])[:300]

    def processes(self) -> list[int]:
        """The live processes of the driver's group: itself and its JVM (and whatever they started)."""
        return live_processes(group=self.proc.pid)

    def kill(self) -> float:
        """SIGKILL to the whole process group, then wait until the driver and its JVM are gone;
        returns when the signal was sent."""
        jvm = (self.first("ready") or {}).get("jvm_pid")
        t = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 30
        while jvm and (stat := proc_stat(jvm)) is not None and stat[1] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        shutil.rmtree(self.local_dir, ignore_errors=True)
        return t

    def go(self) -> None:
        """Start the query of a driver started with ``hold``; nothing if it is gone (its end is
        seen by ``wait`` as ``DriverGone``)."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()

    def ask_to_stop(self) -> None:
        """``stop`` on stdin, then stdin closed; returns at once."""
        if self.alive():
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()

    def stop(self, timeout: float = 120) -> None:
        """Ask for a clean stop (``stop`` on stdin); kill the group if it takes longer than ``timeout``."""
        if self.alive():
            self.ask_to_stop()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self.kill()
