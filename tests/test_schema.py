"""The record's schema (``ckptbench.record.schema``) is the one home of every table's columns, their
types and their defaults: the recorder checks its rows against it, the writer writes through it and
the reader conforms what it reads to it, older records included."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ckptbench.record import disk, results, schema, schema_page
from helpers import event, progress

ROOT = Path(__file__).resolve().parent.parent


def _recorded() -> results.Recorder:
    recorder = results.Recorder()
    run = recorder.add_run("conditional", "stateful", 10, "p")
    recorder.add_batches(run, "measured", [progress(1, 10.0), progress(2, 20.0)])
    recorder.add_requests(run, [event(1.01, "PUT", "p/offsets/1"), event(9.0, "DELETE", "p/state/old")],
                          [progress(1, 10.0), progress(2, 20.0)])
    recorder.add_fault_run(run, profile="eventual", seed=0, batches=2, batches_done=2, outcome="completed", cause="",
                           recovered=None, exactly_once=None, seconds=1.0)
    return recorder


def _dtypes(frame: pd.DataFrame) -> dict[str, str]:
    return {column: str(t) for column, t in frame.dtypes.items()}


def _declared(name: str) -> dict[str, str]:
    return {field.name: schema.dtype(field) for field in schema.SCHEMAS[name]}


def test_a_misspelt_or_missing_column_is_an_error_at_the_add():
    recorder = results.Recorder()
    with pytest.raises(ValueError, match="table fault_runs: no column outcom; missing outcome "):
        recorder.add_fault_run(0, profile="eventual", seed=0, batches=2, batches_done=2, outcom="completed", cause="",
                               recovered=None, exactly_once=None, seconds=1.0)
    with pytest.raises(ValueError, match="table memory: missing heap_mib "):
        recorder.add_memory(0, batch=1, manager_objects=1, manager_kib=1.0)
    assert recorder.rows["fault_runs"] == recorder.rows["memory"] == []  # nothing half-added
    # A nullable column may be left out: it reads as missing (NaN: no outage).
    recorder.add_fault_run(0, profile="eventual", seed=0, batches=2, batches_done=2, outcome="completed", cause="",
                           recovered=None, exactly_once=None, seconds=1.0)
    assert recorder.results({}).fault_runs.outage_s.isna().all()


def test_a_row_put_in_rows_directly_is_checked_when_the_record_is_made():
    recorder = results.Recorder()
    run = recorder.add_run("direct", "stateful", 10, "p")
    recorder.rows["runs"][run].update(peak_rss=1.0)  # a misspelt peak_rss_mib
    with pytest.raises(ValueError, match="table runs has no column peak_rss: its columns are run, strategy"):
        recorder.results({})


def test_every_table_has_its_declared_types_built_written_and_read(tmp_path):
    """Each table's pandas types are the schema's (``schema.dtype``) in a record built by the
    recorder, and the same after it is written and read back; an empty table's too."""
    record = _recorded().results({"schema_version": schema.SCHEMA_VERSION, "store": "t", "experiment": "x"})
    back = disk.read(disk.write(record, tmp_path / "t-x"))
    for name in schema.TABLES:
        assert _dtypes(record.tables[name]) == _declared(name), name
        assert _dtypes(getattr(back, name)) == _declared(name), name
    assert list(back.requests.batch_id) == [1, pd.NA] and back.fault_runs.recovered.isna().all()


def test_the_writer_refuses_a_table_or_column_the_schema_does_not_have(tmp_path):
    record = _recorded().results({"schema_version": schema.SCHEMA_VERSION})
    with pytest.raises(ValueError, match="table runs has no column arm"):
        disk.write(results.Results(record.environment, {**record.tables, "runs": record.runs.assign(arm="on")}),
                   tmp_path / "r")
    with pytest.raises(ValueError, match="a record has no table arms"):
        disk.write(results.Results(record.environment, {"arms": record.runs}), tmp_path / "r")
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_an_older_record_reads_each_missing_column_as_its_default(tmp_path):
    """A record written before ``requests.source``, ``runs.settings``, ``preset``, ``refused`` and
    ``repeat``, ``fault_runs``' outage columns: those read as their fields' defaults (NA where none),
    typed."""
    directory = disk.write(_recorded().results({"schema_version": 1}), tmp_path / "old")
    for name, columns in {"requests": ["source", "origin"], "runs": ["settings", "preset", "refused", "repeat"],
                          "fault_runs": ["outage_s", "died_after_s", "resumed_after_s"]}.items():
        table = pq.read_table(directory / f"{name}.parquet")
        pq.write_table(table.drop_columns(columns), directory / f"{name}.parquet")
    back = disk.read(directory)
    assert list(back.requests.source) == ["proxy"] * 2 and back.requests.origin.isna().all()
    assert back.runs[["settings", "preset", "refused", "repeat"]].values.tolist() == [["{}", "default", False, 0]]
    assert back.fault_runs.outage_s.isna().all()
    for name in ("requests", "runs", "fault_runs"):
        assert _dtypes(getattr(back, name)) == _declared(name), name
    defaults = {(name, f.name): schema.default(f) for name, s in schema.SCHEMAS.items() for f in s
                if schema.has_default(f)}
    assert defaults == {("runs", "settings"): "{}", ("runs", "preset"): "default", ("runs", "refused"): False,
                        ("runs", "repeat"): 0, ("requests", "source"): "proxy", ("crash_series", "preset"): "default",
                        ("stages", "beside"): ""}


