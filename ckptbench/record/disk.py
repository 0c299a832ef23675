"""A record on disk, written and read here: a directory holding ``environment.json`` (with
``schema_version``) and one Parquet file per non-empty table, each typed by its schema
(``ckptbench.record.schema``), or parts of one (``part-K-of-N``) written by processes that split a
plan and merged on read. A reader conforms every table it reads to the schema (an older record's
missing columns read as their defaults, its renamed experiment as the new name) and refuses a schema
version it does not know rather than guess at it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ckptbench.config import Settings
from ckptbench.record import schema
from ckptbench.record.results import Results
from ckptbench.record.schema import READABLE, SCHEMA_VERSION, TABLES


class SchemaMismatch(ValueError):
    """A results directory written with another schema version."""


#: A part of a record split in parts (``write_part``), under the record's directory.
PART = re.compile(r"part-(\d+)-of-(\d+)")


def write(record: Results, directory: Path) -> Path:
    """Write ``record`` to ``directory`` (replacing what was there, parts too); returns it. Each
    table is written with its schema's types (a column it lacks is left out: it reads as its
    default); a table or column the schema does not have is a ``ValueError``, before anything is
    written."""
    tables = {name: _arrow(name, frame) for name, frame in record.tables.items() if not frame.empty}
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.parquet"):
        stale.unlink()
    for stale in directory.glob("part-*-of-*"):  # parts of an earlier run split in parts
        shutil.rmtree(stale)
    for name, table in tables.items():
        pq.write_table(table, directory / f"{name}.parquet")
    (directory / "environment.json").write_text(json.dumps(record.environment, indent=1) + "\n")
    return directory


def _arrow(name: str, frame: pd.DataFrame) -> pa.Table:
    """Table ``name`` of ``frame`` as written: the columns it has, of their schema's types."""
    if name not in TABLES:
        raise ValueError(f"a record has no table {name}: its tables are {', '.join(TABLES)}")
    frame = schema.conform(name, frame)[[c for c in TABLES[name] if c in frame]]  # ValueError: an unknown column
    written = pa.schema([f.with_nullable(True) for f in schema.SCHEMAS[name] if f.name in frame])
    return pa.Table.from_pandas(frame, schema=written, preserve_index=False)


