"""Open a page in headless Chromium with networking off and say what went wrong: ``check_page``.

For the tests of the pages ckptbench publishes (asv's pages, the report). Give it a page (a path,
a ``file://`` URL or an ``http://127.0.0.1`` / ``localhost`` URL) and get back a ``PageCheck``::

    with browser.Chromium() as chrome:
        page = chrome.check_page(Path("results/report/index.html"), screenshot=Path("report.png"))
    assert page.problems() == [], page.problems()

``problems()`` is [] for a clean load, else every console error (``console.error``/``assert``,
uncaught exceptions, Chromium's own error log lines), failed request (a network error or HTTP >=
400), broken image, broken local link, and a page wider than the window (a table a person would have
to scroll sideways to read; the window is 1024 pixels wide unless ``Chromium(window=...)`` says
otherwise). ``check_page`` waits for the load and until no request has run for 0.5 s, then until the
JavaScript expression ``ready`` is true (one that throws counts as false; not true within
``timeout``: a console error), runs ``action`` (JavaScript statements; one that throws: a console
error) and takes a screenshot of the window when asked.

Driven by Playwright's sync API on Debian's Chromium (``/usr/bin/chromium``; ``python -m
ckptbench.install`` installs it as root), not on a browser Playwright downloads. Each page gets a
fresh context (no cache, no cookies, service workers blocked) in a browser with a fresh profile and
networking off: Chromium sends every request but loopback to a proxy that is not there
(``--proxy-server=127.0.0.1:9``) and resolves no host name but localhost, so a page that reaches for
a CDN gets ``net::ERR_PROXY_CONNECTION_FAILED``; and any request for a URL that is not ``file://`` or
loopback counts as a failed request of its own, whether or not the block held.

Limits: requests aborted by a navigation (``net::ERR_ABORTED``) are not failures; links off this
machine are listed, never followed; a local link is checked by a HEAD request (http) or the file's
existence (file://); after ``action`` the page gets a fixed 0.5 s to show what it did.
"""

from __future__ import annotations

import shutil
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Error, sync_playwright

#: Debian's package, then whatever else is on PATH under those names.
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Headless as root on a closed network: without the background-networking flags Chromium reaches out.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"]
SETTLE_S = 0.5

_PAGE_FACTS = """() => ({
  location: location.href, title: document.title,
  images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  width: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  widest: [...document.querySelectorAll('table, pre, img, figure')].filter(
    e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(
    e => e.tagName.toLowerCase() + ': ' + (e.textContent || e.getAttribute('src') || '').trim().slice(0, 60)),
})"""


def executable() -> str | None:
    """The Chromium binary, or None."""
    return next(filter(None, map(shutil.which, CANDIDATES)), None)


class BrowserError(Exception):
    """No Chromium to start."""


@dataclass
class PageCheck:
    """What one page load showed."""

    url: str
    location: str = ""  # where the page ended up (asv sends a failed load to error.html)
    title: str = ""
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)  # "URL: reason"
    requests: list[str] = field(default_factory=list)  # every URL requested (data: URLs are not requests)
    links: list[str] = field(default_factory=list)  # every <a href> on the page, once each
    broken_images: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)  # to a local page or file that is not there
    too_wide: str | None = None  # the page is wider than the window: by how much, and what sticks out
    screenshot: Path | None = None
    value: object = None  # what ``ready`` returned last

    def problems(self) -> list[str]:
        """Everything a person would see as broken; [] for a clean load."""
        return ([f"console: {e}" for e in self.console_errors] + [f"failed request: {r}" for r in self.failed_requests]
                + [f"broken image: {i}" for i in self.broken_images] + [f"broken link: {b}" for b in self.broken_links]
                + ([f"wider than the window: {self.too_wide}"] if self.too_wide else []))


def _is_local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "file" or (parts.scheme in ("http", "https") and parts.hostname in LOOPBACK)


