"""What a store can run, from the probe's checks: each strategy's verdict from its declared needs
(``ckpt_impls.Strategy.requires``)."""

from __future__ import annotations

import ckpt_impls
from ckptbench.record import results


def verdicts(checks: dict[str, dict]) -> dict[str, dict]:
    """For each strategy, from its declared ``requires``: whether this store can run it, the checks it
    depends on, why not (``reasons``), and the settings it needs here (``settings``: a failed need
    with an ``unless``, explained in ``notes``)."""
    out = {}
    for strategy in ckpt_impls.STRATEGIES.values():
        reasons, settings, notes = [], [], []
        for need in strategy.requires:
            check = checks[need.capability]
            if check["ok"]:
                continue
            if need.unless:
                settings.append(need.unless)
                notes.append(f"{need.capability}: {check['detail']}; without it, set {need.unless}")
            else:
                reasons.append(f"{need.capability}: {check['detail']} (needed: {need.why})")
        out[strategy.name] = {"can_run": not reasons, "depends_on": [n.capability for n in strategy.requires],
                              "settings": settings, "notes": notes, "reasons": reasons}
    return out


def recorded_checks(record: results.Results) -> dict[str, dict]:
    """The checks a probe recorded (``results.Recorder.add_capabilities``), in ``run``'s form, for
    ``verdicts``; empty where the record holds no probe."""
    return {row.capability: {"ok": bool(row.ok), "detail": row.detail, "seconds": row.seconds,
                             "what": ckpt_impls.CAPABILITIES.get(row.capability, "")}
            for row in record.capabilities.itertuples()}


def can_run(verdict: dict) -> str:
    """One strategy's verdict (of ``verdicts``) in words: yes, yes with the settings it needs, or NO."""
    if verdict["can_run"] and verdict["settings"]:
        return "yes, with " + ", ".join(f"spark.hadoop.{s}" for s in verdict["settings"])
    return "yes" if verdict["can_run"] else "NO"


#: What the probe's ``exclusive_create`` detail says before the answers the losing writers got.
LOSERS = "; the loser got "


def lost_race_answers(detail: str) -> str | None:
    """The answers the losers of ``exclusive_create``'s races got (``HTTP 412 (20)``), from its
    detail; None where it does not say (a failed check, a record from before it did)."""
    return detail.split(LOSERS, 1)[1] if LOSERS in detail else None
