"""The fault lab's tables (``python -m ckptbench faultlab`` and the report's fault section), built
from its record through ``ckptbench.metrics`` alone: failure rates per workload x profile x
strategy, what the eventual profiles did, and the store outages, each strategy's beside Spark's
default's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckptbench import config, metrics
from ckptbench.record import results
from ckptbench.report.table import Table


def _ran(record: results.Results) -> list[tuple[str, str, str]]:
    """Each workload x profile x strategy a fault-lab record ran, in the order they ran."""
    joined = record.runs.merge(record.fault_runs, on="run")
    return list(dict.fromkeys(zip(joined.workload, joined.profile, joined.strategy, strict=True)))


def fault_summary(record: results.Results) -> list[dict]:
    """One row per workload x profile x strategy of a fault-lab record, in the order they ran:
    runs, deaths, stalls and the rates (``ckptbench.metrics``), and what the first run that did not
    complete died of (its innermost cause, else Spark's error or why it stalled)."""

    out = []
    for workload, profile, strategy in _ran(record):
        runs_ = metrics.fault_runs(record, strategy, profile, workload)
        deaths = runs_[runs_.outcome != "completed"]
        causes = [cause or error for cause, error in zip(deaths.cause, deaths.error, strict=True) if cause or error]
        out.append({
            "workload": workload, "profile": profile, "strategy": strategy, "runs": len(runs_),
            "died": int((runs_.outcome == "died").sum()), "stalled": int((runs_.outcome == "stalled").sum()),
            "death_rate": metrics.death_rate(record, strategy, profile, workload),
            "failed_batch_rate": metrics.failed_batch_rate(record, strategy, profile, workload),
            "retried_per_run": metrics.retried_per_run(record, strategy, profile, workload),
            "injected_per_run": metrics.injected_per_run(record, strategy, profile, workload),
            "recovered": f"{int(runs_.recovered.sum())}/{int(runs_.recovered.notna().sum())}",
            "exactly_once_violations": (metrics.exactly_once_violations(record, strategy, profile)
                                        if workload == "file_sink" else None),
            "cause": causes[0] if causes else ""})
    return out


def eventual_findings(record: results.Results) -> list[str]:
    """What the ``eventual*`` profiles (pre-2020 S3 consistency, emulated) did in this record, in
    words: per workload x profile, which strategies failed (died or stalled) and of what (``summary``'s
    cause), which did not; then whether it reproduces the reference articles' failure, rename failing
    where direct, conditional and manifest do not, and if not, what differs."""
    rows = [r for r in fault_summary(record) if r["profile"].startswith("eventual")]
    if not rows:
        return []
    out, failed = [], {}
    for workload, profile in dict.fromkeys((r["workload"], r["profile"]) for r in rows):
        group = [r for r in rows if (r["workload"], r["profile"]) == (workload, profile)]
        bad = [r for r in group if r["died"] or r["stalled"]]
        fine = [r["strategy"] for r in group if not (r["died"] or r["stalled"])]
        for r in bad:
            failed.setdefault(r["strategy"], []).append(f"{profile} x {workload}")
        died = "; ".join(f"{r['strategy']} in {r['died'] + r['stalled']} of {r['runs']} runs "
                         f"({r['cause'][:160] or 'no cause recorded'})" for r in bad)
        out.append(f"{profile} x {workload}: " + (f"failed: {died}" if bad else "no strategy failed")
                   + (f"; no failure: {', '.join(fine)}." if fine else "; every strategy failed."))
    others = sorted(set(failed) - {"rename"})
    if "rename" not in {r["strategy"] for r in rows}:
        verdict = ("rename was not run under these profiles, so this run says nothing of the reference articles' "
                   "failure" + (f"; {', '.join(others)} failed (causes above)." if others else "."))
    elif "rename" in failed and not others:
        verdict = ("So this run reproduces the reference articles' failure: rename fails under pre-2020 "
                   "consistency where direct, conditional and manifest do not.")
    elif "rename" in failed:
        where = "; ".join(f"{s}: " + ", ".join(failed[s]) for s in others)
        verdict = (f"rename fails as the reference articles describe, but this run does not show the others "
                   f"safe: {', '.join(others)} failed too ({where}), "
                   "for the causes above; only a strategy that failed nowhere survives pre-2020 consistency here.")
    else:
        verdict = ("rename did not fail in this run, so it does not reproduce the reference articles' failure"
                   + (f"; {', '.join(others)} failed (causes above)." if others else "."))
    return [*out, verdict]


FAULT_HEADER = ["workload", "profile", "strategy", "runs", "died", "stalled", "failed batches", "retried / run",
          "injected / run", "recovered", "exactly-once violations", "first failure's root cause"]


def fault_rows(record: results.Results) -> list[list[str]]:
    """``summary`` as text cells, in ``FAULT_HEADER``'s order."""
    def fmt(value: float, spec: str) -> str:
        return "n/a" if value != value else format(value, spec)

    return [[r["workload"], r["profile"], r["strategy"], str(r["runs"]), str(r["died"]), str(r["stalled"]),
             f"{fmt(100 * r['failed_batch_rate'], '.0f')}%", fmt(r["retried_per_run"], ".1f"),
             fmt(r["injected_per_run"], ".1f"), r["recovered"] if r["recovered"] != "0/0" else "-",
             "-" if r["exactly_once_violations"] is None else str(r["exactly_once_violations"]),
             r["cause"][:200]] for r in fault_summary(record)]


OUTAGE_HEADER = ["workload", "profile", "strategy", "runs", "store away (s)", "rode it out", "died", "stalled",
                 "died after (s)", "resumed after (s)", "recovered", "exactly-once violations"]


def outage_rows(record: results.Results) -> list[list[str]]:
    """Store outages: per workload x outage profile x strategy (the runs whose outage began), the
    outage's length, how many runs rode it out, died or stalled, the medians of the seconds from the
    outage's start to the query's death and to its first batch after the store was back
    (``ckptbench.metrics``), restarts that resumed and the file sink's exactly-once violations."""
    def sec(value: float) -> str:
        return "-" if value != value else f"{value:.1f}"

    out = []
    for r in fault_summary(record):
        runs_ = metrics.outage_runs(record, r["strategy"], r["profile"], r["workload"])
        if runs_.empty:
            continue
        args = (record, r["strategy"], r["profile"], r["workload"])
        out.append([r["workload"], r["profile"], r["strategy"], str(len(runs_)),
                    sec(float(pd.to_numeric(runs_.outage_s).median())),
                    str(int((runs_.outcome == "completed").sum())), str(int((runs_.outcome == "died").sum())),
                    str(int((runs_.outcome == "stalled").sum())), sec(metrics.time_to_death(*args)),
                    sec(metrics.time_to_resume(*args)), r["recovered"] if r["recovered"] != "0/0" else "-",
                    "-" if r["exactly_once_violations"] is None else str(r["exactly_once_violations"])])
    return out


def fault_table(record: results.Results) -> str:
    """A fault-lab record as Markdown (``python -m ckptbench faultlab``): the section's tables
    (``tables_of``), then what the eventual profiles did (``eventual_findings``)."""
    findings = eventual_findings(record)
    return "\n\n".join([t.markdown() for t in tables_of(record)]
                        + (["\n".join(["Pre-2020 consistency (eventual profiles):", *findings])] if findings else []))


def _outage_tables(record: results.Results) -> list[Table]:
    rows = outage_rows(record)
    if not rows:
        return []
    return [Table("Store outages", OUTAGE_HEADER, rows,
                  "The store taken away after the query's first batches: every request reset by the proxy for the "
                  "profile's seconds (outage-*), or the gateway process killed and started again (gateway-restart). "
                  "store away: from the outage's start until the store was back; rode it out: runs that completed "
                  "every batch; died after: seconds from the outage's start to the query's death; resumed after: to "
                  "the end of its first batch after the store was back (medians over the runs); recovered: "
                  "restarts without faults that resumed.")]


AGAINST_HEADER = ["workload", "profile", "strategy", "did not die", f"did not die, against {config.SPARK_DEFAULT[0]}",
                  "died after (s), each run", f"a run outlives one of {config.SPARK_DEFAULT[0]}'s", "verdict"]


def _points(i: metrics.Interval) -> str:
    return f"{100 * i.value:+.0f} points" + ("" if i.low != i.low else f" [{100 * i.low:+.0f}, {100 * i.high:+.0f}]")


def against_default_rows(record: results.Results) -> list[list[str]]:
    """Per workload x outage profile, each strategy's runs beside Spark's default's
    (``config.SPARK_DEFAULT``) where both met the outage (``metrics.beside``): how many did not die,
    and that share less Spark's default's in points; when each other died; the chance that one of
    its runs outlives one of Spark's default's; and the verdict, on dying first, then on outliving:
    more or less often, sooner or later, only where the whole interval says so, else a tie."""
    default, out, ran = config.SPARK_DEFAULT[0], [], _ran(record)
    for workload, profile, strategy in ran:
        if strategy == default or (workload, profile, default) not in ran:
            continue
        found = metrics.beside(record, strategy, default, profile, workload)
        mine, theirs, chance = found.lived, found.other_lived, found.outlives
        if not len(mine) or not len(theirs):
            continue
        if np.isinf(mine).all() and np.isinf(theirs).all():
            verdict = "neither died in it"
        elif chance.low != chance.low:
            verdict = "too few runs to call (two or more each)"
        elif found.did_not_die.excludes_zero:
            verdict = f"died {'more' if found.worse else 'less'} often than {default}"
        elif chance.low > 0.5 or chance.high < 0.5:
            verdict = f"died {'sooner' if found.worse else 'later'} than {default}"
        else:
            verdict = f"a tie: the runs cannot tell it from {default}"
        deaths = ", ".join(f"{s:.1f}" for s in sorted(mine[np.isfinite(mine)])) or "-"
        shown = (f"{100 * chance.value:.0f}% (one run)" if chance.low != chance.low else
                 f"{100 * chance.value:.0f}% [{100 * chance.low:.0f}, {100 * chance.high:.0f}]")
        out.append([workload, profile, strategy, f"{int(np.isinf(mine).sum())} of {len(mine)}",
                    _points(found.did_not_die), deaths, shown, verdict])
    return out


def tables_of(record: results.Results) -> list[Table]:
    """The fault section's tables of a fault-lab record: failure rates, then, if it ran any store
    outages, what they did and each strategy beside Spark's default."""
    out = [Table(
        "Per workload x fault profile x strategy", FAULT_HEADER, fault_rows(record),
        "died: the query stopped with an exception (its first line is the error); stalled: its batches did not come "
        "in time; failed batches: asked and not done; retried: requests repeating one answered with nothing or a "
        "5xx; recovered: restarts (faults off) that resumed; exactly-once: the file sink's output, read through "
        "_spark_metadata, holds whole batches once."), *_outage_tables(record)]
    against = against_default_rows(record)
    if against:
        out.append(Table(f"Store outages, each strategy beside {config.SPARK_DEFAULT[0]}", AGAINST_HEADER, against,
                         AGAINST_NOTE))
    return out


AGAINST_NOTE = ("did not die: runs whose query rode the outage out (or stalled), and that share less Spark's "
                "default's in percentage points. died after: seconds from the outage's start to the query's death, "
                "for each run that died (a death after the store was back counts too). Outlives: the chance that "
                "one of the strategy's runs lived longer than one of Spark's default's, a run that did not die "
                "outliving every run that did and tying with another that did not (Mann-Whitney's U over the "
                "pairs). The verdict reads dying first, then outliving; each interval is 95% (bootstrap), and a "
                "difference is called only where the whole interval is on one side (of 0 points, of 50%); "
                "otherwise the runs cannot tell them apart.")
