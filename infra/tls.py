"""TLS for S3 endpoints the public CAs do not vouch for: a self-signed certificate for a local
store, and a JVM truststore holding such a certificate (or a user's CA bundle).

boto3 trusts a PEM file (``verify=``); the JVM trusts a truststore named by the system property
``javax.net.ssl.trustStore`` (``ckpt_impls.session_conf`` sets it for the driver and executors),
which replaces the JDK's own CA list for that JVM.
A truststore holds public certificates only; it is written as JKS, which the JVM reads with no
password (``javax.net.ssl.trustStorePassword`` unset), so no password is kept or passed anywhere.
keytool insists on one while writing: a random one, through its environment, then forgotten.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

from .store import StoreUnavailable

#: The hosts a local store's certificate is valid for (its subjectAltName).
LOCAL_NAMES = "IP:127.0.0.1,DNS:localhost"
_PASSWORD_ENV = "CKPTBENCH_KEYTOOL_PASS"


def self_signed(directory: Path, days: int = 7) -> tuple[Path, Path]:
    """A new self-signed certificate for 127.0.0.1/localhost and its private key, written to
    ``directory`` as ``cert.pem`` and ``key.pem``: ``(cert, key)``."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", str(days),
         "-subj", "/CN=127.0.0.1", "-addext", f"subjectAltName={LOCAL_NAMES}",
         "-keyout", str(key), "-out", str(cert))
    key.chmod(0o600)
    return cert, key


def truststore(ca_pem: Path, directory: Path) -> Path:
    """A JKS truststore in ``directory`` trusting the certificate(s) of ``ca_pem`` (a PEM file: a
    self-signed certificate or a CA bundle); its path."""
    store = directory / "truststore.jks"
    store.unlink(missing_ok=True)
    blocks = ca_pem.read_text().split("-----END CERTIFICATE-----")
    certs = [b + "-----END CERTIFICATE-----\n" for b in blocks if "-----BEGIN CERTIFICATE-----" in b]
    if not certs:
        raise StoreUnavailable(f"{ca_pem} holds no PEM certificate: name a PEM CA bundle")
    env = {**os.environ, _PASSWORD_ENV: secrets.token_hex(16)}
    for i, cert in enumerate(certs):
        part = directory / f"ca-{i}.pem"
        part.write_text(cert)
        _run("keytool", "-importcert", "-noprompt", "-alias", f"ca-{i}", "-file", str(part), "-keystore", str(store),
             "-storetype", "JKS", "-storepass:env", _PASSWORD_ENV, env=env)
        part.unlink()
    return store


def _run(*argv: str, env: dict | None = None) -> None:
    if shutil.which(argv[0]) is None:
        raise StoreUnavailable(f"TLS set-up needs {argv[0]} (openssl, and keytool from the JDK) on PATH")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StoreUnavailable(f"TLS set-up: {argv[0]} exited with {done.returncode} ({said})")
