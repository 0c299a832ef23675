"""What a store can do for each checkpoint strategy, checked against the real store.

``run(store, bucket)`` sends boto3 requests that check each capability the strategies declare
(``ckpt_impls.CAPABILITIES``; each strategy's ``requires``), all under a run prefix of its own
(``ckptbench-probe/<time>-<id>/``) that it empties at the end, pending uploads included. It never
touches another key, and never creates or deletes a bucket. It returns plain data (JSON-ready):
the checks, COPY against object size, and which strategies this store can run. ``table(data)``
renders it; ``python -m ckptbench probe`` prints either.

A check passes or fails on what the store answered; an error answer (a 501 to a conditional
PUT, say) fails it with the error in the detail. Timings here are client-side (boto3, request
sent to response read), so they include the client and the network: a probe sizes a store, it
does not benchmark it (``python -m ckptbench bench`` does).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import datetime as dt
import math
import os
import threading
import time
import uuid

import botocore.exceptions

import ckpt_impls
from ckptbench import metrics
from ckptbench.config import KiB, MiB
from ckptbench.metrics.capabilities import verdicts
from ckptbench.record import results, schema
from infra import StoreUnavailable

#: Object sizes and samples of the COPY check.
COPY_SIZES = (KiB, 64 * KiB, MiB, 8 * MiB, 32 * MiB)
COPY_SAMPLES = 3
#: Fresh keys two writers race on in ``exclusive_create``.
RACE_KEYS = 20
#: Fresh keys each consistency check (read-, list-after-write) tries.
CONSISTENCY_KEYS = 5
PREFIX_ROOT = "ckptbench-probe/"
#: The writer tag the conditional strategies put on each PUT (S3ObjectStore.WRITER in the JVM).
WRITER_META = "ckptbench-write-id"  # the name S3ObjectStore gives its write ids


class CheckFailed(Exception):
    """The store did not do what the check needs; str() says what it did instead."""


def _status(error: botocore.exceptions.ClientError) -> int | None:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _code(error: botocore.exceptions.ClientError) -> str:
    return f"HTTP {_status(error)} {error.response.get('Error', {}).get('Code', '')}".strip()


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


class Probe:
    """The checks, one method each (``check_<capability>``), on one bucket under one prefix."""

    def __init__(self, store, bucket: str, prefix: str, copy_sizes=COPY_SIZES, copy_samples: int = COPY_SAMPLES,
                 race_keys: int = RACE_KEYS) -> None:
        self.store, self.bucket, self.prefix = store, bucket, prefix
        self.copy_sizes, self.copy_samples, self.race_keys = tuple(copy_sizes), copy_samples, race_keys
        self.s3 = store.client()
        self.copy: dict = {}

    # -- small helpers --------------------------------------------------------------------

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}-{uuid.uuid4().hex[:12]}"

    def put(self, key: str, body: bytes, create_only: bool = False, s3=None, **extra):
        kwargs = {"IfNoneMatch": "*"} if create_only else {}
        return (s3 or self.s3).put_object(Bucket=self.bucket, Key=key, Body=body, **kwargs, **extra)

    def get(self, key: str) -> bytes | None:
        """The object's content, or None on a 404."""
        try:
            return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except botocore.exceptions.ClientError as e:
            if _status(e) == 404:
                return None
            raise

    def listed(self, key: str) -> bool:
        page = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=10)
        return any(o["Key"] == key for o in page.get("Contents", []))

    # -- the checks -----------------------------------------------------------------------

    def check_conditional_put(self) -> str:
        key = self.key("conditional")
        try:
            self.put(key, b"first", create_only=True)
        except botocore.exceptions.ClientError as e:
            raise CheckFailed(f"a conditional PUT of a new key was refused ({_code(e)}): the store does not "
                              "accept If-None-Match: * on PUT") from None
        try:
            self.put(key, b"second", create_only=True)
            answer = "accepted (2xx)"
        except botocore.exceptions.ClientError as e:
            if _status(e) not in (412, 409):
                raise CheckFailed(f"the second conditional PUT got {_code(e)}, not 412") from None
            answer = f"refused ({_code(e)})"
        content = self.get(key)
        if answer.startswith("accepted"):
            kept = "the first content stayed" if content == b"first" else "it replaced the first content"
            raise CheckFailed(f"a second If-None-Match: * PUT of an existing key was accepted and {kept}: "
                              "the store ignores the header")
        if content != b"first":
            raise CheckFailed(f"the second conditional PUT was {answer} but the content changed")
        return f"second PUT {answer}; the first content stayed"

    def check_exclusive_create(self) -> str:
        """Two writers, each with a client of its own, PUT one fresh key at once (a barrier lines
        them up), ``race_keys`` times."""
        clients = [self.store.client(), self.store.client()]
        barrier = threading.Barrier(2)

        def write(i: int, key: str) -> str:
            barrier.wait(timeout=30)
            try:
                self.put(key, f"writer {i}".encode(), create_only=True, s3=clients[i])
                return "won"
            except botocore.exceptions.ClientError as e:
                return f"HTTP {_status(e)}" if _status(e) in (412, 409) else _code(e)

        both, none, other, refused = 0, 0, [], collections.Counter()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for _ in range(self.race_keys):
                key = self.key("race")
                outcome = list(pool.map(write, (0, 1), (key, key)))
                wins = outcome.count("won")
                if wins == 2:
                    both += 1
                elif wins == 0:
                    none += 1
                elif self.get(key) != f"writer {outcome.index('won')}".encode():
                    other.append("the stored content is not the winner's")
                refused.update(o for o in outcome if o.startswith("HTTP "))
                other += [o for o in outcome if o != "won" and not o.startswith("HTTP ")]
        if both or none or other:
            parts = [f"both writers won on {both}" if both else "", f"neither won on {none}" if none else "",
                     f"errors: {', '.join(sorted(set(other)))}" if other else ""]
            raise CheckFailed(f"of {self.race_keys} keys raced by two writers: " + "; ".join(p for p in parts if p))
        losers = ", ".join(f"{status} ({count})" for status, count in sorted(refused.items()))
        return (f"{self.race_keys}/{self.race_keys} fresh keys: exactly one of two racing writers won"
                f"{metrics.LOSERS}{losers}")

    def check_user_metadata(self) -> str:
        key, tag = self.key("metadata"), uuid.uuid4().hex
        self.put(key, b"tagged", create_only=True, Metadata={WRITER_META: tag})
        found = self.s3.head_object(Bucket=self.bucket, Key=key).get("Metadata", {}).get(WRITER_META)
        if found != tag:
            raise CheckFailed(f"x-amz-meta-{WRITER_META} sent on a conditional PUT came back as {found!r}")
        return f"x-amz-meta-{WRITER_META} kept on a conditional PUT"

    def check_multipart_abort(self) -> str:
        key = self.key("multipart")
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        try:
            self.s3.upload_part(Bucket=self.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"p" * MiB)
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
        except botocore.exceptions.ClientError as e:
            raise CheckFailed(f"{e.operation_name} failed: {_code(e)}") from None
        problems = []
        if self.get(key) is not None:
            problems.append("an object is there")
        pending = self.s3.list_multipart_uploads(Bucket=self.bucket, Prefix=key).get("Uploads", [])
        if any(u["UploadId"] == upload for u in pending):
            problems.append("the upload is still pending")
        if problems:
            raise CheckFailed("after AbortMultipartUpload " + " and ".join(problems))
        return "aborted a 1-part upload: no object, no pending upload"

    def check_read_after_write(self) -> str:
        for i in range(CONSISTENCY_KEYS):
            key = self.key("read")
            if self.get(key) is not None:
                raise CheckFailed("a fresh key already had content")
            self.put(key, f"one {i}".encode())
            if (seen := self.get(key)) != f"one {i}".encode():
                raise CheckFailed(f"a GET right after the first PUT of a key just found missing returned {seen!r}")
            self.put(key, f"two {i}".encode())
            if (seen := self.get(key)) != f"two {i}".encode():
                raise CheckFailed(f"a GET right after an overwrite returned {seen!r}")
        return f"{CONSISTENCY_KEYS}/{CONSISTENCY_KEYS} keys: new content at once (after a miss, after an overwrite)"

    def check_list_after_write(self) -> str:
        for _ in range(CONSISTENCY_KEYS):
            key = self.key("list")
            self.put(key, b"x")
            if not self.listed(key):
                raise CheckFailed("a LIST right after a PUT did not show the new key")
            self.s3.delete_object(Bucket=self.bucket, Key=key)
            if self.listed(key):
                raise CheckFailed("a LIST right after a DELETE still showed the key")
        return f"{CONSISTENCY_KEYS}/{CONSISTENCY_KEYS} keys: listed at once after PUT, gone at once after DELETE"

    def check_delete(self) -> str:
        key = self.key("delete")
        self.put(key, b"x")
        self.s3.delete_object(Bucket=self.bucket, Key=key)
        if self.get(key) is not None:
            raise CheckFailed("a GET right after a DELETE still returned the object")
        try:
            status = self.s3.delete_object(Bucket=self.bucket, Key=self.key("missing"))["ResponseMetadata"][
                "HTTPStatusCode"]
            answer = self.s3.delete_objects(Bucket=self.bucket, Delete={
                "Objects": [{"Key": self.key("missing")}, {"Key": self.key("missing")}], "Quiet": True})
        except botocore.exceptions.ClientError as e:
            raise CheckFailed(f"a DELETE of a missing key failed: {_code(e)}") from None
        if answer.get("Errors"):
            raise CheckFailed(f"a bulk DELETE of missing keys reported errors: {answer['Errors'][:2]}")
        return f"gone at once; DELETE of a missing key: HTTP {status}; bulk DELETE of missing keys: no errors"

    def check_copy(self) -> str:
        """COPY against object size: identical content, and whether the COPY moves the data (the
        cost of a rename on this store), fitted by ``metrics.copy_fit``.

        Each size is PUT and COPYed ``copy_samples`` times (another object of random bytes each
        time); the fit is over the fastest request of each size and operation, since on a shared
        machine interference only ever adds time, and one slow request would tilt a line through
        a few points."""
        recorder = results.Recorder()
        data = os.urandom(max(self.copy_sizes) + self.copy_samples)
        fastest = {}
        for size in self.copy_sizes:
            timed: dict[str, list[float]] = {"PUT": [], "COPY": []}
            for i in range(self.copy_samples):
                source, target = self.key(f"copy-{size}"), self.key(f"copy-{size}-{i}")
                body = data[i:i + size]
                t0 = time.perf_counter()
                self.put(source, body)
                t1 = time.perf_counter()
                self.s3.copy_object(Bucket=self.bucket, Key=target, CopySource={"Bucket": self.bucket, "Key": source})
                t2 = time.perf_counter()
                timed["PUT"].append((t1 - t0) * 1000)
                timed["COPY"].append((t2 - t1) * 1000)
                if i == 0 and self.get(target) != body:
                    raise CheckFailed(f"a COPY of a {_size(size)} object is not identical to its source")
                # Frugal with space: an in-memory store (Ceph's memstore OSD) would fill up.
                self.s3.delete_objects(Bucket=self.bucket, Delete={
                    "Objects": [{"Key": source}, {"Key": target}], "Quiet": True})
            fastest[size] = {op: min(ms) for op, ms in timed.items()}
            for op, ms in fastest[size].items():
                recorder.add_samples("copy", op, [ms], route="client-fastest", size=size)
        fit = metrics.copy_fit(recorder.results({"schema_version": schema.SCHEMA_VERSION, "experiment": "probe"}))
        self.copy = {"fastest_ms": {str(size): m for size, m in fastest.items()}, "samples": self.copy_samples,
                     "timed_by": "client", **fit}
        shown = ", ".join(f"{_size(size)} {m['COPY']:.1f}" for size, m in fastest.items())
        share, threshold = fit["share_of_put"], metrics.COPY_MOVES_DATA
        per_mib = f"+{fit['ms_per_mib']:.2f} ms/MiB, {share:.2f} of a PUT's"
        kind = metrics.copy_verdict(share)
        if kind == "moves":
            verdict = f"moves the data ({per_mib}, ~{fit['mb_per_s']:.0f} MB/s): a rename costs O(bytes)"
        elif kind == "shares":
            verdict = f"does not move the data ({per_mib}): it shares it"
        else:
            # Ceph RGW copies an object's head (4 MiB) and shares its tail: up to 32 MiB it lands here.
            said = "moves" if fit["moves_data"] else "does not move"
            verdict = (f"copy_fit says it {said} the data ({per_mib}), but near its threshold of {threshold}: "
                       "it may copy a part (Ceph RGW copies a 4 MiB head and shares the rest)")
        largest = max(fastest)
        verdict += (f"; the {_size(largest)} COPY took {fastest[largest]['COPY']:.0f} ms, "
                    f"its PUT {fastest[largest]['PUT']:.0f} ms")
        return f"identical copies; COPY ms (fastest of {self.copy_samples}) {shown}; {verdict}"


