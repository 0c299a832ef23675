"""The crash lab's tests (``tests/test_crashlab.py``, ``tests/test_crashlab_levers.py``) in a pytest
process of their own, run beside the rest of the suite (conftest ``beside_the_suite``). They spend
minutes starting, killing and restarting driver JVMs, while the suite's own process leaves a core
idle most of the time; in line they would add those minutes to the suite's. While this test is
selected, conftest leaves those files' own tests out of the suite's process (the marker's ``runs``)
and the child runs those the main run selected (``-k 'crash and not damaged'`` all but one; ``-k
beside``, which selects none of them, all); ``pytest tests/test_crashlab.py`` alone runs them in
line as before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import assert_beside_pytest_passed, beside_pytest, child_beside

CRASHLAB_TESTS = ("tests/test_crashlab.py", "tests/test_crashlab_levers.py")
TIMEOUT_S = 2400  # against a hang only


def crashlab_part(workdir: Path, tests: list[str]) -> subprocess.Popen:
    """pytest on ``tests`` (of ``CRASHLAB_TESTS``' files, as conftest selected them) in this venv, its output
    into ``workdir``."""
    return beside_pytest(sys.executable, tests, workdir)


@pytest.mark.slow
@pytest.mark.beside_the_suite.with_args(crashlab_part, runs=CRASHLAB_TESTS)
def test_the_crash_lab_tests_pass_beside_the_suite(request):
    proc, workdir = child_beside(request.config, crashlab_part)
    assert_beside_pytest_passed(proc, workdir, TIMEOUT_S)
