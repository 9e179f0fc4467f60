"""A faster ``BinLogStreamReader`` for our own windows: TABLE_MAP parsed once, rows decoded in bulk.

pymysqlreplication 1.0.17 (pinned) re-parses the TABLE_MAP event before every row event: it builds
a ``Column`` per column, reads the optional metadata and computes the primary key through
``Column.data`` each time, about half of its decode time on a stream of small transactions. It
then decodes every value through several layers of method calls per byte read. Neither is needed:

- a TABLE_MAP event's body (table id, schema, table, column types and metadata, optional metadata)
  fully determines what the library parses from it, so :class:`DecodeCache` keeps the parsed
  result per exact body bytes and :class:`CachedTableMapEvent` reuses it. A changed table (new
  columns, new metadata, new table id) has different bytes and is parsed afresh; nothing is ever
  looked up by table id or name alone;
- ``cdc_console.mysql.row_images.RowsPlan`` decodes a row event's images straight from the
  packet bytes with one precompiled reader per column, replicating the library's value decoding
  exactly. Column types it does not cover, partial JSON updates and any decoding failure go
  through the library's own decoder instead, so the values, and the errors, are the library's;
- ``CachingBinLogStreamReader.window_events`` (the window reader's path) goes one step further:
  a TABLE_MAP body seen before, a row event with a compiled plan and an event type the library
  would not parse are handled from the packet's bytes with no wrapper or event object at all
  (:class:`_FastPath`); everything else takes ``fetchone``'s path.

Everything is scoped to :class:`CachingBinLogStreamReader` instances: the library's classes are
subclassed, never patched, so a plain ``BinLogStreamReader`` in the same process (the benchmark's
reference decoder, tests) behaves exactly as shipped. The cache lives on the reader, so it never
outlives one window.
"""

from __future__ import annotations

import logging
import warnings
import zlib
from collections.abc import Iterator
from typing import ClassVar

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication import binlogstream as _binlogstream
from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import NotImplementedEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc_console.core.untyped import BinlogLibObject, PassThrough
from cdc_console.mysql.binlog_events import (
    CHANGE_FREE,
    COMPRESSED_ROWS,
    COMPRESSED_ROWS_V2,
    EVENT_HEADER,
    HEADER_END,
    ROW_TYPES,
    CompressedEventError,
    OpaqueEvent,
    full_bitmap,
    is_opaque,
    plain_packet,
)
from cdc_console.mysql.decoded_rows import DecodedRows, library_partial, row_kind
from cdc_console.mysql.library_events import (
    SUBSTITUTES,
    CachedTableMapEvent,
    DecodeCache,
    FastDeleteRowsEvent,
    FastUpdateRowsEvent,
    FastWriteRowsEvent,
)
from cdc_console.mysql.row_images import RowDict, RowsPlan
from cdc_console.mysql.row_readers import NoneSources

__all__ = ["CachingBinLogStreamReader", "DecodeCache", "DecodedRows"]

_log = logging.getLogger(__name__)

# The first event of every transaction (MySQL 5.7+ writes an anonymous one when GTIDs are off);
# its start is where a reader can resume before the transaction.
_GROUP_START_TYPES = frozenset(
    {BINLOG.GTID_LOG_EVENT, BINLOG.ANONYMOUS_GTID_LOG_EVENT, BINLOG.MARIADB_GTID_EVENT}
)


class _DecodingPacketWrapper(BinLogPacketWrapper):  # type: ignore[misc]
    """The library's packet wrapper with our event classes for TABLE_MAP and row events.

    It also notes where the latest transaction began (``DecodeCache.group_start``) from the
    header of its GTID event, so a reader learns a DDL's transaction start without the GTID
    event being parsed into an object and passed up: one of those per transaction cost the
    window reader a sixth of its speed.
    """

    _BinLogPacketWrapper__event_map: ClassVar[dict[int, type]] = {
        **BinLogPacketWrapper._BinLogPacketWrapper__event_map,
        BINLOG.TABLE_MAP_EVENT: CachedTableMapEvent,
        BINLOG.WRITE_ROWS_EVENT_V1: FastWriteRowsEvent,
        BINLOG.WRITE_ROWS_EVENT_V2: FastWriteRowsEvent,
        BINLOG.DELETE_ROWS_EVENT_V1: FastDeleteRowsEvent,
        BINLOG.DELETE_ROWS_EVENT_V2: FastDeleteRowsEvent,
        BINLOG.UPDATE_ROWS_EVENT_V1: FastUpdateRowsEvent,
        BINLOG.UPDATE_ROWS_EVENT_V2: FastUpdateRowsEvent,
    }

    def __init__(
        self,
        from_packet: BinlogLibObject,
        *args: PassThrough,
        cdc_cache: DecodeCache,
        **kwargs: PassThrough,
    ) -> None:
        self.cdc_cache = cdc_cache
        super().__init__(from_packet, *args, **kwargs)
        kind = self.event_type
        if kind in _GROUP_START_TYPES:
            cdc_cache.group_start = self.log_pos - self.event_size
        elif kind == BINLOG.ROTATE_EVENT:
            cdc_cache.group_start = None


