"""Executor -> driver: the records and reports a batch's tasks send back.

Arrow batches of change records in one schema for all tables, which is generated here from
``core.records.FIELDS`` plus a ``payload`` column; among them one *control* record per task
that reports what the task did (a split's watermarks as a ``SplitResult``, a window's counts as
a ``WindowResult``), so progress is recorded exactly when the data is; and, for a
first-snapshot chunk, one ``ROWS`` record whose payload is the chunk as typed Arrow (IPC stream
bytes), or, when the task wrote the chunk's Delta files itself (``SnapshotTask.lake``), one
``FILES`` record whose payload is the ``WrittenChunk`` as JSON. What goes the other way, the
tasks, is ``partitions.py``'s.

Both ends import these two modules and nothing else of each other: ``datasource.py`` (the
Spark callbacks) -> ``planner.py`` (driver) and ``tasks.py`` (executors) -> here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.records import FIELDS, RecordDict
from cdc_console.core.reports import SplitResult, WindowResult
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.values import JSONObject
from cdc_console.sinks.base import WrittenChunk
from cdc_console.sinks.change_columns import ChangeColumns
from cdc_console.sinks.delta_files import chunk_to_json
from cdc_console.spark.wire import WIRE_FIELDS

CONTROL_OP: Final = "CTRL"
ROWS_OP: Final = "ROWS"
FILES_OP: Final = "FILES"
#: up to ``PACK_RECORDS`` change records of one task, packed as Arrow IPC in one payload
PACK_OP: Final = "PACK"
#: the records that carry a first-snapshot chunk whole: as typed rows, or as written files
CHUNK_OPS: Final = (ROWS_OP, FILES_OP)

_ARROW_TYPES: Final = {
    "string": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "binary": pa.binary(),
}
ARROW_SCHEMA: Final = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in WIRE_FIELDS])
#: a pack's rows: the change record fields, no payload
RECORD_SCHEMA: Final = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in FIELDS])
_EMPTY_RECORD: Final[RecordDict] = {
    name: ("" if kind == "string" else None if kind == "binary" else 0)
    for name, kind in WIRE_FIELDS
}

ARROW_CHUNK_ROWS = 8192
ARROW_CHUNK_BYTES = 16 << 20  # payload bytes per Arrow batch handed to Spark
PACK_RECORDS = 8192


# -- records ----------------------------------------------------------------------------------


def _control(batch_no: int, kind: str, details: JSONObject) -> RecordDict:
    """A record that carries a task's report to ``foreachBatch``: ``key`` names the kind."""
    return {
        **_EMPTY_RECORD,
        "op": CONTROL_OP,
        "key": kind,
        "row": json.dumps({"batch": batch_no, **details}),
    }


def noop_control(batch_no: int) -> RecordDict:
    return _control(batch_no, "noop", {})


def split_control(batch_no: int, result: SplitResult) -> RecordDict:
    """The finished split's report: its watermarks, rows and backfill (Flink CDC's
    ``FinishedSnapshotSplitInfo``)."""
    return _control(
        batch_no,
        "split",
        {
            "split_id": result.split_id,
            "lw": result.low_watermark.to_dict(),
            "hw": result.high_watermark.to_dict(),
            "rows": result.rows,
            "backfill": result.backfill_events,
            "started_at": result.started_at,
            "duration_ms": result.duration_ms,
            "reshaped": result.reshaped,
            "failed": result.failed,
        },
    )


def task_control(batch_no: int, busy_seconds: float) -> RecordDict:
    """The end of one task: how long it spent in our code (reading, decoding, packing), as
    opposed to handing its batches to Spark (``tasks.read_partition``)."""
    return _control(batch_no, "task", {"busy_seconds": round(busy_seconds, 6)})


