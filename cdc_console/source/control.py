"""Operator commands: what each one does to a table's lifecycle, and when it must be refused.

The CLI and the console queue commands in the state database; the enumerator applies them at
its next planning step (``HybridSplitAssigner.next_plan``), when no batch is in flight, so a
command never changes what an already planned batch reads. ``stop`` is the driver's business
(``PipelineJob``), everything else is applied here:

- ``pause T``: T leaves the stream at its stream position P (kept as ``paused_at``); nothing of T
  is emitted after P. A snapshotting table stops getting chunks.
- ``resume T``: a streaming table comes back CATCHING_UP from P (its missed changes are read with
  the per-chunk filter, then it rejoins the stream); a snapshotting one continues its chunks.
- ``pause`` / ``resume`` without a table: no new batches; the Spark session and state are kept.
- ``redump T``: T gets fresh chunks (state REDUMP), each replacing its key range in the mirror
  with the chunk's state at its high watermark; then T catches up from
  ``max(P, min(high watermarks))``. ``redump T --chunk N`` re-reads one chunk (more chunk repairs
  may be queued while one runs): the other chunks' old watermarks stay, and the catch-up from P emits their keys' later changes unfiltered while
  chunk N's keys are filtered by its new watermark.
- ``add-table T``: checked like preflight, then snapshotted while the others stream; a removed
  table comes back where it stopped.
- ``remove-table T``: no longer captured; its mirror stays.

``refusal`` is the single place that explains why a command cannot apply in the current state;
the CLI calls it before queueing (a clear error at once) and the processor again when applying
(state may have moved on meanwhile).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from cdc_console.core.lifecycle import (
    DRIVER_KINDS,
    CommandKind,
    CommandStatus,
    Lifecycle,
    SplitStatus,
    readmitted_state,
)
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import JSONValue
from cdc_console.errors import CdcError, SourceError
from cdc_console.source.redump import start_redump
from cdc_console.state.store import Command, StateStore, TableState

log = logging.getLogger(__name__)

DescribeTable = Callable[[TableId], TableSchema]

#: states in which every chunk is finished, so one chunk can be re-read on its own
_ALL_CHUNKS_DONE = (Lifecycle.STREAMING, Lifecycle.CATCHING_UP, Lifecycle.SNAPSHOT_DONE)


@dataclass(frozen=True)
class Outcome:
    command: Command
    applied: bool
    reason: str


def _captured(tables: Sequence[TableState]) -> str:
    names = [str(t.table_id) for t in tables if t.state != Lifecycle.REMOVED]
    return ", ".join(names) if names else "none"


def _find(tables: Sequence[TableState], target: str) -> TableState | None:
    try:
        wanted = TableId.parse(target)
    except ValueError:
        return None
    for table in tables:
        if table.table_id == wanted:
            return table
    return None


def duplicate_of(
    kind: str, target: str | None, args: Mapping[str, JSONValue], pending: Sequence[Command]
) -> Command | None:
    """A pending command that already asks for ``kind target args``: a second one would only
    be refused (or, for add-table, add nothing) when the job reaches it."""
    for command in pending:
        if (command.kind, command.target, command.args) == (kind, target, args):
            return command
    return None


def refusal(
    kind: str,
    target: str | None,
    args: Mapping[str, JSONValue],
    tables: Sequence[TableState],
    pipeline_paused: bool,
) -> str | None:
    """Why ``kind target`` cannot apply to the current state, or None when it can.

    The text is what the operator reads: it names the state that blocks the command and what to
    do instead.
    """
    if target is None:
        if kind == CommandKind.PAUSE:
            return "the pipeline is already paused" if pipeline_paused else None
        if kind == CommandKind.RESUME:
            return None if pipeline_paused else "the pipeline is not paused"
        if kind in (CommandKind.STOP, CommandKind.OPTIMIZE, CommandKind.VACUUM):
            return None
        return f"{kind} needs a table (--table db.table)"
    try:
        TableId.parse(target)
    except ValueError as exc:
        return str(exc)
    table = _find(tables, target)
    if kind == CommandKind.ADD_TABLE:
        if table is not None and table.state != Lifecycle.REMOVED:
            return f"{target} is already captured (state {table.state})"
        return None
    if table is None:
        return f"unknown table {target}: the captured tables are {_captured(tables)}"
    if kind in (CommandKind.OPTIMIZE, CommandKind.VACUUM):
        return None  # a removed table's mirror stays, and may be kept too
    if table.state == Lifecycle.REMOVED:
        if kind == CommandKind.REDUMP:
            return (
                f"{target} was removed, so it cannot be re-dumped: add it back first with "
                f"'cdc-console add-table {target}' (it resumes where it stopped), then re-dump"
            )
        return (
            f"{target} is not captured (removed); add it back with 'cdc-console add-table {target}'"
        )
    if table.state == Lifecycle.NEEDS_REDUMP and (
        kind in (CommandKind.PAUSE, CommandKind.RESUME)
        or (kind == CommandKind.REDUMP and args.get("chunk") is not None)
    ):
        return (
            f"{target} is parked (NEEDS_REDUMP): its binlog was purged or its shape changed, so "
            f"every chunk must be read again; run 'cdc-console redump --table {target}'"
        )
    if kind == CommandKind.PAUSE:
        if table.state == Lifecycle.PAUSED:
            where = f" at {table.paused_at}" if table.paused_at else ""
            return f"{target} is already paused{where}"
        if table.state == Lifecycle.SNAPSHOT_DONE:
            return f"{target} finished its snapshot (snapshot-only): nothing of it runs to pause"
        return None
    if kind == CommandKind.RESUME:
        if table.state != Lifecycle.PAUSED:
            return (
                f"{target} is not paused (it is {table.state}); only a paused table can be resumed"
            )
        return None
    if kind == CommandKind.REDUMP:
        chunk = args.get("chunk")
        if chunk is None:
            return None
        effective = table.resume_state if table.state == Lifecycle.PAUSED else table.state
        repairing = effective == Lifecycle.REDUMP and table.redump_chunk is not None
        if effective not in _ALL_CHUNKS_DONE and not repairing:
            return (
                f"{target} is {effective}: its chunks are still being read, so chunk {chunk} "
                f"cannot be re-read on its own; re-dump the whole table, or wait until it streams"
            )
        if table.splits_total is not None and not 0 <= int(cast(int, chunk)) < table.splits_total:
            return f"{target} has chunks 0 to {table.splits_total - 1}, not {chunk}"
        return None
    if kind == CommandKind.REMOVE_TABLE:
        return None
    return f"unknown command {kind!r}"


class CommandProcessor:
    """Applies pending commands to the state; each in one transaction with its acknowledgement."""

    def __init__(
        self,
        store: StateStore,
        describe_table: DescribeTable,
        *,
        snapshot_only: bool = False,
    ) -> None:
        self.store = store
        self.describe_table = describe_table
        self.snapshot_only = snapshot_only

    def apply_pending(self) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for command in self.store.pending_commands():
            if command.kind in DRIVER_KINDS:
                continue
            outcome = self.apply(command)
            outcomes.append(outcome)
        return outcomes

    def apply(self, command: Command) -> Outcome:
        """Apply one command (or refuse it) and acknowledge it with its outcome."""
        schema: TableSchema | None = None
        reason = refusal(
            command.kind,
            command.target,
            command.args,
            self.store.tables(),
            self.store.pipeline_paused(),
        )
        fresh_shape = command.kind == CommandKind.ADD_TABLE or (
            command.kind == CommandKind.REDUMP and command.args.get("chunk") is None
        )
        if reason is None and fresh_shape and command.target is not None:
            try:
                schema = self.describe_table(TableId.parse(command.target))
            except SourceError as exc:
                if exc.transient:
                    raise  # the source is away: the command waits for it, not refused
                reason = f"{exc.message} (fix: {exc.hint})" if exc.hint else exc.message
            except CdcError as exc:
                reason = f"{exc.message} (fix: {exc.hint})" if exc.hint else exc.message
        if reason is not None:
            return self._finish(command, False, reason)
        with self.store.transaction() as conn:
            table = self.store.table(TableId.parse(command.target)) if command.target else None
            try:
                result = self._mutate(command, table, schema, conn)
            except _Refused as exc:
                result = None
                reason = str(exc)
            if result is not None:
                self.store.finish_command(command.id, CommandStatus.APPLIED, result, conn)
                self.store.log_event(
                    "command",
                    f"{command.describe()} applied: {result}",
                    table_id=command.target,
                    conn=conn,
                )
        if result is None:
            return self._finish(command, False, reason or "refused")
        log.info("%s applied: %s", command.describe(), result)
        return Outcome(command, True, result)

    def _finish(self, command: Command, applied: bool, reason: str) -> Outcome:
        with self.store.transaction() as conn:
            self.store.finish_command(
                command.id, CommandStatus.APPLIED if applied else CommandStatus.FAILED, reason, conn
            )
            self.store.log_event(
                "command",
                f"{command.describe()} refused: {reason}",
                level="warning",
                table_id=command.target,
                conn=conn,
            )
        log.warning("%s refused: %s", command.describe(), reason)
        return Outcome(command, applied, reason)

    def _mutate(
        self,
        command: Command,
        table: TableState | None,
        schema: TableSchema | None,
        conn: sqlite3.Connection,
    ) -> str:
        kind = command.kind
        if table is None and kind in (CommandKind.PAUSE, CommandKind.RESUME):
            paused = kind == CommandKind.PAUSE
            self.store.set_pipeline_paused(paused, conn)
            if paused:
                return "pipeline paused: no new batches until 'cdc-console resume'"
            return "pipeline resumed"
        if kind == CommandKind.ADD_TABLE:
            assert schema is not None
            return self._add(schema, table, conn)
        assert table is not None
        if kind == CommandKind.PAUSE:
            return self._pause(table, conn)
        if kind == CommandKind.RESUME:
            return self._resume(table, conn)
        if kind == CommandKind.REDUMP:
            chunk = command.args.get("chunk")
            if chunk is None:
                return start_redump(self.store, table, conn, schema)
            return self._redump_chunk(table, int(cast(int, chunk)), conn)  # queued as an int
        if kind == CommandKind.REMOVE_TABLE:
            return self._remove(table, conn)
        raise _Refused(f"unknown command {kind!r}")

    def _pause(self, table: TableState, conn: sqlite3.Connection) -> str:
        at = (
            table.stream_from
            if table.state in (Lifecycle.STREAMING, Lifecycle.CATCHING_UP)
            else None
        )
        self.store.move_table(
            table.table_id, conn, Lifecycle.PAUSED, resume_state=table.state, paused_at=at
        )
        if at is None:
            return f"{table.table_id} paused while {table.state}: no more chunks until resumed"
        return f"{table.table_id} paused at {at} (was {table.state})"

    def _resume(self, table: TableState, conn: sqlite3.Connection) -> str:
        before = table.resume_state or Lifecycle.SNAPSHOTTING
        state = (
            Lifecycle.CATCHING_UP
            if before in (Lifecycle.STREAMING, Lifecycle.CATCHING_UP)
            else before
        )
        self.store.move_table(table.table_id, conn, state, resume_state=None, paused_at=None)
        if state == Lifecycle.CATCHING_UP:
            return f"{table.table_id} resumed: catching up from {table.stream_from}, then streaming"
        return f"{table.table_id} resumed: {state}"

    def _redump_chunk(self, table: TableState, chunk: int, conn: sqlite3.Connection) -> str:
        generation = table.generation + 1
        if not self.store.reopen_split(table.table_id, chunk, generation, conn):
            raise _Refused(f"{table.table_id} has no chunk {chunk}")
        done = self.store.count_splits(table.table_id, (SplitStatus.FINISHED,), conn)
        self.store.move_table(
            table.table_id,
            conn,
            Lifecycle.REDUMP,
            generation=generation,
            splits_done=done,
            resume_state=None,
            paused_at=None,
            redump_chunk=chunk,
        )
        return (
            f"{table.table_id} chunk {chunk} re-dump started: it replaces its key range in the "
            f"mirror, then the table catches up from {table.stream_from}"
        )

    def _remove(self, table: TableState, conn: sqlite3.Connection) -> str:
        self.store.move_table(
            table.table_id,
            conn,
            Lifecycle.REMOVED,
            removed_by="command",
            resume_state=None,
            redump_chunk=None,
        )
        kept = f"as of {table.stream_from}" if table.stream_from else "with its snapshot so far"
        return f"{table.table_id} removed: no longer captured, its mirror stays {kept}"

    def _add(self, schema: TableSchema, table: TableState | None, conn: sqlite3.Connection) -> str:
        table_id = schema.table_id
        if table is None:
            self.store.ensure_table(
                table_id,
                schema.chunk_key,
                Lifecycle.SNAPSHOTTING,
                origin="command",
                schema=schema,
                conn=conn,
            )
            return f"{table_id} added: snapshotting on {schema.chunk_key} while the others stream"
        stored = self.store.schemas().get(table_id)
        if stored is not None and stored.columns != schema.columns:
            raise _Refused(
                f"{table_id} changed shape since it was removed, and its mirror has the old "
                "columns; move its mirror folder away, then add it again to snapshot it afresh"
            )
        left = self.store.count_splits(table_id, (SplitStatus.PENDING, SplitStatus.ASSIGNED))
        state = readmitted_state(table.stream_from is not None, left > 0, self.snapshot_only)
        self.store.move_table(table_id, conn, state, removed_by=None, origin="command")
        where = f" from {table.stream_from}" if table.stream_from else ""
        return f"{table_id} captured again: {state}{where}"


class _Refused(Exception):
    """A command found inapplicable only once its transaction looked at the state."""
