"""The `/` prompt: type to narrow a table's rows, as in k9s, less and vim.

One bar per screen, at the bottom, aimed at whichever table had focus when `/` was pressed. The
rows narrow on every keystroke; Enter keeps the filter and goes back to the table, Escape clears
it. The filter itself lives in the table (``KeyedTable.set_filter``), so it keeps applying to
every poll after the bar is closed; ``filter_note`` is the reminder a screen shows in the table's
title, because an on-call engineer must not mistake a filtered list for the whole one.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Label

from cdc_console.tui.widgets.keyed_table import KeyedTable


class FilterBar(Horizontal):
    """A one-line prompt bound to one ``KeyedTable`` at a time; hidden while not in use."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear", "Clear filter"),
    ]

    class Changed(Message):
        """The filter of ``table`` changed (the screen re-titles it)."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="filter-bar")
        self._target: KeyedTable | None = None

    def compose(self) -> ComposeResult:
        yield Label("/", id="filter-label")
        yield Input(
            placeholder="text in any column, any case; enter keeps it, esc clears it",
            id="filter-input",
        )

    def on_mount(self) -> None:
        self.display = False

    @property
    def target(self) -> KeyedTable | None:
        return self._target

    def open(self, table: KeyedTable, what: str) -> None:
        """Show the prompt for ``table`` (named ``what``), starting from its current filter."""
        self._target = table
        self.query_one("#filter-label", Label).update(
            Text.assemble((f" filter {what} ", "bold"), ("/", "bold cyan"))
        )
        field = self.query_one("#filter-input", Input)
        field.value = table.filter_text
        self.display = True
        field.focus()

    def close(self) -> None:
        """Hide the prompt and give the keys back to the table (the filter stays)."""
        self.display = False
        if self._target is not None:
            self._target.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._target is not None:
            self._target.set_filter(event.value)
            self.post_message(self.Changed(self._target))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close()

    def action_clear(self) -> None:
        """Escape: show every row again and close."""
        if self._target is not None:
            self._target.set_filter("")
            self.post_message(self.Changed(self._target))
        self.close()


def filter_note(table: KeyedTable) -> Text:
    """What a title says while rows are hidden or reordered: the filter and how many rows it
    lets through, and the sort column (also marked by an arrow in its header)."""
    text = Text(no_wrap=True, end="")
    needle = table.filter_text.strip()
    if needle:
        text.append("  │ ", style="dim")
        text.append(f"filter /{needle}", style="bold black on yellow")
        text.append(f" {table.row_count:,} of {table.total_rows:,} shown", style="yellow")
        text.append(" (esc clears)", style="dim")
    if table.sort_column is not None:
        arrow = "descending" if table.sort_reverse else "ascending"
        text.append("  │ ", style="dim")
        text.append(f"sorted by {table.column_label(table.sort_column)}, {arrow}", style="cyan")
    return text
