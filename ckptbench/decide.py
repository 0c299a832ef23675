"""The recommendation: which configuration (a strategy, and Spark's own checkpoint levers:
``config.presets_for``) to run on a store, for a workload, and why.

Derived only from measured numbers (``ckptbench.metrics`` over the records) and, where they
were measured, the store's capabilities (the probe) and the crash lab's exactly-once results.
The rule, in order, so a reader can check every verdict by hand:

1. A configuration is out if the store cannot run its strategy (the probe says why), if Spark
   refuses its levers for the workload (Spark's reason is shown), if its run failed, or if the
   crash lab saw a row lost or duplicated in it, with its strategy in Spark's own settings, or
   with its levers and any strategy (a lever's damage is Spark's).
2. Among the rest, a strategy measured to refuse a second writer comes before the others. The
   measure is the race (``ckptbench.experiments.race``): two writers create one checkpoint
   file at once, held by the proxy until both writes meet, round after round, per file kind;
   a strategy refuses a second writer when exactly one writer won every round and every round
   met (``metrics.refuses_second_writer``). Nothing else counts as refusing: a strategy's
   promise (``exclusive_create``) is shown beside it as a promise, never preferred on; where
   the race was not run on a store no strategy is preferred and the reasons say so. The
   crash lab's zombie driver (a second query started on a running checkpoint) is shown, not
   used: Spark's own checks usually stop it before two writes meet, whatever the strategy.
3. Then the lowest commit latency (Spark's walCommit + commitOffsets, p50 over measured batches);
   within ``TIE`` of the fastest, the cheapest in requests (dollars per month at the trigger
   interval, a projection at AWS list prices) wins. The cost counts every billable request of
   the configuration (``metrics.billable_requests_all_by_op``: those between batches too),
   since Spark's levers move requests no strategy controls (RocksDB's uploads, checksum files);
   the strategy's own share (``metrics.strategy_controls``) is shown beside it.

Each decision carries every candidate's numbers and the reason it was not chosen.
"""

from __future__ import annotations

import dataclasses

import ckpt_impls
from ckptbench import metrics
from ckptbench.config import DEFAULT_PRESET, SPARK_DEFAULT, job_of
from ckptbench.metrics import cost
from ckptbench.record import disk, results

#: Commit latencies within this fraction of the fastest are a tie, settled by cost.
TIE = 0.10


@dataclasses.dataclass
class Candidate:
    strategy: str
    preset: str = DEFAULT_PRESET  # Spark's levers (``config.presets_for``)
    batch_p50_ms: float = float("nan")  # triggerExecution, p50
    commit_p50_ms: float = float("nan")  # walCommit + commitOffsets, p50
    commit_p95_ms: float = float("nan")
    requests_per_batch: float = float("nan")  # billable, made by the strategy
    other_requests_per_batch: float = float("nan")  # billable, made whatever the strategy
    dollars_per_month: float = float("nan")  # a projection of all its requests: see ckptbench.metrics.cost
    other_dollars_per_month: float = float("nan")  # of other_requests_per_batch (as measured in its own run)
    refuses_second_writer: bool | None = None  # by the race; None: not measured
    second_writer_source: str = ""  # "measured", "promised" (not measured) or "" (neither)
    second_writer: str = "not measured"  # what the report shows
    out: str | None = None  # why it cannot be recommended
    note: str = ""  # why it was not chosen, when it could have been
    refused: bool = False  # Spark refused the configuration (``out`` holds its reason)

    @property
    def levers(self) -> int:
        """How many of Spark's levers the configuration sets."""
        return 0 if self.preset == DEFAULT_PRESET else len(self.preset.split("+"))

    @property
    def label(self) -> str:
        """``strategy`` and its levers, as the report and the CLI name a configuration."""
        return self.strategy if self.preset == DEFAULT_PRESET else f"{self.strategy} + {self.preset}"


@dataclasses.dataclass
class Decision:
    store: str
    workload: str
    recommended: str | None  # the chosen configuration's label
    reasons: list[str]
    candidates: list[Candidate]
    chosen: Candidate | None = None
    baseline: Candidate | None = None  # Spark's default configuration (``SPARK_DEFAULT``), where measured


