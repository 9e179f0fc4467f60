"""A DataTable that follows a keyed list of rows, changing only the cells that changed.

Rebuilding a 2,000-row table twice a second would reset the cursor and scroll position and cost a
full re-layout; instead each refresh compares cell by cell and calls ``update_cell`` for the few
that moved (a chunk finishing changes one row). Only when rows come or go is the table rebuilt,
keeping the cursor on the same key.

A table can also be filtered and sorted (``row_order``): ``sync`` always receives every row and
keeps them, and the filter and sort pick what is shown from those, so both survive each poll and
re-apply at once when changed. The sort column carries an arrow in its header.

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

from cdc_console.tui.widgets.row_order import Row, RowLike, as_row, visible

MAX_FITTED_WIDTH = 200
ARROWS = {False: "▲", True: "▼"}


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None


def _signature(cell: Text) -> tuple[object, ...]:
    return (cell.plain, str(cell.style), tuple(cell.spans))


class KeyedTable(DataTable[Text]):
    """Rows are ``(key, cells)`` or ``Row``; call ``sync`` with the full list on every refresh."""

    def __init__(
        self, columns: Sequence[Column], *, sortable: bool = False, **kwargs: object
    ) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._columns = tuple(columns)
        self.sortable = sortable
        self._all: list[Row] = []
        self._order: list[str] = []
        self._shown: dict[str, tuple[tuple[object, ...], ...]] = {}
        self._fitted: dict[str, int] = {}
        self._filter = ""
        self._sort: str | None = None
        self._reverse = False
        self.updated_cells = 0

    def on_mount(self) -> None:
        for column in self._columns:
            width = column.width
            if width is not None and self.sortable:
                # room for the sort arrow, so a sorted header is never cut short
                width = max(width, cell_len(column.label + ARROWS[False]))
            self.add_column(self._label(column), key=column.key, width=width)

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    @property
    def cursor_key(self) -> str | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def total_rows(self) -> int:
        """Rows the last refresh had, shown or filtered out."""
        return len(self._all)

    @property
    def filter_text(self) -> str:
        return self._filter

    @property
    def sort_column(self) -> str | None:
        return self._sort

    @property
    def sort_reverse(self) -> bool:
        return self._reverse

    def column_label(self, key: str | None) -> str:
        return next((c.label for c in self._columns if c.key == key), "")

    def select_key(self, key: str) -> None:
        if key in self._shown:
            self.move_cursor(row=self._order.index(key))

    # -- filter and sort ------------------------------------------------------------------------

    def set_filter(self, text: str) -> None:
        """Show only rows whose visible text contains ``text`` (any case); "" shows all."""
        if text != self._filter:
            self._filter = text
            self._apply()

    def sort_by(self, key: str | None, reverse: bool = False) -> None:
        """Order rows by column ``key`` (None: the poll's own order), then re-show them."""
        if (key, reverse) != (self._sort, self._reverse):
            self._sort, self._reverse = key, reverse and key is not None
            self._label_headers()
            self._apply()

    def cycle_sort(self) -> None:
        """Sort by the next column; after the last one, back to the poll's order."""
        keys = [c.key for c in self._columns]
        at = keys.index(self._sort) + 1 if self._sort in keys else 0
        self.sort_by(keys[at] if at < len(keys) else None)

    def reverse_sort(self) -> None:
        """Flip the direction; unsorted, sort by the first column descending."""
        self.sort_by(self._sort or self._columns[0].key, not self._reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """A header click sorts by it: ascending, then descending, then unsorted. The event
        goes on bubbling, so the screen can re-title the table."""
        if not self.sortable:
            return
        key = event.column_key.value
        if key != self._sort:
            self.sort_by(key)
        elif not self._reverse:
            self.sort_by(key, True)
        else:
            self.sort_by(None)

    def _label(self, column: Column) -> Text:
        arrow = ARROWS[self._reverse] if column.key == self._sort else ""
        return Text(column.label + arrow, no_wrap=True)

    def _label_headers(self) -> None:
        for column in self._columns:
            shown = self.columns.get(ColumnKey(column.key))
            if shown is not None:
                shown.label = self._label(column)
        # DataTable has no public way to relabel a column: drop its rendered lines and redraw.
        self._clear_caches()
        self.refresh()

    def _apply(self) -> None:
        self.sync(self._all)

    # -- syncing rows ---------------------------------------------------------------------------

    def sync(self, rows: Sequence[RowLike]) -> None:
        self._all = [as_row(row) for row in rows]
        index = next((i for i, c in enumerate(self._columns) if c.key == self._sort), None)
        shown = visible(self._all, self._filter, index, self._reverse)
        keys = [row.key for row in shown]
        if keys != self._order or self._wider(shown):
            self._rebuild(shown)
            return
        for key, cells, _ in shown:
            before_row = self._shown[key]
            signature = tuple(_signature(cell) for cell in cells)
            if signature == before_row:
                continue
            for index, (cell, before) in enumerate(zip(cells, before_row, strict=True)):
                if _signature(cell) != before:
                    self.update_cell(key, self._columns[index].key, cell)
                    self.updated_cells += 1
            self._shown[key] = signature

    def _wider(self, rows: Sequence[Row]) -> bool:
        """Whether a content-sized column must grow for these rows (then widths are set)."""
        grew = False
        for index, column in enumerate(self._columns):
            if column.width is not None:
                continue
            label = cell_len(column.label) + (cell_len(ARROWS[False]) if self.sortable else 0)
            widest = max([label, *(row.cells[index].cell_len for row in rows)])
            widest = min(widest, MAX_FITTED_WIDTH)
            if widest > self._fitted.get(column.key, 0):
                self._fitted[column.key] = widest
                grew = True
        return grew

    def _rebuild(self, rows: Sequence[Row]) -> None:
        """Rows re-added in their new order, the cursor kept on its key.

        ``clear`` puts the cursor on row 0 and announces that row as highlighted; when the
        cursor's key is still shown, that announcement is a lie that arrives after the
        cursor is back on its row, and a screen that follows highlights (the Tables screen
        selects the highlighted table) would then move the cursor to row 0's table. So the
        highlight messages are held back whenever the cursor ends on the key it started on.
        """
        keep = self.cursor_key
        stays = keep is not None and any(row.key == keep for row in rows)
        quiet = (DataTable.RowHighlighted, DataTable.CellHighlighted) if stays else ()
        with self.prevent(*quiet):
            self._wider(rows)
            self.clear()
            for key, width in self._fitted.items():
                fitted = self.columns[ColumnKey(key)]
                fitted.width = width
                fitted.auto_width = False
            self._order = []
            self._shown = {}
            for key, cells, _ in rows:
                self.add_row(*cells, key=key)
                self._order.append(key)
                self._shown[key] = tuple(_signature(cell) for cell in cells)
            if stays and keep is not None:
                self.move_cursor(row=self._order.index(keep), animate=False)
