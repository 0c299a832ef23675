"""Everything the README's commands need beyond the venv: S3A jars, the Java build, Ceph, the
scripts asv's pages load (npm, for pages that open offline) and Chromium (the pages' browser test).

Idempotent and quick when all is in place; `make` runs it before every job.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ckpt_impls import build, jars

from . import publish

CEPH_PACKAGES = ["radosgw", "ceph-mon", "ceph-osd", "ceph-common"]
CHROMIUM_PACKAGES = ["chromium"]


def install_ceph() -> None:
    """apt-get Ceph's Debian packages when running as root and they are missing."""
    if all(shutil.which(b) for b in ("radosgw", "ceph-mon", "ceph-osd", "radosgw-admin")):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("ceph: not installed and not root with apt-get; Ceph RGW runs will be skipped")
        return
    print("ceph: installing Debian packages " + " ".join(CEPH_PACKAGES), flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *CEPH_PACKAGES],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def install_chromium() -> None:
    """apt-get Debian's Chromium (tests/test_pages.py opens the published pages in it) when root and missing."""
    if shutil.which("chromium"):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("chromium: not installed and not root with apt-get; the published pages' browser test will be skipped")
        return
    print("chromium: installing Debian package " + " ".join(CHROMIUM_PACKAGES), flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *CHROMIUM_PACKAGES],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    jars.fetch_bundled()
    if build.build():
        print(f"built {jars.MANAGERS_JAR}")
    install_ceph()
    publish.install()
    install_chromium()


if __name__ == "__main__":
    main()