#: Row event type -> (kind, the post-header length the library reads, the library's class).
_ROW_EVENT_TYPES: dict[int, tuple[str, int, type]] = {
    BINLOG.WRITE_ROWS_EVENT_V1: ("insert", 8, WriteRowsEvent),
    BINLOG.WRITE_ROWS_EVENT_V2: ("insert", 10, WriteRowsEvent),
    BINLOG.DELETE_ROWS_EVENT_V1: ("delete", 8, DeleteRowsEvent),
    BINLOG.DELETE_ROWS_EVENT_V2: ("delete", 10, DeleteRowsEvent),
    BINLOG.UPDATE_ROWS_EVENT_V1: ("update", 8, UpdateRowsEvent),
    BINLOG.UPDATE_ROWS_EVENT_V2: ("update", 10, UpdateRowsEvent),
}


#: event types read as they come: change-free ones, and the plain query and row events
_AS_IS = frozenset(CHANGE_FREE | {BINLOG.QUERY_EVENT} | ROW_TYPES)


class _FastPath:
    """``window_events``' handling of the hot event types straight from the packet bytes.

    ``handle`` returns True when it did everything the library's path would have done with the
    packet and there is nothing to yield, a :class:`DecodedRows` to yield, or False to leave the
    packet to the library. For TABLE_MAP bodies already parsed, row events with a compiled plan
    (their rows decoded later, by ``decode``) and event types the library would not parse, it
    leaves exactly the state the library's path leaves (``table_map``, ``log_pos``, the
    transaction start); it hands over anything else (a first TABLE_MAP of a body, an unusual
    post-header, extra row data, and, at decode time, a value the plan cannot read).
    """

    def __init__(self, reader: CachingBinLogStreamReader) -> None:
        me: BinlogLibObject = reader
        #: the reader, untyped: the library's private attributes are read through it
        self.reader = me
        self.cache = reader.cdc_cache
        allowed = me._BinLogStreamReader__allowed_events
        self.row_types = {
            code: (kind, known)
            for code, (kind, known, cls) in _ROW_EVENT_TYPES.items()
            if cls in allowed
        }
        self.only_tables = me._BinLogStreamReader__only_tables
        self.ignored_tables = me._BinLogStreamReader__ignored_tables
        self.only_schemas = me._BinLogStreamReader__only_schemas
        self.ignored_schemas = me._BinLogStreamReader__ignored_schemas
        self.ignore_decode_errors = bool(me._BinLogStreamReader__ignore_decode_errors)
        self.enabled = not me._BinLogStreamReader__verify_checksum
        # A reader that asked for TABLE_MAP events gets each one, as an event object.
        self.table_maps_passed_over = not ({TableMapEvent, CachedTableMapEvent} & set(allowed))
        # Event types the library's wrapper does not even parse (GTID, XID, ... unless asked
        # for): all it does with them is move ``log_pos``.
        in_packet = me._BinLogStreamReader__allowed_events_in_packet
        classes = _DecodingPacketWrapper._BinLogPacketWrapper__event_map
        self.passed_over = frozenset(
            code for code in range(256) if classes.get(code, NotImplementedEvent) not in in_packet
        )

    def handle(self, pkt: BinlogLibObject) -> DecodedRows | bool:
        data: bytes = pkt._data
        if not self.enabled or len(data) < HEADER_END:
            return False
        kind = data[5]
        if kind == BINLOG.TABLE_MAP_EVENT:
            return self.table_maps_passed_over and self._table_map(data)
        spec = self.row_types.get(kind)
        if spec is not None:
            return self._rows(pkt, data, kind, spec)
        if kind in self.passed_over:
            _, _, _, event_size, log_pos, _ = EVENT_HEADER.unpack_from(data)
            if kind in _GROUP_START_TYPES:
                self.cache.group_start = log_pos - event_size
            if log_pos:
                self.reader.log_pos = log_pos
            return True
        return False

    def _body_end(self, event_size: int) -> int:
        tail = 23 if self.reader._BinLogStreamReader__use_checksum else 19
        return HEADER_END + event_size - tail

    def _table_map(self, data: bytes) -> bool:
        me = self.reader
        cache = self.cache
        cache.check_context(me.mysql_version, me._BinLogStreamReader__post_header_lengths)
        _, _, _, event_size, log_pos, _ = EVENT_HEADER.unpack_from(data)
        attrs = cache.table_maps.get(data[HEADER_END : self._body_end(event_size)])
        if attrs is None:
            return False
        cache.hits += 1
        if log_pos:
            me.log_pos = log_pos
        if attrs["_processed"]:
            me.table_map[attrs["table_id"]] = attrs["table_obj"]
        return True

    def _skipped(self, table: BinlogLibObject) -> bool:
        """The library's filters of ``RowsEvent.__init__`` (an unprocessed event is passed over)."""
        name, schema = table.table, table.schema
        if self.only_tables is not None and name not in self.only_tables:
            return True
        if self.ignored_tables is not None and name in self.ignored_tables:
            return True
        if self.only_schemas is not None and schema not in self.only_schemas:
            return True
        return self.ignored_schemas is not None and schema in self.ignored_schemas

    def _rows(
        self, pkt: BinlogLibObject, data: bytes, event_type: int, spec: tuple[str, int]
    ) -> DecodedRows | bool:
        me = self.reader
        timestamp, _, _, event_size, log_pos, _ = EVENT_HEADER.unpack_from(data)
        table = me.table_map.get(int.from_bytes(data[20:26], "little"))
        if table is None or self._skipped(table):
            if log_pos:
                me.log_pos = log_pos
            return True
        kind, known = spec
        lengths = me._BinLogStreamReader__post_header_lengths
        if lengths and 0 <= event_type - 1 < len(lengths) and lengths[event_type - 1] != known:
            return False
        if known == 10:
            if data[28:30] != b"\x02\x00":  # extra row data (NDB or partition info)
                return False
            pos = 30
        else:
            pos = 28
        end = self._body_end(event_size)
        if pos >= end or data[pos] >= 251:
            return False
        columns = data[pos]
        size = (columns + 7) >> 3
        bitmap = data[pos + 1 : pos + 1 + size]
        pos += 1 + size
        plan = self.cache.plan_for(table, self.ignore_decode_errors, me._ctl_connection)
        if plan is None or pos > end:
            return False
        partial = not full_bitmap(bitmap, columns) or (
            kind == "update" and not full_bitmap(data[pos : pos + size], columns)
        )
        if log_pos:
            me.log_pos = log_pos
        original = self.reader._original_size
        return DecodedRows(
            kind,
            table.schema,
            table.table,
            table.columns,
            timestamp,
            log_pos,
            event_size if original is None else original,
            self.reader,
            (pkt, data, kind == "update", plan, pos, end, bitmap, size),
            partial,
        )

    def decode(
        self,
        pkt: BinlogLibObject,
        data: bytes,
        update: bool,
        plan: RowsPlan,
        pos: int,
        end: int,
        bitmap: bytes,
        size: int,
    ) -> list[RowDict]:
        """A row event's rows by its table's plan; the library's, from the packet, on a surprise."""
        sources: NoneSources = {}
        try:
            if update:
                bitmap2 = data[pos : pos + size]
                rows, _ = plan.update_images(data, pos + size, end, bitmap, bitmap2, sources)
            else:
                rows, _ = plan.single_images(data, pos, end, bitmap, sources)
        except Exception:
            # The library decodes it, or raises its own error, from the untouched packet.
            library_rows: list[RowDict] = self.reader._library_event(pkt).rows
            return library_rows
        self.cache.fast_events += 1
        self.cache.direct_events += 1
        return rows