def window_control(batch_no: int, result: WindowResult) -> RecordDict:
    return _control(
        batch_no,
        "window",
        {
            "emitted": dict(result.emitted),
            "skipped": result.skipped,
            "last_event_ts": dict(result.last_event_ts),
            "schema_changes": {
                table: change.to_dict() for table, change in result.schema_changes.items()
            },
        },
    )


@dataclass(frozen=True)
class Reports:
    """The control records of one Spark batch, decoded."""

    batch_numbers: tuple[int, ...]
    splits: tuple[SplitResult, ...]
    window: WindowResult | None
    #: each task's time in our code (``task_control``), in no particular order
    task_seconds: tuple[float, ...] = ()

    @property
    def read_seconds(self) -> float | None:
        """How long the batch's reading and decoding took: its longest task's time in our
        code (tasks run side by side, so the longest bounds the batch); None when no task
        reported it (a batch read before tasks timed themselves)."""
        return max(self.task_seconds) if self.task_seconds else None


def read_controls(controls: Iterable[RecordDict]) -> Reports:
    """Inverse of the ``*_control`` builders over a batch's control records."""
    batches: set[int] = set()
    splits: list[SplitResult] = []
    window: WindowResult | None = None
    busy: list[float] = []
    for control in controls:
        data = json.loads(str(control["row"]))
        batches.add(int(data["batch"]))
        if control["key"] == "split":
            splits.append(
                SplitResult(
                    split_id=data["split_id"],
                    low_watermark=BinlogOffset.from_dict(data["lw"]),
                    high_watermark=BinlogOffset.from_dict(data["hw"]),
                    rows=int(data["rows"]),
                    backfill_events=int(data["backfill"]),
                    started_at=float(data["started_at"]),
                    duration_ms=int(data["duration_ms"]),
                    reshaped=str(data.get("reshaped", "")),
                    failed=str(data.get("failed", "")),
                )
            )
        elif control["key"] == "window":
            changed = {
                table: SchemaChange.from_dict(c)
                for table, c in data.get("schema_changes", {}).items()
            }
            part = WindowResult(
                data["emitted"], int(data["skipped"]), data["last_event_ts"], changed
            )
            window = part if window is None else merge_windows(window, part)
        elif control["key"] == "task":
            busy.append(float(data["busy_seconds"]))
    return Reports(tuple(sorted(batches)), tuple(splits), window, tuple(busy))


def merge_windows(a: WindowResult, b: WindowResult) -> WindowResult:
    """Two parts of one window as one reader of the whole window reports it: counts added,
    the latest event time and, per table, the first change of shape."""
    emitted = dict(a.emitted)
    for table, count in b.emitted.items():
        emitted[table] = emitted.get(table, 0) + count
    last = dict(a.last_event_ts)
    for table, ts in b.last_event_ts.items():
        last[table] = max(ts, last.get(table, ts))
    changes = dict(a.schema_changes)
    for table, change in b.schema_changes.items():
        if table not in changes or change.position < changes[table].position:
            changes[table] = change
    return WindowResult(emitted, a.skipped + b.skipped, last, changes)


def rows_record(
    table_id: TableId, split_id: str, position: tuple[int, int], ts_ms: int, rows: pa.Table
) -> RecordDict:
    """A chunk's typed rows as one record: ``position`` is its high watermark (file index, pos)."""
    return {
        **_EMPTY_RECORD,
        "database": table_id.database,
        "table": table_id.table,
        "op": ROWS_OP,
        "row": str(rows.num_rows),
        "file_index": position[0],
        "pos": position[1],
        "event_index": -1,
        "ts_ms": ts_ms,
        "split_id": split_id,
        "payload": _ipc_bytes(rows),
    }


def files_record(table_id: TableId, chunk: WrittenChunk) -> RecordDict:
    """A chunk whose files the task wrote: only what their add actions need travels."""
    return {
        **_EMPTY_RECORD,
        "database": table_id.database,
        "table": table_id.table,
        "op": FILES_OP,
        "row": str(chunk.rows),
        "file_index": chunk.position[0],
        "pos": chunk.position[1],
        "event_index": chunk.position[2],
        "ts_ms": chunk.ts_ms,
        "split_id": chunk.split_id,
        "payload": chunk_to_json(chunk),
    }


