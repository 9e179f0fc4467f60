"""A SELECT's result set read straight off the wire into Arrow columns of raw text-protocol values.

pymysql builds a packet object per row and makes a Python call per value (read, decode,
convert): about 3.5 µs per row of five columns, most of a snapshot reader's CPU. A chunk that
goes on to Arrow needs none of that per value: Arrow parses text columns in C. ``select_raw``
sends the query through pymysql, reads the column definitions with pymysql, then walks the row
packets in large socket reads, gathering each column's length-encoded values into an Arrow
``large_binary`` array. ``RawResult.driver_value`` turns one raw value into exactly what the
connection's own cursor would have returned (same encoding and converter choice as pymysql's
result reader), for the rows and columns that need the per-value path.

The walk over the row packets is compiled (``_textrows.c``, built at install when a C compiler
is there): the pure-Python walk (``PyRowColumns``) costs about 1.5 µs per row of five columns,
two thirds of a first-snapshot reader's CPU, and the compiled one a few per cent of that. Both
have one interface and are held to each other by the tests; the Python one is the fallback
where nothing was compiled (``mysql.native`` says how to choose it on purpose).

Protocol (classic, as pymysql speaks it: no CLIENT_DEPRECATE_EOF): column count, one column
definition per column, EOF; row packets; EOF. A row is a sequence of length-encoded strings,
``0xFB`` for NULL. A payload of 16 MiB - 1 continues in the next packet. An error packet
(``0xFF``) mid-result is raised as pymysql raises it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from pymysql import converters, err
from pymysql.connections import TEXT_TYPES, FieldDescriptorPacket, MysqlPacket
from pymysql.constants import COMMAND, FIELD_TYPE

from cdc_console.core.untyped import Connection, DriverRow, DriverValue
from cdc_console.mysql.native import compiled_rows_wanted

if TYPE_CHECKING:
    import pyarrow as pa

_textrows: ModuleType | None
try:
    from cdc_console.mysql import _textrows
except ImportError:  # no C compiler at install: the pure-Python walk below
    _textrows = None

MAX_PACKET_LEN = 0xFFFFFF
_READ_SIZE = 1 << 20

#: ``RowColumns.feed``'s statuses (the compiled module defines the same numbers)
NEED_MORE, END, SPECIAL, BAD_SEQUENCE, MALFORMED = range(5)

RawValue = bytes | None


class _Reader(Protocol):
    """The connection's buffered socket file (``conn._rfile``)."""

    def read1(self, size: int = -1, /) -> bytes: ...


class RowColumns(Protocol):
    """Gathers a result's row packets into one Arrow array per column.

    ``feed`` walks the whole packets of ``buf`` from ``pos``, appending each row, and stops at
    the first packet it cannot take: ``NEED_MORE`` (incomplete; read more), ``END`` (the EOF
    packet, consumed), ``SPECIAL`` (an error packet, or a row of 16 MiB or more: the caller's),
    ``BAD_SEQUENCE`` or ``MALFORMED`` (at ``pos``, not consumed). ``add_row`` takes one row's
    joined payload and raises ValueError when its values do not fill it exactly.
    """

    def feed(self, buf: bytes, pos: int, seq: int, /) -> tuple[int, int, int]: ...

    def add_row(self, payload: bytes, /) -> None: ...

    def arrays(self) -> list[pa.Array]: ...


Decoder = Callable[[bytes], DriverValue]


@dataclass
class RawResult:
    """The result's values per column (``large_binary`` arrays), and how pymysql would decode
    each."""

    arrays: list[pa.Array]
    decoders: list[Decoder]

    @property
    def row_count(self) -> int:
        return len(self.arrays[0]) if self.arrays else 0

    def values(self, index: int) -> list[RawValue]:
        """One column's raw values (bytes, or None for NULL)."""
        values: list[RawValue] = self.arrays[index].to_pylist()
        return values

    def driver_value(self, index: int, value: RawValue) -> DriverValue:
        return None if value is None else self.decoders[index](value)

    def driver_rows(self) -> list[DriverRow]:
        """Every row as the connection's cursor would have returned it."""
        decoded = [
            [None if v is None else decode(v) for v in self.values(index)]
            for index, decode in enumerate(self.decoders)
        ]
        return list(zip(*decoded, strict=True))


