"""The suite's version-sensitive part on Spark 3.5, in the Spark 3.5 venv (``make setup-spark35``),
run beside the rest of the suite (conftest ``beside_the_suite``), on one store (``spark35_suite``): the
contract tests, the version checks, the stateful streaming query (stop, restart, state kept) per
strategy, the state store maintenance watch, the manifest strategy's two writer JVMs, which
RocksDB state store requests go through the manager and its state reloaded after a restart, and
the crash lab's verdict on a driver's output.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ckptbench import config
from helpers import ROOT, TEST_STORES, assert_beside_pytest_passed, beside_pytest, child_beside, skip_unless_ci

PYTHON = ROOT / ".venv-spark35" / "bin" / "python"
TESTS = ["tests/test_contract.py", "tests/test_spark_versions.py", "tests/test_s3a_conditional.py",
         # the managers' own S3 calls, in each SDK's body
         "tests/test_outages.py::test_a_manager_whose_store_never_answers_fails_naming_the_store_and_how_long",
         "tests/test_streaming.py::test_stateful_query_resumes_with_its_state",
         "tests/test_manifest.py::test_writers_in_two_jvms_never_take_the_same_record_number",
         "tests/test_state_stores.py",
         # the maintenance watch wraps 3.5's managers, and 3.5 runs maintenance on threads of its own
         "tests/test_requests.py::test_the_maintenance_watch_logs_maintenance_calls_and_none_of_a_batch",
         # crashlab's verdict, the version-sensitive part of the lab: Spark's manager factory (its
         # package moved in 4.1) and reading the sink's rows, after a driver on 3.5 wrote them
         "tests/test_crashlab.py::test_a_damaged_output_is_caught"]
#: What ``-k`` leaves out beside the other store (``spark35_suite``): the floor's RocksDB reload runs in the main
#: suite (with the floor of before it failed on 4.3 too), and so do the version checks that fetch
#: jars with Maven, whichever Spark's they are.
LEFT_OUT = "(in-memory-floor or fetch)"
TIMEOUT_S = 1800  # against a hang only: well above its own time on 2 cores


def spark35_suite(workdir: Path) -> subprocess.Popen | None:
    """pytest on ``TESTS`` in the Spark 3.5 venv, on ``config.default_store`` (Ceph RGW where it can
    run, else the embedded store), its output into ``workdir``; None without that venv. What is
    version-sensitive is Spark's and the managers' classes, not the store: the main suite runs
    every store."""
    if not PYTHON.exists():
        return None
    others = " or ".join(sorted(set(TEST_STORES) - {config.default_store()}))
    return beside_pytest(PYTHON, [*TESTS, "-k", f"not ({others}) and not {LEFT_OUT}"], workdir)


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(spark35_suite)
def test_the_version_sensitive_tests_pass_on_spark_3_5(request):
    proc, workdir = child_beside(request.config, spark35_suite)
    if proc is None:
        skip_unless_ci(f"no Spark 3.5 venv at {PYTHON.parent.parent}: run `make setup-spark35`")
    assert_beside_pytest_passed(proc, workdir, TIMEOUT_S)
    version = subprocess.run([str(PYTHON), "-c", "import pyspark; print(pyspark.__version__)"],
                             capture_output=True, text=True, check=True).stdout
    assert version.startswith("3.5."), version