def write_part(record: Results, directory: Path, k: int, n: int) -> Path:
    """Write ``record`` as part ``k`` of ``n`` of the record in ``directory`` (replacing that part,
    the parts of a split into another number of parts, and a whole record there); ``read`` of
    ``directory`` then merges its parts."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in [*directory.glob("*.parquet"), *directory.glob("environment.json")]:
        stale.unlink()
    for other in directory.glob("part-*-of-*"):
        if (m := PART.fullmatch(other.name)) and int(m.group(2)) != n:
            shutil.rmtree(other)
    return write(Results({**record.environment, "part": [k, n]}, record.tables), directory / f"part-{k}-of-{n}")


def merge(parts: list[Results]) -> Results:
    """One record of ``parts`` (of one experiment): their tables one after the other, series and
    run numbers renumbered so that no two parts share one; the environment is the first part's,
    with each part's ``part``, ``created``, ``commit``, ``seed``, ``finished`` and ``bench_run`` under
    ``parts``."""
    tables: dict[str, list[pd.DataFrame]] = {}
    offsets = {"series": 0, "run": 0}
    for record in parts:
        for name, table in record.tables.items():
            frame = table.copy()
            for column in offsets:
                if column in frame:
                    frame[column] += offsets[column]
            tables.setdefault(name, []).append(frame)
        for column in offsets:
            numbers = [record.tables[name][column].max() for name in record.tables if column in record.tables[name]
                       and len(record.tables[name])]
            offsets[column] += int(max(numbers, default=-1)) + 1
    kept = ("part", "created", "commit", "seed", "finished", "bench_run")
    env = {**parts[0].environment, "parts": [{k: p.environment.get(k) for k in kept} for p in parts]}
    env.pop("part", None)
    return Results(env, {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items()})


def parts_of(directory: Path) -> list[Path]:
    """The part directories of a record split in parts, in part order (none for a whole record)."""
    found = [(int(m.group(1)), p) for p in directory.glob("part-*-of-*") if (m := PART.fullmatch(p.name))]
    return [p for _, p in sorted(found) if (p / "environment.json").exists()]


def read(directory: Path) -> Results:
    """The record written to ``directory`` by ``write`` (or its parts' by ``write_part``, merged),
    conformed to this schema."""
    if not (directory / "environment.json").exists() and (parts := parts_of(directory)):
        return merge([read(part) for part in parts])
    env = json.loads((directory / "environment.json").read_text())
    version = env.get("schema_version")
    if version not in READABLE:
        raise SchemaMismatch(f"{directory} has results schema {env.get('schema_version')}, this ckptbench reads "
                             f"{SCHEMA_VERSION}: rerun the benchmark, or read it with the commit that wrote it "
                             f"({env.get('commit', 'unknown')[:8]})")
    tables = {path.stem: schema.conform(path.stem, pd.read_parquet(path)) for path in directory.glob("*.parquet")
              if path.stem in TABLES}
    env = {**env, "schema_version": SCHEMA_VERSION}
    for since, names in sorted(schema.RENAMED.items()):  # an older record's experiment, by its new name
        if version < since and env.get("experiment") in names:
            env["experiment"] = names[env["experiment"]]
    return Results(env, tables)


def read_all(raw: Path) -> dict[str, dict[str, Results]]:
    """``{store: {experiment: Results}}`` for every record under ``raw``; another schema's are skipped."""
    out: dict[str, dict[str, Results]] = {}
    for record_dir in record_dirs(raw):
        try:
            record = read(record_dir)
        except SchemaMismatch:
            continue
        out.setdefault(record.environment["store"], {})[record.environment["experiment"]] = record
    return out


def record_dirs(raw: Path) -> list[Path]:
    """The directories under ``raw`` holding a record, whole or in parts."""
    return sorted(d for d in raw.glob("*") if (d / "environment.json").exists() or parts_of(d))


def directory(raw: Path, store: str, experiment: str) -> Path:
    """Where the latest record of ``experiment`` on ``store`` lives under ``raw``."""
    return raw / f"{store}-{experiment}"


def save(record: Results, settings: Settings, part: tuple[int, int] = (1, 1)) -> Results:
    """Write ``record`` where ``settings`` keep raw results (the latest of its store and experiment),
    as part K of N when ``part`` is (K, N) of a plan split over processes (``write_part``). Within a
    ``bench`` run (``Settings.bench_run``) the record says which (``bench_run``) and what ran beside
    it (``beside``: stage names; empty: nothing)."""
    if settings.bench_run:
        record.environment.update(bench_run=settings.bench_run, beside=list(settings.beside))
    where = directory(settings.raw, settings.store, record.environment["experiment"])
    if part == (1, 1):
        write(record, where)
    else:
        write_part(record, where, *part)
    return record


def of_this_run(settings: Settings, experiment: str) -> Results | None:
    """The record of ``experiment`` on ``settings.store`` that this ``bench`` run (``settings.bench_run``)
    saved already (in its untimed first phase, or before it was interrupted), where there is one: whole
    (every part of one split in parts) and finished."""
    if not settings.bench_run:
        return None
    try:
        record = read(directory(settings.raw, settings.store, experiment))
    except (FileNotFoundError, SchemaMismatch):
        return None
    parts = record.environment.get("parts") or [record.environment]
    whole = "parts" not in record.environment or len(parts) == parts[0]["part"][1]
    ours = all(p.get("bench_run") == settings.bench_run and p.get("finished") is not False for p in parts)
    return record if whole and ours else None
