"""Text-mode snapshot chunks converted column by column equal the canonical per-row path.

The first snapshot of a table skips canonical rows and change records: a text-mode reader hands
the driver's tuples to ``SnapshotArrowBuilder``. Whatever it builds must be exactly what the
per-record path would have written, ``rows_to_table(schema, canonical rows)``, for every type
family at its edges (the type-fidelity table), including the values that force the per-value
path (zero and invalid dates, year 0) and a chunk that needs a backfill.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pymysql
import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.invalid_dates import InvalidDates
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import SnapshotSplit
from cdc_console.mysql.connection import connect
from cdc_console.mysql.rawrows import RawResult, select_raw
from cdc_console.mysql.schema import load_table_schema
from cdc_console.mysql.snapshot_arrow import SnapshotArrowBuilder
from cdc_console.source.snapshot_reader import SnapshotPhaseHooks, SnapshotSplitReader
from cdc_console.values.arrow import rows_to_table
from tests.conftest import SourceDb
from tests.integration.test_type_fidelity import DDL, INSERTS, ZERO_DATES

pytestmark = pytest.mark.mysql

YEAR_ZERO = (
    "INSERT INTO fidelity (id, d, dt6, s_nn) VALUES (6, '0000-01-01', '0000-03-04 05:06:07', 'x')"
)


def _fill(source_db: SourceDb) -> TableSchema:
    source_db.execute(DDL)
    writer = source_db.connect()
    try:
        with writer.cursor() as cur:
            cur.execute("SET time_zone = '+05:30'")
            for statement in INSERTS:
                cur.execute(statement)
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(ZERO_DATES)
            cur.execute(YEAR_ZERO)
    finally:
        writer.close()
    conn = connect(source_db.source_config())
    try:
        return load_table_schema(conn, TableId(source_db.name, "fidelity"))
    finally:
        conn.close()


def _canonical(source_db: SourceDb, schema: TableSchema, split: SnapshotSplit) -> pa.Table:
    result = SnapshotSplitReader(source_db.source_config(), schema, 5498).read(split)
    assert result.raw is None
    return rows_to_table(schema, result.rows).sort_by("id")


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


@pytest.mark.parametrize(
    ("start", "end", "per_value"),
    [
        (None, 5, []),  # edges of every type, all text columns parsed by Arrow
        # zero, invalid and year-0 dates: those columns go value by value, the others do not
        (None, None, ["dt6", "ts3", "d"]),
        (5, None, ["dt6", "ts3", "d"]),
        (6, None, ["dt6", "d"]),
    ],
)
def test_text_mode_chunk_equals_the_canonical_rows(
    source_db: SourceDb, start: int | None, end: int | None, per_value: list[str]
) -> None:
    schema = _fill(source_db)
    split = SnapshotSplit(schema.table_id, 0, "id", ChunkRange(start, end))
    reader = SnapshotSplitReader(source_db.source_config(), schema, 5498, text_mode=True)
    result = reader.read(split)
    assert result.raw is not None and result.rows == [] and result.records == []
    builder = SnapshotArrowBuilder(schema)
    built = builder.table(result.raw).sort_by("id")
    assert builder.per_value_columns == per_value
    expected = _canonical(source_db, schema, split)
    assert built.schema == expected.schema
    assert _rows(built) == _rows(expected)
    assert built.num_rows == result.row_count > 0


def test_text_mode_fills_the_companions_of_text_ruled_dates_like_the_cursor(
    source_db: SourceDb,
) -> None:
    """Every date column ruled ``text`` (``core.invalid_dates``): both paths put NULL in the
    date column and the server's text in its companion, for the zero, invalid and year-0
    dates alike, and NULL in the companion of every valid date."""
    loaded = _fill(source_db)
    dated = (TypeFamily.DATE, TypeFamily.DATETIME, TypeFamily.TIMESTAMP)
    schema = replace(
        loaded,
        columns=tuple(
            replace(c, invalid_dates=InvalidDates.TEXT) if c.family in dated else c
            for c in loaded.columns
        ),
    )
    assert len(schema.companions) >= 3
    split = SnapshotSplit(schema.table_id, 0, "id", ChunkRange(None, None))
    reader = SnapshotSplitReader(source_db.source_config(), schema, 5498, text_mode=True)
    result = reader.read(split)
    assert result.raw is not None
    built = SnapshotArrowBuilder(schema).table(result.raw).sort_by("id")
    expected = _canonical(source_db, schema, split)
    assert built.schema == expected.schema
    assert _rows(built) == _rows(expected)
    year_zero = next(r for r in _rows(built) if r["id"] == 6)
    assert (year_zero["d"], year_zero["d__text"]) == (None, "0000-01-01")
    assert year_zero["dt6__text"] == "0000-03-04 05:06:07.000000"
    texts = [r[c.name] for r in _rows(built) for c in schema.companions]
    assert sum(t is not None for t in texts) >= 4
    valid = [r for r in _rows(built) if r["id"] < 5]
    assert all(r[c.name] is None for r in valid for c in schema.companions)


def test_text_mode_with_a_backfill_returns_canonical_rows(source_db: SourceDb) -> None:
    """A change between the watermarks: the reader falls back to canonical rows at HW."""
    schema = _fill(source_db)
    split = SnapshotSplit(schema.table_id, 0, "id", ChunkRange(None, None))
    hooks = SnapshotPhaseHooks(
        post_low_watermark=lambda: source_db.execute(
            "UPDATE fidelity SET vc = 'changed' WHERE id = 1", "DELETE FROM fidelity WHERE id = 4"
        )
    )
    reader = SnapshotSplitReader(
        source_db.source_config(), schema, 5498, hooks=hooks, text_mode=True
    )
    result = reader.read(split)
    assert result.raw is None and result.backfill_events > 0
    assert result.records == []  # the typed path needs no change records
    got = rows_to_table(schema, result.rows).sort_by("id")
    assert _rows(got) == _rows(_canonical(source_db, schema, split))
    assert [r["vc"] for r in _rows(got) if r["id"] == 1] == ["changed"]
    assert 4 not in got.column("id").to_pylist()


def test_empty_chunk_builds_an_empty_typed_table(source_db: SourceDb) -> None:
    schema = _fill(source_db)
    built = SnapshotArrowBuilder(schema).table(
        RawResult([pa.array([], type=pa.large_binary()) for _ in schema.columns], [])
    )
    assert built.num_rows == 0 and built.schema == rows_to_table(schema, []).schema


@pytest.mark.parametrize("walk", ["compiled", "python"])
def test_raw_columns_decode_like_the_cursor_at_every_length_prefix(
    source_db: SourceDb, walk: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values of 0..250 bytes, 2- and 3-byte length prefixes, NULLs; errors as the cursor's.
    Both walks over the row packets (``mysql.rawrows``) read the same."""
    monkeypatch.setenv("CDC_CONSOLE_PURE_PYTHON_ROWS", "1" if walk == "python" else "0")
    sizes = [0, 250, 251, 300, 65_535, 65_536, 70_000, 1_000_000]
    source_db.execute(
        "CREATE TABLE blobs (id INT PRIMARY KEY, t LONGTEXT, b LONGBLOB, n INT)",
        *(
            f"INSERT INTO blobs VALUES ({i}, REPEAT('é', {size // 2}), REPEAT(x'00ff', {size // 2}), "
            f"{'NULL' if i % 2 else i})"
            for i, size in enumerate(sizes)
        ),
    )
    conn = connect(source_db.source_config(), database=source_db.name)
    try:
        raw = select_raw(conn, "SELECT * FROM blobs WHERE id >= %s ORDER BY id", (0,))
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM blobs WHERE id >= %s ORDER BY id", (0,))
            expected = list(cur.fetchall())
        assert raw.row_count == len(sizes) and raw.driver_rows() == expected
        assert raw.values(3)[1] is None and raw.values(2)[-1] == b"\x00\xff" * 500_000
        with pytest.raises(pymysql.err.ProgrammingError, match="doesn't exist"):
            select_raw(conn, "SELECT * FROM no_such_table")
        assert select_raw(conn, "SELECT COUNT(*) FROM blobs").driver_rows() == [(len(sizes),)]
    finally:
        conn.close()
