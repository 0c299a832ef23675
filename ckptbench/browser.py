"""Open a page in headless Chromium with no network and say what went wrong: ``check_page``.

For the tests of the published pages (``tests/test_pages.py``) and of any other HTML ckptbench
writes: give it a page (a path or a URL, loopback only) and get back its console errors,
uncaught exceptions, failed requests (any URL off this machine fails by construction), broken
images, broken local links, and a screenshot::

    from ckptbench import browser
    with browser.Chromium() as chrome:
        page = chrome.check_page(Path("results/report.html"), screenshot=Path("/tmp/report.png"))
    assert page.problems() == [], page.problems()

Chromium is Debian's (``/usr/bin/chromium``; ``ckptbench.install`` installs it as root),
headless, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no
websocket client), with a fresh profile and networking off: every request that is not for
loopback goes to a proxy that is not there (``--proxy-server=127.0.0.1:9``) and every host name
but localhost resolves to nothing (``--host-resolver-rules``), so a page that reaches for a CDN
shows it as a failed request instead of loading it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: Debian's package, then whatever else is on PATH under those names.
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")

OFFLINE_FLAGS = (
    "--proxy-server=127.0.0.1:9",  # the discard port: nothing listens, so every request but to loopback
    # (which Chromium never sends through a proxy) fails at once
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
)
#: What the machine notes say Chromium needs headless here (root, no network, no first-run noise).
FLAGS = (
    "--headless", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
)


_EXEC_ON_3_AND_4 = """import os, sys
r, w = int(sys.argv[1]), int(sys.argv[2])
os.dup2(r, 3); os.dup2(w, 4); os.close(r); os.close(w)
os.execv(sys.argv[3], sys.argv[3:])
"""


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to a number >= ``lowest`` (the original closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
    os.close(fd)
    return moved


def executable() -> str | None:
    """The Chromium binary, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(Exception):
    """Chromium did not start, or did not answer."""


@dataclass
class PageCheck:
    """What one page load showed."""

    url: str
    location: str = ""  # where the page ended up (asv sends a failed load to error.html)
    title: str = ""
    console_errors: list[str] = field(default_factory=list)  # console.error/assert, exceptions, error logs
    console_warnings: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)  # "URL: reason" (network error or HTTP >= 400)
    requests: list[str] = field(default_factory=list)  # every URL requested
    links: list[str] = field(default_factory=list)  # every <a href> on the page, once each
    broken_images: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)  # <a href> to a local page or file that is not there
    external_links: list[str] = field(default_factory=list)  # <a href> off this machine: not followed, not loaded
    screenshot: Path | None = None
    value: object = None  # what the ``ready`` expression last returned

    def problems(self) -> list[str]:
        """Everything a person would see as broken; [] for a clean load."""
        out = [f"console: {e}" for e in self.console_errors]
        out += [f"failed request: {r}" for r in self.failed_requests]
        out += [f"broken image: {i}" for i in self.broken_images]
        out += [f"broken link: {link}" for link in self.broken_links]
        return out


_PAGE_FACTS = """(() => {
  const images = Array.from(document.images)
    .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src || i.outerHTML);
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  return {location: location.href, title: document.title, images, links};
})()"""


def _guarded(expression: str) -> str:
    """``expression`` as JavaScript that is false where it throws (say, before jQuery is there)."""
    return f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return false; }} }})()"


def _is_local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "file" or (parts.scheme in ("http", "https")
                                      and parts.hostname in ("127.0.0.1", "localhost", "::1"))


