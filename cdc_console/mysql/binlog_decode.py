"""A faster ``BinLogStreamReader`` for our own windows: TABLE_MAP parsed once, rows decoded in bulk.

pymysqlreplication 1.0.17 (pinned) re-parses the TABLE_MAP event before every row event: it builds
a ``Column`` per column, reads the optional metadata and computes the primary key through
``Column.data`` each time, about half of its decode time on a stream of small transactions. It
then decodes every value through several layers of method calls per byte read. Neither is needed:

- a TABLE_MAP event's body (table id, schema, table, column types and metadata, optional metadata)
  fully determines what the library parses from it, so :class:`DecodeCache` keeps the parsed
  result per exact body bytes and :class:`_CachedTableMapEvent` reuses it. A changed table (new
  columns, new metadata, new table id) has different bytes and is parsed afresh; nothing is ever
  looked up by table id or name alone;
- :class:`_RowsPlan` decodes a row event's images straight from the packet bytes with one
  precompiled reader per column, replicating the library's value decoding exactly (its quirks
  included: see ``cdc_console.values.canonical``). Column types it does not cover, partial JSON
  updates and any decoding failure go through the library's own decoder instead, so the values,
  and the errors, are the library's.

Everything is scoped to :class:`CachingBinLogStreamReader` instances: the library's classes are
subclassed, never patched, so a plain ``BinLogStreamReader`` in the same process (the benchmark's
reference decoder, tests) behaves exactly as shipped. The cache lives on the reader, so it never
outlives one window.
"""

from __future__ import annotations

import datetime
import decimal
import struct
import warnings
from collections.abc import Callable
from typing import ClassVar

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication import binlogstream as _binlogstream
from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.constants import BINLOG, FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc_console.core.untyped import (
    BinlogLibObject,
    Connection,
    DriverImage,
    DriverValue,
    PassThrough,
)

__all__ = ["CachingBinLogStreamReader", "DecodeCache"]