@dataclasses.dataclass
class Safety:
    """What the crash lab measured for one strategy on one store (None: not measured)."""

    cycles: int = 0
    duplicated: int = 0
    lost: int = 0
    two_writer: str | None = None  # the zombie run's outcome: shown, never taken as refusing
    race_rounds: int = 0  # the race's rounds (0: not run)
    race_two_winners: int = 0  # rounds both writers won
    race_one_winner: int = 0  # rounds that met with exactly one winner
    refuses: bool | None = None  # metrics.refuses_second_writer; None: the race was not run


def _candidate(record: results.Results, strategy: str, workload: str, trigger_s: float,
               preset: str = DEFAULT_PRESET) -> Candidate:
    c = Candidate(strategy, preset)
    keys = int(record.runs[record.runs.workload == workload]["keys"].iloc[0])
    try:
        run = record.run(strategy, workload, keys=keys, preset=preset)
    except results.Refused as e:
        c.out, c.refused = f"Spark refuses it: {str(e).split(' refused: ', 1)[-1]}", True
        return c
    except results.RunFailed as e:
        c.out = f"its run failed ({e})"
        return c
    c.batch_p50_ms = metrics.duration_percentile(run, "triggerExecution", 50)
    c.commit_p50_ms = (metrics.duration_percentile(run, "walCommit", 50)
                       + metrics.duration_percentile(run, "commitOffsets", 50))
    c.commit_p95_ms = (metrics.duration_percentile(run, "walCommit", 95)
                       + metrics.duration_percentile(run, "commitOffsets", 95))
    own = metrics.billable_requests_by_op(run, controlled=True)
    others = {op: n - own.get(op, 0.0) for op, n in metrics.billable_requests_all_by_op(run).items()}
    c.requests_per_batch, c.other_requests_per_batch = sum(own.values()), sum(others.values())
    c.dollars_per_month = cost.per_month(cost.dollars(own), trigger_s)
    c.other_dollars_per_month = cost.per_month(cost.dollars(others), trigger_s)
    return c


def _charge_others_by_configuration(candidates: list[Candidate]) -> None:
    """Add to each candidate's cost the requests no strategy controls (a sink's data files,
    RocksDB's uploads, checksum files, maintenance) as the mean over the strategies measured in the
    same configuration of Spark's levers: the levers decide them, and one run's share of them must
    not tip the choice between strategies."""
    for preset in {c.preset for c in candidates}:
        ran = [c for c in candidates if c.preset == preset and c.out is None]
        if not ran:
            continue
        requests = sum(c.other_requests_per_batch for c in ran) / len(ran)
        dollars = sum(c.other_dollars_per_month for c in ran) / len(ran)
        for c in ran:
            c.other_requests_per_batch, c.other_dollars_per_month = requests, dollars
            c.dollars_per_month += dollars


def _first(eligible: list[Candidate]) -> tuple[Candidate, list[Candidate], list[Candidate]]:
    """Rules 2 and 3 over ``eligible`` (none out): the configuration chosen, the pool it was chosen
    from (those measured to refuse a second writer, else all) and those tied with the fastest."""
    pool = [c for c in eligible if c.refuses_second_writer] or eligible
    fastest = min(c.commit_p50_ms for c in pool)
    tied = [c for c in pool if c.commit_p50_ms <= fastest * (1 + TIE)]
    # Within a cent a month, the configuration with fewer of Spark's levers: less to set and keep.
    return min(tied, key=lambda c: (round(c.dollars_per_month, 2), c.levers)), pool, tied


def runner_up(decision: Decision) -> Candidate | None:
    """The configuration the rule would choose were the chosen one gone (None: no other is eligible)."""
    rest = [c for c in decision.candidates if c.out is None and c is not decision.chosen]
    return _first(rest)[0] if rest else None


def _levers_broke(safety: dict, preset: str) -> str | None:
    """How the crash lab saw configuration ``preset`` break exactly-once with some strategy (None:
    it did not, or never ran it). A lever's damage is Spark's (async progress tracking re-plans
    batches whose offsets it never wrote), so it stands against every strategy run with it."""
    if preset == DEFAULT_PRESET:
        return None
    for key, found in safety.items():
        if isinstance(key, tuple) and key[1] == preset and (found.duplicated or found.lost):
            return f"with {key[0]}: {found.duplicated} rows duplicated, {found.lost} lost in {found.cycles} cycles"
    return None


