"""One row event as a window reader sees it: its table, kind and position, rows decoded late.

A reader passes over most events (tables it does not capture, events before a table's resume
position), so ``DecodedRows`` decodes its rows only when they are asked for, by the library's
decoder or ours (``binlog_decode``), and refuses once the reader has moved on.
"""

from __future__ import annotations

from typing import Protocol

from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    WriteRowsEvent,
)

from cdc_console.core.untyped import BinlogLibObject
from cdc_console.mysql.binlog_events import (
    full_bitmap,
)
from cdc_console.mysql.row_images import RowDict


class _FastDecoder(Protocol):
    def decode(self, *how: BinlogLibObject) -> list[RowDict]: ...


class _Reader(Protocol):
    """What a row event asks of the reader it came from (``CachingBinLogStreamReader``):
    which event it is on now, and its own decoder once it has one."""

    _turn: int
    _fast_path: _FastDecoder | None


class DecodedRows:
    """One row event of a table the reader follows: what a window reader needs of it.

    ``columns`` is the TABLE_MAP's column list (one list per parsed TABLE_MAP, so a changed
    table brings a new one), ``log_pos`` the position after the event and ``event_size`` its
    size: ``log_pos - event_size`` is where it starts. ``rows`` (the library's row dicts) are
    decoded on first use, so a reader that passes over an event (a table it does not capture,
    one left out since its DDL, an event before a table's resume position) never decodes it,
    nor fails on a value it could not decode; as with the library's own lazy rows, that use
    must come before the reader moves on.
    """

    __slots__ = (
        "_decode",
        "_reader",
        "_rows",
        "_turn",
        "columns",
        "event_size",
        "kind",
        "log_pos",
        "partial",
        "schema",
        "table",
        "timestamp",
    )

    def __init__(
        self,
        kind: str,
        schema: str,
        table: str,
        columns: BinlogLibObject,
        timestamp: int,
        log_pos: int,
        event_size: int,
        reader: _Reader,
        decode: tuple[BinlogLibObject, ...],
        partial: bool = False,
    ) -> None:
        self.kind = kind  # insert | update | delete
        #: an image lacks some of the table's columns (``binlog_row_image`` MINIMAL/NOBLOB):
        #: the library reads an absent column as None, which is not the column's value
        self.partial = partial
        self.schema = schema
        self.table = table
        self.columns = columns
        self.timestamp = timestamp
        self.log_pos = log_pos
        self.event_size = event_size
        self._rows: list[RowDict] | None = None
        #: how to decode: ``(library_event,)``, or ``_FastPath.decode``'s arguments
        self._decode = decode
        self._reader = reader
        self._turn = reader._turn

    @property
    def rows(self) -> list[RowDict]:
        if self._rows is None:
            if self._reader._turn != self._turn:
                raise RuntimeError(
                    "a row event's rows were first asked for after the reader moved on"
                )
            decode = self._decode
            fast = self._reader._fast_path
            if len(decode) == 1 or fast is None:
                self._rows = decode[0].rows
            else:
                self._rows = fast.decode(*decode)
        return self._rows


def library_partial(event: BinlogLibObject) -> bool:
    """Whether a library row event's images lack columns (its present-columns bitmaps)."""
    columns = event.number_of_columns
    if not full_bitmap(bytes(event.columns_present_bitmap), columns):
        return True
    second = getattr(event, "columns_present_bitmap2", None)
    return second is not None and not full_bitmap(bytes(second), columns)


def row_kind(event: BinlogLibObject) -> str:
    if isinstance(event, WriteRowsEvent):
        return "insert"
    if isinstance(event, DeleteRowsEvent):
        return "delete"
    return "update"
