"""Any local store seen through a metering proxy (in a child process): S3A and boto3 talk to the proxy, which counts."""

from __future__ import annotations

from .proxy_process import ProxyProcess
from .store import ObjectStore, StoreUnavailable


class MeteredStore(ObjectStore):
    """``inner`` (already started) behind a metering proxy: same credentials, bucket and
    S3A settings, the proxy's endpoint. Stopping it stops the proxy, not ``inner``."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.name = inner.name
        self.emulator = inner.emulator
        self.proxy: ProxyProcess | None = None

    def _start(self) -> None:
        if not self.inner.endpoint.startswith("http://"):
            raise StoreUnavailable(f"{self.name}: the metering proxy needs a plain http:// endpoint, "
                                   f"not {self.inner.endpoint or 'AWS S3'}")
        self.proxy = ProxyProcess(self.inner.endpoint).start()
        self.endpoint = self.proxy.endpoint
        self.region = self.inner.region
        self.credentials = self.inner.credentials

    def _stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def s3a_options(self) -> dict[str, str]:
        return self.inner.s3a_options()

    def describe(self) -> str:
        return self.inner.describe() + ", requests counted by a metering proxy"