def _second_writer(c: Candidate, found: Safety | None) -> None:
    """Fill ``c``'s second-writer fields from the race alone (see the module's rule 2)."""
    if found and found.refuses is not None:
        c.refuses_second_writer, c.second_writer_source = found.refuses, "measured"
        if found.refuses:
            c.second_writer = f"refused (race: 1 winner in {found.race_one_winner}/{found.race_rounds} rounds)"
        elif found.race_two_winners:
            c.second_writer = f"NOT refused (race: 2 winners in {found.race_two_winners}/{found.race_rounds})"
        else:
            c.second_writer = (f"NOT refused (race: 1 winner in only {found.race_one_winner}/{found.race_rounds} "
                               "rounds that met)")
    elif ckpt_impls.get(c.strategy).exclusive_create:
        c.second_writer_source, c.second_writer = "promised", "promised, not measured (no race run)"
    else:
        c.second_writer = "not measured (no race run; promises nothing)"


def decide(record: results.Results, workload: str, trigger_s: float = 10.0,
           safety: dict[str, Safety] | None = None, runnable: dict[str, str | None] | None = None) -> Decision:
    """The decision for ``workload`` on the store of ``record`` (a streaming record).

    ``safety``: the crash lab's findings per strategy; ``runnable``: the probe's verdict per
    strategy (None: can run; else why not). Either may be missing: the reasons then say what was
    not measured."""
    safety, runnable = safety or {}, runnable or {}
    runs = record.runs[record.runs.workload == workload]
    pairs = dict.fromkeys(zip(runs.strategy, runs.preset.fillna(DEFAULT_PRESET), strict=True))
    candidates = [_candidate(record, s, workload, trigger_s, p) for s, p in pairs
                  if s in record.strategies()]
    for c in candidates:
        found = safety.get(c.strategy)
        if c.out:
            _second_writer(c, found)
            continue
        own = found if c.preset == DEFAULT_PRESET else safety.get((c.strategy, c.preset))
        broken = _levers_broke(safety, c.preset)
        if runnable.get(c.strategy):
            c.out = f"the store cannot run it: {runnable[c.strategy]}"
        elif own and (own.duplicated or own.lost):
            c.out = (f"it broke exactly-once in the crash lab: {own.duplicated} rows duplicated, "
                     f"{own.lost} lost in {own.cycles} crash cycles")
        elif found and (found.duplicated or found.lost):  # a strategy broken in Spark's settings is out in all
            c.out = (f"{c.strategy} broke exactly-once in the crash lab in Spark's own settings: {found.duplicated} "
                     f"rows duplicated, {found.lost} lost in {found.cycles} crash cycles")
        elif broken:
            c.out = f"Spark's levers {c.preset} broke exactly-once in the crash lab, whatever the strategy ({broken})"
        _second_writer(c, found)
    _charge_others_by_configuration(candidates)
    eligible = [c for c in candidates if c.out is None]
    reasons = []
    baseline = next((c for c in candidates if (c.strategy, c.preset) == SPARK_DEFAULT), None)
    if not eligible:
        return Decision(record.environment["store"], workload, None,
                        ["no configuration can be recommended: every one is out (see the candidates)"], candidates,
                        baseline=baseline)
    chosen, pool, tied = _first(eligible)
    guarded = [c for c in pool if c.refuses_second_writer]
    for c in eligible:
        if c not in pool:
            c.note = ("the race let a second writer through" if c.refuses_second_writer is False
                      else "not measured to refuse a second writer")
    for c in pool:
        if c is chosen:
            continue
        if c in tied and round(c.dollars_per_month, 2) == round(chosen.dollars_per_month, 2):
            c.note = f"as fast (within {TIE:.0%}) and as cheap, with more of Spark's levers to set"
        elif c in tied:
            c.note = (f"as fast (within {TIE:.0%}) but dearer: ${c.dollars_per_month:,.2f} against "
                      f"${chosen.dollars_per_month:,.2f} a month")
        else:
            spec = ".1f" if f"{c.commit_p50_ms:.0f}" == f"{chosen.commit_p50_ms:.0f}" else ".0f"
            c.note = (f"slower: {c.commit_p50_ms:{spec}} ms against {chosen.commit_p50_ms:{spec}} ms per batch's "
                      "commits")
    reasons.append(f"commits a batch in {chosen.commit_p50_ms:.0f} ms (p50; p95 {chosen.commit_p95_ms:.0f} ms), "
                   + ("the fastest" if len(tied) == 1 else f"within {TIE:.0%} of the fastest and the cheapest")
                   + (" of the strategies that refuse a second writer" if guarded else ""))
    reasons.append(f"{chosen.requests_per_batch:.1f} billable requests per batch through the strategy"
                   + (f" and {chosen.other_requests_per_batch:.1f} that Spark's settings and the sink decide (data "
                      "files, RocksDB's uploads, checksum files: the mean of the strategies in this configuration)"
                      if chosen.other_requests_per_batch else "")
                   + f": ${chosen.dollars_per_month:,.2f} a month at one batch every {trigger_s:g} s ({cost.LABEL})")
    found = safety.get(chosen.strategy) if chosen.preset == DEFAULT_PRESET else safety.get((chosen.strategy,
                                                                                              chosen.preset))
    if found and found.cycles:
        reasons.append(f"exactly-once held through {found.cycles} crash cycles (0 rows lost or duplicated)")
    elif chosen.preset != DEFAULT_PRESET and safety.get(chosen.strategy) and safety[chosen.strategy].cycles:
        reasons.append(f"exactly-once held through {safety[chosen.strategy].cycles} crash cycles in Spark's own "
                       f"settings; with {chosen.preset} it was not crash-tested on this store")
    else:
        reasons.append("exactly-once under crashes was not measured on this store")
    raced = [c for c in candidates if c.refuses_second_writer is not None]
    if chosen.refuses_second_writer:
        reasons.append(f"a second writer is {chosen.second_writer}")
    elif raced:
        reasons.append("no strategy here was measured to refuse a second writer (the race): make sure only "
                       "one query runs per checkpoint")
    else:
        promise = (" (its design promises to: If-None-Match: * creates)"
                   if ckpt_impls.get(chosen.strategy).exclusive_create else "")
        reasons.append("whether a second writer is refused was not measured on this store (the race was not "
                       f"run), so no strategy was preferred for it{promise}")
    if runnable:
        reasons.append("the store probe found everything it needs")
    else:
        reasons.append("the store was not probed")
    if record.environment.get("emulator"):
        reasons.insert(0, "measured on an emulator: its latencies say nothing about a real store (the request "
                          "counts and their cost carry over)")
    return Decision(record.environment["store"], workload, chosen.label, reasons, candidates, chosen, baseline)


