"""The executor-side half of the data source: run one partition, yield record dicts.

Each task ends with one control record reporting what it did (a split's watermarks, a window's
counts); ``foreachBatch`` records those in SQLite in the same step that applies the data.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from cdc_console.core.offset import binlog_file_index
from cdc_console.core.records import RecordDict
from cdc_console.core.reports import NO_POSITION, SplitResult, WindowResult
from cdc_console.core.schema import TableId
from cdc_console.core.untyped import Connection
from cdc_console.errors import BinlogPurgedError, SchemaChangedError, SourceUnreachableError
from cdc_console.logs import from_environment
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.retry import (
    RetryAbandoned,
    call_with_retry,
    describe_error,
    iterate_with_retry,
)
from cdc_console.mysql.snapshot_arrow import SnapshotArrowBuilder
from cdc_console.sinks.base import TypedChunk
from cdc_console.sinks.delta_files import write_chunk
from cdc_console.source.binlog_reader import BinlogSplitReader
from cdc_console.source.snapshot_reader import (
    SnapshotSplitReader,
    SnapshotSplitResult,
    open_text_mode,
)
from cdc_console.spark.partitions import BinlogTask, ChunkTask, PlanPartition, SnapshotTask
from cdc_console.spark.protocol import (
    files_record,
    noop_control,
    pack_changes,
    rows_record,
    split_control,
    task_control,
    to_batches,
    window_control,
)
from cdc_console.values.arrow import rows_to_table

log = logging.getLogger(__name__)


def narrate() -> None:
    """Spark's Python workers start with bare logging; give the narration (plans, split steps) a
    handler so it reaches the job's log."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(from_environment())
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.getLogger("pymysqlreplication").setLevel(logging.WARNING)


def read_partition(partition: PlanPartition) -> Iterator[pa.RecordBatch]:
    """The partition's records as Arrow batches for Spark, then one ``task_control`` with the
    time spent producing them: in our code (reading, decoding, packing) and not in Spark's
    hands between two batches, which is what splits the lag's read stage from Spark's."""
    batches = to_batches(pack_changes(run_partition(partition)))
    busy = 0.0
    while True:
        began = time.perf_counter()
        batch = next(batches, None)
        busy += time.perf_counter() - began
        if batch is None:
            break
        yield batch
    yield from to_batches(iter([task_control(partition.batch_no, busy)]))


def run_partition(partition: PlanPartition) -> Iterator[RecordDict]:
    narrate()
    task = partition.task
    if isinstance(task, SnapshotTask):
        yield from _snapshot(partition, task)
    elif isinstance(task, BinlogTask):
        yield from _binlog(partition, task)
    else:
        yield noop_control(partition.batch_no)


class _ReaderSlot:
    """One reader slot's connections (one per value mode) and readers (one per table and mode),
    opened on first use and all dropped after a transient failure, so a retry starts afresh."""

    def __init__(self, partition: PlanPartition, task: SnapshotTask) -> None:
        self.partition = partition
        self.server_id = task.server_id
        self.park_on_schema_change = task.park_on_schema_change
        self.connections: dict[bool, Connection] = {}
        self.readers: dict[tuple[TableId, bool], SnapshotSplitReader] = {}

    def reader(self, chunk: ChunkTask) -> SnapshotSplitReader:
        typed = chunk.typed
        reader = self.readers.get((chunk.split.table_id, typed))
        if reader is None:
            source = self.partition.source
            if typed not in self.connections:
                self.connections[typed] = open_text_mode(source) if typed else connect(source)
            reader = SnapshotSplitReader(
                source,
                chunk.schema,
                self.server_id,
                connection=self.connections[typed],
                text_mode=typed,
                park_on_schema_change=self.park_on_schema_change,
            )
            self.readers[chunk.split.table_id, typed] = reader
        return reader

    def read(self, chunk: ChunkTask) -> tuple[SnapshotSplitReader, SnapshotSplitResult]:
        reader = self.reader(chunk)
        return reader, reader.read(chunk.split)

    def close(self, _error: BaseException | None = None) -> None:
        for conn in self.connections.values():
            close_quietly(conn)
        self.connections.clear()
        self.readers.clear()


