"""Make asv's published pages open with no network: local copies of the scripts it loads from CDNs.

asv 0.6.6's page template (``asv/www/index.html``, copied as is by ``asv publish``) loads jQuery,
flot and three of its plugins, stupidtable, blueimp-md5 and Bootstrap (JS and CSS) from public
CDNs, each with an ``onerror`` that sends the browser to ``error.html`` ("Can not determine
continental origin of swallow"). asv has no setting to bundle them (history: asv PR #663;
``asv publish`` still special-cases a ``vendor`` folder its 0.6.6 template does not have), so on
an air-gapped cluster, a file share or a downloaded CI artifact the pages show only that error.
``offline(html_dir)``, run after ``asv publish``:

* copies pinned copies of those files from ``node_modules/`` (``npm ci`` from the committed
  ``package-lock.json``; ``install()``, called by ``ckptbench.install``, does it) to
  ``html_dir/vendor/<package>/``, with each package's ``package.json`` and licence beside them;
* rewrites every CDN ``<script>``/``<link>`` of the published HTML to its local copy, dropping
  ``integrity``/``crossorigin``, which a ``file://`` page cannot satisfy (a CORS fetch of a
  file fails); jQuery, Bootstrap (JS, CSS), flot-orderbars and blueimp-md5 are byte for byte the
  files whose hashes asv's template pins (``tests/test_pages.py`` checks that);
* adds ``vendor/ckptbench-offline.js`` right after the vendored scripts: it checks the globals
  asv's scripts use (``jQuery``, ``$.plot`` and its plugins, ``$.fn.stupidtable``, ``md5``,
  Bootstrap's ``$.fn.modal``/``tooltip``/``popover``), and sends the page to ``error.html`` as
  asv's own loader does if one is missing; and, on a ``file://`` page, where browsers refuse
  asv's XHR of its ``*.json`` files, gives jQuery a transport that loads each one's twin
  ``<file>.json.js`` (written here) by ``<script>`` instead;
* rewrites ``error.html``'s "make sure you have an active internet connection" to say which
  folder is missing.

Not the same bytes as asv names: flot 0.8.3 is its release's unminified files (the CDN serves
its own minified build of the same release), and stupidtable is 1.1.3, the only release on the
npm registry, in place of 1.0.1 (same ``$.fn.stupidtable(sortFns)`` API; 1.1.x adds settings).

When asv changes its template (a new version of a library, another CDN, another library) the
URLs in ``CDN`` no longer match: ``offline`` then raises ``NotOffline`` naming every remaining
external reference, and ``python -m ckptbench bench`` fails with it after writing its results.
Bump the version in ``package.json`` (``npm install`` rewrites the lock) and the entry in
``CDN``/``PACKAGES``, and run ``tests/test_pages.py``.

``python -m ckptbench.report.publish [HTML_DIR]`` does it to pages already published.
"""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ckptbench.config import ROOT

NODE_MODULES = ROOT / "node_modules"
VENDOR = "vendor"
SHIM = "ckptbench-offline.js"


@dataclass(frozen=True)
class Package:
    version: str
    files: dict[str, str]  # path in the npm package -> path under vendor/<package>/


#: What is copied from each npm package (versions as in package.json / package-lock.json).
PACKAGES = {
    "jquery": Package("3.3.1", {"dist/jquery.min.js": "jquery.min.js", "dist/jquery.min.map": "jquery.min.map",
                                "LICENSE.txt": "LICENSE.txt"}),
    "flot": Package("0.8.3", {f"jquery.flot{p}.js": f"jquery.flot{p}.js"
                              for p in ("", ".time", ".selection", ".categories")} | {"LICENSE.txt": "LICENSE.txt"}),
    "flot-orderbars": Package("1.0.0", {"js/jquery.flot.orderBars.js": "jquery.flot.orderBars.js",
                                        "README.md": "README.md"}),
    "stupid-table-plugin": Package("1.1.3", {"stupidtable.min.js": "stupidtable.min.js", "LICENSE": "LICENSE"}),
    "blueimp-md5": Package("2.19.0", {"js/md5.min.js": "md5.min.js", "js/md5.min.js.map": "md5.min.js.map",
                                      "LICENSE.txt": "LICENSE.txt"}),
    "bootstrap": Package("3.1.1", {"dist/js/bootstrap.min.js": "js/bootstrap.min.js",
                                   "dist/css/bootstrap.min.css": "css/bootstrap.min.css", "LICENSE": "LICENSE"}
                         | {f"dist/fonts/glyphicons-halflings-regular.{x}": f"fonts/glyphicons-halflings-regular.{x}"
                            for x in ("eot", "svg", "ttf", "woff")}),
}

