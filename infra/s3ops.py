"""The S3 request vocabulary: which operation a request is, which part of a checkpoint it
touches, and the ``Event`` that records one request.

Nothing here knows how requests were seen: the metering proxy (``infra.proxy``) produces
``Event``s from the HTTP it relays, and anything else that sees S3 requests (a counter inside
the JVM, say) can produce the same ``Event``s with the same ``classify`` and ``area_of``.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Collection, Mapping
from urllib.parse import parse_qsl, unquote

#: Checkpoint sub-directories, in the order ``area_of`` looks for them.
CHECKPOINT_AREAS = ("offsets", "commits", "state", "sources", "metadata")
#: Every area an event can have: a file sink's log, the checkpoint parts, anything else.
AREAS = ("_spark_metadata", *CHECKPOINT_AREAS, "data")

#: Every op an event can have; "OTHER" is whatever S3 call the classifier does not know.
OPS = (
    "GET", "HEAD", "LIST", "PUT", "COPY", "DELETE", "BULK_DELETE",
    "MPU_INIT", "MPU_PART", "MPU_COMPLETE", "MPU_ABORT", "BUCKET", "OTHER",
)

#: How much of a DeleteObjects body is enough to find its first key (``first_deleted_key``).
BULK_DELETE_CAPTURE = 65536

# Query parameters of ListObjects(V2), ListObjectVersions and ListMultipartUploads:
# a bucket GET with only these is a listing, any other is a bucket sub-resource.
_LIST_PARAMS = frozenset({
    "list-type", "prefix", "delimiter", "marker", "max-keys", "continuation-token",
    "start-after", "encoding-type", "fetch-owner", "uploads", "key-marker",
    "upload-id-marker", "max-uploads", "versions", "version-id-marker",
    "allow-unordered", "optional-object-attributes",
})
_FIRST_KEY = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One S3 request.

    ``start``/``end`` are ``time.time()`` when the request head had arrived and when
    the response was sent on. ``bytes_in`` is the request payload (the
    ``x-amz-decoded-content-length`` of an aws-chunked upload, else the HTTP body
    without chunk framing; what arrived, for a request cut short), ``bytes_out`` the
    response body likewise. ``status`` is 0 if the request got no response (its
    connection was cut before one). ``key`` is what the request is about
    (``subject``): the object key, for a bucket LIST its ``prefix``, for a bulk DELETE
    its first key, else ``""``; ``area`` is ``area_of(key)``.
    """

    start: float
    end: float
    method: str
    op: str
    area: str
    bucket: str
    key: str
    status: int
    bytes_in: int
    bytes_out: int

    @property
    def duration(self) -> float:
        return self.end - self.start


def split_path(path: str) -> tuple[str, str]:
    """Path-style ``/bucket/key`` to ``(bucket, url-decoded key)``; either may be ``""``."""
    bucket, _, key = path[1:].partition("/") if path.startswith("/") else path.partition("/")
    return unquote(bucket), unquote(key)


def classify(method: str, path: str, query: str, headers: Collection[str]) -> str:
    """The S3 operation (one of ``OPS``) of a path-style request.

    ``path`` is the URL path, still percent-encoded; ``query`` the raw query string
    without ``?``; ``headers`` the request's header names (a mapping's keys will do),
    in any case.
    """
    return describe(method, f"{path}?{query}" if query else path, headers)[0]


def describe(method: str, target: str, headers: Collection[str]) -> tuple[str, str, str]:
    """``(op, bucket, subject)`` of a path-style request to ``target`` (path and query, as
    sent): ``op`` as ``classify`` gives it; ``subject`` the object key, for a LIST its
    ``prefix``, else ``""``. A bulk DELETE's subject is its first key, which is in the
    body: see ``first_deleted_key``."""
    path, _, query = target.partition("?")
    bucket, key = split_path(path)
    params = dict(parse_qsl(query, keep_blank_values=True)) if query else {}
    op = _op(method.upper(), bucket, key, params, {h.lower() for h in headers})
    return op, bucket, params.get("prefix", key) if op == "LIST" else key


