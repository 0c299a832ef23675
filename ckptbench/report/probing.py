"""What the store probe found, as tables: one store's checks and verdicts for ``probe``'s output,
and several stores side by side (the consistency matrix) for ``probe`` and the report."""

from __future__ import annotations

import math

from ckptbench import metrics
from ckptbench.metrics.capabilities import can_run
from ckptbench.report.table import Table


def probe_table(data: dict) -> str:
    """The probe's data (``experiments.probe``'s dict) as Markdown: where it probed, a table of the
    checks, a table of what each strategy can do here, then whether a COPY here moves the data."""
    checks = [[name, "ok" if c["ok"] else "FAIL", c["detail"]] for name, c in data["checks"].items()]
    strategies = [[name, can_run(v), ", ".join(v["depends_on"]),
                   "; ".join([f"cannot run: {reason}" for reason in v["reasons"]] + v["notes"]) or "-"]
                  for name, v in data["strategies"].items()]
    lines = [f"store: {data['describe']}, bucket {data['bucket']}",
             f"probed under {data['prefix']}: {data['cleanup']}", "",
             Table("", ["check", "result", "detail"], checks).markdown(), "",
             Table("strategies this store can run", ["strategy", "can run", "depends on", "cannot run, or notes"],
                   strategies).markdown()]
    share = (data.get("copy") or {}).get("share_of_put")
    if share is not None and metrics.copy_verdict(share) != "moves":
        lines += ["", "note: a COPY here does not move (all) the data, so a rename costs far less than on a store "
                      "whose COPY does (AWS S3): rename timings from this store say little about those"]
    return "\n".join(lines)


def store_matrix(stores: dict[str, dict]) -> list[Table]:
    """The probes of several stores side by side: a table of each capability a strategy relies on
    (with the answer a lost race got, and whether a COPY moves the data) and a table of which
    strategies each store can run. ``stores``: per store name, ``checks`` (``metrics.recorded_checks``
    or a probe's own), ``emulator`` (its column is marked so) and ``copy`` (``metrics.copy_fit``'s
    dict, or None)."""
    names = [f"{name} (emulator)" if said["emulator"] else name for name, said in stores.items()]
    capabilities = list(dict.fromkeys(c for said in stores.values() for c in said["checks"]))

    def result(said: dict, capability: str) -> str:
        check = said["checks"].get(capability)
        return "-" if check is None else "ok" if check["ok"] else "FAIL"

    def lost(said: dict) -> str:
        check = said["checks"].get("exclusive_create")
        return (check and metrics.lost_race_answers(check["detail"])) or "-"

    def copy(said: dict) -> str:
        fit = said["copy"]
        if not fit or not math.isfinite(fit["ms_per_mib"]):
            return "-"
        words = {"moves": "moves the data", "shares": "shares it", "near": "part, or unclear"}
        share = fit["share_of_put"]
        said = f"{share:.2f} of a PUT's per MiB" if share is not None and math.isfinite(share) else \
            "a PUT's cost did not grow with size"
        return f"{words[metrics.copy_verdict(share)]} ({said})"

    verdicts = {name: metrics.verdicts(said["checks"]) for name, said in stores.items() if said["checks"]}
    strategies = list(dict.fromkeys(s for v in verdicts.values() for s in v))
    return [
        Table("What each store keeps (the probe's checks)", ["capability", *names],
              [[capability, *(result(said, capability) for said in stores.values())] for capability in capabilities]
              + [["a lost race's answer", *(lost(said) for said in stores.values())],
                 ["COPY (a rename's cost)", *(copy(said) for said in stores.values())]],
              "Each check's detail is in the store's own probe. An emulator's timings say nothing of a real "
              "store's, and its COPY fit neither."),
        Table("Which strategies each store can run", ["strategy", *names],
              [[strategy, *(can_run(verdicts[name][strategy]) if name in verdicts else "-" for name in stores)]
               for strategy in strategies])]
