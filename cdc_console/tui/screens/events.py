"""What happened: operator commands and their outcomes, the job's events, and its log.

Commands from the CLI and from this console share the queue, so both appear here with who issued
them and what the job answered.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Log

from cdc_console.core.lifecycle import CommandStatus
from cdc_console.state.store import Command
from cdc_console.tui import format as fmt
from cdc_console.tui.model import EventView, PipelineView
from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.widgets.keyed_table import Column, KeyedTable

COMMAND_COLUMNS = (
    Column("id", "#", 5),
    Column("issued", "issued", 8),
    Column("by", "by", 14),
    Column("command", "command", 28),
    Column("status", "status", 8),
    Column("outcome", "outcome"),
)

EVENT_COLUMNS = (
    Column("time", "time", 8),
    Column("level", "level", 7),
    Column("kind", "kind", 8),
    Column("table", "table", 18),
    Column("message", "message"),
)


def command_row(command: Command) -> tuple[str, list[Text]]:
    return str(command.id), [
        fmt.plain(command.id),
        fmt.clock(command.issued_at),
        fmt.plain(command.issued_by or "-", "dim"),
        fmt.plain(command.what),
        fmt.state(command.status),
        fmt.plain(command.reason or "", "red" if command.status == CommandStatus.FAILED else ""),
    ]


def event_row(event: EventView) -> tuple[str, list[Text]]:
    style = fmt.EVENT_STYLES.get(event.level, "")
    return str(event.id), [
        fmt.clock(event.ts),
        fmt.plain(event.level, style),
        fmt.plain(event.kind, "cyan" if event.kind == "phase" else ""),
        fmt.plain(event.table or "", "dim"),
        fmt.plain(event.message, style),
    ]


class EventsScreen(ConsoleScreen):
    SCREEN_NAME = "events"
    TAB_KEY = "4"
    TAB_LABEL = "Events"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "repair", "Repair what verify found"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(classes="panel", id="commands-panel") as commands:
            commands.border_title = "Commands (this console and the CLI)"
            yield KeyedTable(COMMAND_COLUMNS, id="commands")
        with Vertical(classes="panel", id="events-panel") as events:
            events.border_title = "Events: phases, errors, commands applied"
            yield KeyedTable(EVENT_COLUMNS, id="events")
        with Vertical(classes="panel", id="log-panel") as log:
            log.border_title = "Job log"
            yield Log(id="job-log", max_lines=1000)

    def on_mount(self) -> None:
        self._log_lines: tuple[str, ...] = ()
        self._events: dict[str, EventView] = {}

    def action_repair(self) -> None:
        """Repair the table of the highlighted verification that found differences."""
        events = self.query_one("#events", KeyedTable)
        event = self._events.get(events.cursor_key or "")
        if event is None or event.kind != "verify" or event.level != "error" or not event.table:
            self.notify(
                "highlight a verify event that found differences (red), then press f",
                severity="warning",
            )
            return
        self.host.repair_table(event.table)

    def show(self, view: PipelineView) -> None:
        self.query_one("#log-panel").border_title = f"Job log: {view.log_path} (tail)"
        with self.app.batch_update():
            commands = self.query_one("#commands", KeyedTable)
            commands.sync([command_row(c) for c in reversed(view.commands)])
            events = self.query_one("#events", KeyedTable)
            at_end = events.cursor_row >= events.row_count - 1
            self._events = {str(e.id): e for e in view.events}
            events.sync([event_row(e) for e in view.events])
            if at_end and events.row_count:
                events.move_cursor(row=events.row_count - 1, animate=False)
            self._show_log(view.log_tail)

    def _show_log(self, lines: tuple[str, ...]) -> None:
        log = self.query_one("#job-log", Log)
        shown = self._log_lines
        if lines == shown:
            return
        overlap = _overlap(shown, lines)
        if overlap is None:
            log.clear()
            log.write_lines(lines or ("(no job log yet)",))
        else:
            log.write_lines(lines[overlap:])
        self._log_lines = lines


def _overlap(before: tuple[str, ...], after: tuple[str, ...]) -> int | None:
    """How many leading lines of ``after`` were already shown (its new lines follow), or None."""
    if not before:
        return None
    for start in range(len(before)):
        tail = before[start:]
        if after[: len(tail)] == tail:
            return len(tail)
    return None
