"""Registering the captured tables at start-up: the configured ones, those an operator added
or removed by command, and those whose shape changed while the job was down.

The job describes each configured table afresh (``mysql.checks.preflight``) and hands the
shapes here before anything is read. A table new to the state is captured (snapshotting, or
streaming from the head under ``latest-offset``); one the config no longer names is retired
(REMOVED) with its mirror kept; one named again resumes where it stopped. A table whose rules
cannot hold, or with a column of a type that is not captured, is parked alone. A table whose
columns changed while the job was down is followed as ``source.schema_follow`` decides (read
again or parked); only under ``schema_changes = "stop"`` does it refuse the start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import CommandKind, Lifecycle, SplitStatus, readmitted_state
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SchemaChanges, StartupMode
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.errors import SchemaChangedError
from cdc_console.source.evolution import rule_changed
from cdc_console.source.parking import PARKABLE, park, park_gone
from cdc_console.source.schema_follow import SchemaFollowed, follow_reshaped_while_stopped
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)


class TableRegistration:
    """One start-up's registration of tables in ``store``; ``read_head`` gives the server's
    binlog head (only asked when a table starts from it), ``followed`` is told of each table
    followed after a change of shape (the lake's schema history)."""

    def __init__(
        self,
        store: StateStore,
        config: PipelineConfig,
        read_head: Callable[[], BinlogOffset],
        followed: SchemaFollowed | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.read_head = read_head
        self.followed = followed

    def register(self, schemas: list[TableSchema], gone: Sequence[TableId] = ()) -> None:
        """Record the configured tables; retire the ones the config no longer names.

        A table dropped from ``source.tables`` becomes REMOVED, so the binlog windows no longer
        read it (that is how a user sidesteps a DDL stop on one table without losing the
        others); named again, it resumes where it stopped (``_restore``). Operator commands
        outlive a restart: a table added with ``add-table`` stays captured though the config
        does not name it, and one removed with ``remove-table`` stays removed though it does.
        """
        store = self.store
        known = store.schemas()
        states = {t.table_id: t for t in store.tables()}
        for table_id in gone:
            park_gone(store, states[table_id])
        self._retire_unconfigured(states.values(), {s.table_id for s in schemas}, gone)
        head: list[BinlogOffset] = []  # the server's head, read once when a table needs it
        for schema in schemas:
            self._register_one(
                schema, states.get(schema.table_id), known.get(schema.table_id), head
            )

    def _retire_unconfigured(
        self, states: Iterable[TableState], configured: set[TableId], gone: Sequence[TableId]
    ) -> None:
        """A table the config no longer names is REMOVED, unless a command added it."""
        store = self.store
        for table in states:
            if table.table_id in configured or table.table_id in gone:
                continue
            if table.state == Lifecycle.REMOVED:
                continue
            if table.origin == "command":
                log.info("%s: captured by add-table, though not in source.tables", table.table_id)
                continue
            with store.transaction() as conn:
                store.move_table(table.table_id, conn, Lifecycle.REMOVED, removed_by="config")
            store.log_event(
                "table",
                f"{table.table_id} is no longer in source.tables: not captured any more, "
                f"its mirror stays as of {table.stream_from or 'its snapshot so far'}",
                level="warning",
                table_id=table.table_id,
            )

    def _register_one(
        self,
        schema: TableSchema,
        previous_state: TableState | None,
        previous: TableSchema | None,
        head: list[BinlogOffset],
    ) -> None:
        """One configured table: captured, restored, followed through a change of shape,
        parked, or left removed by the operator's command."""
        store = self.store
        mode = self.config.snapshot.startup_mode
        if (
            previous_state is not None
            and previous_state.state == Lifecycle.REMOVED
            and previous_state.removed_by == "command"
        ):
            log.warning(
                "%s stays removed (remove-table); 'cdc-console add-table %s' captures it again",
                schema.table_id,
                schema.table_id,
            )
            return
        if schema.refused:
            park_refused(store, schema, previous_state)
            return
        current = schema
        if previous is not None and previous.retired:
            current = replace(schema, retired=previous.retired)  # dropped columns kept
        if previous is not None and previous.columns != current.columns:
            self._reshaped(schema, current, previous_state, previous)
            return
        if mode == StartupMode.LATEST_OFFSET:
            if not head:
                head.append(self.read_head())
            added = store.ensure_table(
                schema.table_id, schema.chunk_key, Lifecycle.STREAMING, head[0]
            )
        else:
            added = store.ensure_table(schema.table_id, schema.chunk_key, Lifecycle.SNAPSHOTTING)
        store.set_schema(schema.table_id, current)
        if previous_state is not None and previous_state.state == Lifecycle.REMOVED:
            self._restore(previous_state)
        if added:
            store.log_event(
                "table", f"capturing {schema.table_id} ({mode})", table_id=schema.table_id
            )
        park_uncaptured(store, schema)

    def _reshaped(
        self,
        schema: TableSchema,
        current: TableSchema,
        previous_state: TableState | None,
        previous: TableSchema,
    ) -> None:
        """A table whose columns changed while the job was stopped: followed, rebuilt by its
        re-dump, left parked, or (schema_changes = "stop") the job stops."""
        store = self.store
        rebuild_under_way = previous_state is not None and previous_state.state == Lifecycle.REDUMP
        if rebuild_under_way and rule_changed(previous, schema):
            # chunks read before the restart follow the old rule: read them again
            assert previous_state is not None
            self._follow(previous_state, previous, schema)
            return
        if rebuilding(store, schema.table_id):
            store.log_event(
                "table",
                f"{schema.table_id} changed shape; its re-dump rebuilds the mirror with "
                "the new columns",
                level="warning",
                table_id=schema.table_id,
            )
            store.set_schema(schema.table_id, current)
            return
        if previous_state is not None and previous_state.state == Lifecycle.NEEDS_REDUMP:
            return  # parked already: its re-dump reads the new shape
        if (
            previous_state is not None
            and previous_state.state in FOLLOWED_WHEN_RESHAPED
            and self.config.schema_changes != SchemaChanges.STOP
        ):
            self._follow(previous_state, previous, schema)
            return
        raise SchemaChangedError(
            f"{schema.table_id} changed shape while the pipeline was stopped",
            f"re-snapshot it: 'cdc-console redump --table {schema.table_id}'",
        )

    def _follow(self, table: TableState, stored: TableSchema, now: TableSchema) -> None:
        follow_reshaped_while_stopped(
            self.store, self.config.schema_changes, table, stored, now, self.followed
        )

    def _restore(self, table: TableState) -> None:
        """A REMOVED table named again resumes where its mirror stopped.

        CATCHING_UP is right whether it had been catching up or streaming: the per-chunk filter
        passes everything after its largest high watermark, and ``stream_from`` is at or after
        that. Its schema was compared with the stored one just before, and the binlog it needs
        is checked before the stream starts.
        """
        store = self.store
        left = store.count_splits(table.table_id, (SplitStatus.PENDING, SplitStatus.ASSIGNED))
        state = readmitted_state(
            table.stream_from is not None,
            left > 0,
            self.config.snapshot.startup_mode == StartupMode.SNAPSHOT_ONLY,
        )
        with store.transaction() as conn:
            store.move_table(table.table_id, conn, state, removed_by=None)
        store.log_event(
            "table",
            f"{table.table_id} is in source.tables again: {state}"
            + (f" from {table.stream_from}" if table.stream_from else ""),
            table_id=table.table_id,
        )


#: states whose table is followed (read again, or parked) when its shape changed while the job
#: was down: every state that holds rows or reads them, a snapshot under way included
FOLLOWED_WHEN_RESHAPED = (*PARKABLE, Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP)


def park_refused(store: StateStore, schema: TableSchema, table: TableState | None) -> None:
    """Park a table whose rules (left-out or masked columns) cannot hold, before anything of
    it is read; its stored schema stays as it was (a re-dump reads it afresh once the rule is
    mended). The other tables start."""
    if table is None:
        store.ensure_table(schema.table_id, schema.chunk_key, Lifecycle.SNAPSHOTTING)
        table = store.table(schema.table_id)
    if table is None or table.state not in FOLLOWED_WHEN_RESHAPED:
        return  # parked, removed or done already: nothing of it is read
    park(
        store,
        schema.table_id,
        f"{schema.table_id} parked (NEEDS_REDUMP): {schema.refused}; nothing of it is read "
        f"until then, the other tables go on. Then: cdc-console redump --table {schema.table_id}",
    )


def park_uncaptured(store: StateStore, schema: TableSchema) -> None:
    """Park a table with a column of a type that is not captured (``check`` warns of it), so
    that its first chunk does not fail; the other tables start. Once parked it stays so."""
    table = store.table(schema.table_id)
    if not schema.uncaptured or table is None or table.state == Lifecycle.NEEDS_REDUMP:
        return
    if table.state not in FOLLOWED_WHEN_RESHAPED:
        return
    park(
        store,
        schema.table_id,
        f"{schema.table_id} parked (NEEDS_REDUMP): {schema.uncaptured}; the other tables go "
        f"on. Fix: change the column's type (ALTER TABLE {schema.table_id.quoted()} MODIFY ...) "
        f"and run cdc-console redump --table {schema.table_id}, or leave the table out of "
        "source.tables",
    )


def rebuilding(store: StateStore, table_id: TableId) -> bool:
    """Whether a whole-table re-dump is queued or under way: the fix for a table whose shape
    changed (a DDL stop), so its new shape is accepted and its old binlog is not read again."""
    table = store.table(table_id)
    if table is not None and table.state == Lifecycle.REDUMP and table.redump_chunk is None:
        return True
    return any(
        c.target == str(table_id) and c.args.get("chunk") is None
        for c in store.pending_commands([CommandKind.REDUMP])
    )
