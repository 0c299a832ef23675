"""``python -m ckptbench probe``: what a store can do for each strategy, checked against real servers.

An honest store (the embedded moto server, Ceph RGW) can run every strategy; a store that ignores
``If-None-Match: *`` (the metering proxy drops the header) cannot run ``conditional``,
``s3a-conditional`` or ``manifest``, and the probe says why. The probe writes only under its own
run prefix and removes it; bad input is one line, exit status 2, nothing written.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid

import pytest

import ckpt_impls
from ckptbench import metrics
from ckptbench.experiments import probe
from ckptbench.report import probing
from helpers import ckptbench, one_error_line
from infra.faults import Fault
from infra.metered import MeteredStore

KiB, MiB = 1024, 1024 * 1024


@pytest.fixture
def fresh_bucket(suite_stores, request):
    """``(store, bucket)``: a bucket of this test's own on the lab's store named by the test's parameter,
    holding two objects the probe must leave alone (one under the probe's own root prefix)."""
    store = suite_stores.get(request.param)
    bucket = f"probe-{store.name}-{uuid.uuid4().hex[:8]}"
    store.create_bucket(bucket)
    s3 = store.client()
    others = {"keep/me": b"not the probe's", f"{probe.PREFIX_ROOT}another-run/x": b"another run's"}
    for key, body in others.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    yield store, bucket, others
    store.empty_bucket(bucket)
    s3.delete_bucket(Bucket=bucket)


def assert_only(store, bucket: str, others: dict[str, bytes]) -> None:
    """The bucket holds exactly ``others``, unchanged, and no pending upload."""
    s3 = store.client()
    assert sorted(store.list_keys(bucket)) == sorted(others)
    for key, body in others.items():
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")


def failed_checks(data: dict) -> dict[str, str]:
    return {name: c["detail"] for name, c in data["checks"].items() if not c["ok"]}


def motos_race(failed: dict[str, str]) -> bool:
    """Only ``exclusive_create`` failed, with both writers winning: the race the embedded store
    declares (``racy_conditional_put``), which one of the probe's races can catch."""
    return list(failed) == ["exclusive_create"] and "both writers won" in failed["exclusive_create"]


def test_the_matrix_says_unclear_where_a_puts_cost_did_not_grow_with_size():
    checks = {name: {"ok": True, "detail": ""} for name in ckpt_impls.CAPABILITIES}
    kept, _ = probing.store_matrix({
        "flat": {"checks": checks, "emulator": True, "copy": {"ms_per_mib": 0.5, "share_of_put": None}},
        "real": {"checks": checks, "emulator": False, "copy": {"ms_per_mib": 3.0, "share_of_put": 0.4}}})
    assert kept.rows[-1] == ["COPY (a rename's cost)", "part, or unclear (a PUT's cost did not grow with size)",
                             "moves the data (0.40 of a PUT's per MiB)"]


def test_every_capability_has_a_check():
    checks = {name[len("check_"):] for name in vars(probe.Probe) if name.startswith("check_")}
    assert checks == set(ckpt_impls.CAPABILITIES)


# Emulator timings mean nothing, so the embedded store gets small COPY sizes; Ceph gets the defaults.
@pytest.mark.parametrize(("fresh_bucket", "copy_sizes"), [("embedded", (KiB, MiB, 4 * MiB)),
                                                          ("ceph", probe.COPY_SIZES), ("seaweedfs", probe.COPY_SIZES)],
                         indirect=["fresh_bucket"])
def test_an_honest_store_runs_every_strategy(fresh_bucket, copy_sizes):
    store, bucket, others = fresh_bucket
    data = probe.run(store, bucket, copy_sizes=copy_sizes)
    failed = failed_checks(data)
    if store.racy_conditional_put and motos_race(failed):  # the store says so; the rest must hold
        pytest.skip(f"{store.racy_conditional_put}: {failed['exclusive_create']}")
    assert not failed
    assert metrics.lost_race_answers(data["checks"]["exclusive_create"]["detail"]).startswith(("HTTP 412", "HTTP 409"))
    assert list(data["checks"]) == list(ckpt_impls.CAPABILITIES)
    for name, verdict in data["strategies"].items():
        assert verdict["can_run"] and not verdict["reasons"] and not verdict["settings"], name
        assert verdict["depends_on"] == [n.capability for n in ckpt_impls.get(name).requires]
    assert data["prefix"].startswith(probe.PREFIX_ROOT)
    assert_only(store, bucket, others)
    json.dumps(data, allow_nan=False)  # JSON-ready as it is
    text = probing.probe_table(data)
    for name in ckpt_impls.STRATEGIES:
        assert any(line.startswith(f"| {name} | yes |") for line in text.splitlines()), text
    # Timings decide the COPY fit's verdict, which a loaded machine can tip either way: what the test
    # holds is that every size was timed for both operations and the fit reports a verdict.
    copy = data["copy"]
    assert set(copy["fastest_ms"]) == {str(size) for size in copy_sizes}, copy
    for times in copy["fastest_ms"].values():
        assert all(math.isfinite(times[op]) and times[op] > 0 for op in ("PUT", "COPY")), copy
    assert isinstance(copy["moves_data"], bool) and math.isfinite(copy["share_of_put"]), copy


# What the checks that send If-None-Match: * say when the proxy drops the header. moto accepts the
# PUT and so ignores the condition, as a broken store would. Ceph RGW and SeaweedFS check boto3's SigV4 signature,
# which covers the header, so the PUT is refused (403): a store that refuses conditional PUTs, as
# OpenStack Swift's s3api does with a 501.
BROKEN = {
    "embedded": {"conditional_put": "ignores the header", "exclusive_create": "both writers won on 5"},
    "ceph": {"conditional_put": "refused (HTTP 403", "exclusive_create": "neither won on 5",
             "user_metadata": "HTTP 403"},
    "seaweedfs": {"conditional_put": "refused (HTTP 403", "exclusive_create": "neither won on 5",
                  "user_metadata": "HTTP 403"},
}


@pytest.mark.parametrize("fresh_bucket", ["embedded", "ceph", "seaweedfs"], indirect=True)
def test_a_store_that_ignores_if_none_match_cannot_run_the_conditional_strategies(fresh_bucket):
    store, bucket, others = fresh_bucket
    with MeteredStore(store) as metered:
        metered.proxy.inject(Fault("PUT", drop_header="If-None-Match"))
        data = probe.run(metered, bucket, copy_sizes=(KiB, MiB), copy_samples=2, race_keys=5)
        ops = {e.op for e in metered.proxy.events()}
    checks, strategies = data["checks"], data["strategies"]
    failed = {name: c["detail"] for name, c in checks.items() if not c["ok"]}
    assert set(failed) == set(BROKEN[store.name]), failed
    for name, expected in BROKEN[store.name].items():
        assert expected in failed[name], failed[name]
    for name in ("conditional", "s3a-conditional", "manifest"):
        assert not strategies[name]["can_run"]
        assert any(r.startswith("conditional_put: ") and "If-None-Match" in r for r in strategies[name]["reasons"])
    assert all(strategies[name]["can_run"] for name in ("rename", "direct", "abortable"))
    text = probing.probe_table(data)
    assert "cannot run: conditional_put:" in text
    assert any(line.startswith("| conditional | NO |") for line in text.splitlines()), text
    # Side by side with an honest probe of the same store, the matrix shows where they differ.
    honest = probe.run(store, bucket, copy_sizes=(KiB, MiB), copy_samples=2, race_keys=5)
    kept, runs = probing.store_matrix({f"{store.name} behind the proxy": {**data, "emulator": store.emulator},
                                       store.name: {**honest, "emulator": store.emulator}})
    rows = {row[0]: row[1:] for row in kept.rows}
    assert rows["conditional_put"] == ["FAIL", "ok"] and rows["copy"] == ["ok", "ok"], kept.rows
    assert rows["a lost race's answer"][0] == "-" and rows["a lost race's answer"][1].startswith("HTTP 412"), rows
    assert {row[0]: row[1:] for row in runs.rows}["conditional"] == ["NO", "yes"], runs.rows
    assert {"PUT", "COPY"} <= ops  # the probe did go through the proxy
    assert_only(store, bucket, others)


def test_cli_probe_on_a_store_it_starts():
    done = ckptbench("probe", "--store", "embedded", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["store"] == "embedded" and data["bucket"].startswith("ckptbench-probe-")
    failed = failed_checks(data)
    assert not failed or motos_race(failed), failed
    assert all(v["can_run"] for v in data["strategies"].values()
               if not failed or "exclusive_create" not in v["depends_on"]), data["strategies"]


def test_cli_probe_shows_several_stores_side_by_side():
    done = ckptbench("probe", "--stores", "embedded,seaweedfs", timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| capability | embedded (emulator) | seaweedfs |" in lines, done.stdout
    assert "| conditional_put | ok | ok |" in lines, done.stdout
    if "| exclusive_create | FAIL | ok |" in lines:  # moto's declared race, caught this run
        assert "| conditional | NO | yes |" in lines, done.stdout
    else:
        assert "| exclusive_create | ok | ok |" in lines and "| conditional | yes | yes |" in lines, done.stdout


# -- bad input: one line, exit status 2, nothing written -------------------------------------

def test_unknown_store():
    line = one_error_line(ckptbench("probe", "--store", "hdfs"))
    assert "'hdfs'" in line and "embedded, ceph" in line


@pytest.mark.parametrize(("args", "said"), [(["--stores", "embedded,hdfs"], "unknown store 'hdfs'"),
                                            (["--store", "embedded", "--stores", "embedded"], "not both")])
def test_bad_stores(args, said):
    assert said in one_error_line(ckptbench("probe", *args))


def test_a_store_that_cannot_start_is_left_out_of_make_bench_and_refused_in_one_line(tmp_path):
    env = {"CKPT_SEAWEEDFS_BIN": str(tmp_path / "weed")}
    done = ckptbench("stores", "--bench", env=env)
    assert done.returncode == 0 and "seaweedfs" not in done.stdout.split(), done.stdout
    assert "seaweedfs" in ckptbench("stores", "--bench").stdout.split()  # as this machine has it
    line = one_error_line(ckptbench("probe", "--store", "seaweedfs", env=env))
    assert "CKPT_SEAWEEDFS_BIN" in line and str(tmp_path / "weed") in line


def test_a_remote_store_needs_a_bucket():
    line = one_error_line(ckptbench("probe", "--store", "endpoint", env={
        "CKPT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "--bucket" in line


@pytest.mark.parametrize("name", ["embedded", "ceph"])
def test_missing_bucket(suite_stores, name):
    store = suite_stores.get(name)
    line = one_error_line(ckptbench("probe", "--store", "endpoint", "--bucket", "no-such-bucket", env={
        "CKPT_S3_ENDPOINT": store.endpoint, "AWS_ACCESS_KEY_ID": store.credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": store.credentials.secret_key}))
    assert "bucket 'no-such-bucket' does not exist" in line
    assert "no-such-bucket" not in {b["Name"] for b in store.client().list_buckets()["Buckets"]}


def test_unreachable_endpoint():
    line = one_error_line(ckptbench("probe", "--store", "endpoint", "--bucket", "any", env={
        "CKPT_S3_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "cannot reach" in line and "127.0.0.1:9" in line


def test_a_store_that_cannot_start():
    if shutil.which("minio"):
        pytest.skip("a minio binary is on PATH here, so MinIO can start")
    env = {"CKPT_MINIO_BIN": "", "CKPT_MINIO_ENDPOINT": "", "PATH": os.environ.get("PATH", "")}
    line = one_error_line(ckptbench("probe", "--store", "minio", env=env))
    assert "minio" in line and "CKPT_MINIO_BIN" in line
