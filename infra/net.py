"""What the local stores share: loopback ports and the child processes they run."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: How long a local server (moto, MinIO) may take to accept connections: a guard against a hang only,
#: since the wait ends when the port answers or the process dies. Generous: a server niced beside
#: other work on a loaded 2-core machine starts many times slower than on an idle one.
SERVER_START_S = 120


def wait_for_port(port: int, timeout: float, alive=lambda: True) -> bool:
    """True once something accepts connections on 127.0.0.1:port; False on timeout or if alive() turns false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def last_line(path: Path) -> str | None:
    """The last non-empty line a server logged to ``path``, stripped; None if it logged nothing."""
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return lines[-1].strip() if lines else None


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ending_with_us(argv: list[str]) -> list[str]:
    """``argv`` run so the kernel kills it when we die without stopping it (SIGKILL, a crash): a
    server left behind holds its port and, for Ceph's memstore, up to a GiB of RAM.

    setpriv's parent-death signal fires when the thread that started the child ends, so start
    servers from a thread that lives as long as they should (the main thread does)."""
    setpriv = shutil.which("setpriv")  # util-linux, on every Debian
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


def _stat(pid: int) -> tuple[str, list[str]] | None:
    """Process ``pid``'s /proc stat line as (comm, the fields after it, from state on), or None if
    there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()


def proc_stat(pid: int) -> tuple[str, str, int] | None:
    """``(comm, state, ppid)`` of process ``pid`` from /proc (state ``"Z"``: dead, not yet
    reaped), or None if there is no such process."""
    stat = _stat(pid)
    return None if stat is None else (stat[0], stat[1][0], int(stat[1][1]))


def proc_started(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (/proc's ``starttime``), or None if
    there is no such process: with the pid, what names one process, since the kernel reuses pids
    (a long run on a busy machine wraps them)."""
    stat = _stat(pid)
    return None if stat is None else int(stat[1][19])


def archives_mapped(pid: int) -> list[str]:
    """The class data sharing archives (``.jsa``) process ``pid`` (a JVM on this host) has mapped, read
    from ``/proc``; [] where that cannot be read (the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return []
    return sorted({line.split(maxsplit=5)[-1] for line in lines if line.endswith(".jsa")})


def live_processes(group: int | None = None, session: int | None = None) -> list[int]:
    """The live processes (not zombies) of process group ``group`` or of session ``session``, from
    /proc: what a process started with ``start_new_session`` left, including children that made
    groups of their own (asv's fork server does), which ``os.killpg`` misses."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text()
        except OSError:
            continue
        state, _, pgrp, sid = fields[fields.rindex(")") + 2 :].split()[:4]
        if state != "Z" and (int(pgrp) == group or int(sid) == session):
            out.append(int(stat.parent.name))
    return out


def command_lines() -> dict[int, str]:
    """Every process's command line, its arguments joined by spaces, as ``ps`` shows it to anyone:
    ``{pid: line}``."""
    lines = {}
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):  # the process ended while we looked
            lines[int(path.parent.name)] = path.read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return lines


def command_lines_holding(secrets) -> dict[int, str]:
    """The processes whose command line holds any of ``secrets``: ``{pid: line}`` ({} when none do,
    or when ``secrets`` is empty)."""
    secrets = [s for s in secrets if s]
    return {pid: line for pid, line in command_lines().items() if any(s in line for s in secrets)}
