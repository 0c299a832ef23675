"""asv results stored under a benchmark module's old name, carried over to its new name.

asv names a benchmark ``module.Class.method`` and shows a stored result only while the result's
``version`` equals the suite's version of that benchmark, a hash of the source of the method and
of its ``setup_cache`` function (not of the module's name). A module renamed so starts new series
under the new names; the results stored under the old names stay in their files, which ``asv
publish`` (the pages, the regressions view) then passes over, since no benchmark of the suite has
those names.

``carry_over`` renames them in place: in every result file under an asv results directory
(``<results>/asv/<machine>/<commit>-<env>.json``), each ``results`` key whose module is in
``RENAMED`` takes the new module's name, its value (every column, the version included) as it
was. That is right only for a rename that left the benchmarks' code as it was, which is what the
version says: a benchmark whose code changed as well gets a new version, and asv still passes over
its older results after the carry-over. A result the file already holds under the new name is
kept, and the old one beside it left as it is, so a second run changes nothing.

``python -m ckptbench.report.asv_history [RESULTS_DIR]`` does it to ``RESULTS_DIR/asv``
(``results/asv`` by default; a ``bench --results DIR`` run's is ``DIR/asv``), once, before the
next ``asv publish``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ckptbench.config import CRASHLAB, FAULTLAB, ROOT

#: asv benchmark modules renamed, old name -> new name (issue #32: one name per lab).
RENAMED = {"failures": CRASHLAB, "fault_rates": FAULTLAB}


def renamed(name: str, renames: dict[str, str] = RENAMED) -> str:
    """``name`` (``module.Class.method``) under its module's new name, or ``name`` as it is."""
    module, _, rest = name.partition(".")
    return f"{renames[module]}.{rest}" if module in renames and rest else name


def carry_over(asv_dir: Path, renames: dict[str, str] = RENAMED) -> list[Path]:
    """Rename ``renames``' modules in the results of every result file under ``asv_dir`` (asv's
    results directory: a folder per machine); the files changed."""
    changed = []
    for path in sorted(asv_dir.glob("*/*.json")):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        results = data.get("results")
        if not isinstance(results, dict):
            continue
        out = {}
        for name, row in results.items():
            new = renamed(name, renames)
            out[new if new not in results else name] = row
        if list(out) != list(results):
            data["results"] = out
            path.write_text(json.dumps(data, separators=(",", ":")))
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    asv_dir = (Path(args[0]) if args else ROOT / "results") / "asv"
    if not asv_dir.is_dir():
        print(f"ckptbench.report.asv_history: error: no asv results in {asv_dir}; give the directory "
              f"`python -m ckptbench bench --results DIR` wrote", file=sys.stderr)
        return 2
    changed = carry_over(asv_dir)
    moves = ", ".join(f"{old}.* -> {new}.*" for old, new in RENAMED.items())
    print(f"{asv_dir}: {len(changed)} result file(s) carried over ({moves})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