def select_raw(conn: Connection, sql: str, args: object = None) -> RawResult:
    """Run one SELECT on a pymysql connection and read its result as raw columns."""
    query = conn.cursor().mogrify(sql, args)
    conn._execute_command(COMMAND.COM_QUERY, query)
    conn._result = None
    first = conn._read_packet()  # raises the server's error, as a cursor would
    if first.is_ok_packet():
        raise ValueError(f"statement returned no result set: {sql[:80]}")
    count = first.read_length_encoded_integer()
    decoders = [_decoder(conn, conn._read_packet(FieldDescriptorPacket)) for _ in range(count)]
    eof = conn._read_packet()
    if not eof.is_eof_packet():
        raise err.OperationalError("protocol error: expected EOF after columns")
    columns = row_columns(count)
    _read_rows(conn, columns)
    return RawResult(columns.arrays(), decoders)


def compiled() -> bool:
    """Whether results are walked by the compiled parser (built, and not switched off)."""
    return _textrows is not None and compiled_rows_wanted()


def row_columns(count: int) -> RowColumns:
    """The compiled parser when it was built (and not switched off), else the Python one."""
    return NativeRowColumns(count) if compiled() else PyRowColumns(count)


def _decoder(conn: Connection, field: FieldDescriptorPacket) -> Decoder:
    """pymysql's own choice for one column (``MySQLResult._get_descriptions``)."""
    field_type = field.type_code
    encoding: str | None
    if not conn.use_unicode:
        encoding = None
    elif field_type == FIELD_TYPE.JSON:
        encoding = conn.encoding
    elif field_type in TEXT_TYPES:
        encoding = None if field.charsetnr == 63 else conn.encoding
    else:
        encoding = "ascii"
    converter = conn.decoders.get(field_type)
    if converter is converters.through:
        converter = None
    if encoding is None:
        return converter if converter is not None else _identity
    text_encoding = encoding
    convert = converter

    def decode(data: bytes) -> DriverValue:
        text = data.decode(text_encoding)
        return text if convert is None else convert(text)

    return decode


def _identity(data: bytes) -> bytes:
    return data


def _read_rows(conn: Connection, columns: RowColumns) -> None:
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    rfile = conn._rfile
    buf = b""
    pos = 0
    seq = conn._next_seq_id
    while True:
        pos, seq, status = columns.feed(buf, pos, seq)
        if status == END:
            conn._next_seq_id = seq
            return
        if status == NEED_MORE:
            buf, pos = _more(rfile, buf, pos, conn)
            continue
        if status == BAD_SEQUENCE:
            conn._force_close()
            raise err.InternalError(
                f"Packet sequence number wrong - got {buf[pos + 3]} expected {seq}"
            )
        length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        if status == MALFORMED:
            conn._force_close()
            raise err.InternalError(
                f"row packet of {length} bytes does not hold one value per column"
            )
        if length < MAX_PACKET_LEN:  # an error packet, whole in the buffer
            conn._next_seq_id = (seq + 1) % 256
            MysqlPacket(bytes(buf[pos + 4 : pos + 4 + length]), conn.encoding).raise_for_error()
            conn._force_close()
            raise err.InternalError("error packet without an error")
        payload, buf, pos, seq = _joined_packet(conn, rfile, buf, pos, seq)
        try:
            columns.add_row(payload)
        except ValueError:
            conn._force_close()
            raise err.InternalError(
                f"row packet of {len(payload)} bytes does not hold one value per column"
            ) from None


def _joined_packet(
    conn: Connection, rfile: _Reader, buf: bytes, pos: int, seq: int
) -> tuple[bytes, bytes, int, int]:
    """A payload of 16 MiB or more, joined from its packets (the first one at ``pos``)."""
    parts = []
    while True:
        while len(buf) - pos < 4:
            buf, pos = _more(rfile, buf, pos, conn)
        length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        if buf[pos + 3] != seq:
            conn._force_close()
            raise err.InternalError(
                f"Packet sequence number wrong - got {buf[pos + 3]} expected {seq}"
            )
        seq = (seq + 1) % 256
        while len(buf) - pos < 4 + length:
            buf, pos = _more(rfile, buf, pos, conn)
        parts.append(buf[pos + 4 : pos + 4 + length])
        pos += 4 + length
        if length < MAX_PACKET_LEN:
            return b"".join(parts), buf, pos, seq


