"""The enumerator's planning step: which splits and which binlog window the next batch reads.

``SnapshotSplitAssigner`` splits tables on first use and hands out pending chunks in order;
``HybridSplitAssigner`` combines them with the binlog window, per table according to its
lifecycle state:

- SNAPSHOTTING: its pending chunks are read; none of its binlog changes are emitted yet.
- REDUMP: the same, but each chunk is planned with ``replace``: it replaces its key range in a
  mirror that already holds the table.
- PAUSED, REMOVED, SNAPSHOT_DONE, NEEDS_REDUMP: nothing of it is read.
- CATCHING_UP: all chunks finished; its changes from the smallest high watermark on are emitted
  through ``should_emit``'s per-chunk filter.
- STREAMING: its changes from its own stream position on are emitted unfiltered.

While the source is busier than ``[source] max_load`` allows (``source.throttle``), a batch
carries no chunks; the binlog window is planned as ever. Before planning, pending operator
commands are applied (``CommandProcessor``), and a paused pipeline plans nothing. A table whose next binlog position lies in a file the server no longer
has (purged while it was paused or behind) is parked in NEEDS_REDUMP before the window is cut,
so the other tables go on instead of every window failing on the missing file. Every batch's window ends at the server's head as read while planning, so one batch brings every
streaming table up to date and a catching-up table joins the stream after one batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import pymysql

from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import BatchStatus, Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan, PlannedSplit
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import BinlogSplit, SnapshotSplit, TableStreamFilter
from cdc_console.errors import ConfigError
from cdc_console.source.control import CommandProcessor
from cdc_console.source.parking import is_purged, park, park_table
from cdc_console.source.plan_past import as_committed, may_plan_past, wait_applied
from cdc_console.source.schema_follow import SchemaFollowed, SettleSchema, settle_held_changes
from cdc_console.source.throttle import LoadThrottle
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)

#: recent batches the chunk budget is estimated from
TIMINGS_READ = 20

SplitTable = Callable[[TableSchema], list[SnapshotSplit]]
#: an open last chunk's range split again, or [] to read it as it is
SplitTail = Callable[[TableSchema, ChunkRange], list[ChunkRange]]
ReadHead = Callable[[], BinlogOffset]
BinlogFiles = Callable[[], list[str]]
#: where a window from ``start`` ends, given the head: the head, or a transaction start before it
WindowEnd = Callable[[BinlogOffset, BinlogOffset], BinlogOffset]


class SnapshotSplitAssigner:
    """Hands out the pending chunks of snapshotting tables, splitting each table on first use,
    and its open last chunk again when the table grew past it (``ChunkSplitter.split_tail``)."""

    def __init__(
        self, store: StateStore, split_table: SplitTable, split_tail: SplitTail | None = None
    ) -> None:
        self.store = store
        self.split_table = split_table
        self.split_tail = split_tail

    def _split_or_park(self, schema: TableSchema) -> bool:
        """Split a table on first use; one the server will not split (gone since it was
        listed, a chunk key it refuses) is parked with the reason, and the others go on."""
        try:
            self.ensure_split(schema)
        except (pymysql.err.ProgrammingError, pymysql.err.DataError, ConfigError) as exc:
            table = schema.table_id
            hint = getattr(exc, "hint", "") or (
                f"check that {table} exists and the source user can read it, then "
                f"'cdc-console redump --table {table}'"
            )
            why = exc.message if isinstance(exc, ConfigError) else str(exc.args[-1])
            park(
                self.store,
                table,
                f"{table} parked (NEEDS_REDUMP): it could not be split into chunks ({why}). "
                f"The other tables go on. Fix: {hint}",
            )
            return False
        return True

    def ensure_split(self, schema: TableSchema) -> None:
        if self.store.has_splits(schema.table_id):
            return
        splits = self.split_table(schema)
        self.store.add_splits(schema.table_id, splits)
        self.store.log_event(
            "split",
            f"{schema.table_id} split into {len(splits)} chunks on {schema.chunk_key}",
            table_id=schema.table_id,
        )
        log.info("table %s: %d chunks on %s", schema.table_id, len(splits), schema.chunk_key)

    def next_splits(self, tables: Sequence[TableSchema], limit: int) -> list[SnapshotSplit]:
        tables = [schema for schema in tables if self._split_or_park(schema)]
        ids = [s.table_id for s in tables]
        pending = self.store.pending_splits(limit, ids)
        if self.split_tail is None:
            return pending
        schemas = {s.table_id: s for s in tables}
        grew = False
        for split in pending:
            if split.range.end is not None:
                continue
            try:
                ranges = self.split_tail(schemas[split.table_id], split.range)
            except (pymysql.err.ProgrammingError, pymysql.err.DataError, ValueError) as exc:
                # splitting again only keeps reads small: the chunk read whole is as exact
                log.warning("%s: its last chunk is read whole (%s)", split.table_id, exc)
                ranges = []
            added = self.store.split_tail(split, ranges) if len(ranges) > 1 else []
            if added:
                grew = True
                self.store.log_event(
                    "split",
                    f"{split.table_id} grew while read: its last chunk {split.range} is now "
                    f"{len(added) + 1} chunks",
                    table_id=split.table_id,
                )
        return self.store.pending_splits(limit, ids) if grew else pending


class HybridSplitAssigner:
    """Plans batches: snapshot chunks first-come, plus one binlog window for the other tables."""

    def __init__(
        self,
        store: StateStore,
        split_table: SplitTable,
        read_head: ReadHead,
        server_ids: range,
        splits_per_batch: int,
        commands: CommandProcessor | None = None,
        readers: int | None = None,
        binlog_files: BinlogFiles | None = None,
        settle_schema: SettleSchema | None = None,
        schema_followed: SchemaFollowed | None = None,
        budget: BatchBudget | None = None,
        window_end: WindowEnd | None = None,
        split_tail: SplitTail | None = None,
        throttle: LoadThrottle | None = None,
    ) -> None:
        if len(server_ids) < 2:
            raise ValueError("need at least two server ids: one binlog reader, one chunk reader")
        self.store = store
        self.snapshot = SnapshotSplitAssigner(store, split_table, split_tail)
        self.read_head = read_head
        self.server_ids = server_ids
        self.splits_per_batch = max(1, splits_per_batch)
        # One server id per concurrent chunk reader; a batch's chunks share them round robin, and
        # the chunks of one id are read one after the other by one task (see ``reader_groups``).
        count = len(server_ids) - 1 if readers is None else readers
        self.reader_ids = server_ids[1 : 1 + max(1, min(count, len(server_ids) - 1))]
        self.commands = commands
        self.binlog_files = binlog_files
        self.settle_schema = settle_schema
        self.schema_followed = schema_followed
        self.budget = budget
        self.window_end = window_end
        self.throttle = throttle

    def next_plan(self) -> BatchPlan | None:
        """The plan of the next batch, persisted; the pending one again if it never applied.

        A batch the driver is still applying is planned past when ``plan_past`` allows it, and
        waited for otherwise."""
        last = self.store.last_batch()
        past: BatchPlan | None = None
        if last is not None and last.status == BatchStatus.STAGED:
            if may_plan_past(self.store, last):
                past = last.plan
            else:
                last = wait_applied(self.store, last)
        if last is not None and last.status != BatchStatus.APPLIED and past is None:
            return last.plan
        clock = time.monotonic()  # planning proper: the server's answers, splitting tables
        batch_no = (last.batch_no if last else 0) + 1
        if self.store.draining():
            return None  # the job is stopping: the batch in flight was the last
        if self.commands is not None and past is None:
            self.commands.apply_pending()
        if self.store.pipeline_paused():
            return None
        tables = self.store.tables()
        if past is not None:
            tables = as_committed(tables, past)
        reshaped: list[TableId] = []
        if any(t.schema_pending for t in tables):
            # first, so a table read again gets its fresh chunks in this very plan
            reshaped = settle_held_changes(
                self.store, tables, self.settle_schema, self.schema_followed
            )
            tables = self.store.tables()
        schemas = self.store.schemas()
        snapshotting = [
            schemas[t.table_id]
            for t in tables
            if t.state in (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP)
        ]
        redumping = {t.table_id for t in tables if t.state == Lifecycle.REDUMP}
        limit = self.splits_per_batch
        budgeted: float | None = None
        if self.budget is not None and snapshotting:
            streaming = any(t.state == Lifecycle.STREAMING for t in tables)
            limit = self.budget.chunks(self.store.batch_timings(TIMINGS_READ), streaming)
            if streaming and self.budget.seconds > 0:
                budgeted = self.budget.seconds
        splits = self._next_splits(snapshotting, limit)
        planned = tuple(
            PlannedSplit(
                split, self.reader_ids[i % len(self.reader_ids)], split.table_id in redumping
            )
            for i, split in enumerate(splits)
        )
        head = self.read_head()
        if past is None:  # the window's tables were just read up to its end: nothing is purged
            tables = self._park_purged(tables)
        binlog = self._binlog_window(tables, head)
        plan = BatchPlan(
            batch_no,
            planned,
            binlog,
            self.server_ids[0],
            head,
            tuple(reshaped),
            budgeted if planned else None,
        )
        if plan.is_empty:
            return None
        self.store.create_batch(batch_no, plan.to_dict(), splits, time.monotonic() - clock)
        log.info(
            "planned %s%s",
            plan.describe(),
            f" (batch {batch_no - 1} still being applied)" if past is not None else "",
        )
        return plan

    def _next_splits(self, snapshotting: list[TableSchema], limit: int) -> list[SnapshotSplit]:
        """The chunks of this batch: none while the source is busier than ``[source] max_load``
        allows (splitting a table reads it too); the binlog window is planned either way."""
        if self.throttle is not None:
            if not snapshotting:
                self.throttle.clear()
            elif self.throttle.reason() is not None:
                return []
        return self.snapshot.next_splits(snapshotting, limit)

    def _park_purged(self, tables: Sequence[TableState]) -> list[TableState]:
        """The tables without those whose next binlog file is gone, which are parked.

        Only a file older than the oldest one the server keeps counts as purged; the window's
        own reader reports anything stranger (a reset binlog) with its own message.
        """
        if self.binlog_files is None or not any(
            t.state.reads_binlog and t.stream_from is not None for t in tables
        ):
            return list(tables)
        files = self.binlog_files()
        kept: list[TableState] = []
        for table in tables:
            start = table.stream_from
            if table.state.reads_binlog and start is not None and is_purged(start, files):
                park_table(self.store, table.table_id, start, files)
            else:
                kept.append(table)
        return kept

    def _binlog_window(
        self, tables: Sequence[TableState], head: BinlogOffset
    ) -> BinlogSplit | None:
        filters: list[TableStreamFilter] = []
        for table in tables:
            if table.stream_from is None:
                continue
            if table.state == Lifecycle.STREAMING:
                filters.append(TableStreamFilter(table.table_id, table.stream_from))
            elif table.state == Lifecycle.CATCHING_UP:
                finished = tuple(self.store.finished_splits(table.table_id))
                pending = tuple(
                    s.split.range
                    for s in self.store.splits(table.table_id)
                    if s.status != SplitStatus.FINISHED
                )
                filters.append(
                    TableStreamFilter(table.table_id, table.stream_from, finished, pending)
                )
        if not filters:
            return None
        start = min(f.resume_from for f in filters if f.resume_from is not None)
        if start >= head and all(f.finished_splits == () for f in filters):
            return None
        start = start.at_event_boundary()
        end = head if self.window_end is None else self.window_end(start, head)
        if end != head:
            log.info("binlog window from %s bounded at %s (head %s)", start, end, head)
        return BinlogSplit(start, end, tuple(filters))
