"""The recommendation: which configuration (a strategy, and Spark's own checkpoint levers:
``config.presets_for``) to run on a store, for a workload, and why.

Derived only from measured numbers (``ckptbench.metrics`` over the records) and, where they
were measured, the store's capabilities (the probe) and the crash lab's exactly-once results.
The rule, in order, so a reader can check every verdict by hand:

1. A configuration is out if the store cannot run its strategy (the probe says why), if Spark
   refuses its levers for the workload (Spark's reason is shown), if its run failed, or if the
   crash lab saw a row lost or duplicated in it, with its strategy in Spark's own settings, or
   with its levers and any strategy (a lever's damage is Spark's). Nothing is recommended
   untested: where the crash lab ran some configuration not otherwise out in its own
   configuration on the store (its strategy and levers, at any task slots per core:
   ``Candidate.crash_cycles``), every
   configuration it did not run is out too; where it ran none, the reasons say exactly-once under
   crashes was not measured (the crash lab needs the metering proxy: not on an https store).
2. Among the rest, a strategy measured to refuse a second writer comes before the others. The
   measure is the race (``ckptbench.experiments.race``): two writers create one checkpoint
   file at once, held by the proxy until both writes meet, round after round, per file kind;
   a strategy refuses a second writer when exactly one writer won every round and every round
   met (``metrics.refuses_second_writer``). Nothing else counts as refusing: a strategy's
   promise (``exclusive_create``) is shown beside it as a promise, never preferred on; where
   the race was not run on a store no strategy is preferred and the reasons say so. The
   crash lab's zombie driver (a second query started on a running checkpoint) is shown, not
   used: Spark's own checks usually stop it before two writes meet, whatever the strategy.
   Then, among those, a configuration whose strategy's query died in a store outage that Spark's
   default strategy rode out (the fault lab's outage profiles, ``Outage``: every run of Spark's
   default completed every batch, not every run of the strategy did), or whose runs the fault lab
   calls dying more often or sooner than Spark's default's under one (``Outage.worse_than_default``),
   comes after those with neither. An outage not measured for a strategy counts for nothing, and its
   column says "not measured".
3. Then commit latency, over every measured batch of every run of a configuration (a record
   may hold repeats of one: ``Results.runs_of``): the per-batch sums of Spark's walCommit +
   commitOffsets (``metrics.commit_ms_per_batch``). Each configuration's median is shown with
   its 95% interval, and two configurations are compared by the 95% interval of the difference
   of their medians (``metrics.difference_interval``: a bootstrap with a fixed seed, so the same
   record gives the same intervals and the same answer). A configuration is slower than the
   fastest (the lowest median) only when the difference is both clear (its interval excludes
   zero) and large: at least ``TIE`` (10%) of the fastest's median and at least one store round
   trip (the record's PUT floor, ``metrics.put_floor_ms``, where it has one; else Spark's
   resolution, 1 ms per duration: ``RESOLUTION_MS``, 2 ms for the two). Every other
   configuration ties with the fastest.
4. Among those tied, the cheapest in requests (dollars per month at the trigger interval, a
   projection at AWS list prices). The cost counts every billable request of the configuration
   (``metrics.billable_requests_all_by_op``: those between batches too), since Spark's levers
   move requests no strategy controls (RocksDB's uploads, checksum files); the strategy's own
   share (``metrics.strategy_controls``) is shown beside it. The strategy's own requests are
   priced per measured batch (``metrics.dollars_per_batch``) and their mean bootstrapped like
   the medians (a stateless job's count is the same every batch: its interval is a point); the
   others are the mean over the strategies of the configuration, a constant added to both ends.
   A configuration is dearer than the cheapest only when the difference of the means is clear
   (its interval excludes zero) and at least ``CENT`` a month; every other ties on cost.
5. Among those tied on latency and cost, the one with the fewest of Spark's levers (less to set
   and keep); then a fixed order that depends on no measurement: Spark's default configuration
   (``config.SPARK_DEFAULT``) first, then the strategies in ``ckpt_impls.STRATEGIES``' order,
   then the levers' names in alphabetical order.

Every verdict shows the intervals it rests on ("slower: 24.0 ms [23.0, 25.0] against 18.0 ms
[17.0, 19.0]"), and the chosen configuration's first reason says what it won on: latency, cost
among those as fast, fewer levers, or the fixed order.

Where other processes took more than ``BUSY`` of the machine's CPU while a configuration that can
be recommended was measured (``Candidate.others_cpu``), the first reason says the machine was busy:
the rule is applied as above, but a latency difference may be that load's, and only a measurement
with nothing else running settles it. A record that did not measure it says nothing.

Each decision carries every candidate's numbers and the reason it was not chosen.
"""