#: The path part of each URL asv 0.6.6's template loads (host left out) -> its copy under vendor/.
CDN = {
    "/jquery-3.3.1.min.js": "jquery/jquery.min.js",
    "/ajax/libs/flot/0.8.3/jquery.flot.min.js": "flot/jquery.flot.js",
    "/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": "flot/jquery.flot.time.js",
    "/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": "flot/jquery.flot.selection.js",
    "/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": "flot/jquery.flot.categories.js",
    "/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": "flot-orderbars/jquery.flot.orderBars.js",
    "/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": "stupid-table-plugin/stupidtable.min.js",
    "/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": "blueimp-md5/md5.min.js",
    "/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": "bootstrap/js/bootstrap.min.js",
    "/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": "bootstrap/css/bootstrap.min.css",
}

#: Loaded after the vendored scripts (see the module docstring).
SHIM_JS = r"""/* Written by ckptbench.report.publish: asv's pages with no network. */
(function () {
  'use strict';
  var $ = window.jQuery;
  var missing = [];
  function need(name, present) { if (!present) { missing.push(name); } }
  need('jQuery', $);
  if ($) {
    need('$.plot (flot)', $.plot);
    var plugins = $.plot ? $.map($.plot.plugins || [], function (p) { return p.name; }) : [];
    $.each(['time', 'selection', 'categories', 'orderBars'], function (i, name) {
      need('flot plugin ' + name, $.inArray(name, plugins) >= 0);
    });
    need('$.fn.stupidtable', $.fn.stupidtable);
    need('Bootstrap ($.fn.modal, tooltip, popover)', $.fn.modal && $.fn.tooltip && $.fn.popover);
  }
  need('md5 (blueimp-md5)', typeof window.md5 === 'function');
  if (missing.length) {
    if (window.console) { console.error('asv pages: missing ' + missing.join(', ')); }
    window.location = 'error.html';
    return;
  }
  /* asv's benchmark names (module.Class.track_...) are long: its tables wrap them rather than
     widen the page past the window. */
  var style = document.createElement('style');
  style.textContent = '#regressions-body td, #summarylist-body td { overflow-wrap: anywhere; }';
  document.head.appendChild(style);
  if (window.location.protocol !== 'file:') { return; }
  /* file://: no XHR; load <name>.json's twin <name>.json.js, which calls ckptbenchJson(name, data). */
  var waiting = {};
  window.ckptbenchJson = function (name, data) {
    var callbacks = waiting[name] || [];
    delete waiting[name];
    $.each(callbacks, function (i, done) { done(data); });
  };
  $.ajaxTransport('json', function (options) {
    var url = options.url.split('?')[0].split('#')[0];
    var name = decodeURIComponent(url);
    var script;
    return {
      send: function (headers, complete) {
        var settled = false;
        function finish(status, text, responses) {
          if (settled) { return; }
          settled = true;
          if (script && script.parentNode) { script.parentNode.removeChild(script); }
          complete(status, text, responses);
        }
        (waiting[name] = waiting[name] || []).push(function (data) {
          finish(200, 'success', {json: data});
        });
        script = document.createElement('script');
        script.src = url + '.js';
        script.onerror = function () { finish(404, 'error'); };
        document.head.appendChild(script);
      },
      abort: function () {
        if (script && script.parentNode) { script.parentNode.removeChild(script); }
      }
    };
  });
})();
"""

ERROR_ADVICE = ("Make sure you have an active internet connection and enable 3rd-party scripts\n"
                "      in your browser the first time you load airspeed velocity.")
