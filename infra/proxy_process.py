"""A ``MeteringProxy`` in a child process of its own, driven from the parent like the in-process one.

Why a process: in the driver's Python the proxy shared one interpreter lock with boto3, py4j and
the benchmark's own bookkeeping, so a request could wait for the lock on its way through, and the
proxy's figures (its overhead, the store's floor) moved with whatever the driver did. In a child
it waits for nothing but the store.

``ProxyProcess(upstream, fault_profile, seed).start()`` runs ``python -m infra.proxy_process`` with
one end of a socket pair; the parent calls ``mark``, ``events``, ``events_since``, ``reset``,
``injections``, ``inject``, ``clear_faults``, ``use_profile`` and ``sign_probes_with`` over it
(pickled calls and results, one at a time; credentials go this way, never on a command line).
The child stops when told to, or when the parent goes away (its end of the pair closes), so an
interrupted run leaves no proxy behind. It ignores SIGINT for the same reason: Ctrl-C goes to the
parent, which stops it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from .faults import Injection, profile
from .proxy import MeteringProxy, upstream_address
from .s3ops import Event

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

_CALLS = frozenset({"mark", "events", "events_since", "reset", "injections", "inject", "clear_faults", "use_profile",
                    "sign_probes_with"})
_ROOT = Path(__file__).resolve().parent.parent  # so the child imports this checkout's infra


class ProxyProcess:
    """The interface of ``MeteringProxy`` (``start``/``stop``, ``endpoint`` and the event and
    fault calls), served by a ``MeteringProxy`` in a child process. Thread-safe."""

    def __init__(self, upstream: str, fault_profile: str = "none", seed: int = 0) -> None:
        upstream_address(upstream)  # a bad upstream or profile fails here, in the caller, not in the child
        profile(fault_profile)
        self.upstream = upstream
        self.fault_profile, self.seed = fault_profile, seed
        self.endpoint = ""
        self._conn: Connection | None = None
        self._child: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> Self:
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
        with theirs:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "infra.proxy_process", self.upstream, str(theirs.fileno()),
                 self.fault_profile, str(self.seed)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        self._conn = Connection(ours.detach())
        try:
            self.endpoint = self._conn.recv()  # sent once the proxy listens
        except (OSError, EOFError):
            self.stop()
            status = self._child.returncode
            raise RuntimeError(f"the metering proxy process could not start (exit status {status})") from None
        return self

    def stop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            with self._lock:
                conn.send(("stop", ()))
                conn.recv()
        except (OSError, EOFError):
            pass  # already gone
        finally:
            conn.close()
            try:
                self._child.wait(10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _call(self, name: str, *args):
        if self._conn is None:
            raise RuntimeError("the metering proxy is not running")
        try:
            with self._lock:
                self._conn.send((name, args))
                ok, value = self._conn.recv()
        except (OSError, EOFError):
            raise RuntimeError(f"the metering proxy process (pid {self._child.pid}) exited with "
                               f"status {self._child.poll()}") from None
        if not ok:
            raise value
        return value

    def mark(self) -> int:
        return self._call("mark")

    def events(self) -> list[Event]:
        return self._call("events")

    def events_since(self, mark: int) -> list[Event]:
        return self._call("events_since", mark)

    def reset(self) -> None:
        self._call("reset")

    def injections(self) -> list[Injection]:
        return self._call("injections")

    def inject(self, rule) -> None:
        self._call("inject", rule)

    def clear_faults(self) -> None:
        self._call("clear_faults")

    def use_profile(self, name: str, seed: int = 0) -> None:
        profile(name)
        self._call("use_profile", name, seed)
        self.fault_profile, self.seed = name, seed

    def sign_probes_with(self, access_key: str, secret_key: str, region: str = "us-east-1") -> None:
        self._call("sign_probes_with", access_key, secret_key, region)


def main(upstream: str, fd: int, fault_profile: str, seed: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    with MeteringProxy(upstream, fault_profile, seed) as proxy:
        conn.send(proxy.endpoint)
        while True:
            try:
                name, args = conn.recv()
            except (OSError, EOFError):
                return  # the parent is gone
            if name == "stop":
                break
            try:
                if name not in _CALLS:
                    raise ValueError(f"not a metering proxy call: {name}")
                conn.send((True, getattr(proxy, name)(*args)))
            except Exception as e:
                conn.send((False, e))
    conn.send((True, None))  # stopped: every connection closed


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