from __future__ import annotations

import numpy as np

import ckpt_impls
from ckptbench import config, metrics
from ckptbench.config import DEFAULT_PRESET, SPARK_DEFAULT
from ckptbench.decide.model import RESOLUTION_MS, Candidate, Decision, Outage, Ranking, Safety
from ckptbench.metrics import cost
from ckptbench.record import jobs, results

#: A commit latency difference smaller than this fraction of the faster's median is a tie.
TIE = 0.10
#: A cost difference smaller than this (dollars a month) is a tie.
CENT = 0.01
#: The most of the machine's CPU (a share of every core's) other processes may take while a
#: configuration is measured before the decision says its machine was busy: an idle machine's
#: kernel and daemons take a few percent.
BUSY = 0.10


#: The outage profile whose outcome the candidate tables show (the longest of those measured if not it).
OUTAGE_SHOWN = "outage-30s"


def _outages(c: Candidate, outages: dict[str, dict[str, Outage]]) -> None:
    """Fill ``c``'s outage fields from the fault lab's outcomes per strategy and profile."""
    own = outages.get(c.strategy, {})
    shown = own.get(OUTAGE_SHOWN) or (max(own.values(), key=lambda o: o.away_s) if own else None)
    if shown:
        c.outage = shown.said() + ("" if shown.profile == OUTAGE_SHOWN else f" ({shown.profile})")
    default = outages.get(SPARK_DEFAULT[0], {})
    rode = {profile for profile, o in own.items() if profile in default and default[profile].rode_out}
    worse = [o for profile, o in own.items() if (not o.rode_out and profile in rode) or o.worse_than_default]
    if worse:
        c.outage_worse = "; ".join(
            f"{o.said()} in {o.profile} (store away {o.away_s:.0f} s), "
            + ("which Spark's default rode out" if o.profile in rode else "more often or sooner than Spark's default")
            for o in worse)


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
    repeats = record.runs_of(strategy, workload, keys=keys, preset=preset) or [run]
    c.runs = len(repeats)
    c.batch_p50_ms = metrics.durations_percentile(repeats, "triggerExecution", 50)
    c.cpu_ms_per_batch = metrics.cpu_ms_per_batch(repeats)
    c.others_cpu = metrics.others_cpu(repeats)
    c.floor_batch_p50_ms = metrics.floor_batch_p50_ms(record, workload, keys, preset)
    c.commit_p50_ms = (metrics.durations_percentile(repeats, "walCommit", 50)
                       + metrics.durations_percentile(repeats, "commitOffsets", 50))
    c.commit_p95_ms = (metrics.durations_percentile(repeats, "walCommit", 95)
                       + metrics.durations_percentile(repeats, "commitOffsets", 95))
    own = metrics.pooled_by_op(repeats, metrics.billable_requests_by_op, controlled=True)
    others = {op: n - own.get(op, 0.0)
              for op, n in metrics.pooled_by_op(repeats, metrics.billable_requests_all_by_op).items()}
    c.requests_per_batch, c.other_requests_per_batch = sum(own.values()), sum(others.values())
    c.dollars_per_month = cost.per_month(cost.dollars(own), trigger_s)
    c.other_dollars_per_month = cost.per_month(cost.dollars(others), trigger_s)
    c.commit_samples = tuple(metrics.commit_ms_per_batch(repeats).tolist())
    c.dollar_samples = tuple(cost.per_month(metrics.dollars_per_batch(repeats, controlled=True), trigger_s).tolist())
    c.commit_median = metrics.median_interval(c.commit_samples)
    c.jvm_commit = metrics.file_commit_ms_interval(repeats, ["offsets", "commits"])
    return c


