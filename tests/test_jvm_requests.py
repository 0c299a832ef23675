"""S3 requests counted inside Spark's JVMs agree with the metering proxy's count, request for request.

The cross-check runs the stateful workload through each strategy to each store behind the
metering proxy (``querylab.QueryLab``, as the suite runs it) and requires both sources to have seen, in
every batch (warm-up included) and between batches, the same requests: operation, checkpoint
area, key, status and payload bytes (``jvm_requests.disagreements``). No operation is exempt.
Two allowances, each for a precise reason and bounded (``jvm_requests.match``):

- The proxy's clock starts a request when its head arrives, after the JVM began the attempt, so
  one begun in a batch's last instants can fall just after that batch's window by the proxy's
  clock (seen: the rename's last DELETE of a batch, on a loaded machine). Such a request agrees
  if the proxy saw it start within the JVM's attempt; it can only move from a batch to "between
  batches" or from there into the next batch, never farther.
- An attempt the JVM saw end with no response (status 0) may or may not have reached the store,
  so the proxy may have it with the store's status, or not at all.

What keeps them comparable at a query's end: ``QueryLab.run`` cuts both sources at a moment no request
was in flight in any of the application's JVMs after the query stopped (``JvmRequests.settle``; off
local mode the executors vouch for it in their shipments), so an upload still finishing after
``stop()``, or an executor's maintenance LIST, counts in both or in neither.

A run whose JVM counting is switched off after its first measured batch shows the check failing.
The rest needs no Spark: the JVM's operation rule against the proxy's on every combination that
decides one, the drained text's parsing, and one source per figure in the results model.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
import uuid

import pandas as pd
import pytest

import ckpt_impls
from ckpt_impls import build, jars
from ckptbench import config, metrics
from ckptbench.harness import jvm_requests, querylab
from ckptbench.record import disk, results
from infra.s3ops import Event, classify

WARMUP, BATCHES, KEYS = 1, 3, 5
CROSS_CHECK_STORES = ("embedded", "ceph")


# -- without Spark ------------------------------------------------------------------------------

METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS")
#: Every query parameter the proxy's rule looks at, one it does not know, and a listing's.
PARAMS = ("uploadId", "partNumber", "uploads", "delete", "prefix", "list-type", "acl", "location")


@pytest.mark.spark
def test_the_jvm_names_each_request_as_the_proxy_does():
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    build.build()
    cases, lines = [], []
    for method, has_bucket, has_key, copy in itertools.product(METHODS, (True, False), (True, False), (True, False)):
        for n in range(len(PARAMS) + 1):
            for params in itertools.combinations(PARAMS, n):
                path = "/" + ("b" if has_bucket else "") + ("/k" if has_bucket and has_key else "")
                headers = {"x-amz-copy-source": "/b/src"} if copy else {}
                cases.append(((method, path, params, copy), classify(method, path, "&".join(f"{p}=" for p in params),
                                                                    headers)))
                lines.append("\t".join([method, str(int(has_bucket)), str(int(has_bucket and has_key)),
                                        ",".join(params), str(int(copy))]))
    out = subprocess.run(["java", "-cp", str(jars.MANAGERS_JAR), "ckptbench.metering.S3Ops"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout.split()
    assert len(out) == len(cases)
    differ = [(case, proxy, jvm) for (case, proxy), jvm in zip(cases, out, strict=True) if proxy != jvm]
    assert not differ, differ[:10]
    assert {op for _, op in cases} == {"GET", "HEAD", "LIST", "PUT", "COPY", "DELETE", "BULK_DELETE", "MPU_INIT",
                                       "MPU_PART", "MPU_COMPLETE", "MPU_ABORT", "BUCKET", "OTHER"}


def test_drained_records_become_proxy_events():
    text = ("1800000000123456\t2500\tPUT\tPUT\t200\t17\t0\tb\tp/checkpoint/offsets/3\tdriver\n"
            "1800000000000000\t1000\tGET\tLIST\t200\t0\t-1\tb\tp/a\\tb\\\\c\\nd/state/\t3\n")
    first, second = jvm_requests.parse(text)  # in completion order: the LIST ended first
    assert isinstance(first, Event)
    assert (first.start, first.duration, first.op, first.area, first.bucket, first.key, first.status, first.bytes_in,
            first.bytes_out, first.origin) == (1_800_000_000.0, pytest.approx(0.001, abs=1e-6), "LIST", "state", "b",
                                               "p/a\tb\\c\nd/state/", 200, 0, -1, "3")
    assert (second.start, second.op, second.area, second.bytes_in) == (pytest.approx(1_800_000_000.123456), "PUT",
                                                                        "offsets", 17)
    assert jvm_requests.parse("") == []


def _event(start: float, op: str, key: str) -> Event:
    return Event(start, start + 0.002, "PUT", op, "offsets", "b", key, 200, 10, 0)


@pytest.fixture
def both_sources() -> results.Results:
    """One run counted by both sources (the JVM saw one retried PUT the proxy saw once), one by the
    JVM alone."""
    recorder = results.Recorder()
    progress = [{"batchId": b, "timestamp": f"2027-01-15T08:00:0{b}.000Z", "numInputRows": 1,
                 "durationMs": {"walCommit": 5.0, "triggerExecution": 500.0}} for b in (0, 1, 2)]
    t0 = results.batch_window(progress[0])[0]
    both = recorder.add_run("direct", "stateful", 10, "p")
    jvm_only = recorder.add_run("conditional", "stateful", 10, "q")
    for run in (both, jvm_only):
        recorder.add_batches(run, "warmup", progress[:1])
        recorder.add_batches(run, "measured", progress[1:])
    proxy = [_event(t0 + b + 0.1, "PUT", f"p/offsets/{b}") for b in (0, 1, 2)]
    recorder.add_requests(both, proxy, progress)
    recorder.add_requests(both, [*proxy, _event(t0 + 1.2, "PUT", "p/offsets/1")], progress, source="jvm")
    recorder.add_requests(jvm_only, proxy[1:], progress, source="jvm")
    return recorder.results({"plan": {"keys": [10]}})


def test_a_figure_counts_one_source_never_both(both_sources):
    run = both_sources.run("direct", "stateful")
    assert run.sources == ["proxy", "jvm"] and run.request_source == "proxy"
    assert metrics.requests_per_batch(run) == 1.0  # the proxy's; summing both would say 2.5
    assert metrics.requests_per_batch(both_sources.run("direct", "stateful", source="jvm")) == 1.5
    alone = both_sources.run("conditional", "stateful")
    assert alone.sources == ["jvm"] and metrics.requests_per_batch(alone) == 1.0
    differ = jvm_requests.disagreements(run)
    assert differ[["batch_id", "op", "key", "proxy", "jvm"]].values.tolist() == [[1, "PUT", "p/offsets/1", 0, 1]]
    exact = jvm_requests.disagreements(run, exact=True)
    assert exact[["batch_id", "op", "key", "proxy", "jvm"]].values.tolist() == [[1, "PUT", "p/offsets/1", 1, 2]]
    with pytest.raises(ValueError, match="source must be one of proxy, jvm"):
        results.Recorder().add_requests(0, [], [], source="both")


def _sources(proxy_statuses: list[int], jvm_statuses: list[int]) -> results.Run:
    """A run whose one batch has LISTs of one prefix with these statuses, as each source saw them."""
    recorder = results.Recorder()
    progress = [{"batchId": 0, "timestamp": "2027-01-15T08:00:00.000Z", "durationMs": {"triggerExecution": 900.0}}]
    t0 = results.batch_window(progress[0])[0]
    run = recorder.add_run("rename", "stateful", 10, "p")
    recorder.add_batches(run, "measured", progress)
    for source, statuses in (("proxy", proxy_statuses), ("jvm", jvm_statuses)):
        events = [Event(t0 + 0.1, t0 + 0.2, "GET", "LIST", "offsets", "b", "p/offsets/", s, 0, 0) for s in statuses]
        recorder.add_requests(run, events, progress, source=source)
    return recorder.results({}).run("rename", "stateful", 10)


@pytest.mark.parametrize(("proxy", "jvm", "agree"), [
    ([200, 200], [200, 0], True),  # the unanswered attempt reached the store, which answered
    ([200], [0], True),
    ([0], [0], True),  # reached the store, no answer came back
    ([], [0], True),  # never reached the store
    ([0], [], True),  # the client went away before its JVM recorded the attempt (a task interrupted)
    ([200, 0], [200, 200], False),  # an unanswered proxy record does not stand for an answered attempt
    ([200, 200, 200], [200, 0], False),  # one unanswered attempt cannot explain two more requests
    ([200], [200, 200], False),
    ([404], [200, 0], False),  # an answered status the proxy never saw
    ([200, 200], [200], False),
])
def test_an_attempt_the_jvm_saw_unanswered_is_matched_as_a_bound(proxy, jvm, agree):
    run = _sources(proxy, jvm)
    assert jvm_requests.disagreements(run).empty == agree
    assert jvm_requests.disagreements(run, exact=True).empty == (sorted(proxy) == sorted(jvm))
    if agree:  # then the totals differ by the unanswered records the other source has no pair for
        assert (len(jvm) - sum(jvm_requests.unseen_by_proxy(run).values())
                == len(proxy) - sum(jvm_requests.unanswered_only_in_proxy(run).values()))


def test_unseen_attempts_are_the_unanswered_ones_the_proxy_never_saw():
    assert jvm_requests.unseen_by_proxy(_sources([], [0, 0])) == {"LIST": 2}
    assert jvm_requests.unseen_by_proxy(_sources([200], [0, 0])) == {"LIST": 1}
    assert jvm_requests.unseen_by_proxy(_sources([200], [200, 200])) == {}  # answered: a disagreement instead


def test_unanswered_proxy_records_no_attempt_pairs_with_are_the_proxys_alone():
    assert jvm_requests.unanswered_only_in_proxy(_sources([0], [])) == {"LIST": 1}
    assert jvm_requests.unanswered_only_in_proxy(_sources([0, 0], [0])) == {"LIST": 1}
    assert jvm_requests.unanswered_only_in_proxy(_sources([0], [0])) == {}  # the JVM's unanswered attempt
    assert jvm_requests.unanswered_only_in_proxy(_sources([200], [200])) == {}


def test_a_request_the_proxy_saw_start_after_its_batch_ended_still_agrees():
    """Begun by the JVM in batch 0's last millisecond, its head reached the proxy 3 ms later: the
    proxy files it between batches. Both saw it; ``moved`` says so. One the proxy saw start after
    the JVM's attempt had ended is another request."""
    recorder = results.Recorder()
    progress = [{"batchId": 0, "timestamp": "2027-01-15T08:00:00.000Z", "durationMs": {"triggerExecution": 500.0}}]
    end = results.batch_window(progress[0])[1]
    run_id = recorder.add_run("rename", "stateful", 10, "p")
    recorder.add_batches(run_id, "measured", progress)
    jvm = Event(end - 0.0005, end + 0.008, "DELETE", "DELETE", "commits", "b", "p/commits/.0.tmp", 204, 0, 0)
    late = Event(end + 0.0025, end + 0.006, "DELETE", "DELETE", "commits", "b", "p/commits/.0.tmp", 204, 0, 0)
    recorder.add_requests(run_id, [jvm], progress, source="jvm")
    recorder.add_requests(run_id, [late], progress)
    run = recorder.results({}).run("rename", "stateful", 10)
    assert jvm_requests.disagreements(run).empty
    assert not jvm_requests.disagreements(run, exact=True).empty
    assert jvm_requests.moved(run)[["jvm_batch", "proxy_batch"]].values.tolist() == [[0, None]]
    assert jvm_requests.moved(run).gap_ms.iloc[0] == pytest.approx(3.0, abs=1e-3)
    other = recorder.results({})
    other.tables["requests"].loc[other.requests.source == "proxy", "start"] = end + 0.02  # after the attempt
    assert not jvm_requests.disagreements(other.run("rename", "stateful", 10)).empty


