"""A Spark standalone cluster on this machine: a master and workers, each a JVM of its own, started
from pyspark's own distribution (``bin/spark-class``), as the local stores are started.

Executors are then JVMs of their own too (each worker launches one for an application), so an
application on it runs as on a real cluster: tasks, and with them the state store's files, are
written by executors, which reach the driver only over the network. Everything listens on the
loopback, so a metering proxy on the loopback still sees every executor's requests.

Sized for a small machine: each worker offers one core and ``WORKER_MEMORY`` to one executor of
``EXECUTOR_MEMORY`` heap; the daemons themselves get ``DAEMON_MEMORY``. Logs (the daemons' and each
executor's ``stdout``/``stderr`` under its worker's work directory) stay in a temporary directory
until ``stop()``, which removes it with the executors' copies of the application's jars.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .net import command_lines, ending_with_us, free_port, last_line, proc_stat, stop_process, wait_for_port
from .store import StoreUnavailable

DAEMON_MEMORY = "256m"
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "1g"  # at most WORKER_MEMORY, or no executor fits on a worker
#: Seconds a daemon may take to listen, and the workers may go without progress while registering
#: with the master: generous, as niced on a loaded 2-core machine a daemon can take minutes to start.
START_TIMEOUT = 300
#: What a worker logs once the master has accepted it (Spark 3.5 and 4's ``Worker``).
REGISTERED = "Successfully registered with master"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkCluster:
    """A master on ``master_url`` and ``workers`` workers of one core each. Use it as a context
    manager, or ``start()``/``stop()``; ``spark_conf()`` is what an application on it needs."""

    def __init__(self, workers: int = 2, env: dict[str, str] | None = None) -> None:
        self.workers = workers
        #: Added to the daemons' environment, which their executors inherit: how a node's AWS SDK
        #: default chain gets keys (``AWS_ACCESS_KEY_ID``...) with none on a command line.
        self.env = dict(env or {})
        self.master_url = ""
        self.directory: Path | None = None
        self._master: subprocess.Popen | None = None
        self._workers: list[subprocess.Popen] = []

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """One line saying why no cluster can start here, or None."""
        if shutil.which("java") is None:
            return "spark cluster: no java on PATH; install a JDK 17"
        if not (_spark_home() / "bin" / "spark-class").is_file():
            return f"spark cluster: {_spark_home()} has no bin/spark-class; reinstall pyspark"
        return None

    @property
    def processes(self) -> tuple[subprocess.Popen, ...]:
        """The daemons (master, then workers) this cluster runs, ours to stop; none once stopped."""
        return tuple(p for p in (self._master, *self._workers) if p is not None)

    def spark_conf(self) -> dict[str, str]:
        """Spark settings for an application on this cluster: the driver on the loopback (where the
        executors reach it) and executors that fit the workers."""
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": EXECUTOR_MEMORY, "spark.executor.cores": "1",
                "spark.cores.max": str(self.workers)}

    def start(self) -> SparkCluster:
        reason = self.unavailable_reason()
        if reason:
            raise StoreUnavailable(reason)
        self.directory = Path(tempfile.mkdtemp(prefix="ckptbench-spark-cluster-"))
        atexit.register(self.stop)  # no orphaned JVMs if the caller forgets stop()
        try:
            port = free_port()
            self.master_url = f"spark://127.0.0.1:{port}"
            self._master = self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                        "--port", str(port), "--webui-port", str(free_port()))
            if not wait_for_port(port, START_TIMEOUT, alive=lambda: self._master.poll() is None):
                raise StoreUnavailable(f"spark cluster: the master did not listen on port {port}; "
                                       f"{self._log_tail('master')}")
            for i in range(self.workers):
                work = self.directory / f"worker-{i}"
                work.mkdir()
                self._workers.append(self._daemon(
                    f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                    "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "1",
                    "--memory", WORKER_MEMORY, "--work-dir", str(work)))
            self._await_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def _daemon(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        """``spark-class main_class args`` (which execs the JVM, so the child is the JVM itself),
        its output in ``<directory>/<name>.log``."""
        home = _spark_home()
        # The environment passes on to the daemons and their executors: the AWS SDKs' default
        # chains read keys there, never from a command line.
        env = {**os.environ, **self.env, "SPARK_HOME": str(home),
               "SPARK_DAEMON_MEMORY": DAEMON_MEMORY, "SPARK_LOG_DIR": str(self.directory),
               "SPARK_NO_DAEMONIZE": "1"}
        with open(self.directory / f"{name}.log", "wb") as log:
            return subprocess.Popen(ending_with_us([str(home / "bin" / "spark-class"), main_class, *args]),
                                    cwd=self.directory, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT)

    def _await_workers(self) -> None:
        """Wait until every worker has registered with the master, as its log says (``REGISTERED``:
        the master's web UI, the other witness, can be too starved to answer for minutes while the
        cluster works). The wait ends ``START_TIMEOUT``
        seconds after the last sign of progress (a daemon's log grew, another worker registered),
        not after a fixed time: niced beside other work, daemons starting can be starved of CPU
        for minutes while each still makes progress, and a daemon that is stuck shows none."""
        began = last_progress = time.monotonic()
        progress: tuple = ()
        alive, dead = 0, []
        while time.monotonic() < last_progress + START_TIMEOUT:
            dead = [(name, p.returncode) for name, p in zip(self._names(), self.processes, strict=True)
                    if p.poll() is not None]
            if dead:
                break
            alive = sum(REGISTERED in self._log(f"worker-{i}") for i in range(len(self._workers)))
            if alive >= self.workers:
                return
            now = (alive, *(self._log_size(name) for name in self._names()))
            if now != progress:
                progress, last_progress = now, time.monotonic()
            time.sleep(0.3)
        why = (", ".join(f"{name} exited {code}" for name, code in dead) if dead
               else f"no progress in {START_TIMEOUT} s, {time.monotonic() - began:.0f} s in all")
        tails = "; ".join(self._log_tail(name) for name in self._names())
        raise StoreUnavailable(f"spark cluster: {alive} of {self.workers} workers registered with the master "
                               f"({why}); {tails}")

    def _log_size(self, name: str) -> int:
        path = self.directory / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    def _log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _names(self) -> list[str]:
        """The daemons' names, in the order of ``processes``; each names its log."""
        return ["master", *(f"worker-{i}" for i in range(len(self._workers)))]

    def jvm_command_lines(self) -> dict[str, dict[int, str]]:
        """The command lines of this cluster's JVMs, by role and pid: ``master``, ``worker`` and
        ``executor`` (a worker's child running an executor: those of the applications running now)."""
        lines = command_lines()
        workers = {p.pid for p in self._workers}
        executors = {pid: line for pid, line in lines.items()
                     if "CoarseGrainedExecutorBackend" in line and (proc_stat(pid) or ("", "", 0))[2] in workers}
        return {"master": {p.pid: lines[p.pid] for p in self.processes[:1] if p.pid in lines},
                "worker": {pid: lines[pid] for pid in workers if pid in lines}, "executor": executors}

    def _log_tail(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return f"{name}: {last_line(path) or 'no output'} (log: {path})"

    def stop(self) -> None:
        """Stop the workers (each stops its executors), then the master, and remove the directory."""
        for proc in reversed(self.processes):  # workers first: a worker outliving its master retries for minutes
            stop_process(proc, timeout=20)
        self._master, self._workers = None, []
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def describe(self) -> str:
        return f"Spark standalone cluster at {self.master_url} ({self.workers} workers of 1 core)"

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

