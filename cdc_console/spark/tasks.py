"""The executor-side half of the data source: run one partition, yield record dicts.

Each task ends with one control record reporting what it did (a split's watermarks, a window's
counts); ``foreachBatch`` records those in SQLite in the same step that applies the data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from cdc_console.mysql.connection import connect
from cdc_console.mysql.schema import TableId, schema_from_dict
from cdc_console.sinks.snapshot_arrow import SnapshotArrowBuilder
from cdc_console.sinks.types import rows_to_table
from cdc_console.source.binlog_reader import BinlogSplitReader
from cdc_console.source.offset import binlog_file_index
from cdc_console.source.snapshot_reader import SnapshotSplitReader, open_text_mode
from cdc_console.source.splits import BinlogSplit, SnapshotSplit
from cdc_console.spark.datasource import PlanPartition, control_row, rows_record

log = logging.getLogger(__name__)


def narrate() -> None:
    """Spark's Python workers start with bare logging; give the narration (plans, split steps) a
    handler so it reaches the job's log."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-5s %(name)s: %(message)s", "%H:%M:%S")
        )
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        logging.getLogger("pymysqlreplication").setLevel(logging.WARNING)


def run_partition(partition: PlanPartition) -> Iterator[dict[str, Any]]:
    narrate()
    if partition.kind == "snapshot":
        yield from _snapshot(partition)
    elif partition.kind == "binlog":
        yield from _binlog(partition)
    else:
        yield control_row(partition.batch_no, "noop", {})


def _snapshot(partition: PlanPartition) -> Iterator[dict[str, Any]]:
    """Read one reader slot's splits in plan order, on one connection per value mode.

    The splits share the slot's server id (their backfills must not overlap) and its
    connection (one connect, one TLS handshake per task instead of per chunk). A split planned
    ``typed`` is read in text mode and leaves as one ``ROWS`` record holding its typed rows.
    """
    payload = partition.payload
    server_id = int(payload["server_id"])
    connections: dict[bool, Any] = {}
    readers: dict[tuple[TableId, bool], SnapshotSplitReader] = {}
    builders: dict[TableId, SnapshotArrowBuilder] = {}
    try:
        for entry in payload["splits"]:
            split = SnapshotSplit.from_dict(entry["split"])
            typed = bool(entry.get("typed"))
            reader = readers.get((split.table_id, typed))
            if reader is None:
                if typed not in connections:
                    source = partition.source
                    connections[typed] = open_text_mode(source) if typed else connect(source)
                reader = SnapshotSplitReader(
                    partition.source,
                    schema_from_dict(entry["schema"]),
                    server_id,
                    connection=connections[typed],
                    text_mode=typed,
                )
                readers[split.table_id, typed] = reader
            result = reader.read(split)
            if typed:
                if result.raw is not None:
                    builder = builders.get(split.table_id)
                    if builder is None:
                        builder = builders[split.table_id] = SnapshotArrowBuilder(reader.schema)
                    rows = builder.table(result.raw)
                else:
                    rows = rows_to_table(reader.schema, result.rows)
                high = result.high_watermark
                position = (binlog_file_index(high.file), high.pos)
                yield rows_record(
                    split.table_id, split.split_id, position, int(time.time() * 1000), rows
                )
            else:
                for record in result.records:
                    yield record.to_dict()
            yield control_row(
                partition.batch_no,
                "split",
                {
                    "split_id": split.split_id,
                    "lw": result.low_watermark.to_dict(),
                    "hw": result.high_watermark.to_dict(),
                    "rows": result.row_count,
                    "backfill": result.backfill_events,
                    "started_at": result.started_at,
                    "duration_ms": result.duration_ms,
                },
            )
    finally:
        for conn in connections.values():
            conn.close()


def _binlog(partition: PlanPartition) -> Iterator[dict[str, Any]]:
    payload = partition.payload
    split = BinlogSplit.from_dict(payload["binlog"])
    schemas = {s.table_id: s for s in (schema_from_dict(d) for d in payload["schemas"])}
    reader = BinlogSplitReader(partition.source, schemas, int(payload["server_id"]))
    # Records as dicts straight from the reader (no ChangeRecord per row); the reader counts
    # them per table, which the window's control record reports.
    yield from reader.read_dicts(split)
    yield control_row(
        partition.batch_no,
        "window",
        {
            "emitted": dict(reader.emitted_by_table),
            "skipped": reader.skipped,
            "last_event_ts": dict(reader.last_ts_by_table),
        },
    )
