"""Every experiment ``bench`` runs, declared once: the names it goes by in each layer, what it writes,
what the decision reads of it, and what it costs at each plan size.

``bench`` plans from here (``plan``): it prints each stage with its planned minutes before asv starts,
shows which stage runs with an ETA for the whole plan while asv runs, and records planned and actual
minutes per stage (the ``stages`` table of its ``bench`` record), which the report shows. A stage's
planned minutes are the actual minutes of the last bench of the same store and size where one was
recorded, else the estimate here (``Experiment.minutes``), which is what the names say: an estimate
for this project's machine kind (2 cores), to be replaced by a measurement as soon as there is one.

A plan may span several stores, each a ``bench`` of its own in one run. The experiments that time
nothing (``Experiment.timed`` False: their findings are what happened, not how long it took) run
first, every store's beside each other (``Timeline.together``), and the crash checks, which time
nothing either, last, every store's beside each other; every other stage runs alone, and each
stage's row says what ran beside it. Latency is never measured beside another stage.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time

from ckptbench import config


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment of the bench.

    ``name``: its record's experiment (``results/raw/<store>-<name>``) and the stage's name in the
    plan; ``title``: the stage as the plan and its progress bar say it; ``setup``: its function in
    ``benchmarks/common.py`` (or ``module.function`` in another module of the suite), asv's
    ``setup_cache`` for the classes reading its record (which classes those are, the suite itself
    says: ``benchmarks.common.listing``); ``command``: the CLI command that runs it on its own (None:
    only within ``bench``); ``tables``: the record tables it writes; ``decides``: what the decision
    reads of it (empty: the report's tables alone); ``minutes``: the estimate per plan size
    (``config.PLANS``) for one store; ``timed``: False where what it finds is what happened (rows
    lost, a store outage ridden out), which another stage beside it does not change, so it may run
    beside others (the timings it also records then say so: ``Settings.beside``); ``every_store``:
    the plan sizes at which it runs on every store of a plan, at the others on its first store only
    (what it measures is Spark's, or only the report's tables read it); ``parts``: per plan size, the
    processes an untimed one is split over (its set-up's share: ``part_of``; 1 where a size is not
    named)."""

    name: str
    title: str
    setup: str
    command: str | None
    tables: tuple[str, ...]
    decides: str
    minutes: dict[str, float]
    timed: bool = True
    every_store: tuple[str, ...] = tuple(config.PLANS)
    parts: dict[str, int] = dataclasses.field(default_factory=dict)


#: The experiments asv runs, in the order their set-up runs (asv's: by benchmark name).
EXPERIMENTS = (
    Experiment("streaming", "streaming queries", "streaming", "measure",
               ("runs", "batches", "requests", "samples", "file_commits", "maintenance"),
               "each strategy's commit latency and requests per workload's job; the store's floor",
               {"smallest": 2.5, "quick": 3, "full": 60}),
    Experiment(config.CRASHLAB, "crash lab", "crashes", config.CRASHLAB,
               ("cycles", "crash_series", "two_writers", "races"),
               "which strategies lose or duplicate a row after a kill; which refuse a second writer (the race)",
               {"smallest": 3, "quick": 3.5, "full": 150}, timed=False, parts={"full": 2}),
    Experiment(config.FAULTLAB, "fault lab", "fault_lab", config.FAULTLAB,
               ("runs", "batches", "requests", "fault_runs", "injections"),
               "which strategies ride out a store outage",
               {"smallest": 2, "quick": 2.5, "full": 120}, timed=False, parts={"full": 4}),
    Experiment("store", "store alone", "store_alone", None,
               ("samples", "capabilities"), "what the store can run (the probe)",
               {"smallest": 0.5, "quick": 0.5, "full": 10}),
    Experiment("jvm_counting", "JVM counting overhead", "jvm_counting.overhead", "counting",
               ("runs", "batches", "requests", "counting_switches", "file_commits", "maintenance"), "",
               {"smallest": 1, "quick": 1, "full": 30}, every_store=()),
    Experiment("levers", "configurations", "levers", "recommend",
               ("runs", "batches", "requests", "file_commits", "maintenance"),
               "each job's configurations (a strategy and Spark's levers): latency, cost, refusals",
               {"smallest": 1.5, "quick": 4, "full": 120}),
    Experiment("manifest-compaction", "compaction histories", "history", None,
               ("compactions",), "", {"smallest": 0.5, "quick": 0.5, "full": 10}, every_store=("full",)),
    Experiment("scale", "scale axes", "scale_axes", "scale",
               ("runs", "batches", "requests", "memory", "maintenance"), "",
               {"smallest": 2, "quick": 2, "full": 360}, every_store=("full",)),
)
BY_NAME = {e.name: e for e in EXPERIMENTS}
#: Part K of N of an untimed experiment's set-up (``Experiment.parts``), as ``K/N``: set by ``bench``
#: for each process of its first phase; unset, the whole.
PART_ENV = "CKPT_BENCH_PART"


