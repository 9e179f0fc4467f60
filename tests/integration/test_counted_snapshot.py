"""A chunk of a table without a unique key is exact at its high watermark.

The keyed backfill would count an insert the SELECT already saw twice, so a counted chunk is read
inside a consistent snapshot at the binlog position the server names (MariaDB), or, where the
server cannot name it (MySQL, a MyISAM table), again until no change in its range falls between
the watermarks. Either way: the chunk's rows plus the changes in its range from its high
watermark on equal the range as it is now, copy for copy, whichever phase a change lands in.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.schema import TableId
from cdc_console.core.splits import SnapshotSplit
from cdc_console.mysql.binlog import read_window
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.source import snapshot_reader
from cdc_console.source.snapshot_reader import (
    SnapshotContendedError,
    SnapshotPhaseHooks,
    SnapshotSplitReader,
)
from cdc_console.values.canonical import RowNormalizer
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql

LOWER, UPPER = 10, 20
PHASES = ["pre_low_watermark", "post_low_watermark", "pre_high_watermark", "post_high_watermark"]
_tables = itertools.count()


def _range(db: SourceDb, table: str) -> Counter[tuple[Any, ...]]:
    rows = db.rows(f"SELECT k, v FROM {table} WHERE k >= {LOWER} AND k < {UPPER}")
    return Counter((int(k), str(v)) for k, v in rows)  # type: ignore[call-overload]


@pytest.mark.parametrize("exact", [True, False], ids=["snapshot-position", "quiet-windows"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_counted_chunk_plus_later_changes_is_its_range_now(
    source_db: SourceDb, monkeypatch: pytest.MonkeyPatch, exact: bool, phase: str
) -> None:
    if not exact:
        monkeypatch.setattr(snapshot_reader, "_NO_EXACT", True)
    table = f"c{next(_tables)}"
    source_db.execute(
        f"CREATE TABLE {table} (k INT NOT NULL, v VARCHAR(10) NOT NULL, KEY (k))",
        f"INSERT INTO {table} SELECT seq DIV 2, 'x' FROM seq_0_to_59",
    )
    source = source_db.source_config()
    table_id = TableId(source_db.name, table)
    conn = connect(source)
    try:
        schema = load_table_schema(conn, table_id)
    finally:
        conn.close()
    assert schema.counted and schema.key_columns == ("k", "v")
    reads: list[str] = []

    def change() -> None:
        if len(reads) == 1:  # the first read only
            source_db.execute(
                f"INSERT INTO {table} VALUES ({LOWER}, 'x'), ({LOWER}, 'x')",
                f"DELETE FROM {table} WHERE k = {LOWER + 1} LIMIT 1",
                f"UPDATE {table} SET v = 'y' WHERE k = {UPPER - 1} LIMIT 1",
            )

    hooks = SnapshotPhaseHooks(**{phase: change})  # type: ignore[arg-type]
    first = hooks.pre_low_watermark

    def counting() -> None:
        reads.append("read")
        if first is not None:
            first()

    hooks.pre_low_watermark = counting
    split = SnapshotSplit(table_id, 1, "k", ChunkRange(LOWER, UPPER))
    result = SnapshotSplitReader(source, schema, 5431, hooks).read(split)
    assert result.backfill_events == 0
    if exact:
        assert result.low_watermark == result.high_watermark and len(reads) == 1
    elif phase in ("post_low_watermark", "pre_high_watermark"):
        assert len(reads) == 2  # the change fell between the watermarks: read again

    got = Counter((int(r["k"]), str(r["v"])) for r in result.rows)  # type: ignore[arg-type]
    normalizer = RowNormalizer(schema)
    conn = connect(source)
    try:
        head = current_position(conn)
    finally:
        conn.close()
    for change in read_window(
        source, 5432, result.high_watermark, head, [table_id], {table_id: schema.column_names}
    ):
        for image, sign in ((change.before, -1), (change.after, 1)):
            if image is not None and split.range.contains(image["k"]):
                row = normalizer.binlog_row(image, ())
                got[(int(row["k"]), str(row["v"]))] += sign  # type: ignore[arg-type]
    assert +got == _range(source_db, table)


def test_a_chunk_that_changes_during_every_read_fails_loudly(
    source_db: SourceDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_reader, "_NO_EXACT", True)
    monkeypatch.setattr(snapshot_reader, "_QUIET_ATTEMPTS", 2)
    source_db.execute(
        "CREATE TABLE busy (k INT NOT NULL, v INT)",
        "INSERT INTO busy SELECT seq, 0 FROM seq_0_to_29",
    )
    source = source_db.source_config()
    table_id = TableId(source_db.name, "busy")
    conn = connect(source)
    try:
        schema = load_table_schema(conn, table_id)
    finally:
        conn.close()
    hooks = SnapshotPhaseHooks(
        post_low_watermark=lambda: source_db.execute(f"INSERT INTO busy VALUES ({LOWER}, 1)")
    )
    split = SnapshotSplit(table_id, 1, "k", ChunkRange(LOWER, UPPER))
    with pytest.raises(SnapshotContendedError, match="changed during each of 2 reads") as caught:
        SnapshotSplitReader(source, schema, 5433, hooks).read(split)
    assert "re-dump the table at a quieter time" in str(caught.value)