def test_a_record_of_schema_1_reads_as_the_proxys(both_sources, tmp_path):
    directory = disk.write(both_sources, tmp_path / "old")
    frame = both_sources.requests
    frame[frame.source == "proxy"].drop(columns="source").to_parquet(directory / "requests.parquet", index=False)
    (directory / "environment.json").write_text('{"schema_version": 1, "plan": {"keys": [10]}}')
    back = disk.read(directory)
    assert set(back.requests.source) == {"proxy"}
    assert metrics.requests_per_batch(back.run("direct", "stateful")) == 1.0


# -- with Spark, on real servers ----------------------------------------------------------------

def test_our_handler_is_global_in_the_sdk_beside_the_bundle(spark):
    """The SDK of the S3A jars (v1's handler chain, v2's interceptor chain) finds our jar's list
    although its own bundle jar is on the classpath too."""
    jvm = spark._jvm
    if jars.aws_sdk() == "v1":
        handlers = jvm.com.amazonaws.handlers.HandlerChainFactory().getGlobalHandlers()
    else:
        handlers = jvm.software.amazon.awssdk.core.interceptor.ClasspathInterceptorChainFactory() \
            .getGlobalInterceptors()
    assert [h.getClass().getName() for h in handlers] == ["ckptbench.metering.S3RequestMeter"]
    assert jvm_requests.of(spark).enabled