def part_of(environ) -> tuple[int, int]:
    """The part (K, N) ``environ`` (``os.environ``) names in ``PART_ENV``; (1, 1) where it names none."""
    k, _, n = (environ.get(PART_ENV) or "1/1").partition("/")
    return int(k), int(n)
#: What ``bench`` does beside the experiments, as stages of its plan: asv's tracks (each benchmark's
#: process, between the experiments), the crash check of each job's leaders, the pages and the report.
TRACKS, CRASH_CHECK, PAGES = "asv tracks", config.CRASH_CHECK, "pages and report"
OTHER_MINUTES = {TRACKS: {"smallest": 1, "quick": 1, "full": 5},
                 CRASH_CHECK: {"smallest": 1, "quick": 1.5, "full": 15},
                 PAGES: {"smallest": 1, "quick": 1, "full": 2}}


def of_setup(setup: str) -> Experiment:
    """The experiment whose asv set-up function is ``setup`` (``Experiment.setup``)."""
    [found] = [e for e in EXPERIMENTS if e.setup == setup]
    return found


@dataclasses.dataclass
class Stage:
    """A stage of ``bench``'s plan: its ``name`` (an experiment's, or ``TRACKS``, ``CRASH_CHECK``,
    ``PAGES``) on ``store``, its ``title``, the ``planned`` minutes and, once it ran, the ``actual``
    ones, and the stages that ran beside it (``beside``: ``label``s)."""

    name: str
    title: str
    planned: float
    actual: float | None = None
    store: str = ""
    beside: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.store} {self.title}" if self.store else self.title


def plan(size: str, suite: dict[str, list[str]], bench: str | None, last: dict[str, float] | None = None,
         store: str = "", first: bool = True, publishes: bool = True) -> list[Stage]:
    """The stages a ``bench`` of ``size`` on ``store`` runs: each experiment with a benchmark of the
    ``suite`` (``benchmarks.common.listing``: each set-up's benchmarks by full name) that ``bench``
    (asv's ``--bench`` expression, searched in full names as asv does; None: all) selects, but those
    for a plan's ``first`` store only on another, and the stages of ``bench`` itself (the pages and
    the report where this store's bench ``publishes``: the last store's); each planned at
    ``last``'s minutes (the actual minutes of the last bench of this store and size, by stage) where
    it has them, else at the estimate."""
    last = last or {}
    chosen = [e for e in EXPERIMENTS if (first or size in e.every_store)
              and any(bench is None or re.search(bench, name) for name in suite.get(e.setup, ()))]
    stages = [Stage(e.name, e.title, last.get(e.name, e.minutes[size]), store=store) for e in chosen]
    others = [TRACKS, *([CRASH_CHECK] if any(e.name == "levers" for e in chosen) else []),
              *([PAGES] if publishes else [])]
    return stages + [Stage(name, name, last.get(name, OTHER_MINUTES[name][size]), store=store) for name in others]


def left_out(suite: dict[str, list[str]], size: str) -> str | None:
    """A regular expression of the full names of the benchmarks (``suite``: ``benchmarks.common.listing``)
    of the experiments a plan of ``size`` runs on its first store only, which every other store leaves
    out; None where there are none."""
    names = [name for e in EXPERIMENTS if size not in e.every_store for name in suite.get(e.setup, ())]
    return _any_of(names) if names else None


def emulator_row(suite: dict[str, list[str]]) -> str:
    """A regular expression of the full names of the store-alone experiment's benchmarks (``suite``:
    ``benchmarks.common.listing``): all an emulator runs in a plan with a real store, which gives the
    report's matrix of stores its row, marked as an emulator's; its other timings would say nothing
    of a real store."""
    return _any_of(suite.get(BY_NAME["store"].setup, []))


def _any_of(names: list[str]) -> str:
    """A regular expression matching the benchmarks ``names`` as asv matches them: a parameterised
    one as ``name(value, ...)``, so a name ends at its end or at a parenthesis."""
    return "(?:{})".format("|".join(re.escape(n) + r"(?:\(|$)" for n in names))


