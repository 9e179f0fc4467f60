"""Rows of the state database as the console's views: events, commands, table notes.

The mapping from stored rows to what an operator reads, kept apart from the polling that fetches
them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.state.store import EventRow
from cdc_console.tui.model import EventView, TableView


def event_view(row: EventRow) -> EventView:
    return EventView(
        id=row.id,
        ts=row.ts,
        level=row.level,
        kind=row.kind,
        table=row.table_id,
        message=row.message,
    )


def default_table(tables: Sequence[TableView]) -> str | None:
    """The table whose splits are worth watching first: one being read, else any captured."""
    for wanted in (
        (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP),
        (Lifecycle.CATCHING_UP, Lifecycle.STREAMING, Lifecycle.PAUSED),
    ):
        for table in tables:
            if table.state in wanted:
                return table.table
    return tables[0].table if tables else None
