"""The one table model of the report, the recommendation page and the CLI, and its renderers.

A ``Table`` is a caption, a header, rows of text cells (one per header column) and a note; a
function in ``ckptbench.report`` builds each from a record (or, for a live check, from plain
dicts), and only this module renders one:

- ``Table.markdown``: GitHub-flavoured Markdown. It is also the terminal's renderer: what the CLI
  prints. Markdown rather than a padded text table because every record's table has always been
  printed so (``measure`` writes it to a ``.md`` file too, and the findings quote it), because a
  line depends on its own cells only, never on another row's widest cell, so output stays stable
  and diffs line by line, and because cells as long as an exception's first line would break a
  padded table's alignment anyway.
- ``html``: the Jinja macro ``table`` of ``templates/table.html``, which every page template
  imports; Jinja's autoescape (``ENV``) escapes every caption, header, cell and note.

Markdown escaping: ``|`` becomes ``\\|`` (GitHub's escape, inside code spans too) and a line break a
space, in header and cells; backticks are left as they are (an error quoting a setting in
backticks reads as code; an unpaired one stays literal). The caption and note are text around the
table, not cells: they are printed as they are.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jinja2
import markupsafe

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: The environment every page of the report package is rendered in: autoescape on, and a name
#: a template misspells fails instead of rendering empty.
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                         undefined=jinja2.StrictUndefined)


def literals(text: str) -> markupsafe.Markup:
    """``text`` escaped, with its reStructuredText literals (a name between double backticks) as
    ``<code>``: a docstring the pages show (the decision's rules) reads as text, not as markup."""
    return markupsafe.Markup(re.sub(r"``(.+?)``", r"<code>\1</code>", str(markupsafe.escape(text))))


ENV.filters["literals"] = literals


@dataclasses.dataclass
class Table:
    """``classes``: a CSS class per column (the page only; ``projection`` marks a projected
    figure), shorter than ``header`` where the last columns have none."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    classes: tuple[str, ...] = ()

    def __post_init__(self):
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"{self.caption or 'a table'}: a row of {len(row)} cells under {len(self.header)} "
                                 f"columns: {row}")

    def column_class(self, column: int) -> str:
        return self.classes[column] if column < len(self.classes) else ""

    def markdown(self) -> str:
        """The table as Markdown, for the terminal and for files: the caption (a title gets a colon;
        a caption that is a sentence, ending in a full stop, stands as it is), a blank line, the
        table, then a blank line and the note if there is one."""
        lines = []
        if self.caption:
            lines += [self.caption if self.caption.endswith((".", ":")) else f"{self.caption}:", ""]
        lines += [_markdown_row(self.header), "|" + "---|" * len(self.header), *map(_markdown_row, self.rows)]
        return "\n".join(lines + (["", self.note] if self.note else []))


def _markdown_row(cells) -> str:
    escaped = (" ".join(str(c).replace("|", "\\|").splitlines()) for c in cells)
    return "|" + "|".join(f" {c} " if c else " " for c in escaped) + "|"


def html(table: Table, css: str = "") -> str:
    """``table`` as HTML by the macro the pages use (``css``: the ``<table>``'s class)."""
    return str(ENV.get_template("table.html").module.table(table, css))


def cell(value, spec: str = ".0f") -> str:
    """A cell for a figure: a failed run's metric says so; NaN is n/a."""
    if value is None:
        return "failed"
    return "n/a" if value != value else format(value, spec)