def _link_broken(url: str) -> str | None:
    """Why a local link is broken, or None. Same-page anchors (``#...``) are fine by definition."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = Path(urllib.parse.unquote(parts.path))
        return None if path.exists() else "no such file"
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(fragment="")), method="HEAD")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return None if response.status < 400 else f"HTTP {response.status}"
    except OSError as e:
        return str(e)


class Chromium:
    """A headless Chromium with networking off, as a context manager; ``check_page`` per page."""

    def __init__(self, binary: str | None = None, window: tuple[int, int] = (1280, 900), offline: bool = True):
        self.binary = binary or executable()
        if self.binary is None:
            raise BrowserError("chromium not found (Debian: apt-get install chromium; "
                               "`python -m ckptbench.install` does it as root)")
        self.window, self.offline = window, offline
        self._next = 0
        self._replies: dict[int, queue.Queue] = {}
        self._events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()

    # -- process and protocol -------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        self._profile = tempfile.TemporaryDirectory(prefix="ckptbench-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Above 4, so that putting one on 3 or 4 cannot overwrite the other.
        to_chrome_r, from_chrome_w = (_above(fd, 10) for fd in (to_chrome_r, from_chrome_w))
        args = [self.binary, *FLAGS, *(OFFLINE_FLAGS if self.offline else ()),
                f"--user-data-dir={self._profile.name}", f"--window-size={self.window[0]},{self.window[1]}",
                "--remote-debugging-pipe", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        # The pipe protocol wants the commands on fd 3 and the replies on fd 4: a tiny Python puts
        # them there and execs Chromium (no preexec_fn, which is unsafe beside threads).
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, "-c", _EXEC_ON_3_AND_4, str(to_chrome_r),
                                         str(from_chrome_w), *args], pass_fds=(to_chrome_r, from_chrome_w),
                                        stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.version = self.send("Browser.getVersion", timeout=60)["product"]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.process.poll() is None:
                with contextlib.suppress(BrowserError):
                    self.send("Browser.close", timeout=5)
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            with contextlib.suppress(OSError):
                os.close(self._to_chrome)
            self._log.close()
            self._profile.cleanup()

    def log(self) -> str:
        """What Chromium printed (for a failure message)."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        waiting = self._replies.get(message["id"])
                    if waiting is not None:
                        waiting.put(message)
                else:
                    self._events.put(message)
        os.close(self._from_chrome)
        self._events.put(None)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        """One DevTools command; its result, or BrowserError with the protocol's error."""
        with self._lock:
            self._next += 1
            ident = self._next
            reply: queue.Queue = queue.Queue()
            self._replies[ident] = reply
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
            deadline = time.monotonic() + timeout
            while True:
                try:
                    answer = reply.get(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
                    break
                except queue.Empty:
                    if self.process.poll() is not None or time.monotonic() >= deadline:
                        raise
        except (OSError, queue.Empty):
            raise BrowserError(f"chromium did not answer {method} within {timeout} s; it printed:\n"
                               f"{self.log()}") from None
        finally:
            with self._lock:
                self._replies.pop(ident, None)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def _drain(self, session: str, until: float, sink) -> None:
        """Hand this session's events to ``sink`` until the monotonic time ``until``."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            try:
                event = self._events.get(timeout=left)
            except queue.Empty:
                return
            if event is None:
                raise BrowserError(f"chromium exited; it printed:\n{self.log()}")
            if event.get("sessionId") == session:
                sink(event)

    # -- pages ----------------------------------------------------------------------------------
    def evaluate(self, session: str, expression: str, timeout: float = 30):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            why = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"evaluating {expression[:80]!r}: {why}")
        return result.get("result", {}).get("value")

    def check_page(self, page: Path | str, screenshot: Path | None = None, ready: str | None = None,
                   action: str | None = None, timeout: float = 30, settle: float = 0.5) -> PageCheck:
        """Load ``page`` (a file path, or a URL: ``path.as_uri() + "#..."`` for a fragment) in a new tab
        and report what went wrong.

        Waits for the load event, then until no request has been in flight for ``settle`` seconds
        and the JavaScript expression ``ready`` (if given; an exception counts as false) is truthy,
        at most ``timeout`` seconds (then reports it as a console error). Then runs ``action``
        (JavaScript statements: a click, say; one that throws is reported as a console error), if
        given and the page is ready, and lets the page settle again. Then looks
        for broken images and links, and takes a screenshot of the window when asked."""
        url = page.resolve().as_uri() if isinstance(page, Path) else page
        check = PageCheck(url=url)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        in_flight: dict[str, tuple[str, str]] = {}  # requestId -> (URL, loaderId)
        last_activity = [time.monotonic()]
        loaded = [False]

        def on_event(event: dict) -> None:
            method, params = event["method"], event.get("params", {})
            if method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if url.startswith("data:"):
                    url = url[:40] + "..."  # an inline image: its whole base64 is no help in a message
                in_flight[params["requestId"]] = (url, params.get("loaderId", ""))
                check.requests.append(url)
            elif method == "Network.responseReceived":
                status = params["response"].get("status", 0)
                if status >= 400:
                    check.failed_requests.append(f"{params['response']['url']}: HTTP {status}")
            elif method == "Network.loadingFailed":
                where = in_flight.get(params["requestId"], ("?",))[0]
                reason = params.get("errorText") or ("blocked: " + params.get("blockedReason", "?"))
                if not params.get("canceled") or reason != "net::ERR_ABORTED":
                    check.failed_requests.append(f"{where}: {reason}")
            elif method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                if params["type"] in ("error", "assert"):
                    check.console_errors.append(text)
                elif params["type"] == "warning":
                    check.console_warnings.append(text)
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text", "")
                check.console_errors.append(f"uncaught: {text} ({details.get('url', '')}:{details.get('lineNumber')})")
            elif method == "Log.entryAdded":
                entry = params["entry"]
                line = f"{entry.get('source')}: {entry.get('text')} ({entry.get('url', '')})"
                if entry["level"] == "error":
                    check.console_errors.append(line)
                elif entry["level"] == "warning":
                    check.console_warnings.append(line)
            elif method == "Page.loadEventFired":
                loaded[0] = True
            elif method == "Page.frameNavigated" and "parentId" not in params["frame"]:
                # A new document in the tab: what the old one still had in flight will never finish.
                current = params["frame"]["loaderId"]
                for ident, (_url, loader) in list(in_flight.items()):
                    if loader != current:
                        del in_flight[ident]
            if method in ("Network.loadingFinished", "Network.loadingFailed"):
                in_flight.pop(params["requestId"], None)
            if method.startswith("Network."):
                last_activity[0] = time.monotonic()

        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable", session=session)
            self.send("Network.setCacheDisabled", {"cacheDisabled": True}, session)
            self.send("Page.navigate", {"url": url}, session)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                self._drain(session, min(deadline, time.monotonic() + 0.1), on_event)
                quiet = not in_flight and time.monotonic() - last_activity[0] >= settle
                if loaded[0] and quiet:
                    check.value = self.evaluate(session, _guarded(ready)) if ready else True
                    if check.value:
                        break
            else:
                pending = sorted(u for u, _ in in_flight.values())
                check.console_errors.append(f"not ready within {timeout} s (in flight: {pending}"
                                            + (f"; {ready} is {check.value!r})" if ready else ")"))
            if action and check.value:
                try:
                    self.evaluate(session, f"(() => {{ {action}\n}})()")
                except BrowserError as e:
                    check.console_errors.append(f"action {action!r}: {e}")
                last_activity[0] = time.monotonic()
                while time.monotonic() < deadline + settle and (
                        in_flight or time.monotonic() - last_activity[0] < settle):
                    self._drain(session, time.monotonic() + 0.1, on_event)
            facts = self.evaluate(session, _PAGE_FACTS)
            check.location, check.title = facts["location"], facts["title"]
            check.broken_images = facts["images"]
            check.links = list(dict.fromkeys(facts["links"]))
            for link in check.links:
                parts = urllib.parse.urlsplit(link)
                if not _is_local(link):
                    check.external_links.append(link)
                elif parts._replace(fragment="") == urllib.parse.urlsplit(check.location)._replace(fragment=""):
                    continue  # an anchor or an asv route (#/regressions) on this page
                elif reason := _link_broken(link):
                    check.broken_links.append(f"{link}: {reason}")
            if screenshot is not None:
                shot = self.send("Page.captureScreenshot", {"format": "png"}, session)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                check.screenshot = screenshot
            self._drain(session, time.monotonic() + 0.05, on_event)
        finally:
            self.send("Target.closeTarget", {"targetId": target})
        return check