class Chromium:
    """Headless Chromium with networking off, as a context manager; ``check_page`` per page."""

    def __init__(self, binary: str | None = None, window: tuple[int, int] = (1024, 900)):
        self.binary = binary or executable()
        if self.binary is None:
            raise BrowserError("chromium not found (Debian: apt-get install chromium; "
                               "`python -m ckptbench.install` does it as root)")
        self.viewport = {"width": window[0], "height": window[1]}

    def __enter__(self) -> Chromium:
        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(executable_path=self.binary, args=ARGS, timeout=60_000)
        except BaseException:
            self._playwright.stop()
            raise
        self.version = self.browser.version
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.browser.close()
        finally:
            self._playwright.stop()

    def check_page(self, page: Path | str, screenshot: Path | None = None, ready: str | None = None,
                   action: str | None = None, timeout: float = 30) -> PageCheck:
        """Load ``page`` (a path, or a URL: ``path.as_uri() + "#..."`` for a fragment) in a new context."""
        check = PageCheck(url=page.resolve().as_uri() if isinstance(page, Path) else page)
        deadline = time.monotonic() + timeout
        context = self.browser.new_context(viewport=self.viewport, service_workers="block")
        try:
            tab = context.new_page()

            def on_request(request) -> None:
                check.requests.append(request.url)
                if not _is_local(request.url):
                    check.failed_requests.append(f"{request.url}: not loopback (networking is off)")

            tab.on("request", on_request)
            tab.on("requestfailed", lambda r: r.failure == "net::ERR_ABORTED"
                   or check.failed_requests.append(f"{r.url}: {r.failure}"))
            tab.on("response", lambda r: r.status < 400 or check.failed_requests.append(f"{r.url}: HTTP {r.status}"))
            tab.on("console", lambda m: m.type not in ("error", "assert")
                   or check.console_errors.append(f"{m.text} ({m.location['url']}:{m.location['lineNumber']})"))
            tab.on("pageerror", lambda e: check.console_errors.append(f"uncaught: {e.stack or e.message}"))
            guarded = f"(() => {{ try {{ return ({ready or 'true'}); }} catch (e) {{ return false; }} }})()"
            try:
                tab.goto(check.url, wait_until="networkidle", timeout=timeout * 1000)
                left = max(1.0, deadline - time.monotonic())
                check.value = tab.wait_for_function(guarded, polling=100, timeout=left * 1000).json_value()
            except Error as e:
                check.value = tab.evaluate(guarded)
                check.console_errors.append(f"not ready within {timeout} s ({ready} is {check.value!r}): "
                                            f"{e.message.splitlines()[0]}")
            if action and check.value:
                try:
                    tab.evaluate(f"() => {{ {action}\n}}")
                except Error as e:
                    check.console_errors.append(f"action {action!r}: {e.message.splitlines()[0]}")
                tab.wait_for_timeout(SETTLE_S * 1000)
            facts = tab.evaluate(_PAGE_FACTS)
            check.location, check.title, check.broken_images = facts["location"], facts["title"], facts["images"]
            (scroll, client), widest = facts["width"], facts["widest"]
            if scroll > client:
                check.too_wide = f"{scroll} px in a {client} px window" + (f" ({'; '.join(widest)})" if widest else "")
            check.links = list(dict.fromkeys(facts["links"]))
            here = urllib.parse.urlsplit(check.location)._replace(fragment="")
            for link in check.links:
                parts = urllib.parse.urlsplit(link)._replace(fragment="")
                if _is_local(link) and parts != here and (reason := self._link_broken(context, parts)):
                    check.broken_links.append(f"{link}: {reason}")
            if screenshot is not None:
                check.screenshot = screenshot
                tab.screenshot(path=screenshot)
        finally:
            context.close()
        return check

    @staticmethod
    def _link_broken(context, parts: urllib.parse.SplitResult) -> str | None:
        """Why a local link (without its fragment) is broken, or None."""
        if parts.scheme == "file":
            return None if Path(urllib.parse.unquote(parts.path)).exists() else "no such file"
        try:
            status = context.request.head(parts.geturl(), timeout=10_000).status
        except Error as e:
            return e.message.splitlines()[0]
        return f"HTTP {status}" if status >= 400 else None
