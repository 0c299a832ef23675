"""The page ``docs/record-schema.md``: every table and column of a record, generated from the
schemas (``ckptbench.record.schema``), never written by hand. Regenerate it with
``python -m ckptbench.record.schema_page``; ``tests/test_schema.py`` fails while the committed page
is not what the schemas generate."""

from __future__ import annotations

import json

import pyarrow as pa

from ckptbench.config import ROOT
from ckptbench.record import schema

#: Where the page is committed.
PATH = ROOT / "docs" / "record-schema.md"
HEADER = ("column", "type", "unit", "nullable", "since", "an older record reads", "pandas", "doc")


def _cell(text: str) -> str:
    """A table cell of a doc: its reStructuredText code (double backquotes) as Markdown's."""
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ")


def _older(field: pa.Field, table_since: int) -> str:
    """What a record older than the column reads for it ("": every record of the table has it)."""
    if schema.has_default(field):
        return f"`{json.dumps(schema.default(field))}`"
    return "NA" if schema.since(field) > table_since else ""


def _table(name: str, fields: pa.Schema) -> list[str]:
    since = schema.since(fields)
    lines = [f"### `{name}`", "", _cell(schema.doc(fields)) + (f" Since schema {since}." if since > 1 else ""), "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for field in fields:
        cells = [f"`{field.name}`", str(field.type), schema.unit(field), "yes" if field.nullable else "no",
                 str(schema.since(field)), _older(field, since), schema.dtype(field), schema.doc(field)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, ""]


def page(schemas: dict[str, pa.Schema] | None = None) -> str:
    """The page's Markdown for ``schemas`` (by default the record's)."""
    schemas = schema.SCHEMAS if schemas is None else schemas
    history = schema.history(schemas)
    lines = ["# Record schema", "",
             "<!-- Generated from ckptbench/record/schema.py by `python -m ckptbench.record.schema_page`: "
             "change the schema there and regenerate; tests/test_schema.py fails while this page differs. -->",
             "",
             "An experiment's record, `results/raw/<store>-<experiment>/`, is `environment.json` (what was "
             "measured where, with which versions, and `schema_version`) and one Parquet file per non-empty "
             "table below. Read it with `ckptbench.record.disk.read`, which conforms each table to these "
             "columns and types: a column an older record lacks reads as the value in *an older record reads* "
             "(NA where that says NA). *nullable*: a value may be missing (NA, NaN or None); the recorder "
             "(`Recorder.add_*`) refuses a row without a column that is not nullable.", "",
             f"Schema version {schema.SCHEMA_VERSION}; this ckptbench reads versions "
             f"{', '.join(map(str, schema.READABLE))}.", "",
             "## Versions", "", "| version | added or changed |", "|---|---|"]
    lines += [f"| {v} | {_cell('; '.join(changes) or 'the first')} |" for v, changes in history.items()]
    lines += ["", "## Tables", ""]
    for name, fields in schemas.items():
        lines += _table(name, fields)
    return "\n".join(lines)


if __name__ == "__main__":
    PATH.write_text(page())
    print(f"wrote {PATH.relative_to(ROOT)}")