def _more(rfile: _Reader, buf: bytes, pos: int, conn: Connection) -> tuple[bytes, int]:
    data = rfile.read1(_READ_SIZE)
    if not data:
        conn._force_close()
        raise err.OperationalError(2013, "Lost connection to MySQL server during query")
    return buf[pos:] + data, 0


class NativeRowColumns:
    """The compiled walk (``_textrows.RowColumns``), its buffers wrapped as Arrow arrays."""

    def __init__(self, count: int) -> None:
        assert _textrows is not None
        self._columns = _textrows.RowColumns(count)
        self.feed = self._columns.feed
        self.add_row = self._columns.add_row

    def arrays(self) -> list[pa.Array]:
        import pyarrow as pa

        rows = self._columns.rows
        return [
            pa.Array.from_buffers(
                pa.large_binary(),
                rows,
                [
                    None if validity is None else pa.py_buffer(validity),
                    pa.py_buffer(offsets),
                    pa.py_buffer(data),
                ],
                null_count=nulls,
            )
            for validity, offsets, data, nulls in self._columns.finish()
        ]


class PyRowColumns:
    """The walk in Python: the fallback, and the compiled one's reference in the tests.

    Unlike the compiled one it appends a row's values as it reads them, so after a malformed
    row (``MALFORMED``, or ValueError from ``add_row``) its columns are no longer aligned; the
    reader then drops the result and the connection anyway.
    """

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("a result has at least one column")
        self._values: list[list[RawValue]] = [[] for _ in range(count)]

    def feed(self, buf: bytes, pos: int, seq: int) -> tuple[int, int, int]:
        appends = [column.append for column in self._values]
        available = len(buf)
        while available - pos >= 4:
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            if buf[pos + 3] != seq:
                return pos, seq, BAD_SEQUENCE
            if length == MAX_PACKET_LEN:
                return pos, seq, SPECIAL
            end = pos + 4 + length
            if end > available:
                break
            if length == 0:
                return pos, seq, MALFORMED
            head = buf[pos + 4]
            if head == 0xFE and length < 9:
                return end, (seq + 1) % 256, END
            if head == 0xFF:
                return pos, seq, SPECIAL
            if _append_row(buf, pos + 4, end, appends) != end:
                return pos, seq, MALFORMED
            pos = end
            seq = (seq + 1) % 256
        return pos, seq, NEED_MORE

    def add_row(self, payload: bytes) -> None:
        appends = [column.append for column in self._values]
        if _append_row(payload, 0, len(payload), appends) != len(payload):
            raise ValueError("row packet's values do not fill it")

    def arrays(self) -> list[pa.Array]:
        import pyarrow as pa

        return [pa.array(values, type=pa.large_binary()) for values in self._values]


def _append_row(payload: bytes, i: int, end: int, appends: list[Callable[[RawValue], None]]) -> int:
    """Append one row's values from ``payload[i:end]``; return where they ended (-1 when
    they ran past ``end``)."""
    for append in appends:
        if i >= end:
            return -1
        size = payload[i]
        if size < 251:
            i += 1
        elif size == 251:
            append(None)
            i += 1
            continue
        elif size == 252 and i + 3 <= end:
            size, i = payload[i + 1] | payload[i + 2] << 8, i + 3
        elif size == 253 and i + 4 <= end:
            size = payload[i + 1] | payload[i + 2] << 8 | payload[i + 3] << 16
            i += 4
        elif size == 254 and i + 9 <= end:
            size = int.from_bytes(payload[i + 1 : i + 9], "little")
            i += 9
        else:
            return -1
        if i + size > end:
            return -1
        append(payload[i : i + size])
        i += size
    return i