def test_a_cut_waits_for_every_live_executor_to_vouch_that_it_was_idle(spark):
    """``S3RequestLog.executorsIdleAt``, given shipments as executors send them (report line, then
    records): not known until a report taken after the cut arrives; no when an executor was busy
    at it (still in flight at its report, or an attempt ended after the cut); yes when each live
    executor was idle; an executor silent for longer than ``liveMillis`` is not waited for."""
    log = spark._jvm.ckptbench.metering.S3RequestLog
    cut = int(time.time() * 1e6)

    def ship(origin: str, at: int, idle: bool, last_end: int) -> None:
        log.received(f"#{origin}\t{at}\t{int(idle)}\t{last_end}\n")

    origins = [f"test-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    ship(origins[0], cut - 100, True, cut - 500)
    ship(origins[1], cut + 100, True, cut - 500)
    assert log.executorsIdleAt(cut, 60_000) == 0  # the first one's report came before the cut
    ship(origins[0], cut + 200, False, cut - 500)
    assert log.executorsIdleAt(cut, 60_000) == -1  # in flight at its report: maybe at the cut too
    ship(origins[0], cut + 300, True, cut + 250)
    assert log.executorsIdleAt(cut, 60_000) == -1  # an attempt ended after the cut
    assert log.executorsIdleAt(cut + 260, 60_000) == 0  # a later cut: the second one has not reported since
    ship(origins[0], cut + 400, True, cut - 500)
    assert log.executorsIdleAt(cut, 60_000) == 1
    time.sleep(0.05)
    assert log.executorsIdleAt(cut + 1000, 10) == 1  # both silent for longer than 10 ms: gone


def assert_agree(run: results.Run) -> None:
    differ = jvm_requests.disagreements(run)
    assert differ.empty, f"{run.info.strategy}: the sources disagree:\n{differ.to_string()}"


def run_both(spark, metered, strategy: str, bar=None) -> results.Run:
    proxied, bucket = metered
    recorder = results.Recorder()
    querylab.QueryLab(spark, proxied, bucket, config.PLANS["smallest"]).run(recorder, strategy, "stateful", KEYS,
                                                                      WARMUP, BATCHES, bar)
    return recorder.results({}).run(strategy, "stateful", KEYS)


@pytest.mark.parametrize("store", CROSS_CHECK_STORES, indirect=True)
def test_jvm_and_proxy_count_the_same_requests_per_batch(spark, metered, strategy):
    meter = jvm_requests.of(spark)
    dropped = meter.dropped()
    run = run_both(spark, metered, strategy)
    assert run.sources == ["proxy", "jvm"]
    jvm = run.results.requests[run.results.requests.source == "jvm"]
    assert len(jvm.batch_id.dropna().unique()) == WARMUP + BATCHES
    # Local mode: the executor (writing the state files) is the driver's JVM, which ships nothing
    # to itself: a request counted twice would show here as a disagreement.
    assert_agree(run)
    assert meter.dropped() == dropped
    assert_moved_to_a_neighbour(run)


def assert_moved_to_a_neighbour(run: results.Run) -> None:
    """A request the sources filed under different batches moved from a batch to between batches,
    or from between batches into the next batch: the proxy's later clock, nothing else."""
    for row in jvm_requests.moved(run).itertuples():
        jvm, proxy = (None if pd.isna(b) else int(b) for b in (row.jvm_batch, row.proxy_batch))
        assert (jvm is not None and proxy is None) or (jvm is None and proxy is not None), row
        assert row.gap_ms >= -1000 * jvm_requests.SLACK_S, row


class _SwitchOff:
    """A progress bar for ``QueryLab.run`` that switches JVM counting off after ``after`` batches."""

    def __init__(self, meter: jvm_requests.JvmRequests, after: int) -> None:
        self.meter, self.after, self.batches = meter, after, 0

    def set_postfix_str(self, _: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        self.batches += n
        if self.batches >= self.after:
            self.meter.set_enabled(False)


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_the_check_fails_when_the_jvm_stops_counting_mid_run(spark, metered):
    meter = jvm_requests.of(spark)
    try:
        run = run_both(spark, metered, "direct", bar=_SwitchOff(meter, WARMUP + 1))
    finally:
        meter.set_enabled(True)
    with pytest.raises(AssertionError, match="the sources disagree"):
        assert_agree(run)
    differ = jvm_requests.disagreements(run)
    assert (differ.jvm < differ.proxy).all()  # requests the JVM no longer saw
    missed = set(differ.batch_id.dropna())
    assert WARMUP + BATCHES - 1 in missed  # the last batch: counting was off
    assert not missed & set(range(WARMUP + 1))  # the batches before the switch: still counted


class _Store:
    credentials, endpoint, region = None, "http://127.0.0.1:9", "us-east-1"

    def s3a_options(self, sdk: str) -> dict:
        return {}


def test_configure_adds_the_plugin_once_beside_the_users(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "spark_jars", lambda: [tmp_path / "x.jar"])
    conf = {"spark.plugins": "com.example.TheirPlugin"}
    for bucket in ("one", "two"):  # once per store
        conf = ckpt_impls.configure(conf, "rename", _Store(), bucket)
    assert conf["spark.plugins"] == f"com.example.TheirPlugin,{ckpt_impls.REQUESTS_PLUGIN}"
    assert jvm_requests.counting_conf(False) == {ckpt_impls.REQUESTS_ENABLED_CONF: "false"}
