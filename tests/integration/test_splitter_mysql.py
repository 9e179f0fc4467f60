"""``ChunkSplitter`` against a real server, asserting on ``str(split)`` as Flink CDC's tests do.

Every case also proves, with the server's own ``WHERE k >= start AND k < end``, that the chunks
are contiguous and that each row of the table falls in exactly one of them. The splitter connects
as the least-privileged ``cdc`` user (SELECT and replication grants only), so a write or a table
lock would fail the test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pymysql
import pytest

from cdc_console.core.keys import KeyOrder
from cdc_console.core.schema import TableId, TableSchema, quote_ident
from cdc_console.core.splits import SnapshotSplit
from cdc_console.errors import ConfigError
from cdc_console.mysql.connection import connect
from cdc_console.mysql.schema import load_table_schema
from cdc_console.source.splitter import ChunkSplitter
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql

U64_MAX = 2**64 - 1
SPLITTER_LOG = "cdc_console.source.splitter"


@pytest.fixture
def cdc_conn(source_db: SourceDb) -> Iterator[pymysql.connections.Connection]:
    conn = connect(source_db.source_config())
    try:
        yield conn
    finally:
        conn.close()


def split_table(
    conn: Any, source_db: SourceDb, table: str, chunk_size: int, **bounds: float
) -> tuple[TableSchema, list[SnapshotSplit]]:
    schema = load_table_schema(conn, TableId(source_db.name, table))
    return schema, ChunkSplitter(conn, chunk_size, **bounds).split(schema)


def expected(db: str, table: str, boundaries: list[Any]) -> list[str]:
    edges = ["(-inf", *(f"[{b}" for b in boundaries)]
    ends = [*(f"{b})" for b in boundaries), "+inf)"]
    return [f"{db}.{table} {left}, {right}" for left, right in zip(edges, ends, strict=True)]


def where(split: SnapshotSplit) -> tuple[str, list[Any]]:
    """The reader's predicate for one chunk: ``k >= start AND k < end``, unbounded ends omitted."""
    key = quote_ident(split.chunk_key)
    conds, args = [], []
    if split.range.start is not None:
        conds.append(f"{key} >= %s")
        args.append(split.range.start)
    if split.range.end is not None:
        conds.append(f"{key} < %s")
        args.append(split.range.end)
    return " AND ".join(conds) or "TRUE", args


@dataclass
class Server:
    """Root's view of the test database, for checking the splits (not used by the splitter)."""

    conn: pymysql.connections.Connection
    db: str

    def query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())


@pytest.fixture
def server(source_db: SourceDb) -> Iterator[Server]:
    conn = source_db.connect()
    try:
        yield Server(conn, source_db.name)
    finally:
        conn.close()


def check_chunks(server: Server, schema: TableSchema, splits: list[SnapshotSplit]) -> list[int]:
    """Assert contiguity and exact coverage on the server; return the per-chunk row counts."""
    assert [s.split_no for s in splits] == list(range(len(splits)))
    assert all(s.table_id == schema.table_id for s in splits)
    assert all(s.chunk_key == schema.chunk_key for s in splits)
    assert splits[0].range.start is None
    assert splits[-1].range.end is None
    for left, right in pairwise(splits):
        assert left.range.end is not None
        assert left.range.end == right.range.start

    table = schema.table_id.quoted()
    key_cols = ", ".join(quote_ident(c) for c in schema.key_columns)
    counts: list[int] = []
    seen: list[tuple[Any, ...]] = []
    for split in splits:
        cond, args = where(split)
        ((count,),) = server.query(f"SELECT COUNT(*) FROM {table} WHERE {cond}", args)
        rows = server.query(f"SELECT {key_cols} FROM {table} WHERE {cond}", args)
        assert len(rows) == count
        counts.append(int(count))
        seen.extend(rows)
    ((total,),) = server.query(f"SELECT COUNT(*) FROM {table}")
    assert sum(counts) == total
    everything = server.query(f"SELECT {key_cols} FROM {table}")
    assert sorted(seen, key=repr) == sorted(everything, key=repr), "a row in 0 or 2 chunks"
    if len(splits) > 1:
        assert all(counts), f"empty chunk in {counts}"
    return counts


