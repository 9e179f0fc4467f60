"""The backfill, proven the way Flink CDC's ``SnapshotSplitReaderTest`` does: change rows between
the watermarks through hooks, then check the chunk's output is its state at the high watermark and
that the binlog reader delivers every later change of the chunk exactly once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import (
    BinlogSplit,
    FinishedSnapshotSplitInfo,
    SnapshotSplit,
    TableStreamFilter,
)
from cdc_console.errors import SchemaChangedError
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.source.binlog_reader import BinlogSplitReader
from cdc_console.source.snapshot_reader import SnapshotPhaseHooks, SnapshotSplitReader
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql

LOWER, UPPER = 10, 20
PHASES = ["pre_low_watermark", "post_low_watermark", "pre_high_watermark", "post_high_watermark"]
KEYS = [LOWER, UPPER - 1, UPPER]
OPS = ["insert", "update", "delete", "delete_reinsert"]
_tables = itertools.count()


def _statements(op: str, key: int) -> list[str]:
    if op == "insert":
        return [f"INSERT INTO {{t}} VALUES ({key}, 'inserted')"]
    if op == "update":
        return [f"UPDATE {{t}} SET v = 'updated' WHERE id = {key}"]
    if op == "delete":
        return [f"DELETE FROM {{t}} WHERE id = {key}"]
    return [f"DELETE FROM {{t}} WHERE id = {key}", f"INSERT INTO {{t}} VALUES ({key}, 'reborn')"]


def _range_state(db: SourceDb, table: str) -> dict[int, str]:
    return {
        int(r[0]): str(r[1])  # type: ignore[call-overload]
        for r in db.rows(f"SELECT id, v FROM {table} WHERE id >= {LOWER} AND id < {UPPER}")
    }


def _apply(state: dict[int, str], records: list[Any]) -> None:
    for record in sorted(records, key=lambda r: r.sort_key):
        row = record.row_dict()
        if record.is_upsert:
            state[int(row["id"])] = str(row["v"])
        else:
            state.pop(int(row["id"]), None)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("key", KEYS)
def test_chunk_output_is_its_state_at_the_high_watermark(
    source_db: SourceDb, phase: str, op: str, key: int
) -> None:
    table = f"t{next(_tables)}"
    source_db.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
        f"INSERT INTO {table} SELECT seq, 'initial' FROM seq_0_to_29"
        + (f" WHERE seq <> {key}" if op == "insert" else ""),
    )
    source = source_db.source_config()
    table_id = TableId(source_db.name, table)
    conn = connect(source)
    schema = load_table_schema(conn, table_id)
    conn.close()

    state_at_hw: dict[int, str] = {}
    changed: list[bool] = []

    def change() -> None:
        source_db.execute(*(s.format(t=table) for s in _statements(op, key)))
        changed.append(True)

    def remember_then(fn: Callable[[], None] | None) -> Callable[[], None]:
        def hook() -> None:
            state_at_hw.update(_range_state(source_db, table))
            if fn:
                fn()

        return hook

    hooks = SnapshotPhaseHooks(**{phase: change})  # type: ignore[arg-type]
    hooks.post_high_watermark = remember_then(hooks.post_high_watermark)
    split = SnapshotSplit(table_id, 1, "id", ChunkRange(LOWER, UPPER))
    result = SnapshotSplitReader(source, schema, 5401, hooks).read(split)

    assert changed == [True]
    chunk = {int(r["id"]): str(r["v"]) for r in result.rows}
    assert chunk == state_at_hw
    assert all(LOWER <= k < UPPER for k in chunk)
    if phase in ("post_low_watermark", "pre_high_watermark") and key < UPPER:
        assert result.high_watermark > result.low_watermark
        assert result.backfill_events > 0

    # The binlog reader, filtered by this split's high watermark, delivers the rest exactly once.
    conn = connect(source)
    head = current_position(conn)
    conn.close()
    info = FinishedSnapshotSplitInfo(split, result.high_watermark)
    others = [
        FinishedSnapshotSplitInfo(SnapshotSplit(table_id, 0, "id", ChunkRange(None, LOWER)), head),
        FinishedSnapshotSplitInfo(SnapshotSplit(table_id, 2, "id", ChunkRange(UPPER, None)), head),
    ]
    window = BinlogSplit(
        result.low_watermark,
        head,
        (TableStreamFilter(table_id, result.low_watermark, (others[0], info, others[1])),),
    )
    records = list(BinlogSplitReader(source, {table_id: schema}, 5400).read(window))
    in_chunk = [r for r in records if LOWER <= int(r.row_dict()["id"]) < UPPER]
    assert len(in_chunk) == len(records)  # other chunks' HW is the head: nothing of theirs
    if phase == "post_high_watermark" and key < UPPER:
        assert len(records) == {"insert": 1, "update": 2, "delete": 1, "delete_reinsert": 2}[op]
    else:
        assert records == []
    _apply(chunk, records)
    assert chunk == _range_state(source_db, table)


def _chunked_table(
    source_db: SourceDb, columns: str, values: str
) -> tuple[str, TableId, TableSchema]:
    """A fresh table ``(id INT PRIMARY KEY, <columns>)`` with ids 0..29, and its schema."""
    table = f"t{next(_tables)}"
    source_db.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, {columns}) ENGINE=InnoDB",
        f"INSERT INTO {table} SELECT seq, {values} FROM seq_0_to_29",
    )
    table_id = TableId(source_db.name, table)
    conn = connect(source_db.source_config())
    try:
        return table, table_id, load_table_schema(conn, table_id)
    finally:
        conn.close()


@pytest.mark.parametrize("park", [True, False])
def test_a_ddl_between_the_watermarks_ends_the_chunk_there_or_fails_it(
    source_db: SourceDb, park: bool
) -> None:
    """``schema_changes = "park"``: the chunk's high watermark becomes the DDL's position (with
    its GTID), where the table's catch-up will park it; the change before the DDL is in the
    chunk. ``"stop"``: the read fails with the DDL, as before."""
    table, table_id, schema = _chunked_table(source_db, "v VARCHAR(20)", "'initial'")
    source = source_db.source_config()
    marks: list[Any] = []

    def alter() -> None:
        source_db.execute(f"UPDATE {table} SET v = 'before ddl' WHERE id = {LOWER}")
        conn = connect(source)
        marks.append(current_position(conn))
        conn.close()
        source_db.execute(
            f"ALTER TABLE {table} ADD COLUMN extra INT",
            f"UPDATE {table} SET v = 'after ddl' WHERE id = {LOWER + 1}",
        )

    hooks = SnapshotPhaseHooks(pre_high_watermark=alter)
    split = SnapshotSplit(table_id, 1, "id", ChunkRange(LOWER, UPPER))
    reader = SnapshotSplitReader(source, schema, 5401, hooks, park_on_schema_change=park)
    if not park:
        with pytest.raises(SchemaChangedError, match=f"DDL on captured table {table_id}"):
            reader.read(split)
        return
    result = reader.read(split)
    ddl_at = marks[0]
    assert result.high_watermark == ddl_at, (result.high_watermark, ddl_at)
    assert result.high_watermark.gtid, "the shortened watermark keeps a GTID for failover"
    chunk = {int(r["id"]): str(r["v"]) for r in result.rows}
    assert chunk[LOWER] == "before ddl"
    assert set(chunk) == set(range(LOWER, UPPER))


@pytest.mark.parametrize("text_mode", [False, True])
def test_a_chunk_of_a_table_reshaped_mid_snapshot_reads_nothing_and_says_why(
    source_db: SourceDb, text_mode: bool
) -> None:
    """Columns changed after the snapshot began (here between the low watermark and the
    SELECT): a dropped one would fail the SELECT with "Unknown column", a widened one could
    hold values its old type cannot. With schema changes followed, the chunk reads nothing and
    reports why, so the table is read again in its new shape; with ``"stop"`` a dropped column
    fails the read as before."""
    table, table_id, schema = _chunked_table(source_db, "v VARCHAR(20), w INT", "'initial', seq")
    source = source_db.source_config()
    split = SnapshotSplit(table_id, 1, "id", ChunkRange(LOWER, UPPER))

    def reader(ddl: str, follow: bool) -> SnapshotSplitReader:
        hooks = SnapshotPhaseHooks(post_low_watermark=lambda: source_db.execute(ddl))
        return SnapshotSplitReader(
            source, schema, 5402, hooks, text_mode=text_mode, park_on_schema_change=follow
        )

    with pytest.raises(pymysql.err.MySQLError, match="Unknown column"):
        reader(f"ALTER TABLE {table} DROP COLUMN w", follow=False).read(split)
    source_db.execute(f"ALTER TABLE {table} ADD COLUMN w INT")
    dropped = reader(f"ALTER TABLE {table} DROP COLUMN w", follow=True).read(split)
    assert dropped.reshaped == "columns now id, v"
    assert dropped.row_count == 0 and dropped.high_watermark == dropped.low_watermark
    source_db.execute(f"ALTER TABLE {table} ADD COLUMN w INT")
    widened = reader(f"ALTER TABLE {table} MODIFY v VARCHAR(40)", follow=True).read(split)
    assert widened.reshaped == "redefined v varchar(40)" and widened.row_count == 0


@pytest.mark.parametrize("phase", ["post_low_watermark", "post_high_watermark"])
def test_partial_row_images_apply_to_the_chunk_and_come_after_it_as_patches(
    source_db: SourceDb, phase: str
) -> None:
    """MINIMAL and NOBLOB updates and deletes between the watermarks are applied to the chunk's
    rows exactly (the columns they do not log keep their values, no re-read); after the high
    watermark the binlog reader delivers them as patches and deletes by key."""
    table, table_id, schema = _chunked_table(
        source_db, "v VARCHAR(20), w TEXT", "'initial', CONCAT('text ', seq)"
    )
    source = source_db.source_config()
    statements = [
        "SET SESSION binlog_row_image = 'MINIMAL'",
        f"UPDATE {table} SET v = 'minimal' WHERE id = 12",
        f"DELETE FROM {table} WHERE id = 13",
        "SET SESSION binlog_row_image = 'NOBLOB'",
        f"UPDATE {table} SET v = 'noblob' WHERE id = 14",
        f"UPDATE {table} SET v = 'outside' WHERE id = 25",
    ]
    state_at_hw: list[tuple[Any, ...]] = []

    def remember() -> None:
        state_at_hw.extend(
            source_db.rows(f"SELECT id, v, w FROM {table} WHERE id >= {LOWER} AND id < {UPPER}")
        )

    def write() -> None:
        source_db.execute(*statements)

    def remember_then_write() -> None:
        remember()
        write()

    if phase == "post_low_watermark":
        hooks = SnapshotPhaseHooks(post_low_watermark=write, post_high_watermark=remember)
    else:
        hooks = SnapshotPhaseHooks(post_high_watermark=remember_then_write)
    split = SnapshotSplit(table_id, 1, "id", ChunkRange(LOWER, UPPER))
    result = SnapshotSplitReader(source, schema, 5401, hooks).read(split)
    assert result.reshaped == ""
    chunk = {int(r["id"]): r for r in result.rows}
    assert sorted((k, r["v"], r["w"]) for k, r in chunk.items()) == sorted(state_at_hw)
    if phase == "post_low_watermark":
        assert (chunk[12]["v"], chunk[12]["w"], chunk[14]["w"]) == ("minimal", "text 12", "text 14")
        assert 13 not in chunk
        return

    conn = connect(source)
    head = current_position(conn)
    conn.close()
    others = [
        FinishedSnapshotSplitInfo(SnapshotSplit(table_id, 0, "id", ChunkRange(None, LOWER)), head),
        FinishedSnapshotSplitInfo(split, result.high_watermark),
        FinishedSnapshotSplitInfo(SnapshotSplit(table_id, 2, "id", ChunkRange(UPPER, None)), head),
    ]
    window = BinlogSplit(
        result.low_watermark,
        head,
        (TableStreamFilter(table_id, result.low_watermark, tuple(others)),),
    )
    reader = BinlogSplitReader(source, {table_id: schema}, 5400, patches=True)
    records = [(r.op, r.row_dict()) for r in reader.read(window)]
    assert records == [
        ("+P", {"id": 12, "v": "minimal"}),
        ("-P", {"id": 13}),
        ("+P", {"id": 14, "v": "noblob"}),
    ]
    assert reader.schema_changes == {}