def rows_payload(payload: bytes) -> pa.Table:
    """Inverse of ``rows_record``'s payload (and of ``pack_record``'s)."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def pack_record(records: list[RecordDict]) -> RecordDict:
    """Change records as one record: Spark moves one binary value, not a row per change.

    Every row a Python data source yields is converted into the JVM's row format and back to
    Arrow for ``foreachBatch``; packed, a 290k-record binlog window cost the JVM 11.4 CPU-s
    instead of 13.0 (most of the rest is its start-up and planning).
    """
    packed = pa.Table.from_pylist(records, schema=RECORD_SCHEMA)
    return {**_EMPTY_RECORD, "op": PACK_OP, "row": str(len(records)), "payload": _ipc_bytes(packed)}


def pack_changes(rows: Iterable[RecordDict]) -> Iterator[RecordDict]:
    """A task's output with its change records packed (``pack_record``), in the same order:
    a chunk, file or control record ends the pack before it."""
    pending: list[RecordDict] = []
    for row in rows:
        if row["op"] in (CONTROL_OP, ROWS_OP, FILES_OP):
            if pending:
                yield pack_record(pending)
                pending = []
            yield row
            continue
        pending.append(row)
        if len(pending) >= PACK_RECORDS:
            yield pack_record(pending)
            pending = []
    if pending:
        yield pack_record(pending)


def change_columns(table: pa.Table) -> ChangeColumns:
    """The change records of ``table`` (no chunk or control records) in order, packs opened,
    as Arrow columns (``RECORD_SCHEMA``): the driver's apply is on the stream's critical path,
    and a record object per change was a third of it (``sinks.change_columns``)."""
    meta = table.drop_columns(["payload"]) if "payload" in table.column_names else table
    ops = meta.column("op")
    if not pc.any(pc.equal(ops, PACK_OP)).as_py():
        return ChangeColumns(_record_columns(meta))
    payloads = table["payload"]
    pieces: list[pa.Table] = []
    plain_from = 0
    for index, op in enumerate(ops.to_pylist()):
        if op == PACK_OP:
            if index > plain_from:
                pieces.append(_record_columns(meta.slice(plain_from, index - plain_from)))
            pieces.append(_record_columns(rows_payload(payloads[index].as_py())))
            plain_from = index + 1
    if plain_from < meta.num_rows:
        pieces.append(_record_columns(meta.slice(plain_from)))
    return ChangeColumns(pa.concat_tables(pieces))


def _record_columns(table: pa.Table) -> pa.Table:
    return table.select(list(RECORD_SCHEMA.names)).cast(RECORD_SCHEMA)


def record_count(table: pa.Table) -> int:
    """Rows of ``table``, counting each pack as the records it holds."""
    packs = table.filter(pc.equal(table["op"], PACK_OP))
    total = int(table.num_rows)
    if packs.num_rows == 0:
        return total
    packed = sum(int(n) for n in packs["row"].to_pylist())
    return total - int(packs.num_rows) + packed


def to_batches(rows: Iterator[RecordDict]) -> Iterator[pa.RecordBatch]:
    """Record dicts as Arrow batches of at most ``ARROW_CHUNK_ROWS`` rows / ``_BYTES`` payload."""
    chunk: list[RecordDict] = []
    size = 0
    for row in rows:
        chunk.append(row)
        payload = row.get("payload")
        if isinstance(payload, bytes):
            size += len(payload)
        if len(chunk) >= ARROW_CHUNK_ROWS or size >= ARROW_CHUNK_BYTES:
            yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_SCHEMA)
            chunk = []
            size = 0
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_SCHEMA)