# Attributes ``BinLogEvent.__init__`` sets from the packet and the stream's state of the moment;
# everything else a ``TableMapEvent`` holds is a function of its body bytes (and of the reader's
# fixed options), so that is what the cache keeps.
_BASE_EVENT_ATTRS = frozenset(
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

#: The none-sources of one image as mysql-replication keeps them: column name (None for a column
#: the library could not name) -> why the value is None (``NONE_SOURCE``).
NoneSources = dict[str | None, str]
#: A row of a row event as mysql-replication shapes it: ``values``/``before_values``/
#: ``after_values`` -> the image, ``none_sources``/... -> column -> ``NONE_SOURCE``.
RowDict = dict[str, DriverImage]
Reader = Callable[[bytes, int, NoneSources], tuple[DriverValue, int]]


class DecodeCache:
    """Per-reader state: parsed TABLE_MAP bodies and the row decoders compiled for their tables."""

    def __init__(self) -> None:
        self.table_maps: dict[bytes, dict[str, BinlogLibObject]] = {}
        self.plans: dict[tuple[int, bool], tuple[BinlogLibObject, _RowsPlan | None]] = {}
        self.context: tuple[BinlogLibObject, BinlogLibObject] | None = None
        self.hits = 0
        self.misses = 0
        self.fast_events = 0
        self.library_events = 0
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
            self.context = context

    def store(self, body: bytes, attrs: dict[str, BinlogLibObject]) -> None:
        if len(self.table_maps) >= _MAX_TABLE_MAPS:
            self.table_maps.clear()
            self.plans.clear()
        self.table_maps[body] = attrs

    def plan_for(self, table: BinlogLibObject, ignore_decode_errors: bool) -> _RowsPlan | None:
        key = (id(table), ignore_decode_errors)
        entry = self.plans.get(key)
        if entry is None or entry[0] is not table:
            entry = (table, _RowsPlan.compile(table.columns, ignore_decode_errors))
            self.plans[key] = entry
        return entry[1]


class _CachedTableMapEvent(TableMapEvent):  # type: ignore[misc]
    """``TableMapEvent`` that reuses the parse of an identical body seen earlier by this reader."""

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
            return
        cache.check_context(kwargs.get("mysql_version"), kwargs.get("post_header_lengths"))
        body = bytes(raw._data[raw._position : raw._position + event_size])
        attrs = cache.table_maps.get(body)
        if attrs is None:
            cache.misses += 1
            super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
            cache.store(body, {k: v for k, v in vars(self).items() if k not in _BASE_EVENT_ATTRS})
            return
        cache.hits += 1
        BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.__dict__.update(attrs)
        if self._processed:
            table_map[self.table_id] = self.table_obj


class _FastRowsMixin:
    """Decodes the rows of a row event with the table's compiled ``_RowsPlan`` when it has one."""

    _images = 1

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
            plan = cache.plan_for(table, bool(event._ignore_decode_errors))
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


class _FastWriteRowsEvent(_FastRowsMixin, WriteRowsEvent):  # type: ignore[misc]
    pass


class _FastDeleteRowsEvent(_FastRowsMixin, DeleteRowsEvent):  # type: ignore[misc]
    pass


class _FastUpdateRowsEvent(_FastRowsMixin, UpdateRowsEvent):  # type: ignore[misc]
    _images = 2


_SUBSTITUTES: dict[type, type] = {
    TableMapEvent: _CachedTableMapEvent,
    WriteRowsEvent: _FastWriteRowsEvent,
    DeleteRowsEvent: _FastDeleteRowsEvent,
    UpdateRowsEvent: _FastUpdateRowsEvent,
}


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
        BINLOG.TABLE_MAP_EVENT: _CachedTableMapEvent,
        BINLOG.WRITE_ROWS_EVENT_V1: _FastWriteRowsEvent,
        BINLOG.WRITE_ROWS_EVENT_V2: _FastWriteRowsEvent,
        BINLOG.DELETE_ROWS_EVENT_V1: _FastDeleteRowsEvent,
        BINLOG.DELETE_ROWS_EVENT_V2: _FastDeleteRowsEvent,
        BINLOG.UPDATE_ROWS_EVENT_V1: _FastUpdateRowsEvent,
        BINLOG.UPDATE_ROWS_EVENT_V2: _FastUpdateRowsEvent,
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
        allowed = me._BinLogStreamReader__allowed_events
        me._BinLogStreamReader__allowed_events = frozenset(
            allowed | {fast for base, fast in _SUBSTITUTES.items() if base in allowed}
        )
        in_packet = me._BinLogStreamReader__allowed_events_in_packet
        me._BinLogStreamReader__allowed_events_in_packet = frozenset(
            in_packet | {fast for base, fast in _SUBSTITUTES.items() if base in in_packet}
        )

    def fetchone(self) -> BinlogLibObject:  # pragma: no cover - exercised against a server
        # A copy of pymysqlreplication 1.0.17's BinLogStreamReader.fetchone; only the wrapper
        # class (and its cdc_cache argument) differ.
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
                continue

            if binlog_event.event_type == BINLOG.TABLE_MAP_EVENT and binlog_event.event is not None:
                me.table_map[binlog_event.event.table_id] = binlog_event.event.get_table()

            if binlog_event.event is None or (
                binlog_event.event.__class__ not in me._BinLogStreamReader__allowed_events
            ):
                continue

            return binlog_event.event


# --------------------------------------------------------------------------- row decoding
# Each reader mirrors the branch of RowsEvent.__read_values_name (1.0.17) for one column type:
# same byte layout, same Python value, same none-source side effects.

_S_B = struct.Struct("<B")
_S_b = struct.Struct("<b")
_S_H = struct.Struct("<H")
_S_h = struct.Struct("<h")
_S_I = struct.Struct("<I")
_S_i = struct.Struct("<i")
_S_Q = struct.Struct("<Q")
_S_q = struct.Struct("<q")
_S_f = struct.Struct("<f")
_S_d = struct.Struct("<d")
_S_BE_i = struct.Struct(">i")
_COMPRESSED_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_FSP_BYTES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}


def _fixed(st: struct.Struct) -> Reader:
    unpack = st.unpack_from
    size = st.size

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        return unpack(data, pos)[0], pos + size

    return read


def _int24(unsigned: bool) -> Reader:
    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        end = pos + 3
        if len(data) < end:
            raise ValueError("short int24")
        return int.from_bytes(data[pos:end], "little", signed=not unsigned), end

    return read


def _uint_le(size: int) -> Callable[[bytes, int], int]:
    """``read_uint_by_size`` for sizes 1..8 (the library returns None for others)."""
    if not 1 <= size <= 8:
        raise _Unsupported(f"uint size {size}")

    def read(data: bytes, pos: int) -> int:
        if len(data) < pos + size:
            raise ValueError("short uint")
        return int.from_bytes(data[pos : pos + size], "little")

    return read


