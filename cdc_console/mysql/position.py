"""Reading the server's current binlog position: the low and high watermarks.

The statement differs by flavour and version: MySQL 8.4 removed ``SHOW MASTER STATUS`` in favour of
``SHOW BINARY LOG STATUS``; MariaDB 10.5.2+ also has ``SHOW BINLOG STATUS``. We try the modern
forms first and remember the first that works per connection.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import DriverRow
from cdc_console.errors import SourceError

_STATEMENTS = ("SHOW BINARY LOG STATUS", "SHOW BINLOG STATUS", "SHOW MASTER STATUS")
_ER_PARSE = 1064
_ER_ACCESS = (1227, 1142, 1044)


def current_position(
    conn: pymysql.connections.Connection, *, with_gtid: bool = False
) -> BinlogOffset:
    """The position right after the last committed transaction (always an event-group boundary).

    ``with_gtid`` also fills in the GTID set at that exact position, for display and failover:
    MySQL returns it in the same status row; MariaDB computes it with ``BINLOG_GTID_POS``, which
    is exact for a given position, so neither form races with concurrent commits. Watermarks
    skip it: one round trip less per chunk.
    """
    cached: str | None = getattr(conn, "_cdc_status_statement", None)
    statements = (cached,) if cached else _STATEMENTS
    last_error: Exception | None = None
    for statement in statements:
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                row: DriverRow | None = cur.fetchone()
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == _ER_PARSE:
                last_error = exc
                continue
            raise
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _ER_ACCESS:
                raise SourceError(
                    "the source user may not read the binlog position",
                    "GRANT REPLICATION CLIENT ON *.* TO the user (MariaDB: BINLOG MONITOR)",
                ) from None
            raise
        conn._cdc_status_statement = statement
        if not row or not row[0]:
            raise SourceError(
                "binary logging is off on the source server",
                "start the server with log_bin enabled (e.g. --log-bin=binlog) and "
                "binlog_format=ROW",
            )
        offset = BinlogOffset(file=str(row[0]), pos=int(row[1]))
        if with_gtid:
            offset = replace(offset, gtid=_gtid_at(conn, offset, row))
        return offset
    raise SourceError(f"cannot read the binlog position: {last_error}", "")


def _gtid_at(
    conn: pymysql.connections.Connection, offset: BinlogOffset, row: DriverRow
) -> str | None:
    if len(row) >= 5 and row[4]:
        return str(row[4]).replace("\n", "")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (offset.file, offset.pos))
            found = cur.fetchone()
    except pymysql.err.MySQLError:
        return None
    return str(found[0]) if found and found[0] else None


def gtid_of(conn: pymysql.connections.Connection, offset: BinlogOffset) -> BinlogOffset:
    """``offset`` with the GTID state at it, where the server can say (MariaDB's
    ``BINLOG_GTID_POS``); unchanged otherwise."""
    gtid = _gtid_at(conn, offset, ())
    return replace(offset, gtid=gtid) if gtid else offset


def binary_logs(conn: pymysql.connections.Connection) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: the files the server still has, oldest first, with their sizes."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in cur.fetchall()]
