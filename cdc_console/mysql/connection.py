"""Opening connections to the source, with errors a user can act on and no secret in them.

The snapshot path reads with ``time_zone = '+00:00'`` so TIMESTAMP values arrive in UTC, the same
instant the binlog decoder produces; DATETIME is zone-less and unaffected.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

import pymysql
import pymysql.converters
import pymysql.cursors
from pymysql.constants import CLIENT, FIELD_TYPE

from cdc_console.config import SourceConfig
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import Connection, DriverRow, DriverValue, PassThrough
from cdc_console.errors import SourceError, redact
from cdc_console.mysql.retry import TRANSIENT_CODES

log = logging.getLogger(__name__)

ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_TABLEACCESS_DENIED = 1142
ER_SPECIFIC_ACCESS_DENIED = 1227
CR_CONN_HOST_ERROR = 2003
CR_UNKNOWN_HOST = 2005
CR_SERVER_LOST = 2013


def connect(
    source: SourceConfig,
    *,
    database: str | None = None,
    unbuffered: bool = False,
    **extra: PassThrough,
) -> pymysql.connections.Connection:
    """A connection as the configured user, autocommit, utf8mb4, session zone UTC; to the first
    server of ``source.hosts`` that answers, when there is such a list."""
    return connect_first(source, database=database, unbuffered=unbuffered, **extra)[0]


def connect_first(
    source: SourceConfig,
    *,
    database: str | None = None,
    unbuffered: bool = False,
    **extra: PassThrough,
) -> tuple[pymysql.connections.Connection, SourceConfig]:
    """:func:`connect`, and the source pinned to the server that answered.

    Only a transient failure (the server is down) moves on to the next server of the list; a
    refused password or privilege is the same everywhere and is raised at once.
    """
    endpoints = source.endpoints()
    failure: SourceError | None = None
    for host, port in endpoints:
        target = source.pinned(host, port) if source.hosts else source
        try:
            return _connect_one(target, database, unbuffered, extra), target
        except SourceError as exc:
            if not exc.transient or len(endpoints) == 1:
                raise
            failure = exc
    assert failure is not None
    raise SourceError(
        f"no server of source.hosts answers: {failure.message}",
        "bring one of them back, or add the promoted replica to source.hosts",
        code=failure.code,
        transient=True,
    )


def _connect_one(
    source: SourceConfig, database: str | None, unbuffered: bool, extra: dict[str, PassThrough]
) -> pymysql.connections.Connection:
    password = source.password()
    kwargs: dict[str, object] = {
        **source.connection_kwargs(),
        "password": password,
        "database": database,
        "charset": "utf8mb4",
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
        # One round trip for the status/GTID/status read of every watermark
        # (``position._bracketed_gtid``); every statement we send is built with quoted names.
        "client_flag": CLIENT.MULTI_STATEMENTS,
        **extra,
    }
    if unbuffered:
        kwargs["cursorclass"] = pymysql.cursors.SSCursor
    try:
        return pymysql.connect(**kwargs)
    except pymysql.err.OperationalError as exc:
        raise translate_error(exc, source) from None


# The driver's decoders for the column types whose server text already is the typed sink's input:
# a connection without them returns that text (see ``text_mode_conversions``).
_TEXT_MODE_FIELD_TYPES = (
    FIELD_TYPE.DECIMAL,
    FIELD_TYPE.NEWDECIMAL,
    FIELD_TYPE.DATE,
    FIELD_TYPE.NEWDATE,
    FIELD_TYPE.DATETIME,
    FIELD_TYPE.TIMESTAMP,
)
_TEXT_MODE_DECODERS: dict[TypeFamily | None, Callable[[str], DriverValue]] = {
    TypeFamily.DECIMAL: pymysql.converters.decoders[FIELD_TYPE.NEWDECIMAL],
    TypeFamily.DATE: pymysql.converters.decoders[FIELD_TYPE.DATE],
    TypeFamily.DATETIME: pymysql.converters.decoders[FIELD_TYPE.DATETIME],
    TypeFamily.TIMESTAMP: pymysql.converters.decoders[FIELD_TYPE.TIMESTAMP],
}


def text_mode_conversions() -> dict[int | type, Callable[..., object]]:
    """pymysql's conversions minus the DECIMAL and date/time decoders.

    A connection opened with ``conv=text_mode_conversions()`` returns those columns as the
    server's text (``'12.30'``, ``'2024-01-01 00:00:01.000000'``), which Arrow parses per column
    in C; pymysql's per-value ``Decimal``/``datetime`` construction was a fifth of a snapshot
    reader's CPU. ``text_mode_decoders`` turns such values into what the default connection
    would have returned, for the rows that need the per-value path.
    """
    conv = dict(pymysql.converters.conversions)
    for field_type in _TEXT_MODE_FIELD_TYPES:
        conv.pop(field_type, None)
    return conv


def text_mode_decoders(columns: Sequence[ColumnInfo]) -> list[Callable[[str], DriverValue] | None]:
    """Per column (by its type family): the decoder the default connection would have applied
    to a value a text-mode connection left as text, or None where both return the same."""
    return [_TEXT_MODE_DECODERS.get(c.family) for c in columns]


def close_quietly(conn: Connection | None) -> None:
    """Close a connection that an outage may already have broken (closing is only tidiness)."""
    if conn is None:
        return
    with contextlib.suppress(Exception):
        conn.close()


def translate_error(exc: BaseException, source: SourceConfig) -> SourceError:
    """Turn a driver error into a ``SourceError`` with the fix, scrubbed of the password."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    text = redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc))
    where = f"{source.user}@{source.host}:{source.port}"
    if code == ER_ACCESS_DENIED:
        return SourceError(
            f"access denied for {where}: wrong user or password",
            f"check the password in ${source.password_env} and that user '{source.user}' may "
            f"connect from this host (CREATE USER '{source.user}'@'%' IDENTIFIED BY ...)",
        )
    transient = code in TRANSIENT_CODES
    if code in (CR_CONN_HOST_ERROR, CR_UNKNOWN_HOST):
        return SourceError(
            f"cannot reach the source server at {source.host}:{source.port}: {text}",
            "check source.host and source.port, and that the server is running",
            code=code,
            transient=transient,
        )
    if code in (ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED):
        return SourceError(
            f"{where} lacks a privilege: {text}",
            "see 'cdc-console check' for the GRANT statements needed",
        )
    return SourceError(
        f"source server error at {where}: {text}", "", code=code, transient=transient
    )


def query(conn: pymysql.connections.Connection, sql: str, args: object = None) -> list[DriverRow]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())