def server_order(server: Server, table: str, key: str) -> list[Any]:
    q = quote_ident(key)
    return [r[0] for r in server.query(f"SELECT {q} FROM {quote_ident(table)} ORDER BY {q}")]


def flink_uneven_boundaries(keys_in_server_order: list[Any], chunk_size: int) -> list[Any]:
    """Reference model for unique keys: each boundary is the ``chunk_size``-th key from the last
    one, until that reaches the maximum."""
    bounds: list[Any] = []
    at = 0
    last = len(keys_in_server_order) - 1
    while at + chunk_size - 1 < last:
        at += chunk_size - 1
        bounds.append(keys_in_server_order[at])
    return bounds


def messages(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == SPLITTER_LOG)


# --------------------------------------------------------------------------------------------


def test_even_split(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE orders (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO orders SELECT seq, 'x' FROM seq_0_to_999",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "orders", 100)
    assert [str(s) for s in splits] == expected(
        source_db.name, "orders", [100, 200, 300, 400, 500, 600, 700, 800, 900]
    )
    assert check_chunks(server, schema, splits) == [100] * 10
    assert f"split {source_db.name}.orders: evenly by id, factor 1, step 100, 10 chunks" in (
        messages(caplog)
    )


def test_even_split_with_gaps_steps_by_factor(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    """Keys 0, 3, 6, ... 2997: factor 2.998, so a step of 299 key values holds ~100 rows."""
    source_db.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY)", "INSERT INTO t SELECT seq * 3 FROM seq_0_to_999"
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [299 * i for i in range(1, 11)]
    )
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 100


def test_factor_exactly_at_the_upper_bound_is_even(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq * 10 FROM seq_1_to_100"
    )
    # keys 10..1000, 100 rows: factor (1000 - 10 + 1) / 100 = 9.91
    schema, splits = split_table(cdc_conn, source_db, "t", 10, distribution_factor_upper=9.91)
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [109 + 99 * i for i in range(10)]
    )
    check_chunks(server, schema, splits)
    schema, splits = split_table(cdc_conn, source_db, "t", 10, distribution_factor_upper=9.9)
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [100 + 90 * i for i in range(10)]
    )
    check_chunks(server, schema, splits)


def test_uneven_split_when_factor_above_upper_bound(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq * 2 FROM seq_1_to_1000"
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 100, distribution_factor_upper=1.5)
    # each boundary is the 100th key from the previous one: chunks of 99 rows
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [2 * (1 + 99 * j) for j in range(1, 11)]
    )
    counts = check_chunks(server, schema, splits)
    assert counts == [99] * 10 + [10]
    assert f"split {source_db.name}.t: unevenly by id (factor 1.999 outside [0.05, 1.5]" in (
        messages(caplog)
    )


def test_sparse_keys_split_unevenly(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY)",
        "INSERT INTO t SELECT seq FROM seq_1_to_1000",
        "INSERT INTO t VALUES (1000000000000)",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [1 + 99 * j for j in range(1, 11)]
    )
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 100
    assert counts[-1] == 11
    assert "outside [0.05, 1000.0]" in messages(caplog)


def test_negative_keys(source_db: SourceDb, cdc_conn: Any, server: Server) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "INSERT INTO t SELECT CAST(seq AS SIGNED) - 500 FROM seq_0_to_999",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [-400, -300, -200, -100, 0, 100, 200, 300, 400]
    )
    assert check_chunks(server, schema, splits) == [100] * 10