class CachingBinLogStreamReader(BinLogStreamReader):  # type: ignore[misc]
    """``BinLogStreamReader`` whose events come from :class:`_DecodingPacketWrapper`.

    Yields instances of subclasses of the library's event classes, so ``isinstance`` checks
    against ``WriteRowsEvent`` & co. hold. ``fetchone`` is the library's (1.0.17), with the packet
    wrapper swapped: the wrapper class is a module global there, and patching it would change
    every reader in the process.
    """

    def __init__(self, *args: PassThrough, **kwargs: PassThrough) -> None:
        if kwargs.get("use_column_name_cache"):
            raise ValueError("use_column_name_cache is not supported by the caching reader")
        super().__init__(*args, **kwargs)
        me: BinlogLibObject = self
        self.cdc_cache = DecodeCache()
        #: packets read by ``window_events`` (see ``DecodedRows.rows``)
        self._turn = 0
        self._fast_path: _FastPath | None = None
        #: the size of the compressed event the current packet was inflated from, else None
        self._original_size: int | None = None
        allowed = me._BinLogStreamReader__allowed_events
        me._BinLogStreamReader__allowed_events = frozenset(
            allowed | {fast for base, fast in SUBSTITUTES.items() if base in allowed}
        )
        in_packet = me._BinLogStreamReader__allowed_events_in_packet
        me._BinLogStreamReader__allowed_events_in_packet = frozenset(
            in_packet | {fast for base, fast in SUBSTITUTES.items() if base in in_packet}
        )

    def fetchone(self) -> BinlogLibObject:  # pragma: no cover - exercised against a server
        # pymysqlreplication 1.0.17's BinLogStreamReader.fetchone, in three parts shared with
        # ``window_events``; only the wrapper class (and its cdc_cache argument) differ.
        while True:
            pkt = self._next_packet()
            if pkt is None:
                return None
            event = self._library_event(pkt)
            if event is not None:
                return event

    def window_events(self) -> Iterator[BinlogLibObject | DecodedRows]:
        """The events ``fetchone`` returns, with every row event as :class:`DecodedRows`.

        TABLE_MAP events whose body was parsed before and row events of a table with a compiled
        plan are handled straight from the packet bytes, with no wrapper or event object: one
        of each per row event cost a window reader a third of its time. Anything else (and any
        surprise on the way) goes through ``fetchone``'s path, and so through the library.
        """
        me: BinlogLibObject = self
        if me.end_log_pos or me.skip_to_timestamp or me._BinLogStreamReader__freeze_schema:
            fast = None
        else:
            fast = self._fast_path = _FastPath(self)
        while True:
            pkt = self._next_packet()
            self._turn += 1
            if pkt is None:
                return
            data: bytes = pkt._data
            self._original_size = None
            event_type = data[5] if len(data) >= HEADER_END else None
            if event_type is not None and event_type not in _AS_IS:
                # an event to inflate first, or one that is not decoded (reported)
                if is_opaque(event_type):
                    yield self._opaque(pkt, event_type)
                    continue
                try:
                    plain = plain_packet(pkt, bool(me._BinLogStreamReader__use_checksum))
                except (CompressedEventError, zlib.error) as exc:
                    yield self._opaque(pkt, event_type, f"it does not inflate ({exc})")
                    continue
                if plain is not None:
                    pkt, self._original_size = plain
            if fast is not None:
                handled = fast.handle(pkt)
                if handled is True:
                    continue
                if handled is not False:
                    yield handled
                    continue
            event = self._library_event(pkt)
            if event is None:
                continue
            packet = event.packet
            if self._original_size is not None:
                # positions are the compressed event's: where it starts, where the next begins
                packet.event_size = self._original_size
            if isinstance(event, RowsEvent):
                yield DecodedRows(
                    row_kind(event),
                    event.schema,
                    event.table,
                    event.columns,
                    event.timestamp,
                    packet.log_pos,
                    packet.event_size,
                    self,
                    (event,),
                    library_partial(event),
                )
            else:
                yield event

    def _opaque(self, pkt: BinlogLibObject, event_type: int, error: str = "") -> OpaqueEvent:
        """An event that may change rows and is not decoded; the stream moves past it."""
        me: BinlogLibObject = self
        _, _, _, event_size, log_pos, _ = EVENT_HEADER.unpack_from(pkt._data)
        if log_pos:
            me.log_pos = log_pos
        schema = table = None
        names_a_table = event_type in COMPRESSED_ROWS or event_type in COMPRESSED_ROWS_V2
        if names_a_table or event_type == BINLOG.PARTIAL_UPDATE_ROWS_EVENT:
            mapped = me.table_map.get(int.from_bytes(pkt._data[20:26], "little"))
            if mapped is not None:
                schema, table = mapped.schema, mapped.table
        return OpaqueEvent(event_type, log_pos - event_size, log_pos, schema, table, error)

    def _next_packet(self) -> BinlogLibObject:  # pragma: no cover - exercised against a server
        """The next OK packet of the stream, or None at its end (the stream is then closed)."""
        me: BinlogLibObject = self
        while True:
            if me.end_log_pos and me.is_past_end_log_pos:
                return None

            if not me._BinLogStreamReader__connected_stream:
                me._BinLogStreamReader__connect_to_stream()

            if not me._BinLogStreamReader__connected_ctl:
                # The library connects with pymysql's deprecated ``db=``; the warning, aimed at
                # this frame, is the library's (pyproject ignores it for the library's modules).
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", "'db' is deprecated", DeprecationWarning)
                    me._BinLogStreamReader__connect_to_ctl()

            try:
                if _binlogstream.PYMYSQL_VERSION_LT_06:
                    pkt = me._stream_connection.read_packet()
                else:
                    pkt = me._stream_connection._read_packet()
            except pymysql.OperationalError as error:
                code, _message = error.args
                if code in _binlogstream.MYSQL_EXPECTED_ERROR_CODES:
                    me._stream_connection.close()
                    me._BinLogStreamReader__connected_stream = False
                    _binlogstream.logger.warning(
                        """
                          A pymysql.OperationalError error occurred, Re-request the connection.
                        """,
                    )
                    continue
                raise

            if pkt.is_eof_packet():
                me.close()
                return None

            if not pkt.is_ok_packet():
                continue
            return pkt

    def _library_event(self, pkt: BinlogLibObject) -> BinlogLibObject:
        """The library's handling of one packet: its event, or None when it is passed over."""
        me: BinlogLibObject = self
        binlog_event = _DecodingPacketWrapper(
            pkt,
            me.table_map,
            me._ctl_connection,
            me.mysql_version,
            me._BinLogStreamReader__use_checksum,
            me._BinLogStreamReader__allowed_events_in_packet,
            me._BinLogStreamReader__only_tables,
            me._BinLogStreamReader__ignored_tables,
            me._BinLogStreamReader__only_schemas,
            me._BinLogStreamReader__ignored_schemas,
            me._BinLogStreamReader__freeze_schema,
            me._BinLogStreamReader__ignore_decode_errors,
            me._BinLogStreamReader__verify_checksum,
            me._BinLogStreamReader__optional_meta_data,
            me._BinLogStreamReader__enable_logging,
            me._BinLogStreamReader__use_column_name_cache,
            me._BinLogStreamReader__post_header_lengths,
            cdc_cache=self.cdc_cache,
        )

        if binlog_event.event_type == BINLOG.ROTATE_EVENT:
            me.log_pos = binlog_event.event.position
            me.log_file = binlog_event.event.next_binlog
            # Table ids are not persistent across a server restart, which always rotates.
            if binlog_event.timestamp != 0:
                me.table_map = {}

        elif binlog_event.log_pos:
            me.log_pos = binlog_event.log_pos

        if me.end_log_pos and me.log_pos >= me.end_log_pos:
            me.is_past_end_log_pos = True

        if (
            binlog_event.event_type == BINLOG.FORMAT_DESCRIPTION_EVENT
            and binlog_event.event is not None
        ):
            me.mysql_version = binlog_event.event.mysql_version
            me._BinLogStreamReader__post_header_lengths = binlog_event.event.post_header_len

        if me.skip_to_timestamp and binlog_event.timestamp < me.skip_to_timestamp:
            return None

        if binlog_event.event_type == BINLOG.TABLE_MAP_EVENT and binlog_event.event is not None:
            me.table_map[binlog_event.event.table_id] = binlog_event.event.get_table()

        if binlog_event.event is None or (
            binlog_event.event.__class__ not in me._BinLogStreamReader__allowed_events
        ):
            return None

        return binlog_event.event
