"""Which server this is, and where a GTID state lies in its binlog: what following a failover needs.

A binlog position (file, offset) means something on one server only: the replica promoted in a
failover holds the same transactions under other file names and offsets. A GTID state (MariaDB's
``gtid_binlog_pos``, ``0-1-57``; MySQL's ``gtid_executed``, ``uuid:1-57``) names the same point on
both. So every position the pipeline stores carries the GTID state at it, and when the source
turns out to be another server, :func:`position_of_gtid` finds each of them in the new server's
binlog: it opens a binlog stream *by GTID*, exactly as a replica would, and takes the position
of the first transaction the server sends (the server skips the ones the state already holds),
or the server's head when there is none. A server that lacks transactions of the state refuses
the stream, and that refusal becomes the error an operator reads.
"""

from __future__ import annotations

import logging

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import DriverRow
from cdc_console.errors import SourceError, redact
from cdc_console.mysql.binlog import stream_settings
from cdc_console.mysql.position import current_position

log = logging.getLogger(__name__)

#: ER_MASTER_FATAL_ERROR_READING_BINLOG: MariaDB and MySQL both refuse a GTID they lack with it
_ER_FATAL_READING_BINLOG = 1236


def server_identity(conn: pymysql.connections.Connection) -> str:
    """A stable name for the server behind ``conn``: ``mysql <server_uuid>`` or, for MariaDB
    (which has no server UUID), ``mariadb server_id=<id>``; what a failover changes."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@version, @@server_id")
        version, server_id = cur.fetchone() or ("", 0)
        if "mariadb" in str(version).lower():
            return f"mariadb server_id={server_id}"
        cur.execute("SELECT @@server_uuid")
        row = cur.fetchone()
    return f"mysql {row[0] if row else server_id}"


def gtid_enabled(conn: pymysql.connections.Connection) -> bool:
    """MariaDB always logs GTIDs; MySQL only with ``gtid_mode=ON``."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@version")
        row: DriverRow | None = cur.fetchone()
        if row and "mariadb" in str(row[0]).lower():
            return True
        try:
            cur.execute("SELECT @@gtid_mode")
            mode: DriverRow = cur.fetchone()  # SELECT @@gtid_mode: always one row
        except pymysql.err.MySQLError:
            return False
    return bool(mode) and str(mode[0]).upper() == "ON"


def position_of_gtid(
    source: SourceConfig, conn: pymysql.connections.Connection, gtid: str, server_id: int
) -> BinlogOffset:
    """Where, in the binlog of the server behind ``source``/``conn``, the GTID state ``gtid``
    ends: the start of the first transaction not in it, or the head when it holds them all.

    Raises ``SourceError`` naming the missing transactions when the server does not have them
    (a replica that was behind, or a diverged one).
    """
    mariadb = "mariadb" in server_identity(conn)
    # Read before the stream: a transaction committed after this is found by the stream or
    # lies after the head returned, so none is skipped either way.
    head = current_position(conn, with_gtid=True)
    stream = BinLogStreamReader(
        connection_settings=stream_settings(source),
        server_id=server_id,
        blocking=False,
        is_mariadb=mariadb,
        auto_position=gtid,
        only_events=[GtidEvent, MariadbGtidEvent],
    )
    try:
        for event in stream:
            packet = event.packet
            start = packet.log_pos - packet.event_size
            return BinlogOffset(stream.log_file, start, gtid=gtid)
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        if code == _ER_FATAL_READING_BINLOG:
            have = _server_gtid(conn, mariadb)
            raise SourceError(
                f"the source server ({source.host}:{source.port}) cannot resume this pipeline "
                f"at GTID {gtid}: it lacks transactions the mirror already holds, or its "
                f"history diverged (it has {have or 'no GTIDs'}); server said: "
                f"{redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc))}",
                "point source.host at a server that has every transaction of that GTID state "
                "(the promoted replica must have caught up before the failover), or re-snapshot "
                "the tables ('cdc-console redump --table ...')",
            ) from None
        raise
    finally:
        stream.close()
    return BinlogOffset(head.file, head.pos, gtid=gtid)


def _server_gtid(conn: pymysql.connections.Connection, mariadb: bool) -> str | None:
    variable = "@@gtid_binlog_pos" if mariadb else "@@gtid_executed"
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {variable}")
            row: DriverRow | None = cur.fetchone()
    except pymysql.err.MySQLError:
        return None
    return str(row[0]).replace("\n", "") if row and row[0] else None
