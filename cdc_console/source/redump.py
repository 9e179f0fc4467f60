"""Reading a whole table again, online: by an operator's ``redump`` or by a schema change.

A re-dump gives the table a new generation and fresh chunks; each chunk, read with its own
low and high watermarks, replaces its key range in the mirror, and the table then catches up
from its chunks' watermarks as at first. Nothing is locked and the other tables stream on. A
new shape (``schema``) becomes the stored schema, and the sink migrates the mirror to it in the
re-dump's first commit. ``CommandProcessor`` starts one for ``cdc-console redump --table``;
``HybridSplitAssigner`` starts one when a DDL left rows the binlog never carried (TRUNCATE, a
column added with a default, INT -> BIGINT, ...).
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import replace

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableSchema
from cdc_console.source.evolution import Reread
from cdc_console.source.parking import park
from cdc_console.state.rows import FieldValue
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)


def start_redump(
    store: StateStore,
    table: TableState,
    conn: sqlite3.Connection,
    schema: TableSchema | None = None,
    **fields: FieldValue,
) -> str:
    """Move ``table`` to REDUMP in ``conn``'s transaction (setting ``fields`` too); return
    what happened, for the journal."""
    generation = table.generation + 1
    reshaped = ""
    if schema is not None:
        stored = store.schemas().get(table.table_id)
        if stored is not None:
            # dropped columns the mirror keeps stay kept, unless the table has them again
            names = {c.name.lower() for c in (*schema.columns, *schema.retired)}
            kept = [c for c in stored.retired if c.name.lower() not in names]
            schema = replace(schema, retired=(*schema.retired, *kept))
        if stored != schema:
            store.set_schema(table.table_id, schema, conn)
        if stored is None or stored.columns != schema.columns:
            reshaped = f"; new shape {', '.join(schema.column_names)}"
    dropped = store.drop_splits(table.table_id, conn)
    store.move_table(
        table.table_id,
        conn,
        Lifecycle.REDUMP,
        generation=generation,
        splits_total=None,
        splits_done=0,
        rows_snapshotted=0,
        resume_state=None,
        paused_at=None,
        redump_chunk=None,
        **fields,
    )
    was = f" (was {table.state}, {dropped} old chunks)" if dropped else f" (was {table.state})"
    return (
        f"{table.table_id} re-dump started, generation {generation}{was}{reshaped}: fresh "
        "chunks replace the mirror's key ranges one by one, then it catches up"
    )


def reread_or_park(
    store: StateStore,
    table: TableState,
    outcome: Reread | str,
    where: str,
    headline: str = "changed shape",
    **fields: FieldValue,
) -> str:
    """Follow a table's schema change that cannot apply in place: read the table again
    (``Reread``) or park it with the reason (a string); ``where`` says where it changed
    (``at binlog.000002:4711 (ALTER ...)``, ``while the pipeline was stopped``). Returns the
    message it journalled."""
    if isinstance(outcome, str):
        return park(
            store,
            table.table_id,
            f"{table.table_id} {headline} {where}: not applied online: {outcome}; parked "
            f"(NEEDS_REDUMP), the other tables go on. Fix: cdc-console redump --table "
            f"{table.table_id}",
            fields=fields,
        )
    with store.transaction() as conn:
        started = start_redump(store, table, conn, outcome.schema, **fields)
        message = (
            f"{table.table_id} {headline} {where}: followed by reading it again online "
            f"({outcome.reason}); {started}"
        )
        store.log_event("table", message, table_id=table.table_id, conn=conn)
    log.info("%s", message)
    return message
