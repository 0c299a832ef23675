"""The crash lab's runs: series of kill -9 cycles per strategy x workload (in a configuration of
Spark's own levers, ``configured``), two drivers on one checkpoint (a zombie, or two started
together and held at one file until both write it), and the managers' race
(``ckptbench.experiments.race``); written as one record (``cycles``, ``crash_series``,
``two_writers``, ``races``) as a plan says (``plans``)."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import ckpt_impls
from ckptbench import progress
from ckptbench.config import CRASHLAB, DEFAULT_PRESET
from ckptbench.experiments import race as race_experiment
from ckptbench.experiments.crashlab.configured import REFUSED, configuration, refused
from ckptbench.experiments.crashlab.plans import PLANS, RACE_WAIT_S, CrashPlan, expected_seconds, measured_times
from ckptbench.experiments.crashlab.points import (
    CRASH_POINTS,
    DEFAULT_POINTS,
    POLL_S,
    RANDOM_DELAY_S,
    RESTART_LIMIT_S,
    WAIT_LIMIT_S,
    WORKLOADS,
    CrashPoint,
    publishes,
)
from ckptbench.experiments.crashlab.verify import (
    classify,
    last_committed,
    leftovers,
    log_ids,
    overwritten_logs,
    stored_batches,
    verify,
)
from ckptbench.experiments.crashlab.victim import Driver, DriverGone, driver_submit_opts
from ckptbench.harness import querylab, stores
from ckptbench.harness.query_process import Config, StoreSpec
from ckptbench.record import disk, results
from infra.faults import Kill, Rendezvous
from infra.s3ops import Event

# -- the lab ------------------------------------------------------------------------------------


def _one_line(text: str | None) -> str | None:
    """The first line of ``text``, its runs of whitespace made one space, at most 300 characters (a
    row's error column holds one line); None for no text."""
    if not text:
        return None
    return " ".join(text.strip().splitlines()[0].split())[:300]


class CrashLab:
    """Crash cycles and two-writer runs of drivers on ``store`` (a ``MeteredStore``: the drivers
    go through its proxy) in ``bucket``. ``spark`` is the lab's own session, which verifies; it
    must reach ``bucket`` (on the store itself, not through the proxy, so that its reads are not
    among the drivers' requests)."""

    def __init__(self, spark, store, bucket: str, recorder: results.Recorder, seed: int = 1,
                 rows_per_batch: int = 100, keep: bool = False, say=print) -> None:
        self.spark, self.store, self.bucket, self.recorder = spark, store, bucket, recorder
        self.seed, self.rows_per_batch, self.keep, self.say = seed, rows_per_batch, keep, say
        self.logs = Path(tempfile.mkdtemp(prefix="ckptbench-crashlab-"))
        self.drivers: list[Driver] = []

    def close(self) -> None:
        """Kill the drivers still alive and remove their logs (what the results need of a log, its
        error lines, was read into them while the driver ran)."""
        for driver in self.drivers:
            if driver.alive():
                driver.kill()
        shutil.rmtree(self.logs, ignore_errors=True)

    def __enter__(self) -> CrashLab:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def output(self, workload: str, prefix: str) -> str:
        """Where the drivers of ``workload`` under ``prefix`` write its output: under the prefix on
        the store, or for a foreach sink a directory of the lab's own here (``points.SINKS``)."""
        if WORKLOADS[workload].sink == "foreach":
            return str(self.logs / "output" / prefix.replace("/", "_"))
        return f"s3a://{self.bucket}/{prefix}/output"

    def driver(self, strategy: str, workload: str, prefix: str, preset: str = DEFAULT_PRESET,
               provider: str | None = None, **extra) -> Driver:
        """A driver of ``workload`` under ``prefix``, its query started with the session settings and
        query options of ``preset`` and ``provider`` (``configured.configuration``)."""
        conf, options = configuration(preset, provider)
        config = Config(strategy=strategy, workload=workload, bucket=self.bucket,
                        store=StoreSpec.of(self.store), checkpoint=f"s3a://{self.bucket}/{prefix}/checkpoint",
                        output=self.output(workload, prefix), rows_per_batch=self.rows_per_batch,
                        conf={**WORKLOADS[workload].conf, **conf}, options=options, **extra)
        driver = Driver(config, self.logs / f"{prefix.replace('/', '_')}-{len(self.drivers)}.log")
        self.drivers.append(driver)
        return driver

    def _events(self, mark: int, prefix: str) -> tuple[list[Event], int]:
        events = self.store.proxy.events_since(mark)
        return [e for e in events if e.key.startswith(prefix + "/")], mark + len(events)

    def _watch(self, driver: Driver, point: CrashPoint, prefix: str, delay: float,
               strategy: str | None = None) -> tuple[bool, float]:
        """Wait for ``point`` (or its delay), then kill ``driver``: (landed, seconds waited).
        ``strategy``: whose requests store the offsets a point's ``confirm`` reads."""
        start = time.monotonic()
        if point.inside is not None:
            return self._kill_inside(driver, point, prefix), time.monotonic() - start
        mirror = strategy is None or ckpt_impls.get(strategy).keys_mirror_paths
        stored: set[int] = set()  # batches whose offsets were stored since the watch began
        mark = self.store.proxy.mark()
        landed = False
        while driver.alive():
            waited = time.monotonic() - start
            if point.random_delay:
                if waited >= delay:
                    landed = True
                    break
            else:
                events, mark = self._events(mark, prefix)
                matched = [e for e in events if point.match(e)]
                if matched and point.confirm is None:
                    landed = True
                    break
                for batch in stored_batches(matched, self.store.inner, self.bucket, "offsets", mirror):
                    landed = landed or point.confirm(stored, batch)
                    stored.add(batch)
                if landed:
                    break
            if waited >= WAIT_LIMIT_S:
                break
            time.sleep(POLL_S)
        driver.kill()
        return landed, time.monotonic() - start

    def _kill_inside(self, driver: Driver, point: CrashPoint, prefix: str) -> bool:
        """Have the proxy kill ``driver`` at the first request ``point.inside`` names (or kill it
        after ``WAIT_LIMIT_S``); whether the proxy's kill did it."""
        proxy = self.store.proxy
        seen = len(proxy.injections())
        try:
            for op, key in point.inside(prefix):
                proxy.inject(Kill(driver.pid, False, op, key))
            deadline = time.monotonic() + WAIT_LIMIT_S
            while driver.alive() and time.monotonic() < deadline:
                time.sleep(POLL_S)
        finally:
            proxy.clear_faults()  # before any restart: the rules that did not fire must not take the next driver
        driver.kill()
        return any(i.fault == "kill-before-forwarding" and i.key.startswith(prefix + "/")
                   for i in proxy.injections()[seen:])

    def _recovery(self, prefix: str, mark: int, t0: float, progress_end: float) -> tuple[float, int, float]:
        """From ``t0`` to the end of the request that stored the first ``commits/N`` (the batch's
        progress end if no such request is found): (ms, the requests in that window, their summed
        store-side ms: the part of the recovery spent waiting on the store, one request at a time)."""
        for _ in range(20):
            events, _ = self._events(mark, prefix)
            events = [e for e in events if e.start >= t0]
            commit = next((e for e in events if publishes(e, "commits")), None)
            if commit is not None:
                break
            time.sleep(0.05)
        end = commit.end if commit is not None else progress_end
        window = [e for e in events if e.end <= end]
        return (end - t0) * 1000, len(window), sum(e.duration for e in window) * 1000

    def series(self, strategy: str, workload: str, cycles: int, points=DEFAULT_POINTS, bar=None,
               preset: str = DEFAULT_PRESET, provider: str | None = None) -> int:
        """``cycles`` kill/restart cycles of ``strategy`` x ``workload`` on a fresh checkpoint and
        output, every driver started in configuration ``preset`` with state store ``provider``
        (``configured``); rows added to ``cycles`` and ``crash_series``. Returns the series number.
        A configuration this Spark lacks a lever of, or refuses before its first batch, runs no
        cycle: the series' ``error`` says why (``configured.REFUSED``). Of ``points``, those that
        apply to the workload in the configuration (``CrashPoint.applies_to``), in turn."""
        chosen = WORKLOADS[workload]
        options = configuration(preset, provider)[1]  # an unknown lever or provider: ValueError before any row
        applying = [CRASH_POINTS[p] for p in points if CRASH_POINTS[p].applies_to(chosen, options)]
        if not applying:
            raise ValueError(f"no crash point of {', '.join(points)} applies to workload {workload} ({preset})")
        points = applying
        # In Spark's own configuration the sequence is the seed's, strategy's and workload's alone.
        salt = "" if preset == DEFAULT_PRESET else f":{preset}"
        rng = random.Random(f"{self.seed}:{strategy}:{workload}{salt}")
        prefix = f"{self.store.run_prefix}crash/{strategy}-{workload}-{uuid.uuid4().hex[:8]}"
        base, output = f"s3a://{self.bucket}/{prefix}", self.output(workload, prefix)
        number = len(self.recorder.rows["crash_series"])
        series_began = time.monotonic()
        row = {"series": number, "strategy": strategy, "workload": workload, "cycles": 0, "seed": self.seed,
               "rows_per_batch": self.rows_per_batch, "prefix": prefix, "error": None, "preset": preset}
        lacking = querylab.lacks(self.spark.version, preset)
        if lacking:  # no driver: nothing is written, so nothing to check
            row.update(error=REFUSED + lacking, seconds=time.monotonic() - series_began)
            self.recorder.rows["crash_series"].append(row)
            if bar:
                bar.update(cycles)
            return number
        started_with = {"preset": preset, "provider": provider}
        driver = self.driver(strategy, workload, prefix, **started_with)
        try:
            driver.wait("progress", RESTART_LIMIT_S)
            for cycle in range(cycles):
                point = points[cycle % len(points)]
                delay = rng.uniform(*RANDOM_DELAY_S)  # drawn every cycle: the sequence is the seed's
                if bar:
                    bar.set_postfix_str(f"{strategy} x {workload}: cycle {cycle + 1}/{cycles}, {point.name}")
                began = time.monotonic()
                landed, waited = self._watch(driver, point, prefix, delay, strategy)
                died = driver.failure()  # the query failed on its own before the crash point
                offsets = max(log_ids(self.spark, strategy, f"{base}/checkpoint/offsets"), default=-1)
                committed = last_committed(self.spark, strategy, f"{base}/checkpoint")
                mark = self.store.proxy.mark()
                driver = self.driver(strategy, workload, prefix, **started_with)
                cycle_row = {"series": number, "strategy": strategy, "workload": workload, "cycle": cycle,
                             "crash_point": point.name, "seed": self.seed,
                             "delay_s": delay if point.random_delay else float("nan"), "landed": landed,
                             "wait_s": waited, "offsets_at_kill": offsets, "committed_at_kill": committed,
                             "first_batch": None, "jvm_start_ms": float("nan"), "recovery_ms": float("nan"),
                             "recovery_requests": None, "recovery_store_ms": float("nan"), "restart_ok": False,
                             "error": f"the query failed before the crash point: {_one_line(died)}" if died else None,
                             "duplicates": None, "lost": None, "partial": None,
                             "verified_through": None, "seconds": float("nan")}
                self.recorder.rows["cycles"].append(cycle_row)
                row["cycles"] += 1
                try:
                    ready = driver.wait("ready", RESTART_LIMIT_S)
                    cycle_row["jvm_start_ms"] = (ready["t"] - driver.spawned) * 1000
                    started = driver.wait("started", RESTART_LIMIT_S)
                    first = driver.wait("progress", RESTART_LIMIT_S)
                except DriverGone as e:
                    cycle_row["error"] = "; ".join(filter(None, [cycle_row["error"], _one_line(str(e))]))
                    row["error"] = f"cycle {cycle}: restart failed: {cycle_row['error']}"
                    cycle_row["seconds"] = time.monotonic() - began
                    if bar:
                        bar.update()
                    break
                recovery_ms, requests, store_ms = self._recovery(prefix, mark, started["t0"], first["end"])
                verdict = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=False, output=output)
                cycle_row.update(first_batch=first["batchId"], recovery_ms=recovery_ms, recovery_requests=requests,
                                 recovery_store_ms=store_ms,
                                 restart_ok=True, duplicates=verdict.duplicates, lost=verdict.lost,
                                 partial=verdict.partial, verified_through=verdict.last,
                                 seconds=time.monotonic() - began)
                if bar:
                    bar.update()
        except DriverGone as e:
            reason = refused(driver)
            row["error"] = REFUSED + reason if reason else f"first start failed: {_one_line(str(e))}"
            if bar and reason:
                bar.update(cycles)
        finally:
            driver.stop()
        final = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=True, output=output)
        left = leftovers(self.spark, strategy, self.store.inner, self.bucket, prefix, chosen)
        row.update(last_batch=final.last, duplicates=final.duplicates, lost=final.lost, partial=final.partial,
                   unexpected=final.unexpected, **dataclasses.asdict(left),
                   seconds=time.monotonic() - series_began)
        self.recorder.rows["crash_series"].append(row)
        if not self.keep:
            self.store.inner.empty_bucket(self.bucket, prefix + "/")
            if chosen.sink == "foreach":
                shutil.rmtree(output, ignore_errors=True)
        return number

    def two_writers(self, strategy: str, workload: str = "stateless", head_start: int = 3,
                    overlap_s: float = 5.0, bar=None, race: str | None = None) -> dict:
        """A second driver on the checkpoint and output a first is still running on (a zombie
        after failover), started after the first's ``head_start`` batches (0: both queries start
        together, a job submitted twice, so that both race for the same files from the first);
        both run until the second has committed a batch or failed, and ``overlap_s`` seconds more,
        then stop. A row of ``two_writers``, also returned.

        ``race`` (a ``race.KINDS`` file kind; ``offsets`` when both start together and none is
        given): the proxy holds each driver's write of that kind's batch-0 file until the
        other's comes (``Rendezvous``), so that both write it past Spark's and the strategy's
        checks, not only when their timing happens to line up. Both queries start only once both
        drivers' sessions are up, and a held write waits for as long as the other driver runs (up
        to ``RACE_WAIT_S`` from the held write): once either driver has ended (it failed before its
        write, or stopped), the rendezvous is released and the held write goes on alone, so a run
        whose writes cannot meet does not wait out the limit; ``race_met`` says whether they met."""
        chosen = WORKLOADS[workload]
        if race is None and head_start == 0:
            race = "offsets"
        prefix = f"{self.store.run_prefix}crash/two-{strategy}-{workload}-{uuid.uuid4().hex[:8]}"
        base = f"s3a://{self.bucket}/{prefix}"
        if bar:
            bar.set_postfix_str(f"two writers: {strategy} x {workload}, head start {head_start}"
                                + (f", held at {race}" if race else ""))
        if race is not None:
            batch_zero = f"{prefix}/{race_experiment.file_of(race, 1 if race == 'state' else 0)}"
            self.store.proxy.inject(Rendezvous(race_experiment.key_pattern(
                batch_zero, ckpt_impls.get(strategy).keys_mirror_paths), RACE_WAIT_S))
        began, mark, seen = time.monotonic(), self.store.proxy.mark(), len(self.store.proxy.injections())
        first = self.driver(strategy, workload, prefix, hold=head_start == 0)
        # The second JVM starts alongside the first; its query waits for "go".
        second = self.driver(strategy, workload, prefix, hold=True)
        row = {"strategy": strategy, "workload": workload, "head_start": head_start, "seed": self.seed,
               "race": race, "first_error": None,
               "second_error": None, "second_started": False, "first_batches": 0, "second_batches": 0,
               "verify_error": None}
        try:
            if head_start == 0:
                first.wait("ready", RESTART_LIMIT_S)
            for _ in range(head_start):
                first.wait("progress", RESTART_LIMIT_S)
            try:
                second.wait("ready", RESTART_LIMIT_S)
                if head_start == 0:
                    first.go()
                second.go()
                second.wait("started", RESTART_LIMIT_S)
                row["second_started"] = True
            except DriverGone:
                pass
            # Both run until the second has committed a batch or failed (its first batch can take
            # many seconds in a cold JVM), then ``overlap_s`` more. A driver that ended writes no
            # more: the other's held write, if any, goes on now.
            limit = time.monotonic() + RESTART_LIMIT_S
            while (time.monotonic() < limit and first.alive() and second.alive()
                   and second.first("progress") is None):
                time.sleep(0.1)
            if race is not None and not (first.alive() and second.alive()):
                self.store.proxy.clear_faults()
            deadline = time.monotonic() + overlap_s
            while time.monotonic() < deadline and (first.alive() or second.alive()):
                time.sleep(0.1)
        except DriverGone as e:
            row["first_error"] = _one_line(str(e))
        finally:
            if race is not None:  # a held write would hold up its driver's clean stop
                self.store.proxy.clear_faults()
            drivers = (first, second)
            for driver in drivers:  # both asked at once: neither runs on alone while the other stops
                driver.ask_to_stop()
            for driver in drivers:
                driver.stop()
            if race is not None:
                row["race_met"] = any(i.fault == "rendezvous" and i.key.startswith(prefix + "/")
                                      for i in self.store.proxy.injections()[seen:])
        row["first_error"] = row["first_error"] or _one_line(first.failure())
        went = second.first("ready") is not None and first.first("failed") is None
        row["second_error"] = _one_line(second.failure()) or (
            None if row["second_started"] or not went else _one_line(second.stderr_tail()))
        row["first_batches"] = sum(e["event"] == "progress" for e in first.events)
        row["second_batches"] = sum(e["event"] == "progress" for e in second.events)
        events, _ = self._events(mark, prefix)
        twice = overwritten_logs(events, self.store.inner, self.bucket, prefix,
                                 ckpt_impls.get(strategy).keys_mirror_paths)
        row["overwritten_logs"], row["overwritten_files"] = len(twice), ",".join(twice)[:300] or None
        try:
            verdict = verify(self.spark, strategy, chosen, base, self.rows_per_batch, at_rest=True,
                             output=self.output(workload, prefix))
            row.update(duplicates=verdict.duplicates, lost=verdict.lost, partial=verdict.partial,
                       unexpected=verdict.unexpected, last_batch=verdict.last)
        except Exception as e:
            row.update(duplicates=None, lost=None, partial=None, unexpected=None, last_batch=None,
                       verify_error=_one_line(str(e)))
        row["outcome"] = classify(row)
        row["seconds"] = time.monotonic() - began
        self.recorder.rows["two_writers"].append(row)
        if bar:
            bar.update()
        if not self.keep:
            self.store.inner.empty_bucket(self.bucket, prefix + "/")
            if chosen.sink == "foreach":
                shutil.rmtree(self.output(workload, prefix), ignore_errors=True)
        return row

    def race(self, strategy: str, kinds=tuple(race_experiment.KINDS), rounds: range = range(10)) -> list[dict]:
        """The managers' race (``race.race``) of ``strategy``: ``rounds`` of each file kind in
        ``kinds`` on a fresh prefix, through the proxy; rows added to ``races``, also returned."""
        prefix = f"{self.store.run_prefix}crash/race-{strategy}-{uuid.uuid4().hex[:8]}"
        rows = race_experiment.race(self.spark, self.store, self.bucket, prefix, strategy, kinds, rounds)
        self.recorder.rows["races"].extend(rows)
        if not self.keep:
            self.store.inner.empty_bucket(self.bucket, prefix + "/")
        return rows


