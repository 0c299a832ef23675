"""The one small interface every object store in the lab implements.

A store is something S3A and boto3 can talk to: an endpoint, credentials and
buckets. Local stores (embedded moto, Ceph RGW, a MinIO binary) are started and
stopped by the project; remote ones (a MinIO endpoint, AWS S3) only connect.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import os
import secrets
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import botocore.exceptions
from botocore.config import Config

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11


class StoreUnavailable(RuntimeError):
    """The store cannot start or be reached here; str() is one line saying why and what to do."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    """An S3 key pair. repr() never shows the secret, so it is safe in logs and tracebacks."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)

    @classmethod
    def generate(cls) -> Credentials:
        return cls("ckpt" + secrets.token_hex(8), secrets.token_hex(20))

    @classmethod
    def from_env(cls, store: str) -> Credentials:
        access, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
        if not (access and secret):
            raise StoreUnavailable(f"{store}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for its endpoint")
        return cls(access, secret)


#: S3A 3.4+ uploads a local file (``copyFromLocalFile``: RocksDB's SST files) through its async
#: client (Netty), apart from every other write: Ceph RGW 16 refuses that client's payload signing
#: (XAmzContentSHA256Mismatch), and after moto's ``100 Continue`` the client takes 100 for the
#: final status (aws-sdk-java-v2 issue 1969). Off, such an upload is a create and a write through
#: the sync client, as S3A 3.3's always was.
SYNC_LOCAL_UPLOADS = {"optimized.copy.from.local.enabled": "false"}


class ObjectStore(abc.ABC):
    """An S3-compatible store.

    Subclasses set ``name`` and ``emulator`` and implement ``_start``/``_stop``;
    after ``start()`` they expose ``endpoint`` (``""`` means AWS's own),
    ``region`` and ``credentials`` (``None`` means the AWS default chain), and for an
    HTTPS endpoint whose certificate no public CA signed, ``ca_bundle`` (a PEM file boto3
    trusts) and ``truststore`` (the same for the JVM, ``infra.tls``).
    """

    name: str = ""
    #: True when latencies mean nothing about a real store (moto is in-process Python).
    emulator: bool = False
    #: Why two racing ``If-None-Match: *`` PUTs of one key may both succeed here, or None: the store
    #: checks and writes atomically, so exactly one wins (what ``conditional`` and ``manifest`` rest on).
    racy_conditional_put: str | None = None

    endpoint: str = ""
    region: str = "us-east-1"
    credentials: Credentials | None = None
    ca_bundle: Path | None = None
    truststore: Path | None = None
    #: False for a store this project did not start (AWS S3, a user's endpoint): its buckets are its
    #: users', so the harness creates or deletes none and keeps to its own run prefix in them.
    owns_buckets: bool = True
    #: Where in the bucket everything the harness writes goes (``ckptbench.harness.stores.started_stores`` sets it).
    run_prefix: str = ""

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """One line saying why this store cannot start on this machine, or None if it can try."""
        return None

    @property
    def processes(self) -> tuple:
        """The server processes (``subprocess.Popen``) this store runs, ours to stop; none for a
        remote store, or once stopped."""
        return ()

    def start(self) -> ObjectStore:
        self._start()
        return self

    def stop(self) -> None:
        self._stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @abc.abstractmethod
    def _start(self) -> None: ...

    @abc.abstractmethod
    def _stop(self) -> None: ...

    def s3a_options(self, sdk: str) -> dict[str, str]:
        """Store-specific, non-secret S3A settings (per bucket) beyond endpoint and path style, for
        an S3A connector built on AWS SDK ``sdk`` ("v1": S3A 3.3; "v2": S3A 3.4+)."""
        return {}


    def client(self, **config):
        """A boto3 S3 client for this store; retries kept short so a dead endpoint fails fast."""
        settings = {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 2, "mode": "standard"},
                    "connect_timeout": 5, "read_timeout": 30, **config}
        if self.endpoint.startswith("https://"):
            # Over HTTPS botocore streams a PUT's body aws-chunked with a trailing CRC32 by default;
            # Ceph RGW 16 answers that with 400 MissingContentLength. Checksums only where S3 requires one.
            settings = {"request_checksum_calculation": "when_required",
                        "response_checksum_validation": "when_required", **settings}
        cfg = Config(**settings)
        kwargs = {"region_name": self.region, "config": cfg}
        if self.ca_bundle is not None:
            kwargs["verify"] = str(self.ca_bundle)
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        if self.credentials is not None:
            kwargs["aws_access_key_id"] = self.credentials.access_key
            kwargs["aws_secret_access_key"] = self.credentials.secret_key
        return boto3.client("s3", **kwargs)

    def check_bucket(self, bucket: str) -> None:
        """Fail fast, in one line, when the endpoint, the credentials or the bucket are wrong."""
        where = self.endpoint or "AWS S3"
        try:
            self.client(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=3).head_bucket(Bucket=bucket)
        except botocore.exceptions.EndpointConnectionError:
            raise StoreUnavailable(f"cannot reach the S3 endpoint {where}: "
                                   "is the store running and the URL right?") from None
        except botocore.exceptions.NoCredentialsError:
            raise StoreUnavailable(f"no credentials for {where}: "
                                   "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
        except botocore.exceptions.ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404:
                raise StoreUnavailable(f"bucket '{bucket}' does not exist at {where}: "
                                       "create it or name another") from None
            if status in (401, 403):
                raise StoreUnavailable(f"{where} rejected the credentials for bucket '{bucket}' (HTTP {status}): "
                                       "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile") from None
            raise StoreUnavailable(f"{where} answered HTTP {status} to HEAD bucket '{bucket}': {e}") from None
        except botocore.exceptions.SSLError:
            raise StoreUnavailable(f"the certificate of {where} is not trusted: set AWS_CA_BUNDLE to a PEM file "
                                   "holding its CA (a self-signed certificate: the certificate itself)") from None
        except botocore.exceptions.BotoCoreError as e:
            raise StoreUnavailable(f"cannot talk to the S3 endpoint {where}: {e}") from None

    def create_bucket(self, bucket: str) -> None:
        s3 = self.client()
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)

    def empty_bucket(self, bucket: str, prefix: str = "") -> None:
        """Delete every object (and pending multipart upload) under ``prefix``."""
        s3 = self.client()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
        for up in uploads:
            s3.abort_multipart_upload(Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        s3 = self.client()
        keys: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        return keys

    @property
    def where(self) -> dict[str, str]:
        """Where requests go, for the results: ``scheme`` (http/https) and ``location`` (local: this
        machine's loopback; remote: anywhere else)."""
        host = urllib.parse.urlsplit(self.endpoint).hostname if self.endpoint else "s3.amazonaws.com"
        return {"scheme": urllib.parse.urlsplit(self.endpoint).scheme if self.endpoint else "https",
                "location": "local" if host in ("127.0.0.1", "localhost", "::1") else "remote"}

    @property
    def meterable(self) -> bool:
        """Whether the metering proxy can stand in front (it speaks plain HTTP only)."""
        return self.endpoint.startswith("http://")

    def describe(self) -> str:
        kind = "emulator: its timings say nothing about a real store" if self.emulator else "real store"
        return f"{self.name} at {self.endpoint or 'AWS S3'} ({kind})"
