"""The default store: a moto S3 server in a child process on a free loopback port."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
from pathlib import Path

from .net import SERVER_START_S, ending_with_us, free_port, stop_process, wait_for_port
from .store import SYNC_LOCAL_UPLOADS, Credentials, ObjectStore, StoreUnavailable


class EmbeddedStore(ObjectStore):
    """moto's S3 server: zero set-up, in memory, starts in under a second.

    An emulator: it speaks S3 over real HTTP (including the 412 for a second
    ``If-None-Match: *`` PUT) but accepts any credentials, its conditional PUT is not atomic
    under a race, and its timings are those of a Python process, not of a storage system.
    """

    name = "embedded"
    emulator = True
    racy_conditional_put = ("moto checks If-None-Match, then writes, with no lock: two racing writers of one key "
                            "both got 200 in about 1 of 1,000 tries")

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None

    @property
    def processes(self) -> tuple[subprocess.Popen, ...]:
        return (self._proc,) if self._proc is not None else ()

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if _moto_server() is None:
            return "embedded: moto_server is not installed; run the README's set-up (make test)"
        return None

    def s3a_options(self, sdk: str) -> dict[str, str]:
        return {} if sdk == "v1" else dict(SYNC_LOCAL_UPLOADS)

    def _start(self) -> None:
        exe = _moto_server()
        if exe is None:
            raise StoreUnavailable(self.unavailable_reason())
        port = free_port()
        self._proc = subprocess.Popen(
            ending_with_us([exe, "-H", "127.0.0.1", "-p", str(port)]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_for_port(port, SERVER_START_S, alive=lambda: self._proc.poll() is None):
            self._stop()
            raise StoreUnavailable(f"embedded: moto_server did not start on port {port}")
        atexit.register(self._stop)  # no orphaned server if the caller forgets stop()
        self.endpoint = f"http://127.0.0.1:{port}"
        # moto accepts any key pair; a generated one keeps real-looking credentials in play.
        self.credentials = Credentials.generate()

    def _stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None


def _moto_server() -> str | None:
    beside_python = Path(sys.executable).with_name("moto_server")
    return str(beside_python) if beside_python.exists() else shutil.which("moto_server")
