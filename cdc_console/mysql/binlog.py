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
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

import pymysql
from pymysqlreplication.event import QueryEvent, RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.records import OP_DELETE_KEY, OP_PATCH, OP_UPDATE_AFTER, OP_UPDATE_BEFORE
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.core.untyped import BinlogLibObject, DriverImage
from cdc_console.errors import BinlogPurgedError, SchemaChangedError, SourceError, redact
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog_decode import CachingBinLogStreamReader, DecodedRows
from cdc_console.mysql.binlog_events import OpaqueEvent
from cdc_console.mysql.connection import close_quietly, connect, translate_error
from cdc_console.mysql.connection import query as run_query
from cdc_console.mysql.logged_statements import dml_targets, without_literals
from cdc_console.mysql.retry import TRANSIENT_CODES
from cdc_console.mysql.stored_writers import (
    FUNCTIONS_SQL,
    TRIGGERS_SQL,
    StoredWriters,
    WindowWriters,
    captured_in,
    stored_writers_of,
)

log = logging.getLogger(__name__)

ER_MASTER_FATAL_READING_BINLOG = 1236
ER_ACCESS_DENIED = (1045, 1227)

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
# Each table-DDL form with the part of the statement that lists the tables it changes.
_DDL_FORMS = [
    re.compile(rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?({_NAME})", re.I),
    re.compile(rf"^\s*TRUNCATE\s+(?:TABLE\s+)?({_NAME})", re.I),
    re.compile(
        rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+"
        rf"(?:IF\s+NOT\s+EXISTS\s+)?({_NAME})",
        re.I,
    ),
    re.compile(
        rf"^\s*DROP\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?"
        rf"((?:{_NAME})(?:\s*,\s*{_NAME})*)",
        re.I,
    ),
    re.compile(
        rf"^\s*RENAME\s+TABLES?\s+((?:{_NAME})\s+TO\s+(?:{_NAME})"
        rf"(?:\s*,\s*(?:{_NAME})\s+TO\s+(?:{_NAME}))*)",
        re.I,
    ),
]


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


def _ddl_targets(query: str, default_schema: str) -> list[TableId] | None:
    """The tables a table-DDL statement changes, or None when it is not table DDL.

    Only the table-name positions of each form are read, so a column named like a captured
    table (``ALTER TABLE audit ADD COLUMN orders INT``) does not count.
    """
    for form in _DDL_FORMS:
        match = form.match(query)
        if match is None:
            continue
        names = re.findall(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?", match.group(1))
        targets = []
        for first, second in names:
            if first.upper() == "TO" and not second:
                continue
            if second:
                targets.append(TableId(_unquote(first), _unquote(second)))
            else:
                targets.append(TableId(default_schema, _unquote(first)))
        return targets
    return None


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


@dataclass(frozen=True, slots=True)
class RowEvent:
    """One row event of a captured table: its decoded rows, where it starts, when it happened.

    ``rows`` are pymysqlreplication's row dicts (``values``/``none_sources`` for inserts and
    deletes, ``before_values``/``after_values`` and their none-sources for updates); row ``i`` is
    at ``BinlogOffset(file, pos, 0, i)``.
    """

    table_id: TableId
    kind: str  # insert | update | delete
    rows: list[dict[str, DriverImage]]
    file: str
    pos: int
    timestamp: int
    #: where its transaction starts in ``file`` (a place a reader can resume from)
    transaction_start: int = 0
    #: its images lack columns (``mysql.partial_images``); only a reader that asked for them
    #: (``patchable``) gets such an event, and only one whose rows ``refusal`` accepts
    partial: bool = False


#: told about a table whose shape changed, where and how (the DDL text)
SchemaChangeHandler = Callable[[TableId, SchemaChange], None]


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
    wanted = set(tables)
    since_keys = {t: (binlog_file_index(p.file), p.pos) for t, p in (since or {}).items()}
    schemas = sorted({t.database for t in wanted})
    stream = CachingBinLogStreamReader(
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
    end_key = (binlog_file_index(end.file), end.pos)
    current_file = start.file
    current_index = binlog_file_index(current_file)
    # (schema, table) of an event -> TableId, or None when not captured
    ids: dict[tuple[str, str], TableId | None] = {}
    checked: dict[TableId, BinlogLibObject] = {}
    cache = stream.cdc_cache
    writers = WindowWriters(_catalogue_loader(source))

    def hold(table_id: TableId, change: SchemaChange, at_key: tuple[int, int]) -> None:
        """Nothing of ``table_id`` from ``change`` on: the handler is told, or it raises."""
        resume = since_keys.get(table_id)
        if resume is not None and at_key < resume:
            return  # a change this table already went through
        if on_schema_change is None:
            raise SchemaChangedError(
                f"{table_id} {change.cause.headline} at {change.position}: {change.what}",
                f"the pipeline stopped before {change.position} so nothing wrong was written; "
                f"cdc-console redump --table {table_id} once the cause is gone, or set "
                '[pipeline] schema_changes = "evolve" to have such tables followed online',
                tables=(table_id,),
                statement=change.what,
            )
        wanted.discard(table_id)
        for name_key, known in ids.items():
            if known == table_id:
                ids[name_key] = None
        on_schema_change(table_id, change)

    def hold_event(
        table_id: TableId, cause: ChangeCause, what: str, group_start: int, event_start: int
    ) -> None:
        """Hold ``table_id`` at the transaction of a row event it cannot take as rows."""
        at = BinlogOffset(current_file, group_start)
        here = BinlogOffset(current_file, event_start)
        hold(table_id, SchemaChange(at, here, what, cause), (current_index, event_start))

    def transaction_start(event_start: int) -> int:
        group = cache.group_start
        return group if group is not None and group <= event_start else event_start

    try:
        for event in stream.window_events():
            if isinstance(event, RotateEvent):
                current_file = event.next_binlog
                current_index = binlog_file_index(current_file)
                if (current_index, event.position) >= end_key:
                    return
                continue
            if isinstance(event, OpaqueEvent):
                if (current_index, event.start) >= end_key:
                    return
                if event.start < start.pos and current_file == start.file:
                    continue
                _hold_opaque(
                    event,
                    wanted,
                    ids,
                    current_file,
                    current_index,
                    hold,
                    transaction_start(event.start),
                )
                continue
            if isinstance(event, DecodedRows):
                event_start = event.log_pos - event.event_size
            else:
                packet = event.packet
                event_start = packet.log_pos - packet.event_size
            if (current_index, event_start) >= end_key:
                return
            if event_start < start.pos and current_file == start.file:
                continue
            if isinstance(event, QueryEvent):
                # A DDL's position is its transaction's start (its GTID event): a boundary a
                # reader can resume at and the server can name the GTID state of.
                at = transaction_start(event_start)
                position = BinlogOffset(current_file, at)
                after = BinlogOffset(current_file, event.packet.log_pos)
                try:
                    _check_ddl(event, wanted, position)
                except SchemaChangedError as exc:
                    if on_schema_change is None:
                        raise
                    for changed in exc.tables:
                        assert isinstance(changed, TableId)
                        hold(
                            changed,
                            SchemaChange(position, after, exc.statement),
                            (current_index, at),
                        )
                    continue
                for changed, what in _statement_changes(event, wanted, writers):
                    change = SchemaChange(position, after, what, ChangeCause.STATEMENT)
                    hold(changed, change, (current_index, at))
                continue
            if not isinstance(event, DecodedRows):
                continue
            name = (event.schema, event.table)
            if name in ids:
                table_id = ids[name]
            else:
                candidate = TableId(event.schema, event.table)
                table_id = ids[name] = candidate if candidate in wanted else None
            if table_id is None:
                continue
            resume = since_keys.get(table_id)
            if resume is not None and (current_index, event_start) < resume:
                continue  # delivered already, and maybe in a shape the table has since left
            if expected_columns is not None and checked.get(table_id) is not event.columns:
                # The columns list is shared by every event of one cached TABLE_MAP, so each
                # distinct list is checked once; a changed table brings a new list.
                try:
                    _check_columns(
                        event.columns,
                        table_id,
                        expected_columns.get(table_id),
                        BinlogOffset(current_file, event_start),
                    )
                except SchemaChangedError as exc:
                    if on_schema_change is None:
                        raise
                    here = BinlogOffset(current_file, event_start)
                    hold(
                        table_id,
                        SchemaChange(here, here, exc.statement),
                        (current_index, event_start),
                    )
                    continue
                checked[table_id] = event.columns
            group_start = transaction_start(event_start)
            if event.partial and (patchable is None or table_id not in patchable):
                why = "this reader needs whole images"
                what = (
                    f"the {event.kind} at {current_file}:{event_start} lacks columns in its row "
                    f"image ({why}; the writing session's binlog_row_image is MINIMAL or "
                    "NOBLOB; the server's should be FULL, and writers should not change it)"
                )
                hold_event(table_id, ChangeCause.PARTIAL_IMAGE, what, group_start, event_start)
                continue
            try:
                rows = _decoded(event)
            except Exception as exc:  # any decode failure holds this table only
                what = (
                    f"the {event.kind} rows at {current_file}:{event_start} do not decode "
                    f"({type(exc).__name__}: {redact(str(exc))[:200]})"
                )
                hold_event(table_id, ChangeCause.UNDECODABLE, what, group_start, event_start)
                continue
            if event.partial:
                assert patchable is not None
                why = partial_images.refusal(event.kind, rows, patchable[table_id])
                if why:
                    what = (
                        f"the {event.kind} at {current_file}:{event_start} lacks columns in "
                        f"its row image and cannot be applied exactly ({why}; the writing "
                        "session's binlog_row_image is MINIMAL or NOBLOB; the server's should "
                        "be FULL, and writers should not change it)"
                    )
                    hold_event(table_id, ChangeCause.PARTIAL_IMAGE, what, group_start, event_start)
                    continue
            yield RowEvent(
                table_id,
                event.kind,
                rows,
                current_file,
                event_start,
                event.timestamp,
                group_start,
                partial=event.partial,
            )
    except pymysql.err.OperationalError as exc:
        raise _translate(exc, start) from None
    finally:
        stream.close()


#: a test's way to make one table's row events undecodable (``CDC_TEST_UNDECODABLE=db.table``):
#: the fault-injection test of one table's failure domain
_UNDECODABLE_FOR_TESTS = os.environ.get("CDC_TEST_UNDECODABLE", "")


def _decoded(event: DecodedRows) -> list[dict[str, DriverImage]]:
    """The event's rows, decoded now (a failure is the event's, raised here)."""
    if _UNDECODABLE_FOR_TESTS and f"{event.schema}.{event.table}" == _UNDECODABLE_FOR_TESTS:
        raise ValueError("undecodable by the test hook CDC_TEST_UNDECODABLE")
    return event.rows


def _query_text(event: QueryEvent) -> tuple[str, str]:
    query = (
        event.query
        if isinstance(event.query, str)
        else bytes(event.query).decode("utf-8", "replace")
    )
    schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
    return query, schema


def _statement_changes(
    event: QueryEvent, wanted: set[TableId], writers: WindowWriters
) -> list[tuple[TableId, str]]:
    """The captured tables a DML logged as a statement may change, each with what to say:
    those it names, and those the triggers and stored functions it sets off write."""
    query, schema = _query_text(event)
    targets = dml_targets(query, schema)
    if targets is None:
        writers.learned.learn(query, schema)
        return []
    if targets:
        named = [t for t in dict.fromkeys(targets) if t in wanted]
    else:  # a DML whose targets do not read: any captured table it could name
        named = sorted(t for t in wanted if not schema or t.database == schema)
    reached = captured_in(writers.reached(targets, query, schema), wanted)
    text = " ".join(without_literals(query).split())
    said = f"{text[:200]}{'...' if len(text) > 200 else ''}"
    why = (
        "the writing session's binlog_format is STATEMENT or MIXED; the server's should be ROW, "
        "and writers should not change it"
    )
    found = [(t, f"{said} (a DML logged as SQL text: {why})") for t in named]
    found += [
        (
            t,
            f"{said} (a DML logged as SQL text that sets off a trigger or stored function "
            f"writing this table: {why})",
        )
        for t in reached
        if t not in named
    ]
    return found


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


def _hold_opaque(
    event: OpaqueEvent,
    wanted: set[TableId],
    ids: dict[tuple[str, str], TableId | None],
    current_file: str,
    current_index: int,
    hold: Callable[[TableId, SchemaChange, tuple[int, int]], None],
    transaction_start: int,
) -> None:
    """Hold every table ``event`` may change: the one it names, or, naming none, all."""
    if event.schema is not None and event.table is not None:
        named = TableId(event.schema, event.table)
        hit = [named] if named in wanted else []
    else:
        hit = sorted(wanted)
    here = BinlogOffset(current_file, event.start)
    at = BinlogOffset(current_file, transaction_start)
    cause = ChangeCause.UNDECODABLE if event.error else ChangeCause.OPAQUE
    for table_id in hit:
        what = f"{event.description} at {here}; fix: {event.fix(str(table_id))}"
        hold(table_id, SchemaChange(at, here, what, cause), (current_index, event.start))


def _check_ddl(event: QueryEvent, wanted: set[TableId], position: BinlogOffset) -> None:
    query, schema = _query_text(event)
    targets = _ddl_targets(query, schema)
    if not targets:
        return
    hit = [t for t in targets if t in wanted]
    if hit:
        raise SchemaChangedError(
            f"DDL on captured table {hit[0]} at {position}: {query.strip()[:200]}",
            f"the pipeline stopped before {position} so no row was written with the wrong "
            f"schema; re-snapshot the table once the change is done "
            f"('cdc-console redump --table {hit[0]}') or remove it from source.tables",
            tables=tuple(hit),
            statement=" ".join(query.split())[:300],
        )


def _check_columns(
    columns: BinlogLibObject, table_id: TableId, expected: list[str] | None, position: BinlogOffset
) -> None:
    if expected is None:
        return
    names = [c.name for c in columns]
    if names != expected:
        if any(n is None or str(n).startswith("UNKNOWN_COL") for n in names):
            raise SourceError(
                f"binlog events of {table_id} carry no column names at {position}",
                "SET GLOBAL binlog_row_metadata = 'FULL' on the server (and in my.cnf)",
            )
        raise SchemaChangedError(
            f"{table_id} changed shape at {position}: binlog has columns {names}, "
            f"snapshot had {expected}",
            f"re-snapshot the table ('cdc-console redump --table {table_id}')",
            tables=(table_id,),
            statement=f"columns now {names}, were {expected}",
        )


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
