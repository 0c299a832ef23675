"""MinIO: a ``minio`` binary the user has (started here), or a MinIO endpoint they run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from .net import SERVER_START_S, ending_with_us, free_port, stop_process, wait_for_port
from .store import Credentials, ObjectStore, StoreUnavailable

BINARY_ENV = "CKPT_MINIO_BIN"
ENDPOINT_ENV = "CKPT_MINIO_ENDPOINT"


class MinioStore(ObjectStore):
    """MinIO, a real S3-compatible server.

    With ``CKPT_MINIO_ENDPOINT`` set it connects to that server using the standard
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``; otherwise it starts the binary named by
    ``CKPT_MINIO_BIN`` (or ``minio`` on PATH) on a free loopback port with generated root
    credentials, passed through its environment, never its command line. Not obtainable from
    this machine's registries, so its tests skip when neither is given.
    """

    name = "minio"

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None

    @property
    def processes(self) -> tuple[subprocess.Popen, ...]:
        return (self._proc,) if self._proc is not None else ()

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if os.environ.get(ENDPOINT_ENV) or _binary():
            return None
        return (f"minio: no server binary (set {BINARY_ENV} or put `minio` on PATH) and no endpoint "
                f"(set {ENDPOINT_ENV}); MinIO is not installable from this machine's registries")

    def _start(self) -> None:
        endpoint = os.environ.get(ENDPOINT_ENV)
        if endpoint:
            self.owns_buckets = False  # a server the user runs
            self.endpoint = endpoint.rstrip("/")
            self.credentials = Credentials.from_env("minio")
            return
        exe = _binary()
        if exe is None:
            raise StoreUnavailable(self.unavailable_reason())
        port = free_port()
        self.credentials = Credentials.generate()
        self._dir = tempfile.mkdtemp(prefix="ckptbench-minio-")
        env = {**os.environ, "MINIO_ROOT_USER": self.credentials.access_key,
               "MINIO_ROOT_PASSWORD": self.credentials.secret_key}
        log_path = os.path.join(self._dir, "minio.log")
        with open(log_path, "wb") as log:  # the server keeps its own copy of the descriptor
            self._proc = subprocess.Popen(ending_with_us([exe, "server", os.path.join(self._dir, "data"), "--address",
                                                          f"127.0.0.1:{port}", "--quiet"]),
                                          env=env, stdout=log, stderr=log)
        if not wait_for_port(port, SERVER_START_S, alive=lambda: self._proc.poll() is None):
            self._stop()
            raise StoreUnavailable(f"minio: {exe} did not start on port {port}; see {log_path}")
        self.endpoint = f"http://127.0.0.1:{port}"

    def _stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _binary() -> str | None:
    return os.environ.get(BINARY_ENV) or shutil.which("minio")

