"""One reader per column type of a row image, as pymysqlreplication (1.0.17) decodes it.

Each reader mirrors the library's branch for its type in ``RowsEvent.__read_values_name``: the
same byte layout, the same Python value, the same none-source side effects; ``column_reader``
picks one for a TABLE_MAP column or says the type is not covered (``UnsupportedColumn``), and
``row_images.RowsPlan`` strings them together for a whole image.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable

from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.row_event import RowsEvent

from cdc_console.core.untyped import BinlogLibObject, DriverValue
from cdc_console.values.canonical import JSON_NULL_SOURCE

#: The none-sources of one image as mysql-replication keeps them: column name (None for a column
#: the library could not name) -> why the value is None (``NONE_SOURCE``).
NoneSources = dict[str | None, str]


Reader = Callable[[bytes, int, NoneSources], tuple[DriverValue, int]]


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
        raise UnsupportedColumn(f"uint size {size}")

    def read(data: bytes, pos: int) -> int:
        if len(data) < pos + size:
            raise ValueError("short uint")
        return int.from_bytes(data[pos : pos + size], "little")

    return read


def encoding_of(column: BinlogLibObject, exact: str | None = None) -> str | None:
    """The Python codec of a character column (None: UTF-8): ``exact``, the one the reader
    found for it (``library_events.exact_codecs``), else the library's pick."""
    if exact is not None:
        return exact
    charset = column.character_set_name
    encoding: str | None = RowsEvent.charset_to_encoding(charset) if charset is not None else None
    return encoding


def _string(
    length_size: int, column: BinlogLibObject, ignore_decode_errors: bool, exact: str | None
) -> Reader:
    length_of = _uint_le(length_size)
    errors = "ignore" if ignore_decode_errors else "strict"
    encoding = encoding_of(column, exact)

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


def _json(length_size: int, source_key: str) -> Reader:
    """MySQL's binary JSON; its ``null`` literal parses to None and is marked as such, so that
    it is not taken for a NULL."""
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
        parsed = parse_json(value[0], value[1:])
        if parsed is None:
            sources[source_key] = JSON_NULL_SOURCE
        return parsed, end

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
        raise UnsupportedColumn("empty decimal")
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


def _invalid_datetime_text(parts: tuple[int, ...], micro: int, fsp: int) -> str:
    """The server's text of a DATETIME no calendar holds, as pymysql hands it back from a
    snapshot: the image's parts as they are, with the column's fractional digits."""
    year, month, day, hour, minute, second = parts
    text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    return text + ("." + f"{micro:06d}"[:fsp] if fsp > 0 else "")


def _datetime2(column: BinlogLibObject) -> Reader:
    fsp = _fsp_reader(column.fsp)
    digits = column.fsp
    make = datetime.datetime

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        if len(data) < pos + 5:
            raise ValueError("short datetime2")
        value = int.from_bytes(data[pos : pos + 5], "big")
        pos += 5
        year_month = (value >> 22) & 0x1FFFF
        parts = (
            int(year_month / 13),
            year_month % 13,
            (value >> 17) & 0x1F,
            (value >> 12) & 0x1F,
            (value >> 6) & 0x3F,
            value & 0x3F,
        )
        try:
            t = make(*parts)
        except ValueError:
            # no calendar holds it (a zero or invalid date): its text, as the snapshot reads it
            micro, pos = fsp(data, pos)
            return _invalid_datetime_text(parts, micro, digits), pos
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


def _date() -> Reader:
    make = datetime.date

    def read(data: bytes, pos: int, sources: NoneSources) -> tuple[DriverValue, int]:
        if len(data) < pos + 3:
            raise ValueError("short date")
        value = int.from_bytes(data[pos : pos + 3], "little")
        pos += 3
        year = (value >> 9) & 0x7FFF
        month = (value >> 5) & 0xF
        day = value & 0x1F
        try:
            return make(year=year, month=month, day=day), pos
        except ValueError:
            # zero parts, year 0, a day past its month (ALLOW_INVALID_DATES: '2024-04-31'):
            # its text, as the snapshot reads it (the library raises here)
            return f"{year:04d}-{month:02d}-{day:02d}", pos

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


class UnsupportedColumn(Exception):
    """A column this module leaves to the library's decoder."""


def column_reader(
    column: BinlogLibObject, index: int, ignore_decode_errors: bool, exact: str | None = None
) -> Reader:
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
        return _string(2 if column.max_length > 255 else 1, column, ignore_decode_errors, exact)
    if kind == FIELD_TYPE.NEWDECIMAL:
        return _decimal(column)
    if kind == FIELD_TYPE.BLOB:
        return _string(column.length_size, column, ignore_decode_errors, exact)
    if kind == FIELD_TYPE.DATETIME2:
        return _datetime2(column)
    if kind == FIELD_TYPE.TIME2:
        return _time2(column)
    if kind == FIELD_TYPE.DATE:
        return _date()
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
        return _json(column.length_size, source_key)
    # DATETIME, TIME and TIMESTAMP of the pre-5.6 formats and anything unknown.
    raise UnsupportedColumn(f"column type {kind}")