def _charge_others_by_configuration(candidates: list[Candidate], trigger_s: float) -> None:
    """Add to each candidate's cost the requests no strategy controls (a sink's data files,
    RocksDB's uploads, checksum files, maintenance) as the mean over the strategies measured in the
    same configuration of Spark's levers: the levers decide them, and one run's share of them must
    not tip the choice between strategies. Each one's ``dollars_interval`` is its own requests'
    interval with that charge added."""
    for preset in {c.preset for c in candidates}:
        ran = [c for c in candidates if c.preset == preset and c.out is None]
        if not ran:
            continue
        requests = sum(c.other_requests_per_batch for c in ran) / len(ran)
        dollars = sum(c.other_dollars_per_month for c in ran) / len(ran)
        for c in ran:
            c.other_requests_per_batch, c.other_dollars_per_month = requests, dollars
            c.dollars_per_month += dollars
            own = metrics.mean_interval(c.dollar_samples)
            c.dollars_interval = metrics.Interval(own.value + dollars, own.low + dollars, own.high + dollars)


def _order(c: Candidate) -> tuple:
    """Rule 5's fixed order: Spark's default first, then ``ckpt_impls.STRATEGIES``' order, then the levers' names."""
    known = list(ckpt_impls.STRATEGIES)
    return ((c.strategy, c.preset) != SPARK_DEFAULT,
            known.index(c.strategy) if c.strategy in known else len(known), c.strategy, c.preset)


def _practical_ms(fastest: Candidate, round_trip_ms: float) -> float:
    """Rule 3's smallest latency difference called: ``TIE`` of the fastest's median, at least a round trip."""
    return max(TIE * fastest.commit_median.value, round_trip_ms)


def _first(eligible: list[Candidate], round_trip_ms: float = RESOLUTION_MS) -> Ranking:
    """Rules 2 to 5 over ``eligible`` (none out), filling each one's ``commit_difference`` (against
    the fastest) and ``dollars_difference`` (against the cheapest of those as fast)."""
    pool = [c for c in eligible if c.refuses_second_writer] or eligible
    pool = [c for c in pool if not c.outage_worse] or pool
    fastest = min(pool, key=lambda c: (c.commit_median.value, _order(c)))
    threshold = _practical_ms(fastest, round_trip_ms)
    tied = []
    for c in pool:
        c.commit_difference = (None if c is fastest
                               else metrics.difference_interval(c.commit_samples, fastest.commit_samples))
        if c is fastest or not (c.commit_difference.excludes_zero and c.commit_difference.value >= threshold):
            tied.append(c)
    cheapest = min(tied, key=lambda c: (c.dollars_interval.value, _order(c)))
    as_cheap = []
    for c in pool:
        c.dollars_difference = None
        if c in tied and c is not cheapest:
            own = metrics.difference_interval(c.dollar_samples, cheapest.dollar_samples, np.mean)
            shift = c.other_dollars_per_month - cheapest.other_dollars_per_month
            c.dollars_difference = metrics.Interval(own.value + shift, own.low + shift, own.high + shift)
        if c in tied and not (c.dollars_difference and c.dollars_difference.excludes_zero
                              and c.dollars_difference.value >= CENT):
            as_cheap.append(c)
    chosen = min(as_cheap, key=lambda c: (c.levers, _order(c)))
    return Ranking(chosen, pool, fastest, tied, cheapest, as_cheap, threshold)


def round_trip_of(record: results.Results) -> tuple[float, str]:
    """Rule 3's store round trip in ms, and what it is: the record's PUT floor (``metrics.put_floor_ms``),
    else Spark's resolution (``RESOLUTION_MS``)."""
    floor = metrics.or_none(metrics.put_floor_ms, record)
    if floor is None or np.isnan(floor):
        return RESOLUTION_MS, f"Spark's resolution, {RESOLUTION_MS:.0f} ms, as the record has no store floor"
    return floor, f"the store's PUT floor, {floor:.1f} ms"


def ms(i: metrics.Interval | None) -> str:
    """A median and its interval as the verdicts show them: "9.1 ms [8.7, 9.6]"."""
    return "-" if i is None else i.said(".1f", after=" ms")


def dollars(i: metrics.Interval | None) -> str:
    """Dollars a month and their interval: "$2.59 [2.59, 2.59]"."""
    return "-" if i is None else i.said(",.2f", before="$")


