"""The binlog position with its GTID state, as every watermark reads it.

MariaDB's GTID at the current position is read between two status reads instead of with
``BINLOG_GTID_POS``, which scans the binlog file from its start (38 ms of server CPU per call at
the end of a 176 MB file, twice per chunk). These tests hold the fast read to the exact one:
at rest, while other sessions commit as fast as they can, and with several GTID domains.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pymysql
import pytest

from cdc_console.core.offset import BinlogOffset
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.sandbox import MySQLSandbox
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql


def _exact(conn: pymysql.connections.Connection, offset: BinlogOffset) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (offset.file, offset.pos))
        found = cur.fetchone()
    return set(str(found[0]).split(",")) if found and found[0] else set()


def _gtids(offset: BinlogOffset) -> set[str]:
    return set(offset.gtid.split(",")) if offset.gtid else set()


def _require_mariadb(sandbox: MySQLSandbox) -> None:
    if sandbox.flavour != "mariadb":
        pytest.skip("MySQL reports its GTID set in the status row itself")


def test_gtid_at_rest_is_the_exact_one(source_db: SourceDb) -> None:
    _require_mariadb(source_db.sandbox)
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    conn = connect(source_db.source_config())
    try:
        offset = current_position(conn, with_gtid=True)
        assert offset.gtid
        assert _gtids(offset) == _exact(conn, offset)
        assert current_position(conn).gtid is None
    finally:
        conn.close()


@pytest.mark.parametrize("batched", [True, False], ids=["one-round-trip", "three-round-trips"])
def test_gtid_read_while_others_commit_matches_its_position(
    source_db: SourceDb, batched: bool
) -> None:
    """Two writers commit single rows flat out; every sampled (position, GTID) pair must be one
    the server's exact function agrees with. A GTID read without the second status read fails
    this within a few hundred samples. ``batched`` is a connection that allows several
    statements per query (ours do); without, each read is its own round trip."""
    _require_mariadb(source_db.sandbox)
    source_db.execute("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    stop = threading.Event()

    def write() -> None:
        writer = source_db.connect()
        try:
            with writer.cursor() as cur:
                while not stop.is_set():
                    cur.execute("INSERT INTO t (v) VALUES (1)")
        finally:
            writer.close()

    writers = [threading.Thread(target=write) for _ in range(2)]
    for thread in writers:
        thread.start()
    conn = connect(source_db.source_config(), **({} if batched else {"client_flag": 0}))
    try:
        samples = [current_position(conn, with_gtid=True) for _ in range(400)]
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    try:
        assert len({s.pos for s in samples}) > 50, "the writers did not move the binlog"
        wrong = [s for s in samples if _gtids(s) != _exact(conn, s)]
        assert not wrong, f"{len(wrong)} of {len(samples)} GTIDs disagree, e.g. {wrong[0]}"
    finally:
        conn.close()


def test_gtid_with_several_domains(tmp_path: Path) -> None:
    sandbox = MySQLSandbox(tmp_path / "data")
    sandbox.start()
    try:
        _require_mariadb(sandbox)
        sandbox.execute("CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)")
        conn = sandbox.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION gtid_domain_id = 7")
                cur.execute("INSERT INTO d.t VALUES (1)")
                cur.execute("SET SESSION gtid_domain_id = 0")
                cur.execute("INSERT INTO d.t VALUES (2)")
            offset = current_position(conn, with_gtid=True)
            assert {g.split("-")[0] for g in _gtids(offset)} == {"0", "7"}
            assert _gtids(offset) == _exact(conn, offset)
        finally:
            conn.close()
    finally:
        sandbox.stop()
