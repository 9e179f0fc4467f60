"""Reading the server's current binlog position: the low and high watermarks.

The statement differs by flavour and version: MySQL 8.4 removed ``SHOW MASTER STATUS`` in favour of
``SHOW BINARY LOG STATUS``; MariaDB 10.5.2+ also has ``SHOW BINLOG STATUS``. We try the modern
forms first and remember the first that works per connection.
"""

from __future__ import annotations

from dataclasses import replace

import pymysql
from pymysql.constants import CLIENT

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import DriverRow
from cdc_console.errors import SourceError

_STATEMENTS = ("SHOW BINARY LOG STATUS", "SHOW BINLOG STATUS", "SHOW MASTER STATUS")
_ER_PARSE = 1064
#: access denied: a privilege the statement needs is missing
ACCESS_DENIED_CODES = (1227, 1142, 1044)


def current_position(
    conn: pymysql.connections.Connection, *, with_gtid: bool = False
) -> BinlogOffset:
    """The position right after the last committed transaction (always an event-group boundary).

    ``with_gtid`` also fills in the GTID set at that exact position, for display and failover:
    MySQL returns it in the same status row. MariaDB's is read between two status reads
    (``_bracketed_gtid``); only when commits keep landing in between does it fall back to
    ``BINLOG_GTID_POS``, which is exact but reads the binlog file from its start.
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
            if exc.args and exc.args[0] in ACCESS_DENIED_CODES:
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
            if len(row) >= 5:
                # MySQL's own GTID column (Executed_Gtid_Set), empty while GTIDs are off.
                return replace(offset, gtid=str(row[4] or "").replace("\n", "") or None)
            return _bracketed_gtid(conn, statement, offset)
        return offset
    raise SourceError(f"cannot read the binlog position: {last_error}", "")


#: status reads that found a commit in between before ``BINLOG_GTID_POS`` is asked instead
_BRACKET_ATTEMPTS = 3


def _bracketed_gtid(
    conn: pymysql.connections.Connection, statement: str, offset: BinlogOffset
) -> BinlogOffset:
    """``offset`` (just read with ``statement``) with MariaDB's GTID state at it.

    ``BINLOG_GTID_POS(file, pos)`` scans the binlog file from its start up to ``pos`` (MariaDB
    10.x keeps no index): 38 ms of server CPU at the end of a 176 MB file, paid twice per chunk,
    which made the server the bottleneck of a large snapshot. ``@@gtid_binlog_pos`` is the state
    after the last event group written, and the server writes a group, moves the end of the
    binlog and records its GTID under one lock (``LOCK_log``), which the status statement takes
    too: when the status reads on both sides of the variable's read give the same position, no
    group was written in between, so the variable is the state at exactly that position. The
    three go in one round trip where the connection allows several statements, so that even
    a server committing 15k transactions a second rarely lands one in between.
    """
    batched = bool(conn.client_flag & CLIENT.MULTI_STATEMENTS)
    for _ in range(_BRACKET_ATTEMPTS):
        try:
            if batched:
                before, gtid, after = _read_bracket(conn, statement)
            else:
                before = offset
                gtid = _variable(conn, "@@GLOBAL.gtid_binlog_pos")
                after = _status_offset(conn, statement)
        except pymysql.err.MySQLError:
            break
        if after is None:
            break
        if after == before:
            return replace(after, gtid=gtid or None)
        offset = after
    return replace(offset, gtid=_gtid_at(conn, offset))


def _read_bracket(
    conn: pymysql.connections.Connection, statement: str
) -> tuple[BinlogOffset | None, str | None, BinlogOffset | None]:
    """Status, GTID state, status: sent as one multi-statement, read back as three results."""
    with conn.cursor() as cur:
        cur.execute(f"{statement}; SELECT @@GLOBAL.gtid_binlog_pos; {statement}")
        first: DriverRow | None = cur.fetchone()
        cur.nextset()
        middle: DriverRow | None = cur.fetchone()
        cur.nextset()
        last: DriverRow | None = cur.fetchone()
    return _offset_of(first), str(middle[0]) if middle and middle[0] else None, _offset_of(last)


def _offset_of(row: DriverRow | None) -> BinlogOffset | None:
    return BinlogOffset(file=str(row[0]), pos=int(row[1])) if row and row[0] else None


def _status_offset(conn: pymysql.connections.Connection, statement: str) -> BinlogOffset | None:
    with conn.cursor() as cur:
        cur.execute(statement)
        return _offset_of(cur.fetchone())


def _variable(conn: pymysql.connections.Connection, name: str) -> str | None:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {name}")
        found: DriverRow | None = cur.fetchone()
    return str(found[0]) if found and found[0] else None


def _gtid_at(conn: pymysql.connections.Connection, offset: BinlogOffset) -> str | None:
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
    gtid = _gtid_at(conn, offset)
    return replace(offset, gtid=gtid) if gtid else offset


def binary_logs(conn: pymysql.connections.Connection) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: the files the server still has, oldest first, with their sizes."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in cur.fetchall()]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def begin_consistent_snapshot(conn: pymysql.connections.Connection) -> BinlogOffset | None:
    """Open a transaction whose reads see the data exactly as of a binlog position, and return
    that position (with its GTID state); None where the server cannot say it.

    ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` under REPEATABLE READ fixes what the
    transaction's reads see. MariaDB (and Percona Server) then report, as the status variables
    ``Binlog_snapshot_file``/``Binlog_snapshot_position``, the binlog position right after the
    last transaction that snapshot includes: lock-free, as ``mariadb-dump --single-transaction
    --master-data`` uses it. MySQL has no such variable: the transaction is rolled back and
    None returned. The caller ends the transaction (``COMMIT``) after its reads.
    """
    with conn.cursor() as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS LIKE 'binlog\\_snapshot\\_%'")
        status = {_text(name).lower(): _text(value) for name, value in cur.fetchall()}
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not file or pos is None:
        conn.rollback()
        return None
    return gtid_of(conn, BinlogOffset(file=file, pos=int(pos)))


def transactional(conn: pymysql.connections.Connection, database: str, table: str) -> bool:
    """Whether the table's engine has transactions, so a consistent snapshot covers its reads
    (a MyISAM or Aria table is read as it is at the moment of the read)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT e.TRANSACTIONS FROM information_schema.TABLES t "
            "JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE "
            "WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s",
            (database, table),
        )
        row: DriverRow | None = cur.fetchone()
    return row is not None and _text(row[0]).upper() == "YES"
