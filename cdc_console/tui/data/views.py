"""Rows of the state database as the console's views: events, commands, table notes.

The mapping from stored rows to what an operator reads, kept apart from the polling that fetches
them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.tui.model import EventView, TableView


def offset_of(text: Any) -> BinlogOffset | None:
    if not text:
        return None
    return BinlogOffset.from_dict(json.loads(text) if isinstance(text, str) else text)


def event_view(row: dict[str, Any]) -> EventView:
    return EventView(
        id=int(row["id"]),
        ts=float(row["ts"]),
        level=str(row["level"]),
        kind=str(row["kind"]),
        table=row.get("table_id"),
        message=str(row["message"]),
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
