"""``MeteringProxy``: the proxy's lifecycle (a listener and a pool of worker threads), the
events and injections it keeps, the fault rules in force, and its own uncounted HEADs. Its
sessions see of it only the ``ProxyLink`` it makes for them."""

from __future__ import annotations

import contextlib
import http.client
import queue
import socket
import threading
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from ..faults import FaultRules, Injection, profile
from ..s3ops import Event
from .session import ProxyLink, Session

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


def upstream_address(upstream: str) -> tuple[str, int]:
    """``(host, port)`` of a plain ``http://host[:port]`` URL; ValueError for anything else."""
    parts = urlsplit(upstream)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"upstream must be an http://host:port URL, not {upstream!r}")
    return parts.hostname, parts.port or 80


class MeteringProxy:
    """Forwards HTTP to ``upstream`` (e.g. ``"http://127.0.0.1:9000"``) and records an
    ``Event`` per request. ``start()`` serves on a free loopback port (``endpoint``)
    from background threads; ``stop()`` closes every connection. Thread-safe.

    ``fault_profile`` (a name in ``infra.faults.PROFILES``) and ``seed`` put that profile's
    rules in force from the start; ``use_profile`` changes them later."""

    def __init__(self, upstream: str, fault_profile: str = "none", seed: int = 0) -> None:
        self.upstream = upstream
        self._upstream_addr = upstream_address(upstream)
        self.endpoint = ""
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._injections: list[Injection] = []
        self._dropped = 0  # events removed by reset(), so marks stay valid across it
        self._sessions: set[Session] = set()
        self._faults = FaultRules()
        self._link = ProxyLink(upstream, self._connect_upstream, self._faults.decide, self._record, self._injected,
                               self.probe_size)
        self._credentials: tuple[str, str, str] | None = None  # for probe_size's HEAD
        self.fault_profile, self.seed = "none", seed
        self.use_profile(fault_profile, seed)
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        # Worker threads outlive their connections: a thread started per connection adds to
        # every request against a store that closes every connection after one response, as
        # moto does (measured: see docs/findings/proxy-overhead.md).
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._handoff: queue.SimpleQueue[Session | None] = queue.SimpleQueue()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
        # Port 0: the kernel picks a free port at bind time, so nothing can take it
        # in between, and the socket listens before start() returns.
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener = listener
        self.endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        self._acceptor = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):  # already shut
            listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        listener.close()
        self._acceptor.join(5)
        with self._lock:
            sessions = list(self._sessions)
        for s in sessions:
            s.abort()
        for _ in self._workers:
            self._handoff.put(None)
        for w in self._workers:
            w.join(5)
        self._workers = []
        self._idle_workers = 0

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- events and faults -----------------------------------------------------

    def events(self) -> list[Event]:
        """A copy of every event recorded since start (or the last reset), in completion order."""
        with self._lock:
            return list(self._events)

    def mark(self) -> int:
        """A position in the event stream, for ``events_since``."""
        with self._lock:
            return self._dropped + len(self._events)

    def events_since(self, mark: int) -> list[Event]:
        """The events completed after ``mark()`` returned ``mark``."""
        with self._lock:
            return self._events[max(0, mark - self._dropped):]

    def reset(self) -> None:
        """Forget every event (and injection) so far; earlier marks stay usable."""
        with self._lock:
            self._dropped += len(self._events)
            self._events = []
            self._injections = []

    def injections(self) -> list[Injection]:
        """Every fault applied since start (or the last reset), in the order applied."""
        with self._lock:
            return list(self._injections)

    def inject(self, rule) -> None:
        """Apply ``rule`` (see ``infra.faults``) to the requests that arrive from now on, after
        the rules already in force."""
        self._faults.add(rule)

    def clear_faults(self) -> None:
        self._faults.clear()

    def use_profile(self, name: str, seed: int = 0) -> None:
        """Replace the rules in force with fault profile ``name``'s, built afresh with ``seed``."""
        rules = profile(name)(seed)
        self._faults.clear()
        for rule in rules:
            self._faults.add(rule)
        self.fault_profile, self.seed = name, seed

    def sign_probes_with(self, access_key: str, secret_key: str, region: str = "us-east-1") -> None:
        """Credentials for the proxy's own HEADs (``probe_size``); without them it sends them unsigned."""
        self._credentials = (access_key, secret_key, region)

    def probe_size(self, bucket: str, key: str) -> int | None:
        """An object's size, from a HEAD the proxy sends the store itself (not recorded as an
        event); None if the store does not say."""
        # Imported here: a proxy that never probes keeps botocore's thousands of objects out of its heap.
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials as BotoCredentials

        host, port = self._upstream_addr
        url = f"{self.upstream.rstrip('/')}/{quote(bucket)}/{quote(key, safe='/~')}"
        request = AWSRequest(method="HEAD", url=url)
        if self._credentials is not None:
            access, secret, region = self._credentials
            S3SigV4Auth(BotoCredentials(access, secret), "s3", region).add_auth(request)
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("HEAD", url[len(self.upstream.rstrip("/")):], headers=dict(request.headers.items()))
            response = conn.getresponse()
            length = response.getheader("Content-Length", "")
            return int(length) if response.status == 200 and length.isdigit() else None
        except OSError:
            return None
        finally:
            conn.close()

    def _record(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def _injected(self, injection: Injection) -> None:
        with self._lock:
            self._injections.append(injection)

    # -- serving ---------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # stop() shut the listener
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = Session(self._link, sock)
            with self._lock:
                self._sessions.add(session)
                spawn = self._idle_workers == 0
                if not spawn:
                    self._idle_workers -= 1
            if spawn:
                worker = threading.Thread(target=self._work, name="proxy-conn", daemon=True)
                self._workers.append(worker)
                worker.start()
            self._handoff.put(session)

    def _work(self) -> None:
        while (session := self._handoff.get()) is not None:
            session.serve()
            with self._lock:
                self._sessions.discard(session)
                self._idle_workers += 1

    def _connect_upstream(self) -> socket.socket:
        sock = socket.create_connection(self._upstream_addr, timeout=10)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
