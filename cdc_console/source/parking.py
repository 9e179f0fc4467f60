"""Parking a table whose binlog was purged, or that is gone from the source: the one move
and the one message for each.

A table that must read the binlog from a file the server no longer has cannot be kept exact
from the binlog any more: the changes in the purged files are gone. Failing every window for it
would stop every other table too, so it is parked in ``NEEDS_REDUMP`` (nothing of it is read)
with the reason and the fix in the events journal, and the others go on. Used by the planner
mid-stream (``HybridSplitAssigner``) and by the job at start-up.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping

from cdc_console.core.lifecycle import TRANSITIONS, Lifecycle
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.schema import TableId
from cdc_console.state.rows import FieldValue
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)

#: states a purge can park (a snapshotting table has no binlog position to lose yet)
PARKABLE = (Lifecycle.CATCHING_UP, Lifecycle.STREAMING, Lifecycle.PAUSED)


def is_purged(position: BinlogOffset, files: list[str]) -> bool:
    """Whether ``position``'s file is older than the oldest binlog the server keeps."""
    if not files:
        return False
    return binlog_file_index(position.file) < min(binlog_file_index(f) for f in files)


def park(
    store: StateStore,
    table_id: TableId | str,
    message: str,
    *,
    conn: sqlite3.Connection | None = None,
    stream_from: BinlogOffset | None = None,
    fields: Mapping[str, FieldValue] | None = None,
) -> str:
    """Move ``table_id`` to NEEDS_REDUMP (at ``stream_from`` when given, setting ``fields``)
    and journal ``message`` (why, and the fix) as an error, in ``conn``'s transaction or one
    of its own."""
    if conn is None:
        with store.transaction() as own:
            return park(store, table_id, message, conn=own, stream_from=stream_from, fields=fields)
    moved = {"stream_from": stream_from} if stream_from is not None else {}
    store.move_table(table_id, conn, Lifecycle.NEEDS_REDUMP, **moved, **(fields or {}))
    store.log_event("table", message, level="error", table_id=table_id, conn=conn)
    log.error("%s", message)
    return message


def park_table(store: StateStore, table_id: TableId, start: BinlogOffset, files: list[str]) -> str:
    """Park a table whose next binlog file was purged; return the message."""
    oldest = min(files, key=binlog_file_index)
    return park(
        store,
        table_id,
        f"{table_id} parked (NEEDS_REDUMP): it must read the binlog from {start}, but the "
        f"server's oldest binlog is now {oldest}; the changes in between were purged. The other "
        f"tables go on. Fix: cdc-console redump --table {table_id}",
    )


def park_gone(store: StateStore, table: TableState) -> None:
    """Park a captured table the source no longer has (dropped or renamed while the job was
    down); one parked already (its DROP seen in the binlog, with where) stays as it is. It is
    a table state, not a config error: the others start, and the config may keep naming it."""
    fix = (
        f"re-create it and run 'cdc-console redump --table {table.table_id}', or leave it out "
        "of source.tables"
    )
    if table.state in (Lifecycle.NEEDS_REDUMP, Lifecycle.REMOVED):
        return
    if (table.state, Lifecycle.NEEDS_REDUMP) not in TRANSITIONS:
        store.log_event(
            "table",
            f"{table.table_id} is gone from the source; its mirror stays as it was. Fix: {fix}",
            level="warning",
            table_id=table.table_id,
        )
        return
    park(
        store,
        table.table_id,
        f"{table.table_id} parked (NEEDS_REDUMP): it is gone from the source (dropped or "
        "renamed while the job was down); its mirror stays as it was. The other tables go "
        f"on. Fix: {fix}",
    )