def test_each_version_since_the_first_says_what_it_changed():
    history = schema.history()
    assert list(history) == list(schema.READABLE) == list(range(1, schema.SCHEMA_VERSION + 1))
    assert all(history[v] for v in history if v > 1), history
    assert "``requests.source``" in history[2] and "the ``races`` table" in history[7]


def test_an_older_records_renamed_experiment_reads_with_its_new_name(tmp_path):
    """Schema 9 renamed the crash lab's and fault lab's records (``schema.RENAMED``): an older
    record's ``crashes`` and ``faults`` read, and are keyed by ``read_all``, as ``crashlab`` and
    ``faultlab``; the committed sample's among them. A record of this schema keeps its name."""
    for version, experiment in ((8, "crashes"), (7, "faults"), (schema.SCHEMA_VERSION, "levers")):
        disk.write(_recorded().results({"schema_version": version, "store": "t", "experiment": experiment}),
                   tmp_path / f"t-{experiment}")
    assert sorted(disk.read_all(tmp_path)["t"]) == ["crashlab", "faultlab", "levers"]
    assert disk.read(tmp_path / "t-crashes").environment["experiment"] == "crashlab"
    sample = disk.read_all(ROOT / "docs" / "sample-report" / "raw")["ceph"]
    assert {"crashlab", "faultlab"} <= set(sample) and not {"crashes", "faults"} & set(sample)


# -- the page, and a column added in one place --------------------------------------------------


def check_page(committed: str) -> None:
    assert committed == schema_page.page(), "docs/record-schema.md is stale: run python -m ckptbench.record.schema_page"


def test_the_committed_page_is_what_the_schema_generates():
    """docs/record-schema.md is regenerated with `python -m ckptbench.record.schema_page`."""
    check_page(schema_page.PATH.read_text())


def _changed_doc(name: str, column: str, doc: str) -> dict[str, pa.Schema]:
    fields = schema.SCHEMAS[name]
    i = fields.get_field_index(column)
    changed = fields.set(i, fields.field(i).with_metadata({**fields.field(i).metadata, b"doc": doc.encode()}))
    return {**schema.SCHEMAS, name: changed}


def test_a_stale_page_is_caught():
    """A page generated before one field changed (here: its doc) is not what the schema generates,
    on that column's line alone."""
    stale = schema_page.page(_changed_doc("memory", "heap_mib", "the heap"))
    with pytest.raises(AssertionError, match=r"record-schema\.md is stale"):
        check_page(stale)
    [(old, new)] = [(a, b) for a, b in zip(stale.splitlines(), schema_page.page().splitlines(), strict=True) if a != b]
    assert old.startswith("| `heap_mib` |") and old.endswith("| the heap |") and new.startswith("| `heap_mib` |")


def test_a_column_added_to_the_schema_alone_flows_through_record_disk_and_page(tmp_path, monkeypatch):
    """Two columns added to the ``memory`` table's schema, nothing else changed: the recorder
    requires the one with no missing value, the record built, written and read has both with
    their types, a record written before them reads their defaults, and the page shows them."""
    older = disk.write(_memory_record(heap_mib=100.0, manager_objects=1, manager_kib=1.0), tmp_path / "older")
    added = schema.SCHEMAS["memory"].append(schema.column("gcs", schema.INT, "full GCs before the reading", "count",
                                                          since=schema.SCHEMA_VERSION, default=1))
    added = added.append(schema.column("old_gen_mib", schema.FLOAT, "the old generation's share", "MiB",
                                       nullable=True, since=schema.SCHEMA_VERSION))
    monkeypatch.setitem(schema.SCHEMAS, "memory", added)
    assert schema.TABLES["memory"][-2:] == ("gcs", "old_gen_mib")
    with pytest.raises(ValueError, match="table memory: missing gcs "):
        _memory_record(heap_mib=100.0, manager_objects=1, manager_kib=1.0)
    record = _memory_record(heap_mib=100.0, manager_objects=1, manager_kib=1.0, gcs=3)
    back = disk.read(disk.write(record, tmp_path / "new"))
    for table in (record.memory, back.memory):
        assert _dtypes(table) == {**_declared("memory"), "gcs": "int64", "old_gen_mib": "float64"}
        assert table.gcs.tolist() == [3] and table.old_gen_mib.isna().all()
    before = disk.read(older).memory
    assert before.gcs.tolist() == [1] and before.old_gen_mib.isna().all() and _dtypes(before) == _dtypes(back.memory)
    text = schema_page.page()
    version = schema.SCHEMA_VERSION
    assert f"| `gcs` | int64 | count | no | {version} | `1` | int64 | full GCs before the reading |" in text
    assert f"| `old_gen_mib` | double | MiB | yes | {version} | NA | float64 |" in text
    assert "`memory.gcs`; `memory.old_gen_mib`" in text


def _memory_record(**reading) -> results.Results:
    recorder = results.Recorder()
    recorder.add_memory(0, batch=1, **reading)
    return recorder.results({"schema_version": schema.SCHEMA_VERSION, "store": "t", "experiment": "scale"})