def recommended_said(c: Candidate) -> str:
    """The chosen configuration's verdict cell: its median and cost with their intervals, the
    figures the others' notes were compared against."""
    return f"recommended: {ms(c.commit_median)}, {dollars(c.dollars_interval)} a month"


def _batches(c: Candidate) -> str:
    return f"{len(c.commit_samples)} batches" + (f" of {c.runs} runs" if c.runs > 1 else "")


def _named(ref: Candidate, chosen: Candidate, what: str) -> str:
    return "" if ref is chosen else f" ({ref.label}'s, the {what})"


def _note(c: Candidate, r: Ranking, round_trip: str) -> str:
    """Why ``c`` (in ``r.pool``, not chosen) was not chosen, with the intervals the verdict rests on."""
    d = c.commit_difference
    against = f"{ms(c.commit_median)} against {ms(r.fastest.commit_median)}{_named(r.fastest, r.chosen, 'fastest')}"
    if c not in r.tied:
        return (f"slower: {against} per batch's commits; the difference {d.value:.1f} ms [{d.low:.1f}, {d.high:.1f}] "
                f"is clear and at least {r.threshold_ms:.1f} ms")
    if d is None:  # the fastest, shown against the chosen: the difference the chosen's tie rests on
        won = r.chosen.commit_difference
        d = metrics.Interval(-won.value, -won.high, -won.low)
        against = f"{ms(c.commit_median)} against {ms(r.chosen.commit_median)}"
    if not d.excludes_zero:
        latency = f"as fast: {against}, the difference [{d.low:.1f}, {d.high:.1f}] ms is inside the noise"
    else:
        latency = (f"as fast: {against}, the difference {d.value:.1f} ms [{d.low:.1f}, {d.high:.1f}] is clear but "
                   f"within {r.threshold_ms:.1f} ms ({TIE:.0%} of the fastest's median, at least one store round "
                   f"trip: {round_trip})")
    cheapest = f"{dollars(r.cheapest.dollars_interval)}{_named(r.cheapest, r.chosen, 'cheapest')}"
    if c not in r.as_cheap:
        return f"{latency}, but dearer: {dollars(c.dollars_interval)} against {cheapest} a month"
    said = f"{latency}, and as cheap: {dollars(c.dollars_interval)} against {cheapest} a month"
    if c.levers > r.chosen.levers:
        return f"{said}, with more of Spark's levers to set"
    return f"{said}, with as many of Spark's levers: {_order_said(r.chosen, c)}"


def _order_said(chosen: Candidate, c: Candidate) -> str:
    """Rule 5's fixed order, as the reason ``chosen`` comes before ``c``."""
    if (chosen.strategy, chosen.preset) == SPARK_DEFAULT:
        return "Spark's default configuration comes first"
    if chosen.strategy != c.strategy:
        return f"{chosen.strategy} comes before {c.strategy} in the fixed order (ckpt_impls.STRATEGIES)"
    return f"{chosen.preset} comes before {c.preset} in the fixed order (alphabetical)"


def _won_on(r: Ranking) -> str:
    """What the chosen configuration won on (the module's rules 3 to 5)."""
    if len(r.tied) == 1:
        return "it won on latency"
    if len(r.as_cheap) == 1:
        return (f"it won on cost among the {len(r.tied)} as fast: {dollars(r.chosen.dollars_interval)} a month, "
                "the others dearer")
    fewest = [c for c in r.as_cheap if c.levers == r.chosen.levers]
    if len(fewest) == 1:
        return f"it won on fewer of Spark's levers among the {len(r.as_cheap)} as fast and as cheap"
    return (f"it won by the fixed order (Spark's default first, then ckpt_impls.STRATEGIES) among the "
            f"{len(fewest)} as fast, as cheap and with as few of Spark's levers")


def runner_up(decision: Decision) -> Candidate | None:
    """The configuration the rule would choose were the chosen one gone (None: no other is eligible).
    The candidates' differences are left as the decision's own ranking filled them."""
    rest = [c for c in decision.candidates if c.out is None and c is not decision.chosen]
    if not rest:
        return None
    saved = [(c, c.commit_difference, c.dollars_difference) for c in decision.candidates]
    chosen = _first(rest, decision.round_trip_ms).chosen
    for c, commit, dollars in saved:
        c.commit_difference, c.dollars_difference = commit, dollars
    return chosen


