"""The race's figures (``ckptbench.experiments.race``, the ``races`` table): of two writers racing
to create one checkpoint file, how often did the strategy let both win? And does it refuse a
second writer, as far as the race can tell?"""

from __future__ import annotations

import pandas as pd

from ckptbench.record.results import Results


def race_rows(results: Results, strategy: str, kind: str | None = None) -> pd.DataFrame:
    """The race's rounds of ``strategy`` (of file ``kind``, or every kind)."""
    races = results.races
    races = races[races.strategy == strategy]
    return races if kind is None else races[races.kind == kind]


def race_kinds(results: Results, strategy: str | None = None) -> list[str]:
    """The file kinds raced (for ``strategy``), in the order they ran."""
    races = results.races if strategy is None else race_rows(results, strategy)
    return list(dict.fromkeys(races.kind))


def race_rounds(results: Results, strategy: str, kind: str | None = None) -> float:
    """Rounds run."""
    return float(len(race_rows(results, strategy, kind)))


def race_two_winners(results: Results, strategy: str, kind: str | None = None) -> float:
    """Rounds in which both writers' creates succeeded: a second writer let through (one file,
    two writers each told it was theirs; the file holds one of them)."""
    return float((race_rows(results, strategy, kind).winners == 2).sum())


def race_one_winner(results: Results, strategy: str, kind: str | None = None) -> float:
    """Rounds the strategy got right: both writes met at the store (the rendezvous paired them)
    and exactly one writer won."""
    rows = race_rows(results, strategy, kind)
    return float(((rows.winners == 1) & rows.paired.astype(bool)).sum())


def race_unmet(results: Results, strategy: str, kind: str | None = None) -> float:
    """Rounds whose rendezvous did not meet: one writer never wrote the shared key (it failed
    first, or wrote elsewhere), so the round did not test the check-then-write window."""
    return float((~race_rows(results, strategy, kind).paired.astype(bool)).sum())


def refuses_second_writer(results: Results, strategy: str) -> bool | None:
    """Whether ``strategy`` refuses a second writer, by the race: None when no race was run for
    it; True only when every round of every kind met and exactly one writer won it; False
    otherwise (a round with two winners, none, or one that never met proves nothing)."""
    rows = race_rows(results, strategy)
    if rows.empty:
        return None
    return bool(((rows.winners == 1) & rows.paired.astype(bool)).all())
