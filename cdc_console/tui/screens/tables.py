"""Tables and the splits of the highlighted one: lifecycle, chunk progress, rates, lag, watermarks.

The splits pane follows the table cursor (master-detail, as in lazygit); both tables update in
place, so a 2,000-chunk table keeps its scroll position while its chunks finish.
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
from cdc_console.tui.widgets.keyed_table import Column, KeyedTable

TABLE_COLUMNS = (
    Column("table", "table", 20),
    Column("state", "state", 13),
    Column("chunks", "chunks done/total", 22),
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


def table_row(table: TableView) -> tuple[str, list[Text]]:
    return table.table, [
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


def split_row(split: SplitView) -> tuple[str, list[Text]]:
    return split.split_id, [
        fmt.plain(split.split_no),
        fmt.plain(split.key_range),
        fmt.state(split.status),
        fmt.number(split.rows),
        fmt.offset(split.low_watermark),
        fmt.offset(split.high_watermark),
        fmt.duration_ms(split.duration_ms),
        fmt.verified(split.verified),
    ]


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
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "app.pause_table", "Pause table"),
        Binding("r", "app.resume_table", "Resume table"),
        Binding("d", "app.redump_table", "Re-dump table"),
        Binding("v", "app.verify_table", "Verify table"),
    ]

    def compose_body(self) -> ComposeResult:
        yield Static(id="tables-title", classes="title")
        yield KeyedTable(TABLE_COLUMNS, id="tables")
        yield Static(id="splits-title", classes="title")
        yield KeyedTable(SPLIT_COLUMNS, id="splits")

    def show(self, view: PipelineView) -> None:
        title = Text(no_wrap=True, end="")
        title.append(f" Tables of {view.name}", style="bold")
        if not view.has_state:
            title.append(f"  no state at {view.state_path} yet: start the job (s)", style="dim")
        self.query_one("#tables-title", Static).update(title)
        tables = self.query_one("#tables", KeyedTable)
        splits = self.query_one("#splits", KeyedTable)
        with self.app.batch_update():
            tables.sync([table_row(t) for t in view.tables])
            wanted = self.host.selected_table or view.selected_table
            if wanted is not None and wanted != tables.cursor_key:
                tables.select_key(wanted)
            if wanted is not None and self.host.selected_table is None:
                self.host.select_table(wanted)
            self.query_one("#splits-title", Static).update(
                splits_title(view.selected_table, view.splits)
            )
            splits.sync([split_row(s) for s in view.splits])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if event.data_table.id == "tables" and key is not None and key != self.host.selected_table:
            self.host.select_table(key)