# -- the experiment -----------------------------------------------------------------------------


def crashes(settings, strategies: list[str] | None = None, plan: CrashPlan | None = None,
            points=DEFAULT_POINTS, seed: int = 1, spark=None, say=print) -> results.Results:
    """Crash cycles (strategy x workload, then strategy x workload in each of the plan's
    ``configurations`` of Spark's levers), two-writer runs (per strategy, zombie and raced) and the
    managers' race (strategy x file kind), as ``plan`` (default: the settings' size) says, on the
    settings' store; written to ``settings.raw`` as the experiment ``config.CRASHLAB`` and returned.
    ``spark``: a session that reaches the store's bucket (one is started, and stopped, otherwise)."""
    from ckptbench.harness.spark import session

    plan = plan or PLANS[settings.size]
    strategies = strategies or settings.measured_strategies
    where = disk.directory(settings.raw, settings.store, CRASHLAB)
    try:
        previous = disk.read(where)
    except (OSError, ValueError, KeyError):
        previous = None
    if plan.part != (1, 1):  # each part its own random choices, recorded
        seed = seed * 100 + plan.part[0]
    configured = plan.configured_series(strategies)
    total_cycles = (len(strategies) * sum(cycles for _, cycles in plan.series_cycles())
                    + sum(cycles for *_, cycles in configured))
    pairs = plan.two_writer_runs(strategies)
    raced = plan.race_runs(strategies)
    rounds = plan.race_round_range()
    cycle, overhead, two, source = measured_times(previous)
    part = f" part {plan.part[0]} of {plan.part[1]}" if plan.part != (1, 1) else ""
    say(f"crash lab{part}: {total_cycles} crash cycles ({len(configured)} series in a configuration of Spark's "
        f"levers), {len(pairs) + len(raced)} two-writer runs "
        f"({len(raced)} raced) and {len(rounds)} race rounds per strategy x file kind; expected about "
        f"{expected_seconds(plan, strategies, previous) / 60:.0f} min ({cycle:.0f} s per cycle, {overhead:.0f} s "
        f"more per strategy x workload, {two:.0f} s per two-writer run, {source})")
    sys.stdout.flush()
    recorder = results.Recorder()
    with stores.started_store(settings, needs_proxy="the crash lab") as (store, bucket), \
            contextlib.ExitStack() as stack:
        if spark is None:
            spark = session(strategies[0], {bucket: store.inner})
            stack.callback(spark.stop)

        # Taken at the start: the commit that ran, not the one checked out when a part is saved. The
        # lab's own session's JVM flags and archives, and the -X options its drivers start with.
        env = results.environment(store, CRASHLAB, settings.size, dataclasses.asdict(plan), spark, seed=seed,
                                  points=list(points),
                                  driver_jvm_flags=[o for o in driver_submit_opts().split() if o.startswith("-X")])

        def save(finished: bool) -> results.Results:
            """The record so far, written: after every series, so that a long run stopped (or out
            of time) keeps its finished series; ``finished`` says whether the plan was done."""
            return disk.save(recorder.results({**env, "finished": finished}), settings, plan.part)

        bar = progress.Recorder("crash lab", total_cycles + len(pairs) + len(raced), "cycle")
        with CrashLab(spark, store, bucket, recorder, seed=seed, rows_per_batch=plan.rows_per_batch, say=say) as lab:
            for workload, cycles in plan.series_cycles():
                for strategy in strategies:
                    lab.series(strategy, workload, cycles, points, bar=bar)
                    save(finished=False)
            for strategy, workload, preset, provider, cycles in configured:
                lab.series(strategy, workload, cycles, plan.configuration_points or points, bar=bar, preset=preset,
                           provider=provider)
                save(finished=False)
            for strategy, workload, start in pairs:
                lab.two_writers(strategy, workload, head_start=start, bar=bar)
                save(finished=False)
            for strategy, workload, kind in raced:
                lab.two_writers(strategy, workload, head_start=0, bar=bar, race=kind)
                save(finished=False)
            if len(rounds):
                for strategy in strategies:
                    lab.race(strategy, plan.race_kinds, rounds)
        return save(finished=True)


crashes.timeout = 6 * 3600