def _clean(value):
    """JSON-ready: numpy scalars become plain ones, NaN and infinities None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def run(store, bucket: str, copy_sizes=COPY_SIZES, copy_samples: int = COPY_SAMPLES,
        race_keys: int = RACE_KEYS, under: str = "") -> dict:
    """Probe ``store``'s ``bucket`` (which must exist) for every capability the strategies need,
    under a prefix of its own inside ``under`` (a benchmark run's prefix: everything it writes stays
    under it).

    Returns ``{"store", "describe", "endpoint", "bucket", "prefix", "checked_at", "checks":
    {capability: {"ok", "detail", "what", "seconds"}}, "copy": {...}, "strategies": {name:
    {"can_run", "depends_on", "settings", "notes", "reasons"}}}``, in ``ckpt_impls.CAPABILITIES`` order.
    """
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    prefix = f"{under}{PREFIX_ROOT}{stamp}-{uuid.uuid4().hex[:8]}/"
    probe = Probe(store, bucket, prefix, copy_sizes, copy_samples, race_keys)
    checks, cleanup = {}, "not done"
    try:
        for capability, what in ckpt_impls.CAPABILITIES.items():
            t0 = time.perf_counter()
            try:
                ok, detail = True, getattr(probe, f"check_{capability}")()
            except CheckFailed as e:
                ok, detail = False, str(e)
            except botocore.exceptions.ClientError as e:
                ok, detail = False, f"{e.operation_name} failed: {_code(e)}"
            checks[capability] = {"ok": ok, "detail": detail, "what": what,
                                  "seconds": round(time.perf_counter() - t0, 3)}
    finally:
        cleanup = _remove(store, bucket, prefix)
    return _clean({"store": store.name, "describe": store.describe(), "endpoint": store.endpoint or "AWS S3",
                   "bucket": bucket, "prefix": prefix, "cleanup": cleanup, "checked_at": stamp, "checks": checks,
                   "copy": probe.copy, "strategies": verdicts(checks)})


def _remove(store, bucket: str, prefix: str) -> str:
    """Remove every object and pending upload under ``prefix``; say how that went."""
    try:
        store.empty_bucket(bucket, prefix)
        left = store.list_keys(bucket, prefix)
    except botocore.exceptions.ClientError as e:
        return f"could not remove everything under it ({e.operation_name}: {_code(e)})"
    return f"{len(left)} objects could not be removed" if left else "removed"


def on_store(store, bucket: str | None = None, **settings) -> dict:
    """``run`` on a started store: on ``bucket``, which must exist, or, when None on a store this
    process started, on a bucket of its own that is deleted afterwards."""
    created = None
    if bucket is None:
        if not store.processes:
            raise StoreUnavailable(f"{store.name}: name an existing bucket with --bucket (the probe creates "
                                   "buckets only on stores it starts)")
        bucket = created = f"ckptbench-probe-{uuid.uuid4().hex[:8]}"
        store.create_bucket(bucket)
    store.check_bucket(bucket)
    try:
        return run(store, bucket, **settings)
    finally:
        if created:
            with contextlib.suppress(botocore.exceptions.ClientError):  # the store ends with this process
                store.client().delete_bucket(Bucket=created)
