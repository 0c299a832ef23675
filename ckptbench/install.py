"""Everything the README's commands need beyond the venv: S3A jars, the Java build, the driver JVMs'
class archive, Ceph, the scripts asv's pages load (npm, for pages that open offline) and Chromium
(the pages' browser test).

Idempotent and quick when all is in place; `make` runs it before every job.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ckpt_impls import build, jars
from ckptbench.harness import jvm_archive
from ckptbench.report import publish

CEPH_PACKAGES = ["radosgw", "ceph-mon", "ceph-osd", "ceph-common"]
CHROMIUM_PACKAGES = ["chromium"]


def apt_install(what: str, packages: list[str], commands: list[str], without: str) -> None:
    """apt-get Debian's ``packages`` for ``what`` when any of ``commands`` is missing and we run as
    root; otherwise say what goes ``without`` them."""
    if all(shutil.which(c) for c in commands):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"{what}: not installed and not root with apt-get; {without}")
        return
    print(f"{what}: installing Debian packages " + " ".join(packages), flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    jars.fetch_bundled()
    if build.build():
        print(f"built {jars.MANAGERS_JAR}")
    # The drivers' class archive of this build and the JVM options set now (made once per key).
    archive = jvm_archive.path(jvm_archive.jvm_options(os.environ.get("SPARK_SUBMIT_OPTS")))
    if not archive.exists() and jvm_archive.options():
        print(f"made the driver JVMs' class archive {archive}")
    apt_install("ceph", CEPH_PACKAGES, ["radosgw", "ceph-mon", "ceph-osd", "radosgw-admin"],
                "Ceph RGW runs will be skipped")
    publish.install()
    # tests/test_pages.py opens the published pages in Chromium
    apt_install("chromium", CHROMIUM_PACKAGES, ["chromium"], "the published pages' browser test will be skipped")


if __name__ == "__main__":
    main()
