"""No chunk grows without bound: the open last chunk of a table that fills up during its snapshot
is split again just before it is read, so no chunk holds more than a small multiple of
``chunk_size``, and the new chunks cover exactly the old one's range."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import SnapshotSplit
from cdc_console.mysql.connection import connect
from cdc_console.mysql.schema import load_table_schema
from cdc_console.source.assigner import SnapshotSplitAssigner
from cdc_console.source.splitter import TAIL_GROWTH, ChunkSplitter
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql

CHUNK = 20


def rows_in(db: SourceDb, table: str, key: str, chunk: ChunkRange) -> int:
    where = []
    if chunk.start is not None:
        where.append(f"{key} >= {chunk.start!r}")
    if chunk.end is not None:
        where.append(f"{key} < {chunk.end!r}")
    sql = f"SELECT COUNT(*) FROM {table}" + (f" WHERE {' AND '.join(where)}" if where else "")
    return int(db.rows(sql)[0][0])  # type: ignore[call-overload]


def covers_everything(splits: list[SnapshotSplit]) -> bool:
    ordered = sorted(splits, key=lambda s: (s.range.start is not None, s.range.start or 0))
    edges = [(s.range.start, s.range.end) for s in ordered]
    return (
        edges[0][0] is None
        and edges[-1][1] is None
        and all(a[1] == b[0] for a, b in itertools.pairwise(edges))
    )


@pytest.mark.parametrize("start_rows", [100, 0], ids=["grown", "empty-at-split"])
def test_the_open_last_chunk_is_split_again_as_its_table_grows(
    source_db: SourceDb, tmp_path: Path, start_rows: int
) -> None:
    source_db.execute("CREATE TABLE grows (id INT PRIMARY KEY, note VARCHAR(10))")
    if start_rows:
        source_db.execute(f"INSERT INTO grows SELECT seq, 'a' FROM seq_1_to_{start_rows}")
    source = source_db.source_config()
    table_id = TableId(source_db.name, "grows")
    conn = connect(source)
    store = StateStore(tmp_path / "state.sqlite")
    try:
        schema: TableSchema = load_table_schema(conn, table_id)
        store.ensure_table(table_id, "id", Lifecycle.SNAPSHOTTING)
        store.set_schema(table_id, schema)
        splitter = ChunkSplitter(conn, CHUNK)
        assigner = SnapshotSplitAssigner(store, splitter.split, splitter.split_tail)
        if start_rows:
            first = assigner.next_splits([schema], 2)
            with store.transaction() as tx:
                store.assign_splits(first, 1, tx)
        else:
            assigner.ensure_split(schema)  # one chunk: the table is empty
        initial = len(store.splits(table_id))
        # the table fills up while its first chunks are read
        source_db.execute(
            f"INSERT INTO grows SELECT seq, 'b' FROM seq_{start_rows + 1}_to_{start_rows + 400}"
        )
        rest = assigner.next_splits([schema], 1000)
        splits = [s.split for s in store.splits(table_id)]
    finally:
        store.close()
        conn.close()
    assert len(splits) > initial + 5
    assert covers_everything(splits)
    for split in rest:
        assert rows_in(source_db, "grows", "id", split.range) <= TAIL_GROWTH * CHUNK, split
    assert [s.range.end for s in rest][-1] is None


def test_a_tail_within_its_bound_is_read_as_it_is(source_db: SourceDb, tmp_path: Path) -> None:
    source_db.execute(
        "CREATE TABLE steady (id INT PRIMARY KEY)", "INSERT INTO steady SELECT seq FROM seq_1_to_95"
    )
    conn = connect(source_db.source_config())
    try:
        schema = load_table_schema(conn, TableId(source_db.name, "steady"))
        splitter = ChunkSplitter(conn, CHUNK)
        tail = splitter.split(schema)[-1].range
        source_db.execute("INSERT INTO steady SELECT seq FROM seq_96_to_110")
        assert splitter.split_tail(schema, tail) == []
        assert splitter.split_tail(schema, ChunkRange(1, 20)) == []  # a closed chunk never
    finally:
        conn.close()
