"""Captured tables and their lifecycle: registration, schemas, counters, and the one
gate for state changes (``move_table``)."""

from __future__ import annotations

import json
import sqlite3
import time

from cdc_console.core.lifecycle import (
    Lifecycle,
    check_move,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId, TableSchema, schema_from_dict, schema_to_dict
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.untyped import SqliteRow
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import (
    FieldValue,
    TableState,
    offset_json,
    offset_of,
)


class TablesRepo(StateDatabase):
    """The ``tables`` part of the state: one row per captured table and its lifecycle."""

    def ensure_table(
        self,
        table_id: TableId,
        chunk_key: str,
        state: Lifecycle,
        stream_from: BinlogOffset | None = None,
        *,
        origin: str = "config",
        schema: TableSchema | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> bool:
        """Register a captured table once (in ``state``, a first move); True when it was new."""
        check_move(table_id, None, state)
        now = time.time()
        sql = (
            "INSERT OR IGNORE INTO tables (table_id, state, chunk_key, stream_from, origin, "
            "schema, added_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        args = (
            str(table_id),
            state,
            chunk_key,
            offset_json(stream_from),
            origin,
            json.dumps(schema_to_dict(schema)) if schema is not None else None,
            now,
            now,
        )
        if conn is not None:
            return bool(conn.execute(sql, args).rowcount > 0)
        with self.transaction() as c:
            return bool(c.execute(sql, args).rowcount > 0)

    def set_schema(
        self, table_id: TableId, schema: TableSchema, conn: sqlite3.Connection | None = None
    ) -> None:
        """Record the shape the job reads ``table_id`` in (``core.schema.schema_to_dict``)."""
        sql = "UPDATE tables SET schema=? WHERE table_id=?"
        text = json.dumps(schema_to_dict(schema))
        if conn is not None:
            conn.execute(sql, (text, str(table_id)))
            return
        with self.transaction() as c:
            c.execute(sql, (text, str(table_id)))

    def schemas(self) -> dict[TableId, TableSchema]:
        """Each captured table's recorded shape, for the tables that have one."""
        return {
            TableId.parse(r[0]): schema_from_dict(json.loads(r[1]))
            for r in self.db.execute(
                "SELECT table_id, schema FROM tables WHERE schema IS NOT NULL"
            ).fetchall()
        }

    _TABLE_COLUMNS = (
        "SELECT table_id, state, chunk_key, generation, splits_total, splits_done, "
        "rows_snapshotted, events_applied, stream_from, paused_at, last_event_ts, updated_at, "
        "resume_state, origin, removed_by, redump_chunk, schema_pending FROM tables"
    )

    @staticmethod
    def _table(r: SqliteRow) -> TableState:
        return TableState(
            TableId.parse(r[0]),
            Lifecycle(r[1]),
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            offset_of(r[8]),
            offset_of(r[9]),
            r[10],
            r[11],
            Lifecycle(r[12]) if r[12] else None,
            r[13],
            r[14],
            r[15],
            SchemaChange.from_dict(json.loads(r[16])) if r[16] else None,
        )

    def tables(self) -> list[TableState]:
        rows = self.db.execute(f"{self._TABLE_COLUMNS} ORDER BY table_id").fetchall()
        return [self._table(r) for r in rows]

    def table(
        self, table_id: TableId | str, conn: sqlite3.Connection | None = None
    ) -> TableState | None:
        """One table, read inside the caller's transaction when ``conn`` is given."""
        source = conn if conn is not None else self.db.conn
        row = source.execute(f"{self._TABLE_COLUMNS} WHERE table_id=?", (str(table_id),)).fetchone()
        return self._table(row) if row else None

    _TABLE_FIELDS = frozenset(
        {
            "generation",
            "splits_total",
            "splits_done",
            "rows_snapshotted",
            "stream_from",
            "paused_at",
            "resume_state",
            "origin",
            "removed_by",
            "redump_chunk",
            "schema_pending",
        }
    )

    def update_table(
        self, table_id: TableId, conn: sqlite3.Connection, **fields: FieldValue
    ) -> None:
        """Set columns of one table inside the caller's transaction; not its lifecycle state,
        which only ``move_table`` changes.

        Offsets are given as ``BinlogOffset`` (or None) and stored in their canonical JSON form.
        """
        unknown = set(fields) - self._TABLE_FIELDS
        if unknown:
            raise ValueError(
                f"not table fields (a state change is move_table's): {sorted(unknown)}"
            )
        values = [_stored(v) for v in fields.values()]
        cols = "".join(f"{k}=?, " for k in fields)
        conn.execute(
            f"UPDATE tables SET {cols}updated_at=? WHERE table_id=?",
            (*values, time.time(), str(table_id)),
        )

    def add_events(
        self,
        table_id: TableId | str,
        conn: sqlite3.Connection,
        count: int,
        last_event_ts: int | None,
    ) -> None:
        """Count a window's applied events for one table and keep its newest event time."""
        conn.execute(
            "UPDATE tables SET events_applied = events_applied + ?, "
            "last_event_ts = COALESCE(?, last_event_ts) WHERE table_id=?",
            (count, last_event_ts, str(table_id)),
        )

    def move_table(
        self,
        table_id: TableId | str,
        conn: sqlite3.Connection,
        target: Lifecycle,
        **fields: FieldValue,
    ) -> Lifecycle:
        """Move one table to ``target`` (and set ``fields``) inside the caller's transaction.

        Every lifecycle change goes through here, checked against ``core.lifecycle``'s table of
        moves: a move it does not list raises ``IllegalTransition`` before anything is written.
        Returns the state the table was in.
        """
        row = conn.execute("SELECT state FROM tables WHERE table_id=?", (str(table_id),)).fetchone()
        if row is None:
            raise LookupError(f"{table_id} is not in the state database")
        current = Lifecycle(row[0])
        check_move(table_id, current, target)
        key = table_id if isinstance(table_id, TableId) else TableId.parse(table_id)
        self.update_table(key, conn, **fields)
        if current != target:
            conn.execute("UPDATE tables SET state=? WHERE table_id=?", (target, str(table_id)))
        return current


def _stored(value: FieldValue) -> int | float | str | bytes | None:
    """A field's stored form: offsets and held changes of shape as their canonical JSON."""
    if isinstance(value, BinlogOffset):
        return offset_json(value)
    if isinstance(value, SchemaChange):
        return json.dumps(value.to_dict())
    return value
