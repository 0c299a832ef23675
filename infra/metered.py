"""Any local store seen through a metering proxy (in a child process): S3A and boto3 talk to the proxy, which counts."""

from __future__ import annotations

from .faults import profile
from .proxy_process import ProxyProcess
from .store import ObjectStore, StoreUnavailable


class MeteredStore(ObjectStore):
    """``inner`` (already started) behind a metering proxy: same credentials, bucket and
    S3A settings, the proxy's endpoint. Stopping it stops the proxy, not ``inner``.
    ``fault_profile`` and ``seed`` choose the faults it injects (``infra.faults.PROFILES``)."""

    def __init__(self, inner: ObjectStore, fault_profile: str = "none", seed: int = 0) -> None:
        outage = profile(fault_profile).outage  # an unknown name fails here, before anything starts
        if outage is not None and outage.restart:
            raise ValueError(f"fault profile {fault_profile} restarts the store's gateway: only the fault lab "
                             "(python -m ckptbench faultlab --store ceph) runs it")
        self.inner = inner
        self.fault_profile, self.seed = fault_profile, seed
        self.name = inner.name
        self.emulator, self.racy_conditional_put = inner.emulator, inner.racy_conditional_put
        self.proxy: ProxyProcess | None = None

    def _start(self) -> None:
        if not self.inner.endpoint.startswith("http://"):
            raise StoreUnavailable(f"{self.name}: the metering proxy needs a plain http:// endpoint, "
                                   f"not {self.inner.endpoint or 'AWS S3'}")
        self.proxy = ProxyProcess(self.inner.endpoint, self.fault_profile, self.seed).start()
        self.endpoint = self.proxy.endpoint
        self.region = self.inner.region
        self.credentials = self.inner.credentials
        self.owns_buckets = self.inner.owns_buckets
        if self.credentials is not None:  # so that its own HEADs (a COPY's source size) pass the store's checks
            self.proxy.sign_probes_with(self.credentials.access_key, self.credentials.secret_key, self.region)

    def _stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def s3a_options(self, sdk: str) -> dict[str, str]:
        return self.inner.s3a_options(sdk)

    def describe(self) -> str:
        faults = "" if self.fault_profile == "none" else f", injecting fault profile {self.fault_profile} " \
                                                          f"(seed {self.seed})"
        return self.inner.describe() + ", requests counted by a metering proxy" + faults
