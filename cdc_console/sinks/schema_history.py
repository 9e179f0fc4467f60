"""The lake's record of every schema change the pipeline followed.

The changelog tables hold row changes only, so a consumer replaying them by ``_op`` never meets
a row it does not understand (Debezium keeps schema changes in a topic of their own for the same
reason). What happened to a table's shape is kept beside them, in one append-only Delta table at
``<sink.path>/_changelog/_schema_changes``: a row per DDL on a captured table, with where it is
in the binlog (the same ``_file_index``/``_pos`` the changelog rows carry, so a reader can line
the two up), the statement, how the pipeline followed it (``in place``, ``re-read``,
``parked``), why, and the table's columns from then on.

A row is written before the state database records the decision; a decision made again after a
crash finds its row and writes none, so each change is recorded once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.schema_change import SchemaChange
from cdc_console.sinks.lake_layout import CHANGELOG_DIR

#: where the record lives, beside the changelog tables of each database
HISTORY_DIR = "_schema_changes"

SCHEMA = pa.schema(
    [
        pa.field("database", pa.string()),
        pa.field("table", pa.string()),
        pa.field("_file_index", pa.int64()),
        pa.field("_pos", pa.int64()),
        pa.field("file", pa.string()),
        pa.field("gtid", pa.string()),
        pa.field("statement", pa.string()),
        pa.field("outcome", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("columns", pa.string()),
        pa.field("recorded_ms", pa.int64()),
    ]
)


@dataclass(frozen=True)
class SchemaChangeEntry:
    """One followed schema change. ``position`` is None for a change made while the job was
    down (the binlog it reads does not show it); ``schema`` is the shape it goes on with (None
    when parked)."""

    table_id: TableId
    position: BinlogOffset | None
    statement: str
    outcome: str
    detail: str
    schema: TableSchema | None = None


def record_followed(
    lake: Path,
    table_id: TableId,
    change: SchemaChange | None,
    outcome: str,
    detail: str,
    schema: TableSchema | None,
) -> None:
    """Record how a change of shape was followed (``source.schema_follow.SchemaFollowed``):
    ``change`` None for a table changed while the job was down."""
    position = change.position if change is not None else None
    statement = change.what if change is not None else ""
    entry = SchemaChangeEntry(table_id, position, statement, outcome, detail, schema)
    record_schema_change(lake, entry)


def history_path(lake: Path) -> Path:
    return lake / CHANGELOG_DIR / HISTORY_DIR


def record_schema_change(lake: Path, entry: SchemaChangeEntry) -> bool:
    """Append ``entry`` unless the same change of the same table, followed the same way, is
    there already; True when it wrote a row."""
    path = history_path(lake)
    position = entry.position
    file_index = binlog_file_index(position.file) if position is not None else None
    pos = position.pos if position is not None else None
    if DeltaTable.is_deltatable(str(path)):
        existing = DeltaTable(str(path)).to_pyarrow_table(
            columns=["database", "table", "_file_index", "_pos", "outcome"]
        )
        same = pc.and_kleene(
            pc.and_kleene(
                pc.equal(existing["database"], entry.table_id.database),
                pc.equal(existing["table"], entry.table_id.table),
            ),
            pc.equal(existing["outcome"], entry.outcome),
        )
        for row in existing.filter(same).to_pylist():
            if (row["_file_index"], row["_pos"]) == (file_index, pos):
                return False
    columns = (
        json.dumps([c.name for c in entry.schema.columns]) if entry.schema is not None else None
    )
    row = {
        "database": entry.table_id.database,
        "table": entry.table_id.table,
        "_file_index": file_index,
        "_pos": pos,
        "file": position.file if position is not None else None,
        "gtid": position.gtid if position is not None else None,
        "statement": entry.statement,
        "outcome": entry.outcome,
        "detail": entry.detail,
        "columns": columns,
        "recorded_ms": int(time.time() * 1000),
    }
    path.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(path), pa.Table.from_pylist([row], schema=SCHEMA), mode="append")
    return True


def read_schema_changes(lake: Path) -> list[dict[str, object]]:
    """Every recorded change, oldest first (empty when none was recorded)."""
    path = history_path(lake)
    if not DeltaTable.is_deltatable(str(path)):
        return []
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: int(str(r["recorded_ms"])))
