"""asv's published pages open with no network, in a real browser.

The pages are published here by ``asv publish`` from a recorded ``bench --size smallest`` run
(``tests/data/asv-smallest``: asv's results file, laid on this repository's last two commits, the
second 3x the first so that the regressions view has rows), then made offline by
``ckptbench.report.publish.offline``. Debian's headless Chromium (``tests/browser.py``, Playwright, networking off)
opens the benchmark grid, one benchmark's graph, the benchmark list and the regressions view,
over a loopback HTTP server and as ``file://``, and must see no console error, no failed request,
no broken image or local link, and asv's own content drawn (flot canvases, table rows). The same
check run on the pages as asv publishes them fails (``test_the_check_fails_on_asv_pages_as_published``).

Chromium missing: skipped with the reason (``python -m ckptbench.install`` installs it as root);
under CI=true that fails instead. Screenshots: in pytest's temporary directory, or in
``$CKPTBENCH_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import browser  # tests/browser.py
import pandas as pd
import pytest

from ckptbench import config, decide
from ckptbench.record import disk
from ckptbench.report import page, provenance, publish
from helpers import fixed_levers_record, fixed_streaming_record, skip_unless_ci

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "data" / "asv-smallest"
MACHINE = "fixture-embedded"
GRAPH = "commit_latency.CommitLatency.track_wal_commit_p50"
ON_ERROR_PAGE = "location.pathname.endsWith('/error.html')"
#: view -> (URL fragment, JavaScript true once asv has drawn it; true at once on asv's error page).
VIEWS = {
    "grid": ("", "$('#summarygrid-display').is(':visible') && $('#summarygrid-display canvas.flot-base').length > 0"),
    "graph": (f"#{GRAPH}", "$('#graph-display').is(':visible') && $('#main-graph canvas.flot-base').length > 0"
                           " && $('#graphdisplay-navigation-params .btn').length > 0"),
    "list": ("#/summarylist", "$('#summarylist-body table tbody tr').length > 0"),
    "regressions": ("#/regressions", "$('#regressions-display').is(':visible')"
                                     " && $('#regressions-body table tbody tr').length > 0"),
}
SORTED = ("const th = $('{table} thead th').eq({column}); th.click();"
          " if (!th.data('sort-dir')) throw new Error('stupidtable did not sort');")
#: What each view does once drawn, throwing if it does not work: sort a table by a column
#: (stupidtable), show a tooltip (Bootstrap). Nothing on asv's error page.
ACTIONS = {view: f"if ({ON_ERROR_PAGE}) return; {action}" for view, action in {
    "list": SORTED.format(table="#summarylist-body table", column=1),
    "regressions": SORTED.format(table="#regressions-body table", column=3),
    "graph": "$('#graphdisplay-state-params .btn').first().trigger('mouseenter');"
             " if (!$('.tooltip').length) throw new Error('no Bootstrap tooltip');",
}.items()}
#: Vendored files that are byte for byte what asv's template pins (its integrity= hashes); the
#: others are flot 0.8.3's unminified release files and stupidtable 1.1.3 (see ckptbench.report.publish).
SAME_BYTES_AS_ASV_PINS = {
    "jquery/jquery.min.js", "flot-orderbars/jquery.flot.orderBars.js", "blueimp-md5/md5.min.js",
    "bootstrap/js/bootstrap.min.js", "bootstrap/css/bootstrap.min.css",
}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def _asv_template() -> Path:
    import asv

    return Path(asv.__file__).resolve().parent / "www" / "index.html"


def publish_fixture(dest: Path) -> Path:
    """``asv publish`` of the recorded run into ``dest/html``, as asv writes it (no offline step)."""
    from asv import util

    commits = list(reversed(_git("rev-list", "--first-parent", "-n", "2", "HEAD").split()))
    assert len(commits) == 2, "the fixture lays its results on the last two commits: a shallow clone has one"
    results = dest / "asv"
    (results / MACHINE).mkdir(parents=True)
    shutil.copyfile(FIXTURE / "benchmarks.json", results / "benchmarks.json")
    (results / MACHINE / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    recorded = json.loads((FIXTURE / "result.json").read_text())
    for age, commit in enumerate(reversed(commits)):
        result = copy.deepcopy(recorded)
        result.update(commit_hash=commit, date=recorded["date"] - age * 86_400_000)
        result["params"]["machine"] = MACHINE
        if age == 0:  # the newer commit: everything 3x, a regression to show
            for value in result["results"].values():
                value[0] = [v * 3 if isinstance(v, (int, float)) else v for v in value[0]]
        (results / MACHINE / f"{commit[:8]}-{result['env_name']}.json").write_text(json.dumps(result))
    conf = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(ROOT), branches=["HEAD"], benchmark_dir=str(ROOT / "benchmarks"),
                results_dir=str(results), html_dir=str(dest / "html"))
    (dest / "asv.conf.json").write_text(json.dumps(conf))
    subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(dest / "asv.conf.json")],
                   cwd=dest, check=True, capture_output=True)
    return dest / "html"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """{"asv": pages as asv published them, "offline": the same after ckptbench.report.publish.offline}."""
    root = tmp_path_factory.mktemp("pages")
    published = publish_fixture(root / "published")
    shutil.copytree(published, root / "asv")
    shutil.copytree(published, root / "offline")
    if publish.installed():
        skip_unless_ci(f"node_modules lacks {', '.join(publish.installed())}: python -m ckptbench.install runs npm ci")
    publish.offline(root / "offline")
    return {"asv": root / "asv", "offline": root / "offline"}


@pytest.fixture(scope="module")
def server(pages):
    """A loopback HTTP server over the directory holding both sets of pages."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(pages["asv"].parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
        httpd.shutdown()