def _string(length_size: int, column: BinlogLibObject, ignore_decode_errors: bool) -> Reader:
    length_of = _uint_le(length_size)
    errors = "ignore" if ignore_decode_errors else "strict"
    charset = column.character_set_name
    encoding = RowsEvent.charset_to_encoding(charset) if charset is not None else None

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        length = length_of(data, pos)
        pos += length_size
        end = pos + length
        if len(data) < end:
            raise ValueError("short string")
        raw = data[pos:end]
        if encoding is None:
            return raw.decode(errors=errors), end
        try:
            return raw.decode(encoding, errors), end
        except LookupError:
            return raw, end

    return read


def _pascal_bytes(length_size: int) -> Reader:
    length_of = _uint_le(length_size)

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        length = length_of(data, pos)
        pos += length_size
        end = pos + length
        if len(data) < end:
            raise ValueError("short bytes")
        return data[pos:end], end

    return read


def _json(length_size: int) -> Reader:
    length_of = _uint_le(length_size)

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        length = length_of(data, pos)
        pos += length_size
        if length == 0:
            return None, pos
        end = pos + length
        if len(data) < end:
            raise ValueError("short json")
        value = data[pos:end]
        return parse_json(value[0], value[1:]), end

    return read


def _be_signed(data: bytes, pos: int, size: int) -> int:
    """``read_int_be_by_size`` for sizes 1..4: a signed big-endian integer."""
    if len(data) < pos + size:
        raise ValueError("short big-endian int")
    return int.from_bytes(data[pos : pos + size], "big", signed=True)


def _fsp_reader(fsp: int) -> Callable[[bytes, int], tuple[int, int]]:
    """``__read_fsp``: the fractional seconds of a temporal value, in microseconds."""
    size = _FSP_BYTES.get(fsp, 0)
    if size == 0:
        return lambda data, pos: (0, pos)
    odd = fsp % 2
    scale = 10 ** (6 - fsp)

    def read(data: bytes, pos: int) -> tuple[int, int]:
        micro = _be_signed(data, pos, size)
        if odd:
            micro = int(micro / 10)
        return micro * scale, pos + size

    return read


def _decimal(column: BinlogLibObject) -> Reader:
    precision, decimals = column.precision, column.decimals
    integral = precision - decimals
    uncomp_integral = int(integral / 9)
    uncomp_fractional = int(decimals / 9)
    comp_integral = integral - uncomp_integral * 9
    comp_fractional = decimals - uncomp_fractional * 9
    size_i = _COMPRESSED_BYTES[comp_integral]
    size_f = _COMPRESSED_BYTES[comp_fractional]
    total = size_i + 4 * uncomp_integral + 4 * uncomp_fractional + size_f
    if total == 0:
        raise _Unsupported("empty decimal")
    unpack_be_i = _S_BE_i.unpack_from
    Decimal = decimal.Decimal

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        end = pos + total
        if len(data) < end:
            raise ValueError("short decimal")
        buf = bytearray(data[pos:end])
        first = buf[0]
        if first & 0x80 != 0:
            res = ""
            mask = 0
        else:
            mask = -1
            res = "-"
        buf[0] = first ^ 0x80
        at = 0
        if size_i > 0:
            res += str(int.from_bytes(buf[0:size_i], "big", signed=True) ^ mask)
            at = size_i
        for _ in range(uncomp_integral):
            res += f"{unpack_be_i(buf, at)[0] ^ mask:09d}"
            at += 4
        res += "."
        for _ in range(uncomp_fractional):
            res += f"{unpack_be_i(buf, at)[0] ^ mask:09d}"
            at += 4
        if size_f > 0:
            value = int.from_bytes(buf[at : at + size_f], "big", signed=True) ^ mask
            res += f"{value:0{comp_fractional}d}"
        return Decimal(res), end

    return read


def _datetime2(column: BinlogLibObject, source_key: str | None) -> Reader:
    fsp = _fsp_reader(column.fsp)
    make = datetime.datetime

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        if len(data) < pos + 5:
            raise ValueError("short datetime2")
        value = int.from_bytes(data[pos : pos + 5], "big")
        pos += 5
        year_month = (value >> 22) & 0x1FFFF
        try:
            t = make(
                year=int(year_month / 13),
                month=year_month % 13,
                day=(value >> 17) & 0x1F,
                hour=(value >> 12) & 0x1F,
                minute=(value >> 6) & 0x3F,
                second=value & 0x3F,
            )
        except ValueError:
            _, pos = fsp(data, pos)
            sources[source_key] = NONE_SOURCE.OUT_OF_DATETIME2_RANGE
            return None, pos
        micro, pos = fsp(data, pos)
        if micro > 0:
            t = t.replace(microsecond=micro)
        return t, pos

    return read