class Timeline:
    """``bench``'s plan as it runs, over one store or several: each stage's start and end (from an
    experiment's ``progress.stage`` events on the ``store`` asv runs on, or ``bench``'s own ``start``
    /``end``), said as they come with the time the whole plan is then expected to end; asv's tracks
    are the time asv ran outside every experiment (``tracks``). Stages run ``together`` overlap: the
    plan counts the longest of them; the untimed experiments' are, and so are the crash checks of the
    stores, unless ``together`` says otherwise."""

    def __init__(self, stages: list[Stage], clock=time.time) -> None:
        self.stages = {(s.store, s.name): s for s in stages}
        self.clock, self.store = clock, stages[0].store if stages else ""
        self.started: dict[tuple[str, str], float] = {}
        self.groups: list[set[tuple[str, str]]] = []
        self.together([k for k in self.stages if k[1] in BY_NAME and not BY_NAME[k[1]].timed])
        self.together([k for k in self.stages if k[1] == CRASH_CHECK])

    def together(self, keys: list[tuple[str, str]]) -> None:
        """Stages ``keys`` (store, name) run beside each other, and no longer beside those they were
        planned with: each says the others'."""
        self.groups = [g for g in (g - set(keys) for g in self.groups) if g]
        if keys:
            self.groups.append(set(keys))
        for group in self.groups:
            for key in group:
                self.stages[key].beside = tuple(self.stages[k].label for k in self.stages if k in group and k != key)

    def grouped(self, key: tuple[str, str]) -> bool:
        """Whether stage ``key`` runs beside others."""
        return any(key in g and len(g) > 1 for g in self.groups)

    def _wall(self, seconds: dict[tuple[str, str], float]) -> float:
        """The seconds ``seconds`` (by stage) take in all, those run together overlapping."""
        return (sum(v for k, v in seconds.items() if not any(k in g for g in self.groups))
                + sum(max((v for k, v in seconds.items() if k in g), default=0.0) for g in self.groups))

    def planned_text(self) -> str:
        """The plan, a line a stage, with its planned minutes and the minutes they take in all."""
        width = max(len(s.label) for s in self.stages.values())
        lines = [f"  {s.label:<{width}}  {s.planned:5.1f} min" + (" (beside others)" if self.grouped(k) else "")
                 for k, s in self.stages.items()]
        total = self._wall({k: s.planned for k, s in self.stages.items()})
        return "\n".join([f"the plan ({total:.0f} min planned):", *lines])

    def eta(self, now: float) -> str:
        """When the plan is expected to end: now, plus what the running stages have left of their
        planned minutes, plus every stage not started."""
        left = {k: max(s.planned * 60 - (now - self.started[k]), 0) if k in self.started else s.planned * 60
                for k, s in self.stages.items() if s.actual is None}
        return dt.datetime.fromtimestamp(now + self._wall(left), dt.timezone.utc).strftime("%H:%M UTC")

    def start(self, name: str, say, at: float | None = None, store: str | None = None) -> None:
        at = self.clock() if at is None else at
        key = (self.store if store is None else store, name)
        stage = self.stages.get(key) or self.stages.setdefault(key, Stage(name, name, 0.0, store=key[0]))
        self.started[key] = at
        say(f"stage {stage.label}: started, {stage.planned:.1f} min planned; the plan ends about {self.eta(at)}")

    def end(self, name: str, say, at: float | None = None, store: str | None = None) -> None:
        at = self.clock() if at is None else at
        key = (self.store if store is None else store, name)
        stage = self.stages[key]
        stage.actual = (at - self.started[key]) / 60
        say(f"stage {stage.label}: {stage.actual:.1f} min ({stage.planned:.1f} planned); "
            f"the plan ends about {self.eta(at)}")

    def event(self, event: dict, say) -> None:
        """A ``progress.stage`` event of an experiment's set-up (``Experiment.setup``) on ``store``."""
        name = of_setup(event["stage"]).name
        (self.start if event["event"] == "start" else self.end)(name, say, event["at"])

    def tracks(self, asv_minutes: float) -> None:
        """asv ran ``asv_minutes`` in all on ``store``: its tracks took what the experiments it ran did
        not (those run before, beside others, are not asv's)."""
        ran = sum(s.actual for k, s in self.stages.items()
                  if k[0] == self.store and s.actual is not None and s.name in BY_NAME and not self.grouped(k))
        self.stages[(self.store, TRACKS)].actual = max(asv_minutes - ran, 0.0)

    def rows(self, store: str | None = None) -> list[dict]:
        """The ``stages`` table's rows (``record.schema``) of ``store`` (None: the one asv runs on)."""
        nan, store = float("nan"), self.store if store is None else store
        return [{"stage": s.name, "title": s.title, "planned_min": s.planned,
                 "actual_min": nan if s.actual is None else s.actual, "started": self.started.get(k, nan),
                 "beside": ", ".join(s.beside)}
                for k, s in self.stages.items() if k[0] == store]
