"""Stores this project does not run: AWS S3 itself, or any S3 endpoint the user names.

Both are the user's: the harness creates and deletes no bucket there (``owns_buckets``) and keeps
to a run prefix of its own (``ckptbench.harness.stores.started_stores``). An https:// endpoint whose
certificate no public CA signed is trusted through ``AWS_CA_BUNDLE`` (a PEM file, the variable
boto3, the AWS CLI and the AWS SDKs read): boto3 is given it, and Spark's JVMs a truststore made
from it at start, in a temp directory removed on stop.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import boto3

from .store import Credentials, ObjectStore, StoreUnavailable
from .tls import truststore

ENDPOINT_ENV = "CKPT_S3_ENDPOINT"
#: The AWS SDKs' own variable for another S3 endpoint than AWS's (a VPC endpoint, a gateway).
AWS_ENDPOINT_ENV = "AWS_ENDPOINT_URL_S3"
#: The CA bundle (PEM) an https endpoint's certificate is checked against: the AWS SDKs' own variable.
CA_BUNDLE_ENV = "AWS_CA_BUNDLE"


class _UsersStore(ObjectStore):
    """A store the user runs: their buckets, and their CA bundle for an https endpoint."""

    owns_buckets = False
    _tls_dir: tempfile.TemporaryDirectory | None = None

    def _trust_ca_bundle(self) -> None:
        bundle = os.environ.get(CA_BUNDLE_ENV)
        if not (bundle and self.endpoint.startswith("https://")):
            return
        if not Path(bundle).is_file():
            raise StoreUnavailable(f"{self.name}: {CA_BUNDLE_ENV}={bundle} is not a file; name the PEM CA bundle")
        self._tls_dir = tempfile.TemporaryDirectory(prefix="ckptbench-tls-")
        self.ca_bundle = Path(bundle)
        self.truststore = truststore(self.ca_bundle, Path(self._tls_dir.name))

    def _stop(self) -> None:
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None


class AwsS3Store(_UsersStore):
    """Real AWS S3, with credentials from the standard AWS environment, profile or instance role.

    The keys stay with the AWS SDKs' default chains (boto3 here, the S3A SDK's in the JVM);
    this project never reads or forwards them. ``AWS_ENDPOINT_URL_S3`` (the SDKs' variable) sends
    the requests to another endpoint, path-style: how the tests run this store's code path
    against a local HTTPS store.
    """

    name = "s3"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if boto3.session.Session().get_credentials() is None:
            return "s3: no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        return None

    def _start(self) -> None:
        reason = self.unavailable_reason()
        if reason:
            raise StoreUnavailable(reason)
        self.region = boto3.session.Session().region_name or "us-east-1"
        self.endpoint = os.environ.get(AWS_ENDPOINT_ENV, "").rstrip("/")
        if self.endpoint and not self.endpoint.startswith(("http://", "https://")):
            raise StoreUnavailable(f"s3: {AWS_ENDPOINT_ENV}='{self.endpoint}' is not an http(s):// URL")
        self._trust_ca_bundle()


class EndpointStore(_UsersStore):
    """Any S3-compatible endpoint (``CKPT_S3_ENDPOINT``), keys from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY."""

    name = "endpoint"

    def __init__(self, endpoint: str | None = None) -> None:
        self._endpoint = endpoint or os.environ.get(ENDPOINT_ENV, "")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if os.environ.get(ENDPOINT_ENV) else f"endpoint: set {ENDPOINT_ENV} to the S3 endpoint URL"

    def _start(self) -> None:
        if not self._endpoint.startswith(("http://", "https://")):
            raise StoreUnavailable(f"endpoint: '{self._endpoint}' is not an http(s):// URL; set {ENDPOINT_ENV}")
        self.endpoint = self._endpoint.rstrip("/")
        self.credentials = Credentials.from_env("endpoint")
        self._trust_ca_bundle()
