"""The one table model (``ckptbench.report.table``): a table's cells come out the same in Markdown
(what the CLI prints), in the pages' HTML macro and in the recommendation's text and page; Markdown
escapes what would break a row, HTML escapes what would run."""

from __future__ import annotations

import re

import pytest
from test_recommend import fixed  # tests/test_recommend.py: a fixed recommend record

from ckptbench.record import disk
from ckptbench.report import page as report_page
from ckptbench.report import recommendation
from ckptbench.report.table import Table, html

CELLS = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.DOTALL)


def markdown_cells(text: str) -> list[list[str]]:
    """The cells of a Markdown table's rows (header first), split on unescaped pipes."""
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            for line in text.splitlines() if line.startswith("| ")]


def test_one_table_three_ways():
    t = Table("Two strategies", ["strategy", "p50 (ms)", "$ per month (projection)"],
              [["rename", "12", "65.66"], ["conditional", "3", "5.18"]], "A note.", classes=("", "", "projection"))
    assert t.markdown().splitlines() == [
        "Two strategies:", "", "| strategy | p50 (ms) | $ per month (projection) |", "|---|---|---|",
        "| rename | 12 | 65.66 |", "| conditional | 3 | 5.18 |", "", "A note."]
    page = html(t)
    assert CELLS.findall(page) == [cell for row in [t.header, *t.rows] for cell in row]
    assert markdown_cells(t.markdown()) == [t.header, *t.rows]
    assert "<caption>Two strategies</caption>" in page and '<p class="note">A note.</p>' in page
    assert '<th class="projection">$ per month (projection)</th>' in page
    assert '<td class="projection">65.66</td>' in page and "<td>rename</td>" in page


def test_markdown_escapes_pipes_and_line_breaks_and_keeps_the_rows_whole():
    t = Table("", ["check", "what was seen"], [["race", "both | won\nagain"], ["empty", ""]])
    assert t.markdown().splitlines() == ["| check | what was seen |", "|---|---|",
                                         "| race | both \\| won again |", "| empty | |"]
    assert markdown_cells(t.markdown()) == [["check", "what was seen"], ["race", "both | won again"], ["empty", ""]]


def test_a_sentence_caption_stands_as_it_is():
    assert Table("Cost per month: a projection.", ["a"], []).markdown().splitlines()[0] == \
        "Cost per month: a projection."


def test_html_escapes_what_would_run():
    t = Table("<b>caption</b>", ["<i>head</i>"], [["<script>alert(1)</script>"]], "a & b")
    page = html(t)
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "a &amp; b" in page


def test_a_long_cell_may_wrap():
    page = html(Table("", ["error"], [["x" * 61], ["y" * 60]]))
    assert f'<td class="long">{"x" * 61}</td>' in page and f'<td>{"y" * 60}</td>' in page


def test_a_row_that_does_not_fit_the_header_is_refused():
    with pytest.raises(ValueError, match="a row of 1 cells under 2 columns"):
        Table("t", ["a", "b"], [["only one"]])


def test_the_recommendation_text_and_page_show_the_same_cells_escaped_each_its_way(tmp_path):
    """A reason Spark gives that holds a pipe and markup: the terminal's Markdown escapes the pipe,
    the page escapes the markup, and both show every cell of the candidates' table."""
    record = fixed()
    refused = record.runs.error.notna()
    record.tables["runs"].loc[refused, "error"] = "Spark says <script>x</script> | no"
    record = disk.read(disk.write(record, tmp_path / "ceph-recommend"))
    decision = report_page.recommend_decision(record)
    table = recommendation.summary(record, decision).candidates
    assert any("<script>x</script> | no" in cell for row in table.rows for cell in row)
    text = recommendation.text(record, decision)
    printed = text[text.index(table.markdown()):]
    assert markdown_cells(printed) == [table.header, *table.rows]
    assert "<script>x</script> \\| no" in printed
    page = recommendation.html(record, decision, "now")
    assert "<script>" not in page and "Spark says &lt;script&gt;x&lt;/script&gt; | no" in page
    start = page.index(f"<caption>{table.caption}</caption>")
    shown = CELLS.findall(page[start:page.index("</table>", start)])
    assert shown[:len(table.header)] == [h.replace("'", "&#39;") for h in table.header]
    assert len(shown) == len(table.header) * (1 + len(table.rows))
