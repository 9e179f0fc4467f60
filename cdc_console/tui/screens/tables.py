"""Tables and the splits of the highlighted one: lifecycle, chunk progress, rates, lag, watermarks.

The splits pane follows the table cursor (master-detail, as in lazygit); both tables update in
place, so a 2,000-chunk table keeps its scroll position while its chunks finish.

`/` filters and `o`/`O` sort whichever of the two has focus (Tab switches); both persist across
polls, and each title says when rows are hidden or reordered.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from cdc_console.core.lifecycle import SplitStatus
from cdc_console.tui import format as fmt
from cdc_console.tui.model import PipelineView, SplitView, TableView
from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.widgets.filter_bar import FilterBar, filter_note
from cdc_console.tui.widgets.keyed_table import Column, KeyedTable
from cdc_console.tui.widgets.row_order import Row, SortValue

TABLE_COLUMNS = (
    Column("table", "table", 20),
    Column("state", "state", 13),
    Column("chunks", "chunks done/total", 21),  # 21: room for events/s's sort arrow
    Column("rows", "rows read", 10),
    Column("events", "events", 8),
    Column("rate", "events/s", 8),
    Column("lag", "lag", 7),
    Column("mirror", "mirror files", 13),
    Column("note", "note"),
)

SPLIT_COLUMNS = (
    Column("no", "#", 5),
    Column("range", "key range", 24),
    Column("status", "status", 9),
    Column("rows", "rows", 9),
    Column("lw", "low watermark", 22),
    Column("hw", "high watermark", 22),
    Column("duration", "duration", 9),
    Column("verified", "verified", 16),
)


def table_row(table: TableView) -> Row:
    """The cells, and what each sorts by: numbers rather than their text, chunks by the
    fraction done, lag in seconds, the mirror by its bytes."""
    done = table.splits_done / table.splits_total if table.splits_total else None
    cells = [
        fmt.plain(table.table, "bold"),
        fmt.state(table.state),
        fmt.progress(table.splits_done, table.splits_total),
        fmt.number(table.rows_snapshotted),
        fmt.number(table.events_applied),
        fmt.rate(table.events_per_second),
        fmt.lag(table.lag),
        fmt.files(table.lake_files, table.lake_bytes),
        fmt.plain(table.note, "dim"),
    ]
    values: list[SortValue] = [
        table.table,
        table.state,
        done,
        table.rows_snapshotted,
        table.events_applied,
        table.events_per_second,
        table.lag.seconds if table.lag else None,
        table.lake_bytes,
        table.note or None,
    ]
    return Row(table.table, cells, values)


def split_row(split: SplitView) -> Row:
    """The cells; the key range sorts in chunk order, the rest by value or text."""
    cells = [
        fmt.plain(split.split_no),
        fmt.plain(split.key_range),
        fmt.state(split.status),
        fmt.number(split.rows),
        fmt.offset(split.low_watermark),
        fmt.offset(split.high_watermark),
        fmt.duration_ms(split.duration_ms),
        fmt.verified(split.verified),
    ]
    values: list[SortValue] = [split.split_no, split.split_no, split.status, split.rows]
    return Row(split.split_id, cells, values)


def splits_title(table: str | None, splits: tuple[SplitView, ...]) -> Text:
    if table is None:
        return fmt.plain(" no table selected", "dim")
    counts = Counter(s.status for s in splits)
    text = Text(no_wrap=True, end="")
    text.append(f" Splits of {table}", style="bold")
    if not splits:
        text.append("  none yet: the job splits a table when it starts reading it", style="dim")
        return text
    text.append(f"  {counts[SplitStatus.FINISHED]:,}/{len(splits):,} finished", style="green")
    if counts[SplitStatus.ASSIGNED]:
        text.append(f", {counts[SplitStatus.ASSIGNED]:,} reading", style="cyan")
    if counts[SplitStatus.PENDING]:
        text.append(f", {counts[SplitStatus.PENDING]:,} pending", style="dim")
    return text


class TablesScreen(ConsoleScreen):
    SCREEN_NAME = "tables"
    TAB_KEY = "2"
    TAB_LABEL = "Tables"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "app.pause_table", "Pause table"),
        Binding("r", "app.resume_table", "Resume table"),
        Binding("d", "app.redump_table", "Re-dump table"),
        Binding("v", "app.verify_table", "Verify table"),
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Sort"),
        Binding("O", "reverse_sort", "Reverse sort", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    #: the selection the tables' cursor was last put on or moved to (see ``show``)
    _cursor_follows: str | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id="tables-title", classes="title")
        yield KeyedTable(TABLE_COLUMNS, sortable=True, id="tables")
        yield Static(id="splits-title", classes="title")
        yield KeyedTable(SPLIT_COLUMNS, sortable=True, id="splits")
        yield FilterBar(id="filter-bar")

    def _focused_table(self) -> KeyedTable:
        """The table the filter and sort keys act on: the focused one, else the tables list."""
        focused = self.focused
        if isinstance(focused, KeyedTable):
            return focused
        bar = self.query_one(FilterBar)
        return bar.target or self.query_one("#tables", KeyedTable)

    def _what(self, table: KeyedTable) -> str:
        return f"splits of {self.host.selected_table}" if table.id == "splits" else "tables"

    def action_filter(self) -> None:
        """Open the `/` prompt on the focused table."""
        table = self._focused_table()
        self.query_one(FilterBar).open(table, self._what(table))

    def action_clear_filter(self) -> None:
        """Escape on a filtered table (prompt closed): show all its rows again."""
        self._focused_table().set_filter("")
        self._retitle()

    def action_sort(self) -> None:
        """Sort the focused table by its next column (then back to the poll's order)."""
        self._focused_table().cycle_sort()
        self._retitle()

    def action_reverse_sort(self) -> None:
        self._focused_table().reverse_sort()
        self._retitle()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape acts only while the focused table hides rows (the title says "esc clears")."""
        if action == "clear_filter":
            return bool(self._focused_table().filter_text)
        return True

    def on_filter_bar_changed(self, event: FilterBar.Changed) -> None:
        self._retitle()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self._retitle()

    def _retitle(self) -> None:
        """Redraw the titles now, not at the next poll, and re-check which keys apply."""
        self.refresh_bindings()
        self.refresh_from_host()

    def show(self, view: PipelineView) -> None:
        title = Text(no_wrap=True, end="")
        title.append(f" Tables of {view.name}", style="bold")
        if not view.has_state:
            title.append(f"  no state at {view.state_path} yet: start the job (s)", style="dim")
        tables = self.query_one("#tables", KeyedTable)
        splits = self.query_one("#splits", KeyedTable)
        with self.app.batch_update():
            tables.sync([table_row(t) for t in view.tables])
            title.append_text(filter_note(tables))
            self.query_one("#tables-title", Static).update(title)
            wanted = self.host.selected_table or view.selected_table
            # The cursor goes to the selection only when the selection moved on its own (the
            # first poll, the palette): a cursor the user has just moved is ahead of the
            # selection until its highlight is handled, and a poll shown in between would
            # otherwise put it back.
            if wanted not in (None, tables.cursor_key, self._cursor_follows):
                tables.select_key(wanted)
            if wanted is not None and tables.cursor_key == wanted:
                self._cursor_follows = wanted
            if wanted is not None and self.host.selected_table is None:
                self.host.select_table(wanted)
            splits.sync([split_row(s) for s in view.splits])
            title = splits_title(view.selected_table, view.splits)
            title.append_text(filter_note(splits))
            self.query_one("#splits-title", Static).update(title)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if event.data_table.id != "tables" or key is None:
            return
        self._cursor_follows = key
        if key != self.host.selected_table:
            self.host.select_table(key)