def test_negative_sparse_keys(source_db: SourceDb, cdc_conn: Any, server: Server) -> None:
    source_db.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY)",
        "INSERT INTO t SELECT -CAST(seq AS SIGNED) FROM seq_1_to_500",
        "INSERT INTO t VALUES (-1000000000000)",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    assert [str(s) for s in splits] == expected(source_db.name, "t", [-402, -303, -204, -105, -6])
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 100


def test_bigint_unsigned_near_the_top(source_db: SourceDb, cdc_conn: Any, server: Server) -> None:
    source_db.execute(
        "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY)",
        f"INSERT INTO t SELECT {U64_MAX} - seq FROM seq_0_to_999",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    low = U64_MAX - 999
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", [low + 100 * i for i in range(1, 10)]
    )
    assert str(splits[-1]) == f"{source_db.name}.t [18446744073709551516, +inf)"
    assert check_chunks(server, schema, splits) == [100] * 10


def test_bigint_unsigned_sparse_walks_the_server(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    """Keys 0..299 and 2^64-300..2^64-1: uneven, boundaries past 2^63 sent as parameters."""
    source_db.execute(
        "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY)",
        "INSERT INTO t SELECT seq FROM seq_0_to_299",
        f"INSERT INTO t SELECT {U64_MAX} - seq FROM seq_0_to_299",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    keys = server_order(server, "t", "id")
    assert [str(s) for s in splits] == expected(
        source_db.name, "t", flink_uneven_boundaries(keys, 100)
    )
    assert splits[-2].range.start is not None and splits[-2].range.start > 2**63
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 100


MIXED_CASE = (
    # 'AA', 'bb', 'aC', 'Bd', ...: 676 two-letter keys, unique case-insensitively, each letter's
    # case alternating with a different period so Python's code-point order is not the collation's
    "CONCAT("
    " IF(seq % 2 = 0, CHAR(97 + seq DIV 26), CHAR(65 + seq DIV 26)),"
    " IF(seq % 3 = 0, CHAR(65 + seq % 26), CHAR(97 + seq % 26)))"
)


def test_string_key_follows_the_server_collation(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE t (code VARCHAR(8) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT)",
        f"INSERT INTO t SELECT {MIXED_CASE}, seq FROM seq_0_to_675",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 50)
    keys = server_order(server, "t", "code")
    assert keys != sorted(keys), "the data must tell the collation from code-point order"
    bounds = flink_uneven_boundaries(keys, 50)
    assert [str(s) for s in splits] == expected(source_db.name, "t", bounds)
    assert [s.range.start for s in splits[1:]] != sorted(s.range.start for s in splits[1:])
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 50
    assert len(splits) == 14
    assert "unevenly by code (varchar key" in messages(caplog)


def test_key_order_places_rows_where_the_server_does(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    source_db.execute(
        "CREATE TABLE t (code VARCHAR(8) COLLATE utf8mb4_general_ci PRIMARY KEY)",
        f"INSERT INTO t SELECT {MIXED_CASE} FROM seq_0_to_675",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 40)
    order = KeyOrder.for_column(schema.column("code"))
    server_chunk: dict[Any, int] = {}
    for split in splits:
        cond, args = where(split)
        for (code,) in server.query(f"SELECT code FROM t WHERE {cond}", args):
            server_chunk[code] = split.split_no
    assert len(server_chunk) == 676
    for code, number in server_chunk.items():
        owners = [s.split_no for s in splits if s.range.contains(code, order)]
        assert owners == [number], code


def test_composite_key_chunks_on_first_column_with_duplicates(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    """Six groups of 100 rows, each half 'x' and half 'X': the walk must treat them as equal."""
    source_db.execute(
        "CREATE TABLE t (grp VARCHAR(4) COLLATE utf8mb4_general_ci, n INT, PRIMARY KEY (grp, n))",
        "INSERT INTO t SELECT IF(seq % 2, CHAR(65 + seq DIV 100), CHAR(97 + seq DIV 100)), seq "
        "FROM seq_0_to_599",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 30)
    assert schema.chunk_key == "grp"
    assert [str(s).lower() for s in splits] == [
        line.lower() for line in expected(source_db.name, "t", ["b", "c", "d", "e", "f"])
    ]
    assert check_chunks(server, schema, splits) == [100] * 6


def test_composite_key_with_a_repeated_maximum_keeps_it_apart(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    """The chunk of a repeated value is already full: the maximum's rows get their own chunk."""
    source_db.execute(
        "CREATE TABLE t (grp CHAR(1), n INT, PRIMARY KEY (grp, n))",
        "INSERT INTO t SELECT 'a', seq FROM seq_1_to_10",
        "INSERT INTO t SELECT 'b', seq FROM seq_1_to_50",
        "INSERT INTO t SELECT 'c', seq FROM seq_1_to_50",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 20)
    assert [str(s) for s in splits] == expected(source_db.name, "t", ["b", "c"])
    assert check_chunks(server, schema, splits) == [10, 50, 50]


def test_composite_int_key_below_lower_factor_walks_groups(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """20 groups of 50 rows: factor 0.02 < 0.05, so uneven; 120 rows reach two groups further."""
    source_db.execute(
        "CREATE TABLE t (g INT, n INT, PRIMARY KEY (g, n))",
        "INSERT INTO t SELECT seq DIV 50, seq FROM seq_0_to_999",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 120)
    assert [str(s) for s in splits] == expected(source_db.name, "t", list(range(2, 19, 2)))
    assert check_chunks(server, schema, splits) == [100] * 9 + [100]
    assert "factor 0.02 outside" in messages(caplog)


def test_one_distinct_first_column_value_is_one_chunk(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    source_db.execute(
        "CREATE TABLE t (grp VARCHAR(4), n INT, PRIMARY KEY (grp, n))",
        "INSERT INTO t SELECT IF(seq % 2, 'a', 'A'), seq FROM seq_0_to_99",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 10)
    assert [str(s) for s in splits] == [f"{source_db.name}.t (-inf, +inf)"]
    check_chunks(server, schema, splits)


@pytest.mark.parametrize(
    ("column_type", "value"),
    [
        ("DECIMAL(20, 4)", "seq * 1.25 - 300"),
        ("DATETIME(6)", "TIMESTAMP'2024-02-28 23:00:00' + INTERVAL seq * 7 MINUTE"),
        ("DATE", "DATE'1999-12-01' + INTERVAL seq DAY"),
        ("VARBINARY(16)", "CAST(CONCAT(CHAR(255 - seq % 7), seq) AS BINARY)"),
        ("VARCHAR(20) COLLATE utf8mb4_bin", f"{MIXED_CASE}"),
        ("INT UNSIGNED", "seq * seq * seq"),
    ],
)
def test_other_key_types_split_unevenly_in_server_order(
    source_db: SourceDb, cdc_conn: Any, server: Server, column_type: str, value: str
) -> None:
    source_db.execute(
        f"CREATE TABLE t (k {column_type} PRIMARY KEY)",
        f"INSERT INTO t SELECT {value} FROM seq_0_to_599",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 64)
    keys = server_order(server, "t", "k")
    assert [s.range.start for s in splits[1:]] == flink_uneven_boundaries(keys, 64)
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 64
    assert len(splits) == 10


def test_empty_table(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 10)
    assert [str(s) for s in splits] == [f"{source_db.name}.t (-inf, +inf)"]
    assert splits[0].split_id == f"{source_db.name}.t:0"
    check_chunks(server, schema, splits)
    assert "empty table" in messages(caplog)


def test_one_row_table(source_db: SourceDb, cdc_conn: Any, server: Server) -> None:
    source_db.execute("CREATE TABLE t (id VARCHAR(5) PRIMARY KEY)", "INSERT INTO t VALUES ('x')")
    schema, splits = split_table(cdc_conn, source_db, "t", 10)
    assert [str(s) for s in splits] == [f"{source_db.name}.t (-inf, +inf)"]
    check_chunks(server, schema, splits)


def test_table_no_larger_than_a_chunk_is_one_chunk(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq FROM seq_1_to_100"
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 100)
    assert [str(s) for s in splits] == [f"{source_db.name}.t (-inf, +inf)"]
    assert "100 rows (counted) fit in one chunk of 100" in messages(caplog)
    schema, splits = split_table(cdc_conn, source_db, "t", 99)
    assert [str(s) for s in splits] == expected(source_db.name, "t", [100])
    check_chunks(server, schema, splits)


def test_configured_chunk_key_and_awkward_identifiers(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    source_db.execute(
        "CREATE TABLE `we``ird t` (id INT PRIMARY KEY, `k``ey` VARCHAR(8) NOT NULL UNIQUE)",
        "INSERT INTO `we``ird t` SELECT seq, CONCAT('k', 1000 - seq) FROM seq_1_to_300",
    )
    schema = load_table_schema(cdc_conn, TableId(source_db.name, "we`ird t"), chunk_key="k`ey")
    splits = ChunkSplitter(cdc_conn, 50).split(schema)
    assert all(s.chunk_key == "k`ey" for s in splits)
    keys = server_order(server, "we`ird t", "k`ey")
    assert [s.range.start for s in splits[1:]] == flink_uneven_boundaries(keys, 50)
    counts = check_chunks(server, schema, splits)
    assert max(counts) <= 50


def test_enum_key_is_one_chunk(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """ENUM sorts by member number but compares with text: ranges on it cannot be trusted."""
    source_db.execute(
        "CREATE TABLE t (k ENUM('zeta', 'alpha', 'mid', 'beta') PRIMARY KEY)",
        "INSERT INTO t VALUES ('zeta'), ('alpha'), ('mid'), ('beta')",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema, splits = split_table(cdc_conn, source_db, "t", 1)
    assert [str(s) for s in splits] == [f"{source_db.name}.t (-inf, +inf)"]
    check_chunks(server, schema, splits)
    assert "k is ENUM" in messages(caplog)


@pytest.mark.timeout(30)
def test_float_key_that_does_not_round_trip_still_terminates(
    source_db: SourceDb, cdc_conn: Any, server: Server
) -> None:
    """FLOAT arrives as 6 significant digits, below the stored value: 1000.142822... as 1000.14.

    With one row per chunk the server keeps answering that the walk advanced to a value the
    client can only repeat; the splitter must stop instead of looping.
    """
    source_db.execute(
        "CREATE TABLE t (k FLOAT PRIMARY KEY)",
        "INSERT INTO t SELECT 1000 + seq / 7 FROM seq_1_to_50",
    )
    schema, splits = split_table(cdc_conn, source_db, "t", 1)
    check_chunks(server, schema, splits)


def test_configured_chunk_key_must_exist(source_db: SourceDb, cdc_conn: Any) -> None:
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    schema = load_table_schema(cdc_conn, TableId(source_db.name, "t"), chunk_key="nope")
    with pytest.raises(ConfigError, match="nope"):
        ChunkSplitter(cdc_conn, 10).split(schema)


def test_nullable_chunk_key_is_split_with_a_warning(
    source_db: SourceDb, cdc_conn: Any, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    source_db.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, ref INT NULL, KEY (ref))",
        "INSERT INTO t SELECT seq, seq FROM seq_1_to_100",
    )
    caplog.set_level(logging.INFO, logger=SPLITTER_LOG)
    schema = load_table_schema(cdc_conn, TableId(source_db.name, "t"), chunk_key="ref")
    splits = ChunkSplitter(cdc_conn, 30).split(schema)
    assert [str(s) for s in splits] == expected(source_db.name, "t", [31, 61, 91])
    assert "nullable" in messages(caplog)