def _levers_broke(safety: dict, preset: str) -> str | None:
    """How the crash lab saw configuration ``preset`` break exactly-once with some strategy (None:
    it did not, or never ran it), at one task slot per core as ``_own_safety`` reads it. A lever's
    damage is Spark's (async progress tracking re-plans batches whose offsets it never wrote), so
    it stands against every strategy run with it."""
    preset = config.at_slots(preset, 1)
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


def _own_safety(safety: dict, c: Candidate) -> Safety | None:
    """The crash lab's findings for ``c``'s very configuration (its strategy's in Spark's settings),
    at one task slot per core: task slots (``config.SLOTS_PER_CORE``) change how many of a batch's
    tasks run at once, not which files the manager and the levers write nor in what order a batch
    commits, and the crash lab's drivers run one slot per core."""
    preset = config.at_slots(c.preset, 1)
    return safety.get(c.strategy if preset == DEFAULT_PRESET else (c.strategy, preset))


def _untested_out(candidates: list[Candidate]) -> None:
    """Rule 1's last clause: where the crash lab ran a configuration not otherwise out, every other
    one not out that it did not run is out."""
    tested = sum(1 for c in candidates if c.out is None and c.crash_cycles)
    for c in candidates:
        if tested and c.out is None and not c.crash_cycles:
            c.untested = True
            c.out = (f"not crash-tested in this configuration on this store, unlike {tested} other"
                     f"{'s' if tested > 1 else ''}: nothing untested is recommended")


def decide(record: results.Results, workload: str, trigger_s: float = 10.0,
           safety: dict[str, Safety] | None = None, runnable: dict[str, str | None] | None = None,
           untested_out: bool = True, outages: dict[str, dict[str, Outage]] | None = None) -> Decision:
    """The decision for ``workload`` on the store of ``record`` (a streaming record).

    ``safety``: the crash lab's findings per strategy; ``runnable``: the probe's verdict per
    strategy (None: can run; else why not); ``outages``: the fault lab's outage outcomes per
    strategy and profile. Any may be missing: the reasons then say what was not measured.
    ``untested_out`` False leaves out rule 1's last clause (nothing recommended untested): the
    ranking a crash check asks for, to learn which configurations to check."""
    safety, runnable, outages = safety or {}, runnable or {}, outages or {}
    round_trip_ms, round_trip = round_trip_of(record)
    runs = record.runs[record.runs.workload == workload]
    pairs = dict.fromkeys(zip(runs.strategy, runs.preset.fillna(DEFAULT_PRESET), strict=True))
    candidates = [_candidate(record, s, workload, trigger_s, p) for s, p in pairs
                  if s in record.strategies()]
    for c in candidates:
        found = safety.get(c.strategy)
        _outages(c, outages)
        if c.out:
            _second_writer(c, found)
            continue
        own = _own_safety(safety, c)
        c.crash_cycles = own.cycles if own else 0
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
    if untested_out:
        _untested_out(candidates)
    _charge_others_by_configuration(candidates, trigger_s)
    eligible = [c for c in candidates if c.out is None]
    reasons = []
    baseline = next((c for c in candidates if (c.strategy, c.preset) == SPARK_DEFAULT), None)
    if not eligible:
        return Decision(record.environment["store"], workload, None,
                        ["no configuration can be recommended: every one is out (see the candidates)"], candidates,
                        baseline=baseline, round_trip_ms=round_trip_ms, round_trip=round_trip)
    ranking = _first(eligible, round_trip_ms)
    chosen, pool, tied = ranking.chosen, ranking.pool, ranking.tied
    guarded = [c for c in pool if c.refuses_second_writer]
    for c in eligible:
        if c not in pool:
            c.note = (f"its queries {c.outage_worse}" if c.outage_worse and (c.refuses_second_writer or not guarded)
                      else "the race let a second writer through" if c.refuses_second_writer is False
                      else "not measured to refuse a second writer")
    for c in pool:
        if c is not chosen:
            c.note = _note(c, ranking, round_trip)
    reasons.append(f"commits a batch in {chosen.commit_p50_ms:.0f} ms (p50; p95 {chosen.commit_p95_ms:.0f} ms), "
                   + ("the fastest" if len(tied) == 1 else "as fast as the fastest within the noise")
                   + (" of the strategies that refuse a second writer" if guarded else "")
                   + f": its batches' walCommit + commitOffsets have a median of {ms(chosen.commit_median)} over "
                   f"{_batches(chosen)}; " + _won_on(ranking))
    reasons.append(f"{chosen.requests_per_batch:.1f} billable requests per batch through the strategy"
                   + (f" and {chosen.other_requests_per_batch:.1f} that Spark's settings and the sink decide (data "
                      "files, RocksDB's uploads, checksum files: the mean of the strategies in this configuration)"
                      if chosen.other_requests_per_batch else "")
                   + f": ${chosen.dollars_per_month:,.2f} a month at one batch every {trigger_s:g} s ({cost.LABEL})")
    found = _own_safety(safety, chosen)
    if found and found.cycles:
        reasons.append(f"exactly-once held through {found.cycles} crash cycles (0 rows lost or duplicated)"
                       + (f", crash-tested at one task slot per core (as {config.at_slots(chosen.preset, 1)})"
                          if config.slots_of(chosen.preset) > 1 else ""))
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
    if not outages:
        reasons.append("store outages were not measured on this store (the fault lab's outage profiles)")
    elif chosen.outage_worse:
        rode = [c for c in eligible if not c.outage_worse]
        why = ("those that rode them out were not measured to refuse a second writer, which comes first" if rode
               else "no configuration that can be recommended rode them out")
        reasons.append(f"its queries {chosen.outage_worse}: {why}")
    elif chosen.strategy in outages:
        reasons.append("its queries rode out every store outage Spark's default rode out ("
                       + ", ".join(f"{o.profile}: {o.said()}" for o in outages[chosen.strategy].values()) + ")")
    else:
        reasons.append(f"store outages were not measured for {chosen.strategy}")
    reasons.append("the store probe found everything it needs" if runnable else "the store was not probed")
    busy = max((c.others_cpu for c in eligible if c.others_cpu == c.others_cpu), default=0.0)
    if busy > BUSY:
        reasons.insert(0, f"measured on a busy machine: other processes took up to {busy:.0%} of its CPU while "
                          "these configurations' batches ran, so a latency difference between them may be that "
                          "load's: measure again with nothing else running")
    if record.environment.get("emulator"):
        reasons.insert(0, "measured on an emulator: its latencies say nothing about a real store (the request "
                          "counts and their cost carry over)")
    return Decision(record.environment["store"], workload, chosen.label, reasons, candidates, chosen, baseline,
                    round_trip_ms, round_trip)