@pytest.fixture(scope="module")
def chrome():
    if browser.executable() is None:
        skip_unless_ci("chromium not installed (python -m ckptbench.install installs Debian's as root)")
    with browser.Chromium() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("CKPTBENCH_SCREENSHOTS")
    return Path(where) if where else tmp_path_factory.mktemp("screenshots")


def open_view(chrome, pages, server, which: str, scheme: str, view: str, shots: Path) -> browser.PageCheck:
    fragment, drawn = VIEWS[view]
    if scheme == "http":
        url = f"{server}/{pages[which].name}/index.html{fragment}"
    else:
        url = (pages[which] / "index.html").as_uri() + fragment
    return chrome.check_page(url, screenshot=shots / f"{which}-{scheme}-{view}.png",
                             ready=f"{ON_ERROR_PAGE} || ({drawn})", action=ACTIONS.get(view), timeout=30)


def assert_opens_offline(page: browser.PageCheck) -> None:
    """The check itself: what a person opening the page with no network would call broken."""
    assert "error.html" not in page.location, f"asv's error page: {page.problems()} (screenshot {page.screenshot})"
    assert page.problems() == [], f"screenshot {page.screenshot}"
    assert page.value is True, f"not drawn: {page.value!r} (screenshot {page.screenshot})"
    assert page.title == "airspeed velocity of an unladen ckptbench"
    assert all(urllib.parse.urlsplit(u).scheme in ("file", "data") or u.startswith("http://127.0.0.1:")
               for u in page.requests), page.requests


# -- without a browser ------------------------------------------------------------------------------

def test_every_cdn_url_of_asvs_template_has_a_local_copy():
    """asv's template loads exactly the URLs of publish.CDN: a new asv that changes one fails here first."""
    urls = publish.external_resources(_asv_template().read_text())
    assert {urllib.parse.urlsplit(u).path for u in urls} == set(publish.CDN)


def test_vendored_files_are_the_bytes_asv_pins():
    if publish.installed():
        skip_unless_ci(f"node_modules lacks {', '.join(publish.installed())}: python -m ckptbench.install runs npm ci")
    files = {f"{name}/{dst}": publish.NODE_MODULES / name / src
             for name, package in publish.PACKAGES.items() for src, dst in package.files.items()}
    same, pinned = set(), set()
    for _tag, _source, attrs in publish.tags(_asv_template().read_text()):
        url, integrity = attrs.get("src") or attrs.get("href"), attrs.get("integrity")
        if url and integrity:
            local = publish.CDN[urllib.parse.urlsplit(url).path]
            algorithm, digest = integrity.split("-", 1)
            pinned.add(local)
            if base64.b64encode(hashlib.new(algorithm, files[local].read_bytes()).digest()).decode() == digest:
                same.add(local)
    assert pinned == set(publish.CDN.values())
    assert same == SAME_BYTES_AS_ASV_PINS


def test_offline_leaves_no_network_reference_and_is_idempotent(pages):
    assert publish.external_resources((pages["asv"] / "index.html").read_text())
    for html in pages["offline"].glob("*.html"):
        assert publish.external_resources(html.read_text()) == [], html
    before = {p: p.read_bytes() for p in pages["offline"].rglob("*") if p.is_file()}
    assert publish.offline(pages["offline"]) == []
    assert {p: p.read_bytes() for p in pages["offline"].rglob("*") if p.is_file()} == before


def test_offline_fails_loudly_when_asvs_template_loads_something_new(tmp_path):
    (tmp_path / "index.html").write_text(_asv_template().read_text().replace(
        "</head>", '<script src="https://cdn.example.org/new-lib@2.0.0/lib.min.js"></script>\n</head>'))
    if publish.installed():
        skip_unless_ci(f"node_modules lacks {', '.join(publish.installed())}: python -m ckptbench.install runs npm ci")
    with pytest.raises(publish.NotOffline, match=r"index.html: https://cdn.example.org/new-lib@2.0.0/lib.min.js"):
        publish.offline(tmp_path)
    # What it knew it rewrote all the same.
    assert "vendor/jquery/jquery.min.js" in (tmp_path / "index.html").read_text()


