"""Following a table's change of shape, in one room: hold, settle, re-read or park.

A change of shape reaches the pipeline three ways: a DDL (or a row image of another shape) met
in the binlog, a chunk that finds its table's columns changed, or a table described afresh at
start-up in another shape than the state recorded. The first two are *held* where they were met
(``hold_for_evolution``, ``hold_reshaped``: the table's ``schema_pending``, a typed
``SchemaChange``, and its stream position set to the change), inside the transaction that
commits the batch that met them, so nothing of the new shape is applied with the old one.
Before the next plan the planner *settles* each held table (``settle_held_changes``): applied
in place when the new shape can be followed exactly from the change on, read again online
(lock-free, while the others stream) when it cannot, or parked where ``[pipeline]
schema_changes`` asks for that or the change breaks the mirror's readers. A table changed while
the job was down is re-read or parked the same way (``follow_reshaped_while_stopped``); the
binlog up to its DDL is not replayed in place, as the server describes only the new shape.

What each outcome means for the mirror is decided by ``source.evolution``; how a table is
re-read or parked by ``source.redump`` and ``source.parking``. Every outcome is told to a
``SchemaFollowed`` callback first (the lake's schema history, which lives above this layer).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SchemaChanges
from cdc_console.core.reports import SplitResult
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.source.evolution import Reread, describe_evolution, reshaped_unseen
from cdc_console.source.parking import park
from cdc_console.source.redump import reread_or_park
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)

#: the new shape of a table held at a schema change (and where it goes on in it), or why it
#: cannot be applied online
SettleSchema = Callable[
    [TableState, SchemaChange], "tuple[TableSchema, BinlogOffset] | Reread | str"
]
#: told how a table's schema change is followed (``in place``, ``re-read``, ``parked``), why,
#: and the shape it goes on with, before the state records it (the lake's schema history)
#: (no change: the table changed while the job was down, where the binlog has no DDL to name)
SchemaFollowed = Callable[[TableId, "SchemaChange | None", str, str, "TableSchema | None"], None]


def hold_for_evolution(
    store: StateStore, conn: sqlite3.Connection, table_id: str, change: SchemaChange
) -> str:
    """Hold a table whose shape changed at ``position`` there: its changes before it were
    applied; the planner decides, before the next window, whether the new shape can be
    applied exactly (then the table goes on from ``position`` in it) or the table is parked."""
    table = store.table(table_id, conn)
    state = table.state if table is not None else Lifecycle.STREAMING
    count_held(store, conn, table_id, change)
    store.move_table(
        table_id,
        conn,
        state,
        stream_from=change.position,
        schema_pending=change,
    )
    message = f"{table_id} {change.cause.headline} at {change}: held there until it is followed"
    store.log_event("table", message, level="warning", table_id=table_id, conn=conn)
    return message


def count_held(
    store: StateStore, conn: sqlite3.Connection, table_id: str, change: SchemaChange
) -> None:
    """Count a change the binlog did not carry as full rows (status, metrics, alerts); an
    unplaced key is the reader's own finding, told in the journal instead."""
    if change.cause not in (ChangeCause.DDL, ChangeCause.UNPLACED):
        store.count_held_change(table_id, change.cause.value, change.position, change.what, conn)


def park_on_schema_change(
    store: StateStore, conn: sqlite3.Connection, table_id: str, change: SchemaChange
) -> str:
    """Park a table whose shape changed at ``change.position``: its changes before it were
    applied, none after; a re-dump (which reads the new shape) brings it back."""
    position, what = change.position, change.what
    count_held(store, conn, table_id, change)
    if change.cause is ChangeCause.DDL:
        why = "so no row of the new shape is written with the old one"
        fix = f"cdc-console redump --table {table_id} (it reads the new shape and migrates the mirror)"
    else:
        why = "so nothing it cannot apply exactly reaches its mirror"
        fix = f"cdc-console redump --table {table_id} once the cause is gone"
    return park(
        store,
        table_id,
        f"{table_id} {change.cause.headline} at {position} ({what}): parked (NEEDS_REDUMP) "
        f"{why}; the other tables go on. Fix: {fix}",
        conn=conn,
        stream_from=position,
    )


