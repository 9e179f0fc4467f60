"""One binlog window's walk: where it is, which tables it still follows, and what each event
means for them.

``read_window_events`` (``mysql.binlog``) feeds every event of ``[start, end)`` to a
``WindowWalk``, which yields the row events of the captured tables and holds a table, with
what happened and where, at the first event it cannot take as rows: a DDL, a DML logged as a
statement, row images that lack columns, rows that do not decode, an event type not decoded.
From there on nothing of that table is yielded, while the others go on; without a handler
(``on_schema_change``) the hold raises instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from pymysqlreplication.event import QueryEvent, RotateEvent

from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.core.untyped import BinlogLibObject, DriverImage
from cdc_console.errors import SchemaChangedError, SourceError, redact
from cdc_console.mysql import partial_images
from cdc_console.mysql.binlog_ddl import check_ddl, query_text
from cdc_console.mysql.binlog_events import OpaqueEvent
from cdc_console.mysql.decoded_rows import DecodedRows
from cdc_console.mysql.logged_statements import dml_targets, without_literals
from cdc_console.mysql.stored_writers import WindowWriters, captured_in


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

#: a test's way to make one table's row events undecodable (``CDC_TEST_UNDECODABLE=db.table``):
#: the fault-injection test of one table's failure domain
_UNDECODABLE_FOR_TESTS = os.environ.get("CDC_TEST_UNDECODABLE", "")

_FULL_IMAGES = (
    "the writing session's binlog_row_image is MINIMAL or NOBLOB; the server's should be FULL, "
    "and writers should not change it"
)


class WindowWalk:
    """The state of one window's walk over the binlog, event by event (see the module)."""

    def __init__(
        self,
        start: BinlogOffset,
        end: BinlogOffset,
        tables: Collection[TableId],
        writers: WindowWriters,
        group_start: Callable[[], int | None],
        *,
        expected_columns: dict[TableId, list[str]] | None = None,
        on_schema_change: SchemaChangeHandler | None = None,
        since: Mapping[TableId, BinlogOffset] | None = None,
        patchable: Mapping[TableId, Collection[str]] | None = None,
    ) -> None:
        self.start = start
        self.wanted = set(tables)
        self.writers = writers
        #: where the transaction of the event being read starts, as the decoder saw it
        self.group_start = group_start
        self.expected_columns = expected_columns
        self.on_schema_change = on_schema_change
        self.patchable = patchable
        self.since_keys = {t: (binlog_file_index(p.file), p.pos) for t, p in (since or {}).items()}
        self.end_key = (binlog_file_index(end.file), end.pos)
        self.file = start.file
        self.index = binlog_file_index(start.file)
        #: (schema, table) of an event -> TableId, or None when not captured
        self.ids: dict[tuple[str, str], TableId | None] = {}
        #: the columns list last checked per table (one per cached TABLE_MAP)
        self.checked: dict[TableId, BinlogLibObject] = {}

    # --- where the walk is ------------------------------------------------------------------

    def rotate(self, event: RotateEvent) -> bool:
        """Follow a rotation; True when it ends the window."""
        self.file = event.next_binlog
        self.index = binlog_file_index(self.file)
        return (self.index, event.position) >= self.end_key

    def past_end(self, event_start: int) -> bool:
        return (self.index, event_start) >= self.end_key

    def before_start(self, event_start: int) -> bool:
        return event_start < self.start.pos and self.file == self.start.file

    def transaction_start(self, event_start: int) -> int:
        group = self.group_start()
        return group if group is not None and group <= event_start else event_start

    # --- holding a table ----------------------------------------------------------------------

    def hold(self, table_id: TableId, change: SchemaChange, at_key: tuple[int, int]) -> None:
        """Nothing of ``table_id`` from ``change`` on: the handler is told, or it raises."""
        resume = self.since_keys.get(table_id)
        if resume is not None and at_key < resume:
            return  # a change this table already went through
        if self.on_schema_change is None:
            raise SchemaChangedError(
                f"{table_id} {change.cause.headline} at {change.position}: {change.what}",
                f"the pipeline stopped before {change.position} so nothing wrong was written; "
                f"cdc-console redump --table {table_id} once the cause is gone, or set "
                '[pipeline] schema_changes = "evolve" to have such tables followed online',
                tables=(table_id,),
                statement=change.what,
            )
        self.wanted.discard(table_id)
        for name_key, known in self.ids.items():
            if known == table_id:
                self.ids[name_key] = None
        self.on_schema_change(table_id, change)

    def _hold_event(
        self, table_id: TableId, cause: ChangeCause, what: str, group_start: int, event_start: int
    ) -> None:
        """Hold ``table_id`` at the transaction of a row event it cannot take as rows."""
        at = BinlogOffset(self.file, group_start)
        here = BinlogOffset(self.file, event_start)
        self.hold(table_id, SchemaChange(at, here, what, cause), (self.index, event_start))

    # --- the events ---------------------------------------------------------------------------

    def opaque(self, event: OpaqueEvent) -> None:
        """Hold every table ``event`` may change: the one it names, or, naming none, all."""
        if event.schema is not None and event.table is not None:
            named = TableId(event.schema, event.table)
            hit = [named] if named in self.wanted else []
        else:
            hit = sorted(self.wanted)
        here = BinlogOffset(self.file, event.start)
        at = BinlogOffset(self.file, self.transaction_start(event.start))
        cause = ChangeCause.UNDECODABLE if event.error else ChangeCause.OPAQUE
        for table_id in hit:
            what = f"{event.description} at {here}; fix: {event.fix(str(table_id))}"
            self.hold(table_id, SchemaChange(at, here, what, cause), (self.index, event.start))

    def query(self, event: QueryEvent, event_start: int) -> None:
        """A statement: a DDL or a DML logged as text holds each captured table it may change."""
        # A DDL's position is its transaction's start (its GTID event): a boundary a reader can
        # resume at and the server can name the GTID state of.
        at = self.transaction_start(event_start)
        position = BinlogOffset(self.file, at)
        after = BinlogOffset(self.file, event.packet.log_pos)
        try:
            check_ddl(event, self.wanted, position)
        except SchemaChangedError as exc:
            if self.on_schema_change is None:
                raise
            for changed in exc.tables:
                assert isinstance(changed, TableId)
                self.hold(changed, SchemaChange(position, after, exc.statement), (self.index, at))
            return
        for changed, what in _statement_changes(event, self.wanted, self.writers):
            change = SchemaChange(position, after, what, ChangeCause.STATEMENT)
            self.hold(changed, change, (self.index, at))

    def rows(self, event: DecodedRows, event_start: int) -> RowEvent | None:
        """The row event of a captured table as it is to be applied, or None: not captured,
        delivered already, or held here."""
        table_id = self._table_of(event)
        if table_id is None:
            return None
        resume = self.since_keys.get(table_id)
        if resume is not None and (self.index, event_start) < resume:
            return None  # delivered already, and maybe in a shape the table has since left
        if not self._columns_hold(event, table_id, event_start):
            return None
        group_start = self.transaction_start(event_start)
        where = f"{self.file}:{event_start}"
        if event.partial and (self.patchable is None or table_id not in self.patchable):
            what = (
                f"the {event.kind} at {where} lacks columns in its row image (this reader needs "
                f"whole images; {_FULL_IMAGES})"
            )
            self._hold_event(table_id, ChangeCause.PARTIAL_IMAGE, what, group_start, event_start)
            return None
        try:
            rows = _decoded(event)
        except Exception as exc:  # any decode failure holds this table only
            what = (
                f"the {event.kind} rows at {where} do not decode "
                f"({type(exc).__name__}: {redact(str(exc))[:200]})"
            )
            self._hold_event(table_id, ChangeCause.UNDECODABLE, what, group_start, event_start)
            return None
        if event.partial:
            assert self.patchable is not None
            why = partial_images.refusal(event.kind, rows, self.patchable[table_id])
            if why:
                what = (
                    f"the {event.kind} at {where} lacks columns in its row image and cannot be "
                    f"applied exactly ({why}; {_FULL_IMAGES})"
                )
                self._hold_event(
                    table_id, ChangeCause.PARTIAL_IMAGE, what, group_start, event_start
                )
                return None
        return RowEvent(
            table_id,
            event.kind,
            rows,
            self.file,
            event_start,
            event.timestamp,
            group_start,
            partial=event.partial,
        )

    def _table_of(self, event: DecodedRows) -> TableId | None:
        name = (event.schema, event.table)
        if name in self.ids:
            return self.ids[name]
        candidate = TableId(event.schema, event.table)
        found = self.ids[name] = candidate if candidate in self.wanted else None
        return found

    def _columns_hold(self, event: DecodedRows, table_id: TableId, event_start: int) -> bool:
        """Whether the event's columns are the ones the table was read with; a table whose
        columns changed is held (or, without a handler, the error raised)."""
        if self.expected_columns is None or self.checked.get(table_id) is event.columns:
            return True
        # The columns list is shared by every event of one cached TABLE_MAP, so each distinct
        # list is checked once; a changed table brings a new list.
        here = BinlogOffset(self.file, event_start)
        try:
            _check_columns(event.columns, table_id, self.expected_columns.get(table_id), here)
        except SchemaChangedError as exc:
            if self.on_schema_change is None:
                raise
            self.hold(table_id, SchemaChange(here, here, exc.statement), (self.index, event_start))
            return False
        self.checked[table_id] = event.columns
        return True


def _decoded(event: DecodedRows) -> list[dict[str, DriverImage]]:
    """The event's rows, decoded now (a failure is the event's, raised here)."""
    if _UNDECODABLE_FOR_TESTS and f"{event.schema}.{event.table}" == _UNDECODABLE_FOR_TESTS:
        raise ValueError("undecodable by the test hook CDC_TEST_UNDECODABLE")
    return event.rows


def _statement_changes(
    event: QueryEvent, wanted: set[TableId], writers: WindowWriters
) -> list[tuple[TableId, str]]:
    """The captured tables a DML logged as a statement may change, each with what to say:
    those it names, and those the triggers and stored functions it sets off write."""
    query, schema = query_text(event)
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
