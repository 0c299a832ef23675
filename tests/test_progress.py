"""The bar across processes (``ckptbench.progress``): a line said while a bar is shown stands on a
line of its own in a log that takes stdout and stderr both, as a bench run's output file does."""

from __future__ import annotations

import re
import subprocess
import sys

SCRIPT = """
import os, sys, time
from ckptbench import progress
with progress.shown_for(os.environ) as say:
    bar = progress.Recorder("crash check", 2, "cycle")
    bar.update()
    time.sleep(1.2)  # the bar is drawn: its line is open
    bar.update()
    (say if sys.argv[1] == "say" else print)("crash check, job: 1 cycle")
    time.sleep(1.2)
"""


def _logged(tmp_path, how: str) -> str:
    log = tmp_path / f"{how}.txt"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", SCRIPT, how], stdout=out, stderr=subprocess.STDOUT, check=True)
    return log.read_text()


def test_a_said_line_starts_a_line_of_its_own_after_the_finished_bar(tmp_path):
    output = _logged(tmp_path, "say")
    assert re.search(r"^crash check, job: 1 cycle$", output, re.M), output
    # The bar it closed was drawn to its end first, before the line.
    assert output.index("2/2") < output.index("crash check, job"), output


def test_the_check_catches_a_line_printed_onto_the_bars_line(tmp_path):
    output = _logged(tmp_path, "print")
    assert "crash check, job: 1 cycle" in output, output
    assert not re.search(r"^crash check, job: 1 cycle$", output, re.M), output


GROWN = """
import os, time
from ckptbench import progress
with progress.shown_for(os.environ):
    bar = progress.Recorder("JVM counting overhead", 2, "batch")
    bar.update(2)
    time.sleep(1.2)
    bar.grow(1)
    bar.update()
    time.sleep(1.2)
"""


def test_a_bar_given_more_work_ends_at_its_new_total(tmp_path):
    output = subprocess.run([sys.executable, "-c", GROWN], capture_output=True, text=True, check=True).stderr
    assert re.search(r"JVM counting overhead: 100%.*\b3/3\b", output), output
