"""The latency bench's writers send several INSERTs per query; each must stay its own
single-row transaction, or the bench would measure a lighter binlog than it claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.bench.common import BENCH_DB, BenchEnv
from cdc_console.bench.latency import TABLE, Inserter
from cdc_console.mysql.sandbox import MySQLSandbox

pytestmark = pytest.mark.mysql


def _binlog_events(sandbox: MySQLSandbox, start: tuple[str, int]) -> list[tuple[str, str]]:
    conn = sandbox.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}")
            return [(str(row[2]), str(row[5])) for row in cur.fetchall()]
    finally:
        conn.close()


def test_each_row_is_its_own_transaction_in_the_binlog(
    mariadb: MySQLSandbox, tmp_path: Path
) -> None:
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {BENCH_DB}")
    env = BenchEnv(workdir=tmp_path, sandbox=mariadb, password="unused")
    env.execute(
        f"DROP TABLE IF EXISTS {TABLE}",
        f"CREATE TABLE {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
        "sent_at DOUBLE NOT NULL, note VARCHAR(40))",
    )
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            assert row is not None
            start = (str(row[0]), int(row[1]))
    finally:
        conn.close()
    writer = Inserter(env, rate=3_000, seconds=0.5)
    writer.start()
    writer.join(30)
    try:
        assert writer.error is None
        assert writer.sent >= 1_000  # several INSERTs per query, or the rate was not kept
        events = _binlog_events(mariadb, start)
        maps = [info for kind, info in events if kind == "Table_map"]
        assert len(maps) == writer.sent
        assert all(f"({BENCH_DB}.{TABLE})" in info for info in maps), maps[:3]
        assert sum(kind == "Xid" for kind, _ in events) == writer.sent
        assert sum(kind.startswith("Write_rows") for kind, _ in events) == writer.sent
        rows = env.sandbox.connect(database=BENCH_DB)
        with rows.cursor() as cur:
            cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT sent_at) FROM {TABLE}")
            count, times = cur.fetchone()
        rows.close()
        assert count == writer.sent
        assert 1 < times < count  # rows of one query share its send time
    finally:
        env.execute(f"DROP TABLE {TABLE}")
