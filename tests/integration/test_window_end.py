"""Bounded binlog windows end at a transaction start, with the GTID state the server has there."""

from __future__ import annotations

import pymysql
import pytest

from cdc_console.core.offset import BinlogOffset
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.window_end import bounded_window_end
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql


def _group_starts(conn: pymysql.connections.Connection, file: str) -> list[int]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINLOG EVENTS IN %s", (file,))
        return [int(r[1]) for r in cur.fetchall() if r[2] in ("Gtid", "Anonymous_Gtid")]


def _exact_gtid(conn: pymysql.connections.Connection, offset: BinlogOffset) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (offset.file, offset.pos))
        found = cur.fetchone()
    return set(str(found[0]).split(",")) if found and found[0] else set()


def _write(db: SourceDb, transactions: int, first: int = 0) -> None:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            for n in range(first, first + transactions):
                cur.execute("START TRANSACTION")
                cur.execute(f"INSERT INTO t VALUES ({2 * n}, REPEAT('x', 200))")
                cur.execute(f"INSERT INTO t VALUES ({2 * n + 1}, REPEAT('y', 200))")
                cur.execute("COMMIT")
    finally:
        conn.close()


@pytest.fixture
def written(source_db: SourceDb) -> tuple[SourceDb, BinlogOffset]:
    if source_db.sandbox.flavour != "mariadb":
        pytest.skip("the exact GTID at a position is asked of MariaDB (BINLOG_GTID_POS)")
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(300))")
    conn = connect(source_db.source_config())
    try:
        start = current_position(conn, with_gtid=True)
    finally:
        conn.close()
    return source_db, start


def test_a_window_within_the_budget_ends_at_the_head(
    written: tuple[SourceDb, BinlogOffset],
) -> None:
    db, start = written
    _write(db, 5)
    conn = connect(db.source_config())
    try:
        head = current_position(conn, with_gtid=True)
        assert bounded_window_end(conn, start, head, 1 << 20) == head
    finally:
        conn.close()


def test_a_long_window_ends_at_the_first_transaction_past_the_budget(
    written: tuple[SourceDb, BinlogOffset],
) -> None:
    db, start = written
    _write(db, 400)
    conn = connect(db.source_config())
    try:
        head = current_position(conn, with_gtid=True)
        budget = 64 << 10
        end = bounded_window_end(conn, start, head, budget)

        assert start < end < head
        starts = [p for p in _group_starts(conn, start.file) if p > start.pos]
        assert end.pos == min(p for p in starts if p - start.pos >= budget)
        assert end.gtid is not None
        assert set(end.gtid.split(",")) == _exact_gtid(conn, end)

        # the next window goes on from the cut, and the last one ends at the head
        ends = [end]
        while ends[-1] != head:
            ends.append(bounded_window_end(conn, ends[-1], head, budget))
        assert len(ends) >= 3
        assert all(set(e.gtid.split(",")) == _exact_gtid(conn, e) for e in ends if e.gtid)
    finally:
        conn.close()


def test_the_cut_found_by_skipping_is_the_one_a_full_listing_finds(
    written: tuple[SourceDb, BinlogOffset],
) -> None:
    """Within one file the cut is found by skipping events server-side and listing only the
    headers near it: for budgets of a few events up to most of the window, it is exactly the
    first transaction start the whole listing shows past the budget, with the server's GTID."""
    db, start = written
    _write(db, 1_500)
    conn = connect(db.source_config())
    try:
        head = current_position(conn, with_gtid=True)
        starts = [p for p in _group_starts(conn, start.file) if p > start.pos]
        window = head.pos - start.pos
        for budget in (3_000, 50_000, 100_000, window // 3, window - 20_000):
            end = bounded_window_end(conn, start, head, budget)
            assert end.pos == min(p for p in starts if p - start.pos >= budget), budget
            assert end.gtid is not None
            assert set(end.gtid.split(",")) == _exact_gtid(conn, end)
    finally:
        conn.close()


def test_a_window_over_a_binlog_rotation_is_cut_in_the_next_file(
    written: tuple[SourceDb, BinlogOffset],
) -> None:
    db, start = written
    _write(db, 50)
    db.sandbox.execute("FLUSH BINARY LOGS")
    _write(db, 400, first=50)
    conn = connect(db.source_config())
    try:
        head = current_position(conn, with_gtid=True)
        assert head.file != start.file
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            sizes = dict((str(r[0]), int(r[1])) for r in cur.fetchall())
        left_in_first = sizes[start.file] - start.pos
        end = bounded_window_end(conn, start, head, left_in_first + (32 << 10))

        assert end.file == head.file and end.pos < head.pos
        # the first file's bytes count: the cut is 32 KiB into the second file (it starts at 4)
        assert end.pos == min(p for p in _group_starts(conn, end.file) if p - 4 >= 32 << 10)
        assert end.gtid is not None
        assert set(end.gtid.split(",")) == _exact_gtid(conn, end)
    finally:
        conn.close()
