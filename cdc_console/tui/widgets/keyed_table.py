"""A DataTable that follows a keyed list of rows, changing only the cells that changed.

Rebuilding a 2,000-row table twice a second would reset the cursor and scroll position and cost a
full re-layout; instead each refresh compares cell by cell and calls ``update_cell`` for the few
that moved (a chunk finishing changes one row). Only when rows come or go is the table rebuilt,
keeping the cursor on the same key.

Columns declared without a width are sized here from their content, not by DataTable's idle-time
measuring: a console refreshing several times a second is rarely idle, and a column measured late
shows truncated text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

MAX_FITTED_WIDTH = 200


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None


def _signature(cell: Text) -> tuple[object, ...]:
    return (cell.plain, str(cell.style), tuple(cell.spans))


class KeyedTable(DataTable[Text]):
    """Rows are ``(key, cells)``; call ``sync`` with the full list on every refresh."""

    def __init__(self, columns: Sequence[Column], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._columns = tuple(columns)
        self._order: list[str] = []
        self._shown: dict[str, tuple[tuple[object, ...], ...]] = {}
        self._fitted: dict[str, int] = {}
        self.updated_cells = 0

    def on_mount(self) -> None:
        for column in self._columns:
            self.add_column(Text(column.label, no_wrap=True), key=column.key, width=column.width)

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    @property
    def cursor_key(self) -> str | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    def select_key(self, key: str) -> None:
        if key in self._shown:
            self.move_cursor(row=self._order.index(key))

    def sync(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> None:
        keys = [key for key, _ in rows]
        if keys != self._order or self._wider(rows):
            self._rebuild(rows)
            return
        for key, cells in rows:
            shown = self._shown[key]
            signature = tuple(_signature(cell) for cell in cells)
            if signature == shown:
                continue
            for index, (cell, before) in enumerate(zip(cells, shown, strict=True)):
                if _signature(cell) != before:
                    self.update_cell(key, self._columns[index].key, cell)
                    self.updated_cells += 1
            self._shown[key] = signature

    def _wider(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> bool:
        """Whether a content-sized column must grow for these rows (then widths are set)."""
        grew = False
        for index, column in enumerate(self._columns):
            if column.width is not None:
                continue
            widest = max([cell_len(column.label), *(cells[index].cell_len for _, cells in rows)])
            widest = min(widest, MAX_FITTED_WIDTH)
            if widest > self._fitted.get(column.key, 0):
                self._fitted[column.key] = widest
                grew = True
        return grew

    def _rebuild(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> None:
        keep = self.cursor_key
        self._wider(rows)
        self.clear()
        for key, width in self._fitted.items():
            fitted = self.columns[ColumnKey(key)]
            fitted.width = width
            fitted.auto_width = False
        self._order = []
        self._shown = {}
        for key, cells in rows:
            self.add_row(*cells, key=key)
            self._order.append(key)
            self._shown[key] = tuple(_signature(cell) for cell in cells)
        if keep is not None and keep in self._shown:
            self.move_cursor(row=self._order.index(keep), animate=False)
