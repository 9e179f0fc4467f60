"""The library's event classes, made exact and fast for our windows (``binlog_decode``).

pymysqlreplication re-parses a TABLE_MAP before every row event and decodes values through
several layers of calls; these subclasses reuse a parse per exact body bytes
(:class:`DecodeCache`, :class:`CachedTableMapEvent`), decode rows with the table's compiled
``RowsPlan`` (:class:`FastRowsMixin`), and decode what the library gets wrong: strings in their
column's exact codec (``exact_codecs``) and ENUM/SET member names in their own charset. They are
subclasses, never patches: a plain ``BinLogStreamReader`` behaves as shipped.
"""

from __future__ import annotations

import contextlib
import logging

from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc_console.core.untyped import BinlogLibObject, Connection, PassThrough
from cdc_console.mysql.charsets import python_codec
from cdc_console.mysql.row_images import RowsPlan
from cdc_console.mysql.row_readers import NoneSources

_log = logging.getLogger(__name__)

# Attributes ``BinLogEvent.__init__`` sets from the packet and the stream's state of the moment;
# everything else a ``TableMapEvent`` holds is a function of its body bytes (and of the reader's
# fixed options), so that is what the cache keeps.
BASE_EVENT_ATTRS = frozenset(
    {
        "packet",
        "table_map",
        "event_type",
        "timestamp",
        "event_size",
        "_post_header_lengths",
        "_ctl_connection",
        "mysql_version",
        "_ignore_decode_errors",
        "_verify_checksum",
        "_is_event_valid",
        "complete",
    }
)
_MAX_TABLE_MAPS = 4096


class DecodeCache:
    """Per-reader state: parsed TABLE_MAP bodies and the row decoders compiled for their tables."""

    def __init__(self) -> None:
        self.table_maps: dict[bytes, dict[str, BinlogLibObject]] = {}
        self.plans: dict[tuple[int, bool], tuple[BinlogLibObject, RowsPlan | None]] = {}
        #: id(column) -> (the column, the codec that decodes its strings as the server does)
        self.codecs: dict[int, tuple[BinlogLibObject, str]] = {}
        self.context: tuple[BinlogLibObject, BinlogLibObject] | None = None
        self.hits = 0
        self.misses = 0
        self.fast_events = 0
        self.library_events = 0
        #: row events decoded by ``window_events`` straight from the packet (no event object)
        self.direct_events = 0
        self.group_start: int | None = None

    def check_context(
        self, mysql_version: BinlogLibObject, post_header_lengths: BinlogLibObject
    ) -> None:
        """A new format description (server version, post-header lengths) invalidates it all."""
        context = (mysql_version, post_header_lengths)
        if self.context is None or (
            (self.context[0] is not mysql_version or self.context[1] is not post_header_lengths)
            and self.context != context
        ):
            self.table_maps.clear()
            self.plans.clear()
            self.codecs.clear()
            self.context = context

    def store(self, body: bytes, attrs: dict[str, BinlogLibObject]) -> None:
        if len(self.table_maps) >= _MAX_TABLE_MAPS:
            self.table_maps.clear()
            self.plans.clear()
            self.codecs.clear()
        self.table_maps[body] = attrs

    def plan_for(
        self, table: BinlogLibObject, ignore_decode_errors: bool, conn: Connection | None = None
    ) -> RowsPlan | None:
        key = (id(table), ignore_decode_errors)
        entry = self.plans.get(key)
        if entry is None or entry[0] is not table:
            exact = exact_codecs(table.columns, conn)
            for column, codec in zip(table.columns, exact, strict=True):
                if codec is not None:
                    self.codecs[id(column)] = (column, codec)
            entry = (table, RowsPlan.compile(table.columns, ignore_decode_errors, exact))
            self.plans[key] = entry
        return entry[1]


def exact_codecs(columns: BinlogLibObject, conn: Connection | None) -> list[str | None]:
    """Per column, the codec that decodes its strings as the server converts them
    (``mysql.charsets``), or None to keep the library's pick.

    The library names a column's charset by a Python codec it picked from the MySQL name
    (``character_set_name``; wrong or missing for a dozen sets) and keeps the collation, whose
    first word is the MySQL charset. A set without an exact codec, or a server table that
    could not be read, keeps the library's."""
    found: list[str | None] = []
    for column in columns:
        collation = getattr(column, "collation_name", None)
        codec = None
        if collation and getattr(column, "character_set_name", None) is not None:
            charset = str(collation).split("_", 1)[0]
            try:
                codec = python_codec(charset, conn)
            except Exception as exc:  # a probe: the library's codec stands in
                _log.warning("the server's table of charset %s could not be read: %s", charset, exc)
        found.append(codec)
    return found


