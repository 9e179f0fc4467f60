"""Chunk keys in every collation: where a key falls among the chunks is what the server says.

The collations come from the server's own catalogue (``SHOW COLLATION``), a seeded sample of
them in CI (``CDC_KEY_ORDER_COLLATIONS=all`` runs every one). For each, a table keyed by a
VARCHAR in that collation gets generated keys (letters of several scripts, case and accents,
punctuation, digits, trailing spaces), is split into chunks by the real ``ChunkSplitter``, and
every key's chunk by ``key_order`` (Python's order where it is exact, the server's weights
where not) must be the chunk whose ``WHERE k >= lo AND k < hi`` returns it on the server; and
the order of the keys must be the server's ``ORDER BY``. A collation whose weights disagree
with its own comparisons (``weights_agree``) must be read as one chunk.
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable
from pathlib import Path

import pymysql
import pytest

from cdc_console.core.keys import KeyOrder
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.mysql.binlog import read_window_events
from cdc_console.mysql.checks import run_checks
from cdc_console.mysql.connection import connect
from cdc_console.mysql.key_weights import key_order, weights_agree
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.source.splitter import ChunkSplitter
from cdc_console.values.canonical import raw_chunk_key
from tests.conftest import SourceDb
from tests.integration.harness import load, write_config

pytestmark = pytest.mark.mysql

LETTERS = "aAbBzZoOeE éÉèåÅäÄöÖüÜßøØæÆñÑçÇœŒİıÿŸ-_.,'0129中文日本語ＡａЖжΩω"
SAMPLE = 14


def collations(conn: pymysql.connections.Connection) -> list[tuple[str, str]]:
    with conn.cursor() as cur:
        cur.execute("SHOW COLLATION")
        found = sorted(
            {(str(r[1]), str(r[0])) for r in cur.fetchall() if r[1] not in (None, "binary")}
        )
    # multi-byte sets the key column cannot hold every generated letter of are kept: the keys
    # are converted by the server, and what it cannot hold it refuses (those keys are left out)
    if os.environ.get("CDC_KEY_ORDER_COLLATIONS") == "all":
        return found
    rng = random.Random(20261127)
    always = [
        ("latin1", "latin1_swedish_ci"),
        ("utf8mb4", "utf8mb4_unicode_ci"),
        ("utf8mb4", "utf8mb4_general_ci"),
        ("utf8mb4", "utf8mb4_bin"),
        ("gbk", "gbk_chinese_ci"),
        ("utf8mb4", "utf8mb4_unicode_520_ci"),
        ("big5", "big5_chinese_ci"),
        ("latin7", "latin7_general_ci"),
    ]
    rest = [
        c for c in found if c not in always and c[0] not in ("utf16", "utf16le", "utf32", "ucs2")
    ]
    return [c for c in always if c in found] + rng.sample(rest, SAMPLE - len(always))


def test_every_key_falls_in_the_chunk_the_server_puts_it_in(source_db: SourceDb) -> None:
    root = source_db.connect()
    cdc = connect(source_db.source_config())
    rng = random.Random(7)
    words = {
        "".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 6))) + " " * rng.randint(0, 1)
        for _ in range(600)
    }
    checked = []
    try:
        for charset, collation in collations(root):
            table = f"k_{collation}"
            with root.cursor() as cur:
                cur.execute(
                    f"CREATE TABLE `{table}` (k VARCHAR(40) CHARACTER SET {charset} "
                    f"COLLATE {collation} NOT NULL PRIMARY KEY, n INT)"
                )
                for n, word in enumerate(sorted(words)):
                    try:  # a key the set cannot hold, or equal to one already in: left out
                        cur.execute(f"INSERT INTO `{table}` VALUES (%s, %s)", (word, n))
                    except pymysql.err.MySQLError:
                        continue
                cur.execute(f"SELECT k FROM `{table}` ORDER BY k")
                served = [str(r[0]) for r in cur.fetchall()]
            schema = load_table_schema(cdc, TableId(source_db.name, table))
            order = key_order(schema.column("k"), source_db.source_config())
            splits = ChunkSplitter(cdc, max(3, len(served) // 10)).split(schema)
            python_exact = KeyOrder.for_column(schema.column("k")).exact
            if not python_exact and not weights_agree(cdc, charset, collation):
                assert len(splits) == 1, collation
                checked.append((collation, "one chunk", len(served), 1))
                continue
            assert sorted(served, key=functools.cmp_to_key(order.compare)) == served, collation
            assert len(splits) > 3, collation
            for split in splits:
                lo, hi = split.range.start, split.range.end
                where = " AND ".join(
                    [
                        *(["k >= %s"] if lo is not None else []),
                        *(["k < %s"] if hi is not None else []),
                    ]
                )
                with root.cursor() as cur:
                    cur.execute(
                        f"SELECT k FROM `{table}`" + (f" WHERE {where}" if where else ""),
                        [v for v in (lo, hi) if v is not None],
                    )
                    inside = {str(r[0]) for r in cur.fetchall()}
                ours = {k for k in served if split.range.contains(k, order)}
                assert ours == inside, (collation, str(split), sorted(ours ^ inside)[:5])
            checked.append((collation, order.description, len(served), len(splits)))
    finally:
        root.close()
        cdc.close()
    assert len(checked) >= SAMPLE, checked


def test_check_warns_of_a_chunk_key_the_snapshot_reads_as_one_chunk(
    source_db: SourceDb, tmp_path: Path
) -> None:
    source_db.execute(
        "CREATE TABLE b5 (k VARCHAR(10) CHARACTER SET big5 COLLATE big5_chinese_ci PRIMARY KEY)",
        "CREATE TABLE l1 (k VARCHAR(10) CHARACTER SET latin1 PRIMARY KEY)",
    )
    _, tables, results = run_checks(load(write_config(source_db, tmp_path)))
    assert {t.table_id.table for t in tables} == {"b5", "l1"}
    warned = [r for r in results if r.name.startswith("order ")]
    assert [r.name for r in warned] == [f"order {source_db.name}.b5"]
    assert "big5_chinese_ci" in warned[0].detail and warned[0].severity == "warning"


#: key types with generators of values at and near their edges (SQL literals)
KEY_TYPES: dict[str, Callable[[random.Random], str]] = {
    "TINYINT": lambda r: str(r.choice([-128, 127, 0, -1, r.randint(-128, 127)])),
    "INT UNSIGNED": lambda r: str(r.choice([0, 4294967295, r.randint(0, 4294967295)])),
    "BIGINT": lambda r: str(r.choice([-(2**63), 2**63 - 1, r.randint(-(2**63), 2**63 - 1)])),
    "BIGINT UNSIGNED": lambda r: str(r.choice([0, 2**64 - 1, 2**63, r.randint(0, 2**64 - 1)])),
    "DECIMAL(20,6)": lambda r: f"{r.uniform(-1e13, 1e13):.6f}",
    "DATE": lambda r: f"'{r.randint(1000, 9999)}-{r.randint(1, 12):02}-{r.randint(1, 28):02}'",
    "DATETIME(6)": lambda r: (
        f"'{r.randint(1000, 9999)}-{r.randint(1, 12):02}-{r.randint(1, 28):02} "
        f"{r.randint(0, 23):02}:{r.randint(0, 59):02}:{r.randint(0, 59):02}."
        f"{r.randint(0, 999999):06}'"
    ),
    "TIMESTAMP(3)": lambda r: f"FROM_UNIXTIME({r.randint(1, 2**31 - 2)}.{r.randint(0, 999):03})",
    "TIME(6)": lambda r: (
        f"'{r.choice(['-', ''])}{r.randint(0, 838)}:{r.randint(0, 59):02}:{r.randint(0, 59):02}"
        f".{r.randint(0, 999999):06}'"
    ),
    "BINARY(4)": lambda r: "0x" + r.randbytes(r.choice([1, 4])).hex().ljust(2, "0"),
    "VARBINARY(8)": lambda r: "0x" + r.randbytes(r.randint(1, 8)).hex(),
    "CHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin": lambda r: repr(
        "".join(r.choice("aZ9 _é") for _ in range(r.randint(1, 6))).strip() or "x"
    ),
}


@pytest.mark.parametrize("key_type", list(KEY_TYPES))
def test_every_key_type_chunks_and_places_keys_as_the_server_does(
    source_db: SourceDb, key_type: str
) -> None:
    """Generated keys of each type, split by the real splitter: each key, as the snapshot reads
    it and as the binlog decodes it, falls in the chunk whose WHERE returns it on the server.

    CI draws 300 keys with a fixed seed; ``CDC_KEY_SEED`` and ``CDC_KEY_ROWS`` draw others (a
    larger run: ``CDC_KEY_SEED=$RANDOM CDC_KEY_ROWS=5000``)."""
    rng = random.Random(f"{key_type}-{os.environ.get('CDC_KEY_SEED', '20261127')}")
    rows = int(os.environ.get("CDC_KEY_ROWS", "300"))
    source_db.execute(f"CREATE TABLE kt (k {key_type} NOT NULL PRIMARY KEY, n INT)")
    cdc = connect(source_db.source_config())
    table = TableId(source_db.name, "kt")
    try:
        start = current_position(cdc)
        source_db.execute(
            *(
                f"INSERT IGNORE INTO kt VALUES ({KEY_TYPES[key_type](rng)}, {n})"
                for n in range(rows)
            )
        )
        end = current_position(cdc)
        schema = load_table_schema(cdc, table)
        column = schema.column("k")
        order = key_order(column, source_db.source_config())
        with cdc.cursor() as cur:
            cur.execute(f"SELECT k, n FROM {table.quoted()} ORDER BY k")
            served = [(raw_chunk_key(column, k), n) for k, n in cur.fetchall()]
        keys = [k for k, _ in served]
        assert sorted(keys, key=functools.cmp_to_key(order.compare)) == keys, key_type
        binlog = {}
        for event in read_window_events(
            source_db.source_config(), 5431, start, end, [table], {table: schema.column_names}
        ):
            for row in event.rows:
                values = row["values"]
                binlog[values["n"]] = raw_chunk_key(column, values["k"], binlog=True)
        assert {n: k for k, n in served} == binlog, key_type
        # about a dozen chunks whatever was drawn (a TINYINT key holds 256 values at most)
        splits = ChunkSplitter(cdc, max(25, len(served) // 12)).split(schema)
        assert len(splits) >= 3, (key_type, splitter_method(cdc, schema))
        for split in splits:
            lo, hi = split.range.start, split.range.end
            where = [
                *(["k >= %s"] if lo is not None else []),
                *(["k < %s"] if hi is not None else []),
            ]
            with cdc.cursor() as cur:
                cur.execute(
                    f"SELECT n FROM {table.quoted()}"
                    + (" WHERE " + " AND ".join(where) if where else ""),
                    [v for v in (lo, hi) if v is not None],
                )
                inside = {int(r[0]) for r in cur.fetchall()}
            ours = {n for n, k in binlog.items() if split.range.contains(k, order)}
            assert ours == inside, (key_type, str(split), sorted(ours ^ inside)[:5])
    finally:
        cdc.close()


def splitter_method(conn: pymysql.connections.Connection, schema: TableSchema) -> str:
    splitter = ChunkSplitter(conn, 25)
    splitter.split(schema)
    return splitter.method