# -- in Chromium --------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["http", "file"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_pages_open_offline(chrome, pages, server, shots, scheme, view):
    assert_opens_offline(open_view(chrome, pages, server, "offline", scheme, view, shots))


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_the_check_fails_on_asv_pages_as_published(chrome, pages, server, shots, scheme):
    page = open_view(chrome, pages, server, "asv", scheme, "grid", shots)
    with pytest.raises(AssertionError, match="asv's error page"):
        assert_opens_offline(page)
    assert any("net::ERR_PROXY_CONNECTION_FAILED" in failed for failed in page.failed_requests), page.failed_requests


def test_a_vendored_script_that_defines_nothing_sends_to_asvs_error_page(chrome, pages, tmp_path, shots):
    """The loaded-but-empty case asv's onerror= cannot see: ckptbench-offline.js checks the globals."""
    broken = tmp_path / "broken"
    shutil.copytree(pages["offline"], broken)
    (broken / "vendor" / "stupid-table-plugin" / "stupidtable.min.js").write_text("/* emptied */\n")
    page = chrome.check_page(broken / "index.html", screenshot=shots / "emptied-stupidtable.png",
                             ready=ON_ERROR_PAGE, timeout=15)
    assert page.location.endswith("/error.html"), page
    assert any("missing $.fn.stupidtable" in error for error in page.console_errors), page.console_errors
    assert "copy that folder along with the pages" in (broken / "error.html").read_text()


# -- the report, and the links between it and asv's pages -------------------------------------------

@pytest.fixture(scope="module")
def bench_output(pages, tmp_path_factory) -> Path:
    """A results directory as `python -m ckptbench bench` leaves it: asv's pages made offline, a
    record, the report, and the link from asv's pages to the report."""
    out = tmp_path_factory.mktemp("bench-output")
    shutil.copytree(pages["offline"], out / "html")
    disk.write(fixed_streaming_record(), disk.directory(out / "raw", "ceph", "streaming"))
    page.write(out)
    publish.link_report(out / "html")
    return out


def test_the_report_opens_offline_and_links_to_asvs_pages(chrome, bench_output, shots):
    page = chrome.check_page(bench_output / "report" / "index.html", screenshot=shots / "report.png",
                             ready="document.querySelectorAll('.decision').length === 2 && "
                                   "[...document.images].every(i => i.complete && i.naturalWidth > 0)")
    assert page.problems() == [], f"screenshot {page.screenshot}"
    assert page.value is True and page.title == "ckptbench report", page.screenshot
    assert any(u.endswith("/html/index.html") for u in page.links), page.links


def test_asvs_pages_link_to_the_report(chrome, bench_output, shots):
    page = chrome.check_page(bench_output / "html" / "index.html", screenshot=shots / "asv-with-report-link.png",
                             ready=f"{ON_ERROR_PAGE} || document.getElementById('ckptbench-report') !== null")
    assert_opens_offline(page)
    assert any(u.endswith("/report/index.html") for u in page.links), page.links


def test_linking_the_report_needs_a_report(pages, tmp_path):
    shutil.copytree(pages["offline"], tmp_path / "html")
    with pytest.raises(publish.NotOffline, match="no report beside"):
        publish.link_report(tmp_path / "html")


# -- one answer per job -----------------------------------------------------------------------------

#: A levers record's walCommit per strategy where conditional is the fastest; the fixed streaming
#: record's fastest is manifest.
LEVERS_WAL_MS = {"rename": 40.0, "conditional": 5.0, "manifest": 30.0}


def test_a_job_two_records_measured_has_one_answer_in_every_section_and_the_summary(tmp_path):
    streaming, levers = fixed_streaming_record(), fixed_levers_record(LEVERS_WAL_MS)
    job = config.Shape().name
    # Each record alone, as the streaming and the configurations sections used to decide: two answers.
    assert decide.decide(streaming, "stateful").recommended == "manifest"
    assert decide.decide(levers, job).recommended == "conditional"
    for record in (streaming, levers):
        disk.write(record, disk.directory(tmp_path / "raw", "ceph", record.environment["experiment"]))
    text = re.sub(r"<[^>]+>", "", page.write(tmp_path)[0].read_text())
    answer = decide.per_job([streaming, levers])[job].recommended
    # The streaming section's verdict, the configurations section's and the summary's line.
    assert re.findall(rf"^\s*{job} on ceph:\s+run (.+?)(?::|$)", text, re.M) == [answer] * 3, text
    assert "stateful on ceph" not in text
    assert f"The job {job}, measured here as stateful:" in text