class CachedTableMapEvent(TableMapEvent):  # type: ignore[misc]
    """``TableMapEvent`` that reuses the parse of an identical body seen earlier by this reader,
    and reads ENUM and SET member names in their column's own character set."""

    def _read_type_values(self, length: int) -> list[list[bytes]] | None:
        """ENUM and SET member names (optional metadata) as their bytes: the library decodes
        them as UTF-8 and keeps "" for a name in any other charset, so a member of a latin1 or
        big5 ENUM came out as ""; ``_decode_members`` decodes them with the column's codec."""
        packet = self.packet
        end = packet.read_bytes + length
        if packet.read_bytes >= end:
            return None
        lists: list[list[bytes]] = []
        while packet.read_bytes < end:
            count = packet.read_length_coded_binary()
            lists.append([bytes(packet.read_variable_length_string()) for _ in range(count)])
        return lists

    def _decode_members(self, conn: Connection | None) -> None:
        for column in getattr(self, "columns", None) or ():
            for attr in ("enum_values", "set_values"):
                members = getattr(column, attr, None)
                if members and any(isinstance(m, bytes) for m in members):
                    setattr(column, attr, _members_text(members, column, conn))

    def __init__(
        self,
        from_packet: BinlogLibObject,
        event_size: int,
        table_map: BinlogLibObject,
        ctl_connection: Connection,
        **kwargs: PassThrough,
    ) -> None:
        cache: DecodeCache | None = getattr(from_packet, "cdc_cache", None)
        raw = from_packet.packet
        if (
            cache is None
            or kwargs.get("freeze_schema")
            or from_packet._BinLogPacketWrapper__data_buffer
            or from_packet.read_bytes != 0
        ):
            super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
            self._decode_members(ctl_connection)
            return
        cache.check_context(kwargs.get("mysql_version"), kwargs.get("post_header_lengths"))
        body = bytes(raw._data[raw._position : raw._position + event_size])
        attrs = cache.table_maps.get(body)
        if attrs is None:
            cache.misses += 1
            super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
            self._decode_members(ctl_connection)
            cache.store(body, {k: v for k, v in vars(self).items() if k not in BASE_EVENT_ATTRS})
            return
        cache.hits += 1
        BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.__dict__.update(attrs)
        if self._processed:
            table_map[self.table_id] = self.table_obj


def _members_text(
    members: list[str | bytes], column: BinlogLibObject, conn: Connection | None
) -> list[str | bytes]:
    """Member names decoded with the codec of the column's charset (from its collation);
    a name that does not decode stays bytes, so that its rows fail to convert and hold their
    table loudly rather than carry a wrong member."""
    collation = getattr(column, "collation_name", None)
    charset = str(collation).split("_", 1)[0] if collation else "utf8mb4"
    try:
        codec = python_codec(charset, conn) or "utf-8"
    except Exception as exc:  # a probe: the server's table could not be read
        _log.warning("the server's table of charset %s could not be read: %s", charset, exc)
        codec = "utf-8"
    decoded: list[str | bytes] = []
    for member in members:
        if isinstance(member, bytes):
            with contextlib.suppress(UnicodeDecodeError, LookupError):
                member = member.decode(codec)
        decoded.append(member)
    return decoded


class FastRowsMixin:
    """Decodes the rows of a row event with the table's compiled ``RowsPlan`` when it has one;
    where the library decodes, a string column is decoded with its exact codec when it has one
    (``exact_codecs``)."""

    _images = 1

    def _RowsEvent__read_string(self, size: int, column: BinlogLibObject) -> PassThrough:
        event: BinlogLibObject = self
        cache: DecodeCache | None = getattr(event.packet, "cdc_cache", None)
        found = cache.codecs.get(id(column)) if cache is not None else None
        codec = found[1] if found is not None and found[0] is column else None
        if codec is None:
            return super()._RowsEvent__read_string(size, column)  # type: ignore[misc]
        raw = event.packet.read_length_coded_pascal_string(size)
        errors = "ignore" if event._ignore_decode_errors else "strict"
        return raw.decode(codec, errors)

    def _fetch_rows(self) -> None:
        event: BinlogLibObject = self  # the library's RowsEvent this mixin is part of
        if not event.complete:
            event._RowsEvent__rows = []
            return
        cache: DecodeCache | None = getattr(event.packet, "cdc_cache", None)
        wrapper = event.packet
        plan = None
        if cache is not None and not wrapper._BinLogPacketWrapper__data_buffer:
            table = event.table_map[event.table_id]
            plan = cache.plan_for(table, bool(event._ignore_decode_errors), event._ctl_connection)
        if cache is None or plan is None:
            if cache is not None:
                cache.library_events += 1
            super()._fetch_rows()  # type: ignore[misc]
            return
        raw = wrapper.packet
        start = raw._position
        end = start + (event.event_size - wrapper.read_bytes)
        sources: NoneSources = event._RowsEvent__none_sources
        event.is_partial_json_update = False
        try:
            if self._images == 1:
                rows, pos = plan.single_images(
                    raw._data, start, end, event.columns_present_bitmap, sources
                )
            else:
                rows, pos = plan.update_images(
                    raw._data,
                    start,
                    end,
                    event.columns_present_bitmap,
                    event.columns_present_bitmap2,
                    sources,
                )
        except Exception:
            # Malformed or surprising data: let the library decode it (or raise its own error)
            # from the untouched packet, with the none-sources it would have started from.
            event._RowsEvent__none_sources = {}
            cache.library_events += 1
            super()._fetch_rows()  # type: ignore[misc]
            return
        cache.fast_events += 1
        wrapper.advance(pos - start)
        event._RowsEvent__rows = rows


class FastWriteRowsEvent(FastRowsMixin, WriteRowsEvent):  # type: ignore[misc]
    pass


class FastDeleteRowsEvent(FastRowsMixin, DeleteRowsEvent):  # type: ignore[misc]
    pass


class FastUpdateRowsEvent(FastRowsMixin, UpdateRowsEvent):  # type: ignore[misc]
    _images = 2


SUBSTITUTES: dict[type, type] = {
    TableMapEvent: CachedTableMapEvent,
    WriteRowsEvent: FastWriteRowsEvent,
    DeleteRowsEvent: FastDeleteRowsEvent,
    UpdateRowsEvent: FastUpdateRowsEvent,
}
