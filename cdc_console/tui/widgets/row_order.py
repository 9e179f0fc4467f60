"""Which rows a table shows and in what order: the `/` filter and the `o`/`O` sort.

Kept apart from the widget so the rules are plain functions over rows: the poll hands over every
row on each refresh and these pick and order the ones to show, so a filter or sort is never lost
when fresh numbers arrive.

Sorting uses a value per cell when the row supplies one (rows read as an int, lag in seconds, a
progress fraction), and otherwise a natural order of the cell's text, in which "1,234" is a number
and "binlog.000041:4" comes after "binlog.000040:1007". Rows without a value (a dash) sort last
in both directions: on-call wants the tables that have a lag, not the ones that have none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from rich.text import Text

SortValue = int | float | str | None
#: A comparable key: one (kind, number, text) triple per run of digits or of other characters.
OrderKey = tuple[tuple[int, float, str], ...]

#: Cells that mean "no value" (``fmt.DASH`` and friends).
MISSING = frozenset({"", "-", "–", "—"})
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


class Row(NamedTuple):
    """One table row: its key, the cells shown, and optionally one sort value per cell."""

    key: str
    cells: Sequence[Text]
    values: Sequence[SortValue] = ()


RowLike = Row | tuple[str, Sequence[Text]]


def as_row(row: RowLike) -> Row:
    """Rows given as plain ``(key, cells)`` pairs (most tables) sort by their text."""
    return row if isinstance(row, Row) else Row(row[0], row[1])


def natural(text: str) -> OrderKey:
    """Order text as people read it: digit runs (thousands commas allowed) compare as numbers."""
    parts: list[tuple[int, float, str]] = []
    at = 0
    for match in _NUMBER.finditer(text):
        if match.start() > at:
            parts.append((1, 0.0, text[at : match.start()].casefold()))
        parts.append((0, float(match.group().replace(",", "")), ""))
        at = match.end()
    if at < len(text):
        parts.append((1, 0.0, text[at:].casefold()))
    return tuple(parts)


def order_key(row: Row, index: int) -> OrderKey | None:
    """The key of cell ``index``: its supplied value, else its text; None when it has neither."""
    if index < len(row.values):
        value = row.values[index]
        if value is None:
            return None
        if isinstance(value, str):
            return natural(value)
        return ((0, float(value), ""),)
    plain = row.cells[index].plain.strip() if index < len(row.cells) else ""
    return None if plain in MISSING else natural(plain)


def matches(row: Row, needle: str) -> bool:
    """Case-insensitive substring of the row's visible text (so the table name, a state, ...)."""
    return needle in " ".join(cell.plain for cell in row.cells).casefold()


def visible(rows: Sequence[Row], needle: str, sort_index: int | None, reverse: bool) -> list[Row]:
    """The rows to show: those matching ``needle`` (all when empty), sorted by ``sort_index``
    (stable, so equal rows keep the poll's order; without a column, the poll's order)."""
    needle = needle.strip().casefold()
    shown = [row for row in rows if matches(row, needle)] if needle else list(rows)
    if sort_index is None:
        return shown
    keyed = [(order_key(row, sort_index), row) for row in shown]
    present = [(key, row) for key, row in keyed if key is not None]
    present.sort(key=lambda pair: pair[0], reverse=reverse)
    return [row for _, row in present] + [row for key, row in keyed if key is None]
