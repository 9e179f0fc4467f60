"""The lake's schema history: one row per followed change, written once."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks.schema_history import (
    SchemaChangeEntry,
    history_path,
    read_schema_changes,
    record_schema_change,
)

T = TableId("shop", "orders")
SHAPE = TableSchema(T, (ColumnInfo("id", "int", "int(11)", nullable=False),), ("id",), "id")


def test_each_change_is_recorded_once_with_where_and_how(tmp_path: Path) -> None:
    at = BinlogOffset("binlog.000003", 4711, gtid="0-1-42")
    added = SchemaChangeEntry(T, at, "ALTER TABLE orders ADD x INT", "in place", "added", SHAPE)
    assert record_schema_change(tmp_path, added)
    assert not record_schema_change(tmp_path, added)  # decided again after a crash
    unseen = SchemaChangeEntry(T, None, "", "re-read", "the binlog does not say how", SHAPE)
    parked = SchemaChangeEntry(T, at, "ALTER TABLE orders MODIFY id BIGINT", "parked", "why")
    assert record_schema_change(tmp_path, unseen) and record_schema_change(tmp_path, parked)
    rows = read_schema_changes(tmp_path)
    assert [(r["outcome"], r["_file_index"], r["_pos"], r["gtid"]) for r in rows] == [
        ("in place", 3, 4711, "0-1-42"),
        ("re-read", None, None, None),
        ("parked", 3, 4711, "0-1-42"),
    ]
    assert json.loads(str(rows[0]["columns"])) == ["id"] and rows[2]["columns"] is None
    assert history_path(tmp_path) == tmp_path / "_changelog" / "_schema_changes"