def _timestamp2(column: BinlogLibObject) -> Reader:
    fsp = _fsp_reader(column.fsp)
    from_timestamp = datetime.datetime.utcfromtimestamp

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        t = from_timestamp(_be_signed(data, pos, 4))
        micro, pos = fsp(data, pos + 4)
        if micro > 0:
            t = t.replace(microsecond=micro)
        return t, pos

    return read


def _time2(column: BinlogLibObject) -> Reader:
    fsp = _fsp_reader(column.fsp)
    timedelta = datetime.timedelta

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        value = _be_signed(data, pos, 3)
        sign = 1 if (value >> 23) & 1 else -1
        if sign == -1:
            value = ~value + 1
        micro, pos = fsp(data, pos + 3)
        t = (
            timedelta(
                hours=(value >> 12) & 0x3FF,
                minutes=(value >> 6) & 0x3F,
                seconds=value & 0x3F,
                microseconds=micro,
            )
            * sign
        )
        return t, pos

    return read


def _date(source_key: str | None) -> Reader:
    make = datetime.date

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        if len(data) < pos + 3:
            raise ValueError("short date")
        value = int.from_bytes(data[pos : pos + 3], "little")
        pos += 3
        if value == 0:
            sources[source_key] = NONE_SOURCE.OUT_OF_DATE_RANGE
            return None, pos
        year = (value >> 9) & 0x7FFF
        month = (value >> 5) & 0xF
        day = value & 0x1F
        if year == 0 or month == 0 or day == 0:
            sources[source_key] = NONE_SOURCE.OUT_OF_DATE_RANGE
            return None, pos
        return make(year=year, month=month, day=day), pos

    return read