# -- one decision per job ----------------------------------------------------------------------------


def _job_runs(record: results.Results):
    """``record.runs`` that a decision reads, each under its job's name and the configuration it
    measured the job in (``config.job_of``): a workload's runs at its first keys, as ``decide`` takes
    them (a state sweep's other sizes are no candidates)."""
    runs = record.runs
    runs = runs[runs["keys"] == runs.groupby("workload", sort=False)["keys"].transform("first")]
    named = [job_of(w, int(k), p) for w, k, p in zip(runs.workload, runs["keys"],
                                                      runs.preset.fillna(DEFAULT_PRESET), strict=True)]
    return runs.assign(workload=[job for job, _ in named], preset=[preset for _, preset in named])


def jobs(records: list[results.Results]) -> list[str]:
    """The jobs the runs of ``records`` measured, in the order they first appear."""
    return list(dict.fromkeys(job for record in records for job in _job_runs(record).workload))


def job_record(records: list[results.Results], job: str) -> results.Results:
    """One record of every run of ``job`` in ``records`` (one store's: its streaming, levers or
    recommend records), each run under the job's name in the configuration it measured it in, with
    its rows of every table, numbered as ``record.disk.merge`` numbers a record's parts (a later
    record's runs after an earlier one's); tables of no run as they are, the environment the first
    record's. KeyError where no record ran the job."""
    parts = []
    for record in records:
        runs = _job_runs(record)
        runs = runs[runs.workload == job]
        if runs.empty:
            continue
        tables = {name: runs if name == "runs" else frame[frame.run.isin(set(runs.run))] if "run" in frame else frame
                  for name, frame in record.tables.items()}
        parts.append(results.Results(record.environment, tables))
    if not parts:
        raise KeyError(f"no run of job {job} in these records")
    return disk.merge(parts)


def per_job(records: list[results.Results], trigger_s: float = 10.0, safety: dict[str, Safety] | None = None,
            runnable: dict[str, str | None] | None = None) -> dict[str, Decision]:
    """One decision per job the runs of ``records`` (one store's) measured, each ``decide`` once on
    all the job's runs (``job_record``): the one answer the report, ``recommend`` and ``drift`` give
    for a (store, job). ``safety`` and ``runnable`` as ``decide`` takes them."""
    return {job: decide(job_record(records, job), job, trigger_s, safety=safety, runnable=runnable)
            for job in jobs(records)}
