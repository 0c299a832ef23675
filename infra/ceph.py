"""A real object store: a one-node Ceph cluster (mon, OSD, RADOS Gateway) started as our children.

Everything lives in one fresh directory (config, mon and OSD data, logs, admin
sockets, pid files), so nothing touches /etc/ceph or /var/run/ceph and several
clusters can run side by side. With memstore a cluster starts from empty in
seconds. The settings are chosen for a fast start and fast requests on one node
(measured: see docs/findings/ceph-rgw.md).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from .net import ending_with_us, free_port, proc_stat, stop_process, wait_for_port
from .store import SYNC_LOCAL_UPLOADS, Credentials, ObjectStore, StoreUnavailable
from .tls import self_signed, truststore

OBJECTSTORES = ("memstore", "bluestore")
_BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool")
_USER = "ckptbench"
#: Whole start-up budget: a guard against a hang only, as the wait ends once the gateway answers or
#: a daemon dies. Generous: niced on a loaded 2-core machine, beside other stores and JVMs starting,
#: a start takes many times an idle one's.
_START_TIMEOUT = 300.0
#: Per daemon on stop before SIGKILL.
_STOP_TIMEOUT = 15.0
#: What a data_dir remembers between runs (no secrets: radosgw-admin hands those out).
_STATE_FILE = "ckptbench-ceph.json"
_TEMP_PREFIX = "ckptbench-ceph-"
#: What the ceph CLI prints when it lost the race described in CephStore._ceph.
_COMMAND_TABLE_RACE = "problem getting command descriptions"
#: How long a command that met that race is asked again once the cluster runs.
_COMMAND_RETRY_S = 20.0


class CephStore(ObjectStore):
    """Ceph RADOS Gateway 16.x on a one-node cluster: a real store, not an emulator.

    - ``objectstore="memstore"`` (default): objects live in the OSD's RAM and
      vanish on stop; the fastest choice, for tests.
    - ``objectstore="bluestore"``: a sparse file is the OSD's disk; persistent
      across stop/start when ``data_dir`` is given (a temp dir otherwise).

    It honours ``If-None-Match: *`` (412 on the second PUT) and checks
    credentials (403 on a wrong key). Its server-side COPY shares the object's
    tail instead of moving bytes, so COPY (and thus S3A rename) cost here says
    nothing about AWS S3.

    - ``tls=True``: RGW serves HTTPS only, with a self-signed certificate for 127.0.0.1 made at
      start (``ca_bundle``, which boto3 is given) and a JVM truststore holding it (``truststore``,
      which ``ckpt_impls.configure`` hands Spark's JVMs): the HTTPS path AWS S3 is reached by,
      tested here. No metering proxy can stand in front of it: requests are counted in-JVM.
    """

    name = "ceph"
    emulator = False

    def __init__(self, objectstore: str = "memstore", data_dir: str | None = None, tls: bool = False) -> None:
        if objectstore not in OBJECTSTORES:
            valid = ", ".join(OBJECTSTORES)
            raise ValueError(f"ceph: objectstore must be one of {valid}, not {objectstore!r}")
        if data_dir is not None and objectstore != "bluestore":
            raise ValueError("ceph: data_dir needs objectstore='bluestore' (memstore keeps no data on disk)")
        self.objectstore = objectstore
        self.tls = tls
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self._root: Path | None = None
        self._conf: Path | None = None
        self._procs: list[subprocess.Popen] = []
        self._deadline = 0.0

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if any(shutil.which(b) is None for b in _BINARIES):
            return (
                "ceph: radosgw/ceph-mon/ceph-osd are not installed; "
                "run the set-up as root (it apt-installs them) or pick --store embedded"
            )
        if os.geteuid() != 0:
            return "ceph: running a Ceph cluster here needs root; run as root or pick --store embedded"
        return None

    @property
    def log_dir(self) -> Path | None:
        return self._root / "log" if self._root is not None else None

    @property
    def processes(self) -> tuple[subprocess.Popen, ...]:
        """The running daemons (mon, osd, rgw), ours to stop; empty once stopped."""
        return tuple(self._procs)

    def _start(self) -> None:
        if self._procs:
            raise RuntimeError("ceph: already started")
        reason = self.unavailable_reason()
        if reason is not None:
            raise StoreUnavailable(reason)
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._root = self.data_dir
        else:
            _remove_abandoned_clusters()
            self._root = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX))
        atexit.register(self._stop)
        self._deadline = time.monotonic() + _START_TIMEOUT
        try:
            self._bring_up()
        except Exception as exc:
            logs = self.log_dir
            self._halt()
            self._drop_data_keep_logs()
            if isinstance(exc, StoreUnavailable):
                raise
            raise StoreUnavailable(f"ceph: start failed: {_one_line(exc)}; read the logs in {logs}") from exc

    def _bring_up(self) -> None:
        root = self._root
        for sub in ("log", "run", "mon", "osd", "rgw", "tls"):
            (root / sub).mkdir(exist_ok=True)
        state_path = root / _STATE_FILE
        reuse = state_path.exists()
        if reuse:
            state = json.loads(state_path.read_text())
            if state["objectstore"] != self.objectstore:
                raise StoreUnavailable(
                    f"ceph: {root} holds a {state['objectstore']} cluster, not {self.objectstore}; "
                    "use another data_dir"
                )
        else:
            state = {"fsid": str(uuid.uuid4()), "objectstore": self.objectstore}
        mon_port, rgw_port = free_port(), free_port()
        while rgw_port == mon_port:
            rgw_port = free_port()
        frontend = f"endpoint=127.0.0.1:{rgw_port}"
        if self.tls:
            cert, key = self_signed(root / "tls")
            self.ca_bundle, self.truststore = cert, truststore(cert, root / "tls")
            frontend = f"ssl_endpoint=127.0.0.1:{rgw_port} ssl_certificate={cert} ssl_private_key={key}"
        conf = root / "ceph.conf"
        conf.write_text(_ceph_conf(root, state["fsid"], mon_port, frontend, self.objectstore))
        self._conf = conf

        # The monmap holds the mon's address; a reused cluster gets its new port injected.
        monmap = root / "run" / "monmap"
        mon_addr = f"[v1:127.0.0.1:{mon_port}]"
        self._run("monmaptool", "monmaptool", "-c", str(conf), "--create", "--clobber",
                  "--fsid", state["fsid"], "--addv", "a", mon_addr, str(monmap))
        if reuse:
            self._run("ceph-mon --inject-monmap", "ceph-mon", "-c", str(conf), "-i", "a",
                      "--inject-monmap", str(monmap))
        else:
            self._run("ceph-mon --mkfs", "ceph-mon", "-c", str(conf), "-i", "a", "--mkfs",
                      "--monmap", str(monmap))
        self._spawn("mon", "ceph-mon", "-f", "-i", "a")

        if not reuse:
            # crush/class "update on start" are off (they cost seconds), so the OSD is registered
            # here, while its mkfs (no mon needed; the slow step on bluestore) runs alongside.
            osd_uuid = str(uuid.uuid4())
            mkfs = self._launch("ceph-osd", "-c", str(conf), "-i", "0", "--mkfs",
                                "--osd-uuid", osd_uuid, "--no-mon-config")
            try:
                self._ceph("osd", "new", osd_uuid, "0")
                self._ceph("osd", "crush", "add", "osd.0", "1.0", "host=localhost", "root=default")
            finally:
                self._finish("ceph-osd --mkfs", mkfs)
        self._spawn("osd", "ceph-osd", "-f", "-i", "0")
        # radosgw waits for the OSD by itself; starting both now overlaps their start-up.
        self._spawn("rgw", "radosgw", "-f", "-n", "client.rgw")

        self._wait("osd.0 to come up", self._osd_up, "ceph-osd.0.log")
        if not wait_for_port(rgw_port, self._remaining(), alive=self._all_alive):
            raise self._failure(f"radosgw did not open port {rgw_port}", "ceph-client.rgw.log")
        self.endpoint = f"{'https' if self.tls else 'http'}://127.0.0.1:{rgw_port}"
        self.credentials = self._user_keys(reuse)
        self._wait("an S3 request to radosgw to succeed", self._s3_ok, "ceph-client.rgw.log")
        state_path.write_text(json.dumps(state))

    def kill_gateway(self) -> None:
        """SIGKILL the RADOS Gateway (radosgw), as a crash would, and reap it. The mon and the OSD,
        which hold every object (memstore in the OSD's memory, bluestore in its file), keep running;
        the endpoint refuses connections until ``start_gateway``."""
        gateway = self._gateway()
        if gateway is None:
            raise RuntimeError("ceph: no gateway is running")
        gateway.kill()
        gateway.wait()
        self._procs.remove(gateway)

    def start_gateway(self, timeout: float = _START_TIMEOUT) -> None:
        """Start radosgw again after ``kill_gateway``, from the same ceph.conf, so on the same port
        (clients, and a metering proxy in front, reconnect to the endpoint they had) with the same
        user and keys; returns once an S3 request succeeds (``StoreUnavailable`` if none does
        within ``timeout`` seconds). radosgw keeps no state of its own: the objects are the OSD's."""
        if not self._procs or self._gateway() is not None:
            raise RuntimeError("ceph: start_gateway needs a running cluster whose gateway was killed")
        self._deadline = time.monotonic() + timeout
        self._spawn("rgw", "radosgw", "-f", "-n", "client.rgw")
        port = int(self.endpoint.rsplit(":", 1)[1])
        if not wait_for_port(port, self._remaining(), alive=self._all_alive):
            raise self._failure(f"radosgw did not open port {port} again", "ceph-client.rgw.log")
        self._wait("an S3 request to the restarted radosgw to succeed", self._s3_ok, "ceph-client.rgw.log")

    def _gateway(self) -> subprocess.Popen | None:
        return next((p for p in self._procs if "radosgw" in p.args), None)

    def _stop(self) -> None:
        self._halt()
        if self._root is not None and self.data_dir is None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None
        atexit.unregister(self._stop)

    def _halt(self) -> None:
        # Reverse start order: rgw, then osd, then mon; rgw can hang 120 s once the mon is gone.
        for proc in reversed(self._procs):
            stop_process(proc, _STOP_TIMEOUT)
        self._procs = []

    def _drop_data_keep_logs(self) -> None:
        """After a failed start: the logs stay for the reader; a half-made cluster goes, so the
        next start in the same data_dir begins afresh (an established one is kept)."""
        if self._root is not None and not (self._root / _STATE_FILE).exists():
            for sub in ("mon", "osd", "rgw", "run"):
                shutil.rmtree(self._root / sub, ignore_errors=True)
        self._root = None
        atexit.unregister(self._stop)

    def s3a_options(self, sdk: str) -> dict[str, str]:
        # RGW 16 rejects the Java SDKs' chunked SigV4 upload of an empty object over HTTP (v1:
        # XAmzContentSHA256Mismatch; v2: 400). SDK v1's SigV2 signer works for every size; S3A
        # 3.4+ has no SigV2, and its unsigned-payload SigV4 signer (headers signed, the body's
        # hash not) works. S3A's plain SigV4 signer sends no x-amz-content-sha256: RGW answers 403.
        if sdk == "v1":
            return {"signing-algorithm": "S3SignerType"}
        return {"signing-algorithm": "AWS4UnsignedPayloadSignerType", **SYNC_LOCAL_UPLOADS}

    def describe(self) -> str:
        tls = ", HTTPS with a self-signed certificate" if self.tls else ""
        return f"{super().describe()}, {self.objectstore}{tls}"

    # --- helpers -----------------------------------------------------------------

    def _remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _all_alive(self) -> bool:
        return all(p.poll() is None for p in self._procs)

    def _spawn(self, name: str, *argv: str) -> None:
        with open(self.log_dir / f"{name}.out", "ab") as out:
            self._procs.append(
                subprocess.Popen(
                    ending_with_us([argv[0], "-c", str(self._conf), *argv[1:]]),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=_child_env(),
                )
            )

    def _run(self, what: str, *argv: str) -> str:
        return self._finish(what, self._launch(*argv))

    def _launch(self, *argv: str) -> subprocess.Popen:
        """Start a command; _finish collects its output and logs it to log/commands.log."""
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=_child_env(),
        )

    def _finish(self, what: str, proc: subprocess.Popen) -> str:
        """The command's stdout once it exits 0 within the start-up budget; killed otherwise."""
        try:
            out, err = proc.communicate(timeout=max(1.0, self._remaining()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self._log_command(proc, err)
            raise self._failure(f"{what} timed out", "commands.log") from None
        self._log_command(proc, err)
        if proc.returncode != 0:
            said = _last_line(err)
            raise self._failure(f"{what} exited with {proc.returncode}" + (f" ({said})" if said else ""),
                                "commands.log")
        return out

    def _log_command(self, proc: subprocess.Popen, err: str) -> None:
        # Written when the command ends, so commands run side by side don't interleave.
        with open(self.log_dir / "commands.log", "a") as log:
            log.write(f"$ {' '.join(proc.args)}\n{err}")

    def _ceph(self, *args: str) -> str:
        what = f"ceph {' '.join(args[:2])}"
        # Asked again until the start's deadline, and for a few seconds more once the cluster runs.
        retry_until = max(self._deadline, time.monotonic() + _COMMAND_RETRY_S)
        while True:
            # --connect-timeout bounds the wait for the mon, which may still be starting; at least a few
            # seconds once it runs: a machine under load can take longer than one to answer.
            timeout = str(max(5, int(self._remaining())))
            try:
                return self._run(what, "ceph", "-c", str(self._conf), "--connect-timeout", timeout, *args)
            except StoreUnavailable as exc:
                # With auth off, the CLI can ask for the command table before the monmap (and so
                # the fsid) reaches it; the mon answers EPERM "wrong fsid". Nothing ran: ask again.
                if _COMMAND_TABLE_RACE not in str(exc) or time.monotonic() >= retry_until:
                    raise
                time.sleep(0.2)

    def _wait(self, what: str, ready, log: str) -> None:
        while not ready():
            if not self._all_alive():
                raise self._failure(f"a daemon died while waiting for {what}", log)
            if self._remaining() <= 0:
                raise self._failure(f"timed out waiting for {what}", log)
            time.sleep(0.05)

    def _osd_up(self) -> bool:
        return json.loads(self._ceph("osd", "stat", "-f", "json"))["num_up_osds"] >= 1

    def _s3_ok(self) -> bool:
        try:
            self.client().list_buckets()
            return True
        except (BotoCoreError, ClientError):
            return False

    def _user_keys(self, reuse: bool) -> Credentials:
        # radosgw-admin generates the keys and prints them; they never touch a command line.
        admin = ["radosgw-admin", "-c", str(self._conf)]
        if reuse:
            out = self._run("radosgw-admin user info", *admin, "user", "info", f"--uid={_USER}")
        else:
            out = self._run("radosgw-admin user create", *admin, "user", "create",
                            f"--uid={_USER}", f"--display-name={_USER}",
                            "--gen-access-key", "--gen-secret")
        key = json.loads(out)["keys"][0]
        return Credentials(key["access_key"], key["secret_key"])

    def _failure(self, what: str, log: str) -> StoreUnavailable:
        return StoreUnavailable(f"ceph: {what}; read {self.log_dir / log}")


class CephTlsStore(CephStore):
    """``CephStore(tls=True)`` as a store kind of its own (``--store ceph-tls``): Ceph RGW over HTTPS
    with a self-signed certificate, reached with no metering proxy, as AWS S3 is."""

    name = "ceph-tls"

    def __init__(self, objectstore: str = "memstore", data_dir: str | None = None) -> None:
        super().__init__(objectstore, data_dir, tls=True)


def _ceph_conf(root: Path, fsid: str, mon_port: int, frontend: str, objectstore: str) -> str:
    store = f"osd objectstore = {objectstore}\n"
    if objectstore == "bluestore":
        # A sparse file in the OSD's data dir is the device; a blank one needs no fsck.
        store += (
            "bluestore block create = true\nbluestore block size = 10737418240\n"
            "bluestore fsck on mkfs = false\n"
        )
    return f"""\
[global]
fsid = {fsid}
mon host = v1:127.0.0.1:{mon_port}
mon initial members = a
# One loopback cluster, no auth: the S3 keys are RGW's own, checked by RGW.
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr2 = false
# Keep every file in our directory: several clusters can coexist, nothing leaks.
# (Admin sockets are set per daemon: CLI clients must not share one path.)
run dir = {root}/run
pid file = {root}/run/$cluster-$name.pid
log file = {root}/log/$cluster-$name.log
mon cluster log file = {root}/log/$cluster.log
crash dir = {root}/crash
# Auth is off: no keyring to read (the default path is under /etc/ceph).
keyring = /dev/null
# A single OSD: one replica, placement across OSDs rather than hosts.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
# The mon commits map changes at once instead of every second: most of a cold start (docs/findings/ceph-rgw.md).
paxos propose interval = 0.01

[mon]
mon data = {root}/mon
admin socket = {root}/run/$cluster-$name.asok

[osd]
osd data = {root}/osd
admin socket = {root}/run/$cluster-$name.asok
{store}osd crush update on start = false
osd class update on start = false

[client.rgw]
rgw data = {root}/rgw
admin socket = {root}/run/$cluster-$name.asok
# tcp_nodelay: without it Nagle meets delayed ACKs and a small GET waits for them (docs/findings/ceph-rgw.md).
rgw frontends = beast {frontend} tcp_nodelay=1
"""


def _remove_abandoned_clusters() -> None:
    """Remove the temp dirs of clusters whose owner was killed outright (its daemons died with it,
    see ``ending_with_us``, but nobody was left to remove their ~40 MB). Such a dir has a mon pid
    file naming no running ceph-mon. A failed start's dir (logs only, kept for the reader) and a
    cluster still starting (no pid file yet) or running are left alone."""
    for root in Path(tempfile.gettempdir()).glob(_TEMP_PREFIX + "*"):
        try:
            pid = int((root / "run" / "ceph-mon.a.pid").read_text())
        except (OSError, ValueError):
            continue
        stat = proc_stat(pid)
        if stat is None or stat[0] != "ceph-mon" or stat[1] == "Z":  # gone, pid reused, or not yet reaped
            shutil.rmtree(root, ignore_errors=True)


def _child_env() -> dict[str, str]:
    # The ceph CLI is Python: our PYTHONPATH/PYTHONHOME must not reach it; CEPH_ARGS and
    # CEPH_CONF would override the flags that keep every command on our cluster.
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CEPH_"))}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