def _year(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
    return data[pos] + 1900, pos + 1


def _enum(column: BinlogLibObject) -> Reader:
    size = column.size
    index_of = _uint_le(size)
    values = column.enum_values

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        index = index_of(data, pos)
        if values:
            return values[index], pos + size
        return None, pos + size

    return read


def _set(column: BinlogLibObject) -> Reader:
    size = column.size
    mask_of = _uint_le(size)
    members = column.set_values
    name = column.name

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        bit_mask = mask_of(data, pos)
        pos += size
        if members:
            ret = {val for idx, val in enumerate(members) if bit_mask & (1 << idx)}
            if not ret:
                sources[name] = NONE_SOURCE.EMPTY_SET
                return None, pos
            return ret, pos
        sources[name] = NONE_SOURCE.EMPTY_SET
        return None, pos

    return read


def _bit(column: BinlogLibObject) -> Reader:
    nbytes = column.bytes
    bits = column.bits
    first_end = bits if nbytes == 1 else (bits % 8 or 8)

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        if len(data) < pos + nbytes:
            raise ValueError("short bit")
        resp = ""
        for index in range(nbytes):
            byte = data[pos + index]
            end = first_end if index == 0 else 8
            current = ""
            for bit in range(end):
                current += "1" if byte & (1 << bit) else "0"
            resp += current[::-1]
        return resp, pos + nbytes

    return read


class _Unsupported(Exception):
    """A column this module leaves to the library's decoder."""


def _column_reader(column: BinlogLibObject, index: int, ignore_decode_errors: bool) -> Reader:
    kind = column.type
    unsigned = column.unsigned
    source_key = column.name
    if kind == FIELD_TYPE.TINY:
        return _fixed(_S_B if unsigned else _S_b)
    if kind == FIELD_TYPE.SHORT:
        return _fixed(_S_H if unsigned else _S_h)
    if kind == FIELD_TYPE.LONG:
        return _fixed(_S_I if unsigned else _S_i)
    if kind == FIELD_TYPE.INT24:
        return _int24(bool(unsigned))
    if kind == FIELD_TYPE.LONGLONG:
        return _fixed(_S_Q if unsigned else _S_q)
    if kind == FIELD_TYPE.FLOAT:
        return _fixed(_S_f)
    if kind == FIELD_TYPE.DOUBLE:
        return _fixed(_S_d)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _string(2 if column.max_length > 255 else 1, column, ignore_decode_errors)
    if kind == FIELD_TYPE.NEWDECIMAL:
        return _decimal(column)
    if kind == FIELD_TYPE.BLOB:
        return _string(column.length_size, column, ignore_decode_errors)
    if kind == FIELD_TYPE.DATETIME2:
        return _datetime2(column, source_key)
    if kind == FIELD_TYPE.TIME2:
        return _time2(column)
    if kind == FIELD_TYPE.DATE:
        return _date(source_key)
    if kind == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(column)
    if kind == FIELD_TYPE.YEAR:
        return _year
    if kind == FIELD_TYPE.ENUM:
        return _enum(column)
    if kind == FIELD_TYPE.SET:
        return _set(column)
    if kind == FIELD_TYPE.BIT:
        return _bit(column)
    if kind == FIELD_TYPE.GEOMETRY:
        return _pascal_bytes(column.length_size)
    if kind == FIELD_TYPE.JSON:
        return _json(column.length_size)
    # DATETIME, TIME and TIMESTAMP of the pre-5.6 formats and anything unknown.
    raise _Unsupported(f"column type {kind}")


class _RowsPlan:
    """The compiled decoders of one table's columns: ``(value key, none-source key, reader)``."""

    def __init__(self, columns: list[tuple[str, str | None, Reader]]) -> None:
        self.columns = columns
        self.count = len(columns)
        self._bitmaps: dict[bytes, tuple[tuple[bool, ...], int, bool]] = {}

    @classmethod
    def compile(cls, columns: BinlogLibObject, ignore_decode_errors: bool) -> _RowsPlan | None:
        compiled = []
        try:
            for index, column in enumerate(columns):
                name = column.name
                key = name if name else "UNKNOWN_COL" + str(index)
                compiled.append((key, name, _column_reader(column, index, ignore_decode_errors)))
        except (_Unsupported, AttributeError, TypeError, KeyError):
            return None
        return cls(compiled)

    def _bitmap(self, bitmap: bytes) -> tuple[tuple[bool, ...], int, bool]:
        info = self._bitmaps.get(bitmap)
        if info is None:
            present = tuple(bool(bitmap[i >> 3] & (1 << (i & 7))) for i in range(self.count))
            info = (present, (BitCount(bitmap) + 7) // 8, all(present))
            self._bitmaps[bitmap] = info
        return info

    def _image(
        self,
        data: bytes,
        pos: int,
        bitmap: tuple[tuple[bool, ...], int, bool],
        sources: NoneSources,
    ) -> tuple[DriverImage, int]:
        present, null_bytes, full = bitmap
        nulls = data[pos : pos + null_bytes]
        if len(nulls) != null_bytes:
            raise ValueError("short null bitmap")
        pos += null_bytes
        values: DriverImage = {}
        null_index = 0
        null_source = NONE_SOURCE.NULL
        for i, (key, source_key, read) in enumerate(self.columns):
            if not full and not present[i]:
                sources[source_key] = NONE_SOURCE.COLS_BITMAP
                values[key] = None
                continue
            if nulls[null_index >> 3] & (1 << (null_index & 7)):
                sources[source_key] = null_source
                values[key] = None
            else:
                values[key], pos = read(data, pos, sources)
            null_index += 1
        return values, pos

    @staticmethod
    def _none_sources(values: DriverImage, sources: NoneSources) -> dict[str, str]:
        return {k: sources.get(k, "null") for k, v in values.items() if v is None}

    def single_images(
        self, data: bytes, pos: int, end: int, bitmap: bytes, sources: NoneSources
    ) -> tuple[list[RowDict], int]:
        info = self._bitmap(bitmap)
        rows = []
        image = self._image
        none_sources = self._none_sources
        while pos < end:
            values, pos = image(data, pos, info, sources)
            rows.append({"values": values, "none_sources": none_sources(values, sources)})
        if pos != end:
            raise ValueError("row images overran the event")
        return rows, pos

    def update_images(
        self,
        data: bytes,
        pos: int,
        end: int,
        bitmap: bytes,
        bitmap2: bytes,
        sources: NoneSources,
    ) -> tuple[list[RowDict], int]:
        info = self._bitmap(bitmap)
        info2 = self._bitmap(bitmap2)
        rows = []
        image = self._image
        none_sources = self._none_sources
        while pos < end:
            before, pos = image(data, pos, info, sources)
            before_sources = none_sources(before, sources)
            after, pos = image(data, pos, info2, sources)
            rows.append(
                {
                    "before_values": before,
                    "before_none_sources": before_sources,
                    "after_values": after,
                    "after_none_sources": none_sources(after, sources),
                }
            )
        if pos != end:
            raise ValueError("row images overran the event")
        return rows, pos