def hold_reshaped(
    store: StateStore, conn: sqlite3.Connection, table_id: str, result: SplitResult
) -> str:
    """Hold a table whose columns changed during its snapshot (a chunk found them changed and
    read nothing): before the next plan the table is read again in its new shape, or parked."""
    table = store.table(table_id, conn)
    if table is None or table.schema_pending:
        return f"{table_id}: changed shape during its snapshot (already held)"
    at = result.low_watermark
    change = SchemaChange(at, at, f"its columns changed during its snapshot: {result.reshaped}")
    store.move_table(table_id, conn, table.state, schema_pending=change)
    message = f"{table_id} changed shape at {change}: held until it is read again in its new shape"
    store.log_event("table", message, level="warning", table_id=table_id, conn=conn)
    return message


def settle_held_changes(
    store: StateStore,
    tables: Sequence[TableState],
    settle_schema: SettleSchema | None,
    schema_followed: SchemaFollowed | None,
) -> list[TableId]:
    """Follow each table held at a schema change: in place, by reading it again, or parked;
    return the tables followed in place (their mirror takes the new shape in this batch).

    A table still catching up whose chunks were read after the change holds rows in the
    old shape past it: only reading it again makes it exact.
    """
    in_place: list[TableId] = []
    for table in tables:
        change = table.schema_pending
        if change is None:
            continue
        settled = (
            "schema changes are not applied online here"
            if settle_schema is None
            else settle_schema(table, change)
        )
        late = [
            f for f in store.finished_splits(table.table_id) if f.high_watermark > change.position
        ]
        if late and not isinstance(settled, str | Reread):
            settled = Reread(
                f"{len(late)} chunk(s) were read after it, in the old shape", settled[0]
            )
        if isinstance(settled, str | Reread):
            parked = {"stream_from": change.position} if isinstance(settled, str) else {}
            if schema_followed is not None:
                schema_followed(
                    table.table_id,
                    change,
                    "parked" if isinstance(settled, str) else "re-read",
                    str(settled),
                    None if isinstance(settled, str) else settled.schema,
                )
            reread_or_park(
                store,
                table,
                settled,
                f"at {change}",
                change.cause.headline,
                schema_pending=None,
                **parked,
            )
            continue
        schema, resume = settled
        old = store.schemas()[table.table_id]
        described = describe_evolution(old, schema)
        if schema_followed is not None:
            schema_followed(table.table_id, change, "in place", described, schema)
        message = (
            f"{table.table_id} changed shape at {change}: applied online "
            f"({described}); it goes on from {resume}"
        )
        with store.transaction() as conn:
            store.set_schema(table.table_id, schema, conn)
            store.move_table(
                table.table_id, conn, table.state, stream_from=resume, schema_pending=None
            )
            store.log_event("table", message, table_id=table.table_id, conn=conn)
        log.info("%s", message)
        in_place.append(table.table_id)
    return in_place


def follow_reshaped_while_stopped(
    store: StateStore,
    schema_changes: SchemaChanges,
    table: TableState,
    stored: TableSchema,
    now: TableSchema,
    followed: SchemaFollowed | None,
) -> None:
    """A table whose columns changed while the job was down: with ``evolve`` it is read
    again in its new shape unless the change breaks the mirror's readers, with ``park`` (or
    a breaking change) it waits for its re-dump; the others start either way. Its binlog
    up to the DDL is not replayed in place: the server describes only the new shape, so
    the old rows could not be decoded by name."""
    outcome: Reread | str = (
        reshaped_unseen(stored, now)
        if schema_changes == SchemaChanges.EVOLVE
        else 'schema_changes is "park"'
    )
    if followed is not None:
        parked = isinstance(outcome, str)
        shape = None if isinstance(outcome, str) else outcome.schema
        followed(table.table_id, None, "parked" if parked else "re-read", str(outcome), shape)
    reread_or_park(store, table, outcome, "while the pipeline was stopped")