OFFLINE_ADVICE = ("These pages load their scripts from the <code>vendor/</code> folder beside this page\n"
                  "      (written by ckptbench, no network needed): copy that folder along with the pages.")


class NotOffline(Exception):
    """The published pages still need the network (or the vendored files are missing)."""


def installed() -> list[str]:
    """What is wrong with node_modules/ (missing or other versions than PACKAGES): [] when all is right."""
    wrong = []
    for name, package in PACKAGES.items():
        meta = NODE_MODULES / name / "package.json"
        version = json.loads(meta.read_text()).get("version") if meta.is_file() else None
        if version != package.version:
            wrong.append(f"{name} {version or 'missing'} (want {package.version})")
    return wrong


def install() -> None:
    """``npm ci`` from the committed lock when node_modules/ lacks a pinned package; quick when all are there."""
    if not installed():
        return
    if shutil.which("npm") is None:
        print("asv pages: npm not found; published pages will need the network (install Node.js and npm)")
        return
    print("asv pages: npm ci (" + ", ".join(f"{n} {p.version}" for n, p in PACKAGES.items()) + ")", flush=True)
    subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    if wrong := installed():
        raise NotOffline(f"npm ci left node_modules without {', '.join(wrong)}: package.json and "
                         "ckptbench/report/publish.py PACKAGES disagree")