def _snapshot(partition: PlanPartition, task: SnapshotTask) -> Iterator[RecordDict]:
    """Read one reader slot's splits in plan order, on one connection per value mode.

    The splits share the slot's server id (their backfills must not overlap) and its
    connection (one connect, one TLS handshake per task instead of per chunk). A split planned
    ``typed`` is read in text mode and leaves as one ``ROWS`` record holding its typed rows,
    or, when the task has a ``lake``, as Delta data files written here and one ``FILES`` record
    naming them. A chunk is read whole before anything of it is yielded, so a source outage mid-chunk is
    waited out and the chunk read again from its low watermark.
    """
    slot = _ReaderSlot(partition, task)
    builders: dict[TableId, SnapshotArrowBuilder] = {}
    try:
        for chunk in task.chunks:
            split, typed = chunk.split, chunk.typed
            try:
                reader, result = call_with_retry(
                    functools.partial(slot.read, chunk),
                    what=f"split {split.split_id}",
                    outage_seconds=partition.source.outage_seconds,
                    on_failure=slot.close,
                )
                rows = (
                    _typed_rows(builders, reader, result) if typed and not result.reshaped else None
                )
            except _JOB_FAULTS:
                raise
            except Exception as exc:  # one table's fault: its chunk reports it, the rest go on
                why = describe_error(exc)
                log.error("split %s of %s failed: %s", split.split_id, split.table_id, why)
                slot.close()
                yield split_control(partition.batch_no, _failed(split.split_id, why))
                continue
            if result.reshaped:
                pass  # nothing of it was read: its table is read again or parked
            elif rows is not None:
                high = result.high_watermark
                position = (binlog_file_index(high.file), high.pos)
                ts_ms = int(time.time() * 1000)
                if task.lake is None:
                    yield rows_record(split.table_id, split.split_id, position, ts_ms, rows)
                else:
                    chunk_rows = TypedChunk(split.split_id, (*position, -1, 0), ts_ms, rows)
                    written = write_chunk(task.lake, reader.schema, partition.batch_no, chunk_rows)
                    yield files_record(split.table_id, written)
            else:
                for record in result.records:
                    yield record.to_dict()
            yield split_control(
                partition.batch_no,
                SplitResult(
                    split_id=split.split_id,
                    low_watermark=result.low_watermark,
                    high_watermark=result.high_watermark,
                    rows=result.row_count,
                    backfill_events=result.backfill_events,
                    started_at=result.started_at,
                    duration_ms=result.duration_ms,
                    reshaped=result.reshaped,
                ),
            )
    finally:
        slot.close()


def _typed_rows(
    builders: dict[TableId, SnapshotArrowBuilder],
    reader: SnapshotSplitReader,
    result: SnapshotSplitResult,
) -> pa.Table:
    """A typed chunk's rows as the mirror's Arrow table (its values converted here, so a value
    that does not convert is the chunk's failure)."""
    if result.raw is None:
        return rows_to_table(reader.schema, result.rows)
    table_id = reader.schema.table_id
    builder = builders.get(table_id)
    if builder is None:
        builder = builders[table_id] = SnapshotArrowBuilder(reader.schema)
    return builder.table(result.raw)


#: failures that are the job's, not one table's: an outage past its limit, a purged binlog, a
#: stop asked for while waiting, a DDL under ``schema_changes = "stop"``
_JOB_FAULTS = (SourceUnreachableError, BinlogPurgedError, SchemaChangedError, RetryAbandoned)


def _failed(split_id: str, why: str) -> SplitResult:
    return SplitResult(split_id, NO_POSITION, NO_POSITION, 0, 0, time.time(), 0, failed=why)


def _binlog(partition: PlanPartition, task: BinlogTask) -> Iterator[RecordDict]:
    """The window's records, then its counts; an outage mid-window is waited out.

    A window's binlog never changes, so after a reconnect the window is read again from its
    start and the records already yielded are skipped by count: each leaves the task once.
    The counts are the last (complete) reading's.
    """
    readers: list[BinlogSplitReader] = []

    def open_window() -> Iterator[RecordDict]:
        readers.append(
            BinlogSplitReader(
                partition.source,
                task.schema_map(),
                task.server_id,
                park_on_schema_change=task.park_on_schema_change,
                patches=task.patches,
            )
        )
        # Records as dicts straight from the reader (no ChangeRecord per row); the reader
        # counts them per table, which the window's control record reports.
        return readers[-1].read_dicts(task.split)

    yield from iterate_with_retry(
        open_window,
        what=f"binlog window of batch {partition.batch_no}",
        outage_seconds=partition.source.outage_seconds,
    )
    reader = readers[-1]
    yield window_control(
        partition.batch_no,
        WindowResult(
            dict(reader.emitted_by_table),
            reader.skipped,
            dict(reader.last_ts_by_table),
            dict(reader.schema_changes),
        ),
    )