def area_of(key: str) -> str:
    """The area (one of ``AREAS``) an object key belongs to.

    ``_spark_metadata`` if any path segment is that; else the first segment that is
    a checkpoint area (``metadata`` is the checkpoint's own metadata file); else ``data``.
    """
    parts = key.split("/")
    if "_spark_metadata" in parts:
        return "_spark_metadata"
    return next((p for p in parts if p in CHECKPOINT_AREAS), "data")


#: Directories of the RocksDB state store's immutable files (``state/<op>/<partition>/SSTs/<n>-<uuid>.sst``
#: and ``logs/``), which its ``RocksDBFileManager`` uploads with ``FileSystem.copyFromLocalFile``.
FILESYSTEM_DIRS = frozenset({"SSTs", "logs"})


def through_manager(op: str, area: str, key: str) -> bool:
    """Whether a request (``op`` about ``key``, in ``area``) is one the checkpoint strategy
    controls: made through Spark's ``CheckpointFileManager``, which the strategy replaces.

    Not the strategy's: the ``data`` area (a sink's data files, a source's input: Spark's
    FileSystem and committers); under ``state/`` the RocksDB store's SST and log files
    (``FILESYSTEM_DIRS``: the upload, S3A's probes around it, its parent-marker clean-up, and
    their reads), which ``RocksDBFileManager`` moves with ``FileSystem.copyFromLocalFile`` /
    ``copyToLocalFile``; and the GET of a RocksDB ``.zip``, which it unzips from ``FileSystem.open``.
    Writing the ``<version>.zip``, ``<version>.changelog`` and ``_metadata`` files is the manager's.
    Measured, not assumed: with ``rename`` every file the manager writes is a temp PUT then a
    COPY, and in RocksDB runs (Spark 3.5 and 4.3, changelog on and off) exactly the SST files
    were PUT straight to their key (``tests/test_state_stores.py`` checks it on every run).
    Conservative: the old SST files RocksDB deletes in maintenance go through the manager's
    ``delete``, but are counted as the FileSystem's with the rest of their key's requests.
    """
    if area == "data":
        return False
    if area != "state":
        return True
    parts = key.split("/")
    if FILESYSTEM_DIRS.intersection(parts[parts.index("state") + 1:]):
        return False
    return not (op == "GET" and key.endswith(".zip"))


def first_deleted_key(delete_body: bytes) -> str:
    """The first ``<Key>`` of a DeleteObjects request body (its first
    ``BULK_DELETE_CAPTURE`` bytes are enough), or ``""``."""
    m = _FIRST_KEY.search(delete_body)
    return html.unescape(m.group(1).decode("utf-8", "replace")) if m else ""


def _op(method: str, bucket: str, key: str, params: Mapping[str, str], headers: Collection[str]) -> str:
    """``headers``: lower-case header names."""
    if not bucket:
        return "BUCKET"  # service level: ListBuckets
    if not key:
        if method == "GET":
            return "LIST" if params.keys() <= _LIST_PARAMS else "BUCKET"
        if method == "HEAD":
            return "HEAD"
        if method == "POST" and "delete" in params:
            return "BULK_DELETE"
        return "BUCKET"
    if method == "GET":
        return "LIST" if "uploadId" in params else "GET"  # ListParts, else GetObject
    if method == "HEAD":
        return "HEAD"
    if method == "PUT":
        if "partNumber" in params and "uploadId" in params:
            return "MPU_PART"  # UploadPart and UploadPartCopy
        return "COPY" if "x-amz-copy-source" in headers else "PUT"
    if method == "DELETE":
        return "MPU_ABORT" if "uploadId" in params else "DELETE"
    if method == "POST":
        if "uploads" in params:
            return "MPU_INIT"
        if "uploadId" in params:
            return "MPU_COMPLETE"
    return "OTHER"