def per_job(records: list[results.Results], trigger_s: float = 10.0, safety: dict[str, Safety] | None = None,
            runnable: dict[str, str | None] | None = None, untested_out: bool = True,
            outages: dict[str | None, dict[str, dict[str, Outage]]] | None = None) -> dict[str, Decision]:
    """One decision per job the runs of ``records`` (one store's) measured, each ``decide`` once on
    all the job's runs (``record.jobs.job_record``): the one answer the report, ``recommend`` and ``drift`` give
    for a (store, job). ``safety``, ``runnable`` and ``untested_out`` as ``decide`` takes them;
    ``outages`` per fault-lab workload, None's over every workload: a job gets those of the workload
    closest to it (``record.jobs.fault_workload``) where the fault lab ran it, else every workload's."""
    outages = outages or {}
    return {job: decide(jobs.job_record(records, job), job, trigger_s, safety=safety, runnable=runnable,
                        untested_out=untested_out, outages=outages.get(jobs.fault_workload(job), outages.get(None)))
            for job in jobs.jobs(records)}


def halves(records: list[results.Results], job: str, trigger_s: float = 10.0) -> tuple[Decision, Decision]:
    """``job``'s decision, as ``per_job`` makes it (no crash lab, no probe), on each half of the
    repeats of ``records`` (``record.jobs.halves``): two independent measurements of one commit on
    one store, whose recommendations differ only where noise decided one of them."""
    first, second = zip(*(jobs.halves(record) for record in records), strict=True)
    return (decide(jobs.job_record(list(first), job), job, trigger_s),
            decide(jobs.job_record(list(second), job), job, trigger_s))