def test_the_report_shows_the_probed_stores_side_by_side(tmp_path):
    """Two stores' probes (the sample's Ceph record, and a copy of it as a store whose conditional
    PUT failed) make one matrix: the failed check and the strategies it rules out show per store."""
    raw = tmp_path / "raw"
    shutil.copytree(SAMPLE / "raw" / "ceph-store", raw / "ceph-store")
    broken = raw / "seaweedfs-store"
    shutil.copytree(SAMPLE / "raw" / "ceph-store", broken)
    environment = json.loads((broken / "environment.json").read_text())
    (broken / "environment.json").write_text(json.dumps({**environment, "store": "seaweedfs"}))
    checks = pd.read_parquet(broken / "capabilities.parquet")
    checks.loc[checks.capability == "conditional_put", ["ok", "detail"]] = [False, "the store ignores the header"]
    checks.to_parquet(broken / "capabilities.parquet")
    text = page.write(tmp_path)[0].read_text()
    matrix = text.split("Every store side by side (the probe)", 1)[1]
    rows = {cells[0]: cells[1:] for cells in (re.findall(r"<td[^>]*>(.*?)</td>", row)
                                               for row in re.findall(r"<tr>(.*?)</tr>", matrix, re.S)) if cells}
    assert rows["conditional_put"] == ["ok", "FAIL"] and rows["conditional"] == ["yes", "NO"], rows
    assert rows["rename"] == ["yes", "yes"], rows


# -- the report -------------------------------------------------------------------------------------

SAMPLE = ROOT / "docs" / "sample-report"
#: What differs between two renderings of one record: when it was written, and the PNGs' bytes.
UNSTABLE = re.compile(r"Written [^ ]+ by|data:image/png;base64,[A-Za-z0-9+/=]+")


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory) -> Path:
    """The committed sample's record, rendered afresh by this tree's ``report``."""
    out = tmp_path_factory.mktemp("sample")
    shutil.copytree(SAMPLE / "raw", out / "raw")
    page.write(out)
    return out / "report" / "index.html"


def test_the_decision_rules_read_as_text_with_names_as_code(sample_report):
    rules = sample_report.read_text().split('id="rule"', 1)[1]
    assert "``" not in rules
    assert "<code>TIE</code>" in rules and "<code>ckpt_impls.STRATEGIES</code>" in rules


def test_the_report_says_at_its_top_what_ran_the_checkpoints(sample_report):
    """Each record's Spark, S3A connector and AWS SDK (``provenance.runtime_said``), once each."""
    top = sample_report.read_text().split("<h2", 1)[0]
    assert "Checkpoints ran on Spark 4.3.0, hadoop-aws 3.3.1 on AWS SDK v1 1.11.901." in top


def test_the_strategies_an_older_s3a_cannot_run_are_named_where_it_is():
    """Spark 3.5's hadoop-aws 3.3.4 has no conditional create: s3a-conditional is not measured on it,
    and every line that names the runtime says so."""
    env = {"versions": {"spark": "3.5.9", "hadoop_aws": "3.3.4", "aws_sdk": "v1 1.12.262"},
           "not_runnable": {"s3a-conditional": "3.4.2"}}
    assert provenance.runtime_said(env) == ("Spark 3.5.9, hadoop-aws 3.3.4 on AWS SDK v1 1.12.262 (not measured on "
                                            "it: s3a-conditional, which needs hadoop-aws 3.4.2+)")
    assert provenance.runtime_said({**env, "not_runnable": {}}).endswith("1.12.262")


def test_the_committed_sample_report_is_what_report_makes_of_its_record(sample_report):
    """docs/sample-report/report is regenerated with `python -m ckptbench report --results docs/sample-report`."""
    committed = (SAMPLE / "report" / "index.html").read_text()
    assert UNSTABLE.sub("", sample_report.read_text()) == UNSTABLE.sub("", committed)


def test_the_report_opens_offline_and_fits_the_window(chrome, sample_report, shots):
    check = chrome.check_page(sample_report, screenshot=shots / "report.png",
                              ready="document.querySelectorAll('.decision').length >= 3")
    assert check.problems() == [], f"screenshot {check.screenshot}"
    assert check.value is True


def test_the_check_sees_a_table_wider_than_the_window(chrome, tmp_path):
    wide = tmp_path / "wide.html"
    row = "".join(f"<td>{'x' * 30}-{i}</td>" for i in range(40))
    wide.write_text(f"<!doctype html><html><body><table><tr>{row}</tr></table></body></html>")
    check = chrome.check_page(wide)
    [problem] = check.problems()
    assert problem.startswith("wider than the window: ") and "in a 1024 px window (table: xxx" in problem