class _Tags(html.parser.HTMLParser):
    """Start tags with their source text and attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, self.get_starttag_text() or "", dict(attrs)))

    handle_startendtag = handle_starttag


def tags(text: str) -> list[tuple[str, str, dict[str, str | None]]]:
    """The start tags of an HTML page: (name, source text, attributes)."""
    parser = _Tags()
    parser.feed(text)
    return parser.tags


EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def external_resources(text: str) -> list[str]:
    """What ``text`` (an HTML page) loads from another host: script src, link href (but rel=alternate
    feeds), img/iframe/source src. Links a person follows (``<a href>``) are not loads."""
    found = []
    for tag, _source, attrs in tags(text):
        if tag in ("script", "img", "iframe", "source", "embed", "audio", "video"):
            url = attrs.get("src")
        elif tag == "link" and "alternate" not in (attrs.get("rel") or "").split():
            url = attrs.get("href")
        else:
            continue
        if url and EXTERNAL.match(url):
            found.append(url)
    return found


def _local_tag(source: str, attrs: dict[str, str | None], local: str) -> str:
    """``source`` (a start tag) with its URL pointing at ``local`` and the CORS/SRI attributes gone."""
    attr = "src" if "src" in attrs else "href"
    out = source.replace(attrs[attr] or "", local, 1)
    for name in ("integrity", "crossorigin", "referrerpolicy"):
        out = re.sub(rf'\s+{name}(?:="[^"]*"|=\'[^\']*\'|=[^\s>]+)?(?=[\s/>])', "", out)
    return out


def localize(text: str, prefix: str = VENDOR) -> str:
    """``text`` with every CDN script/stylesheet of ``CDN`` loaded from ``prefix/`` instead, and the
    shim after the last of them. Leaves unknown external references in place for ``offline`` to report."""
    last = None
    for tag, source, attrs in tags(text):
        url = attrs.get("src") if tag == "script" else attrs.get("href") if tag == "link" else None
        if not url or not EXTERNAL.match(url):
            continue
        path = urllib.parse.urlsplit(url).path
        if path in CDN:
            new = _local_tag(source, attrs, f"{prefix}/{CDN[path]}")
            text = text.replace(source, new, 1)
            if tag == "script":
                last = new
    if last is not None and SHIM not in text:
        start = text.index(last)
        end = text.index("</script>", start) + len("</script>")
        text = (text[:end] + f'\n    <script src="{prefix}/{SHIM}" onerror="js_load_failure()"></script>'
                + text[end:])
    return text


def _copy_vendor(html_dir: Path) -> None:
    if wrong := installed():
        raise NotOffline(f"node_modules lacks {', '.join(wrong)}: run `python -m ckptbench.install` "
                         "(npm ci from package-lock.json), then `python -m ckptbench.report.publish " f"{html_dir}`")
    vendor = html_dir / VENDOR
    for name, package in PACKAGES.items():
        for src, dst in {**package.files, "package.json": "package.json"}.items():
            target = vendor / name / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(NODE_MODULES / name / src, target)
    (vendor / SHIM).write_text(SHIM_JS)


def _json_twins(html_dir: Path) -> int:
    """Each ``*.json`` of the pages gets ``*.json.js``: ``ckptbenchJson("<path>", <json>);``."""
    count = 0
    for path in sorted(html_dir.rglob("*.json")):
        rel = path.relative_to(html_dir)
        if rel.parts[0] == VENDOR:
            continue
        name = json.dumps(rel.as_posix())
        path.with_name(path.name + ".js").write_text(f"ckptbenchJson({name}, {path.read_text().strip()});\n")
        count += 1
    return count


def offline(html_dir: Path) -> list[Path]:
    """Make the pages ``asv publish`` wrote in ``html_dir`` open with no network; the pages rewritten.

    Raises NotOffline (after doing what it can) if a page still loads anything from another host."""
    html_dir = Path(html_dir)
    pages = sorted(html_dir.glob("*.html"))
    if not (html_dir / "index.html").is_file():
        raise NotOffline(f"{html_dir} has no index.html: not pages asv published")
    _copy_vendor(html_dir)
    rewritten = []
    for page in pages:
        text = page.read_text()
        new = localize(text)
        if page.name == "error.html":
            new = new.replace(ERROR_ADVICE, OFFLINE_ADVICE)
        if new != text:
            page.write_text(new)
            rewritten.append(page)
    _json_twins(html_dir)
    remaining = {page.name: external_resources(page.read_text()) for page in pages}
    remaining = {name: urls for name, urls in remaining.items() if urls}
    if remaining:
        listing = "; ".join(f"{name}: {', '.join(urls)}" for name, urls in remaining.items())
        raise NotOffline(f"asv's pages in {html_dir} still load from the network ({listing}): asv's template "
                         "changed; add these to ckptbench/report/publish.py CDN/PACKAGES and package.json")
    missing = [str(p) for p in _local_references(html_dir, pages) if not p.is_file()]
    if missing:
        raise NotOffline(f"asv's pages in {html_dir} reference missing files: {', '.join(missing)}")
    return rewritten


#: asv's navigation bar, where the link to the report goes (the first list in it).
_NAVBAR = '<ul class="nav navbar-nav navbar-left">'
REPORT_LINK = ('<li><p class="navbar-text"><a id="ckptbench-report" href="../report/index.html" '
               'class="navbar-link">ckptbench report</a></p></li>')


def link_report(html_dir: Path) -> None:
    """Put a link to the report (``../report/index.html``, which links back) in asv's navigation
    bar, once; the report must exist, or the link would be broken."""
    index = Path(html_dir) / "index.html"
    if not (index.parent.parent / "report" / "index.html").is_file():
        raise NotOffline(f"no report beside {html_dir} to link to")
    text = index.read_text()
    if REPORT_LINK in text:
        return
    if _NAVBAR not in text:
        raise NotOffline(f"{index} has no navigation bar to link the report from: asv's template changed")
    index.write_text(text.replace(_NAVBAR, _NAVBAR + REPORT_LINK, 1))


def _local_references(html_dir: Path, pages: list[Path]) -> list[Path]:
    out = []
    for page in pages:
        for tag, _source, attrs in tags(page.read_text()):
            url = attrs.get("src") if tag in ("script", "img") else attrs.get("href") if tag == "link" else None
            if url and not EXTERNAL.match(url) and not url.startswith(("#", "data:")):
                out.append(html_dir / url.split("?")[0].split("#")[0])
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    html_dir = Path(args[0]) if args else ROOT / "results" / "html"
    try:
        offline(html_dir)
    except NotOffline as e:
        print(f"ckptbench.report.publish: error: {e}", file=sys.stderr)
        return 2
    print(f"{html_dir}: opens with no network (scripts in {html_dir / VENDOR})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
