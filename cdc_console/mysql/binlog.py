"""Reading a bounded window ``[start, end)`` of the binlog as row changes with exact positions.

The window is bounded by our own ``(file, pos)`` comparison, not pymysqlreplication's
``end_log_pos``, which compares the position only and so stops early or late across a rotation.
Every window starts at an event-group boundary (a watermark or a previous window's end), so the
TABLE_MAP preceding each row event is always inside the window.

Each concurrent reader must use its own ``server_id``: two replicas with the same id make the
server kill the older connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

import pymysql
from pymysqlreplication.event import QueryEvent, RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.records import OP_DELETE_KEY, OP_PATCH, OP_UPDATE_AFTER, OP_UPDATE_BEFORE
from cdc_console.core.schema import TableId
from cdc_console.core.untyped import DriverImage
from cdc_console.errors import BinlogPurgedError, SourceError, redact
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog_decode import CachingBinLogStreamReader
from cdc_console.mysql.binlog_events import OpaqueEvent
from cdc_console.mysql.connection import close_quietly, connect, translate_error
from cdc_console.mysql.connection import query as run_query
from cdc_console.mysql.decoded_rows import DecodedRows
from cdc_console.mysql.retry import TRANSIENT_CODES
from cdc_console.mysql.stored_writers import (
    FUNCTIONS_SQL,
    TRIGGERS_SQL,
    StoredWriters,
    WindowWriters,
    stored_writers_of,
)
from cdc_console.mysql.window_walk import RowEvent, SchemaChangeHandler, WindowWalk

log = logging.getLogger(__name__)

ER_MASTER_FATAL_READING_BINLOG = 1236
ER_ACCESS_DENIED = (1045, 1227)


@dataclass(frozen=True)
class RowChange:
    """One row of a row event: ``before``/``after`` images as decoded, at an exact position."""

    table_id: TableId
    kind: str  # insert | update | delete
    before: DriverImage | None
    after: DriverImage | None
    position: BinlogOffset
    timestamp: int
    before_none_sources: dict[str, str] | None = None
    after_none_sources: dict[str, str] | None = None
    #: the images hold only some columns (``mysql.partial_images``): a ``delete`` by its key,
    #: or a ``patch`` (``after`` only) of the columns it holds
    partial: bool = False


def stream_settings(source: SourceConfig) -> dict[str, str | int | float]:
    return {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source.password(),
        "charset": "utf8mb4",
        "connect_timeout": source.connect_timeout,
    }


def read_window(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    end: BinlogOffset,
    tables: Collection[TableId],
    expected_columns: dict[TableId, list[str]] | None = None,
    on_schema_change: SchemaChangeHandler | None = None,
    patchable: Mapping[TableId, Collection[str]] | None = None,
) -> Iterator[RowChange]:
    """Yield the row changes of ``tables`` committed in ``[start, end)``, in binlog order.

    Raises ``SchemaChangedError`` on DDL touching a captured table, or when a row event's columns
    differ from ``expected_columns`` (the schema the snapshot was read with), unless
    ``on_schema_change`` takes it (see ``read_window_events``); ``BinlogPurgedError`` when
    ``start`` is no longer on the server.
    """
    for event in read_window_events(
        source,
        server_id,
        start,
        end,
        tables,
        expected_columns,
        on_schema_change,
        patchable=patchable,
    ):
        table_id, kind, file, pos, timestamp = (
            event.table_id,
            event.kind,
            event.file,
            event.pos,
            event.timestamp,
        )
        columns = expected_columns.get(table_id, ()) if expected_columns else ()
        for row_index, row in enumerate(event.rows):
            position = BinlogOffset(file, pos, 0, row_index)
            if event.partial:
                yield from _partial_changes(table_id, kind, row, columns, position, timestamp)
            elif kind == "insert":
                yield RowChange(
                    table_id,
                    "insert",
                    None,
                    row["values"],
                    position,
                    timestamp,
                    None,
                    row.get("none_sources"),
                )
            elif kind == "delete":
                yield RowChange(
                    table_id,
                    "delete",
                    row["values"],
                    None,
                    position,
                    timestamp,
                    row.get("none_sources"),
                    None,
                )
            else:
                yield RowChange(
                    table_id,
                    "update",
                    row["before_values"],
                    row["after_values"],
                    position,
                    timestamp,
                    row.get("before_none_sources"),
                    row.get("after_none_sources"),
                )


def _partial_changes(
    table_id: TableId,
    kind: str,
    row: Mapping[str, DriverImage],
    columns: Collection[str],
    position: BinlogOffset,
    timestamp: int,
) -> Iterator[RowChange]:
    """The changes of one row of a partial event (``partial_images.halves``)."""
    pending_before: tuple[DriverImage, dict[str, str]] | None = None
    for op, image, sources in partial_images.halves(kind, row, columns):
        if op == OP_UPDATE_BEFORE:
            pending_before = (image, sources)
        elif op == OP_UPDATE_AFTER:
            assert pending_before is not None
            before, before_sources = pending_before
            yield RowChange(
                table_id, "update", before, image, position, timestamp, before_sources, sources
            )
        elif op == OP_PATCH:
            yield RowChange(
                table_id, "patch", None, image, position, timestamp, None, sources, partial=True
            )
        else:
            yield RowChange(
                table_id,
                "delete",
                image,
                None,
                position,
                timestamp,
                sources,
                None,
                partial=op == OP_DELETE_KEY,
            )


def read_window_events(
    source: SourceConfig,
    server_id: int,
    start: BinlogOffset,
    end: BinlogOffset,
    tables: Collection[TableId],
    expected_columns: dict[TableId, list[str]] | None = None,
    on_schema_change: SchemaChangeHandler | None = None,
    since: Mapping[TableId, BinlogOffset] | None = None,
    *,
    patchable: Mapping[TableId, Collection[str]] | None = None,
) -> Iterator[RowEvent]:
    """``read_window`` one row event at a time: the same checks, errors and positions, without
    an object per row (the binlog reader's hot path).

    With ``on_schema_change``, a DDL on a captured table (or row events whose columns are not
    the expected ones) does not raise: the handler gets the table, the position and what
    changed, and nothing of that table is yielded from there on, while the other tables go on.
    ``since`` gives a table's resume position: its events before it, and its DDL before it (a
    change it already went through), are passed over.

    A row event logged with partial images (``mysql.partial_images``) holds its table, unless
    ``patchable`` names the columns that name a row of that table (its key and chunk key) and
    every row of the event can be applied exactly with them: it is then yielded, marked
    ``partial``, for the reader to turn into patches and deletes by key.
    """
    if start >= end:
        return
    stream = _window_stream(source, server_id, start, tables)
    cache = stream.cdc_cache
    walk = WindowWalk(
        start,
        end,
        tables,
        WindowWriters(_catalogue_loader(source)),
        lambda: cache.group_start,
        expected_columns=expected_columns,
        on_schema_change=on_schema_change,
        since=since,
        patchable=patchable,
    )
    try:
        for event in stream.window_events():
            if isinstance(event, RotateEvent):
                if walk.rotate(event):
                    return
                continue
            if isinstance(event, OpaqueEvent):
                if walk.past_end(event.start):
                    return
                if not walk.before_start(event.start):
                    walk.opaque(event)
                continue
            if isinstance(event, DecodedRows):
                event_start = event.log_pos - event.event_size
            else:
                packet = event.packet
                event_start = packet.log_pos - packet.event_size
            if walk.past_end(event_start):
                return
            if walk.before_start(event_start):
                continue
            if isinstance(event, QueryEvent):
                walk.query(event, event_start)
            elif isinstance(event, DecodedRows):
                row_event = walk.rows(event, event_start)
                if row_event is not None:
                    yield row_event
    except pymysql.err.OperationalError as exc:
        raise _translate(exc, start) from None
    finally:
        stream.close()


def _window_stream(
    source: SourceConfig, server_id: int, start: BinlogOffset, tables: Collection[TableId]
) -> CachingBinLogStreamReader:
    """The non-blocking stream a window is read from, from ``start``: the events that can carry
    a change of ``tables`` (the rest arrive as ``OpaqueEvent`` or are passed over unparsed)."""
    schemas = sorted({t.database for t in tables})
    return CachingBinLogStreamReader(
        connection_settings=stream_settings(source),
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        is_mariadb=False,
        only_events=[
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
            QueryEvent,
            RotateEvent,
        ],
        only_schemas=schemas or None,
        enable_logging=False,
    )


def _catalogue_loader(source: SourceConfig) -> Callable[[], StoredWriters]:
    def load() -> StoredWriters:
        conn = None
        try:
            conn = connect(source)
            return stored_writers_of(run_query(conn, TRIGGERS_SQL), run_query(conn, FUNCTIONS_SQL))
        except pymysql.MySQLError as exc:
            raise translate_error(exc, source) from exc
        finally:
            close_quietly(conn)

    return load


def _translate(exc: pymysql.err.OperationalError, start: BinlogOffset) -> SourceError:
    code = exc.args[0] if exc.args else None
    text = redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc))
    if code == ER_MASTER_FATAL_READING_BINLOG:
        return BinlogPurgedError(
            f"the server no longer has the binlog at {start} ({text})",
            "the binlog this pipeline needs was purged; raise binlog_expire_logs_seconds and "
            "re-snapshot ('cdc-console redump --table ...' for each table, or delete the state "
            "file to start over)",
        )
    if code in ER_ACCESS_DENIED:
        return SourceError(
            f"cannot read the binlog: {text}", "GRANT REPLICATION SLAVE ON *.* TO the source user"
        )
    return SourceError(
        f"binlog read failed at {start}: {text}",
        "",
        code=code if isinstance(code, int) else None,
        transient=code in TRANSIENT_CODES,
    )
