"""A SELECT's result set read straight off the wire into columns of raw text-protocol values.

pymysql builds a packet object per row and makes a Python call per value (read, decode,
convert): about 3.5 µs per row of five columns, most of a snapshot reader's CPU. A chunk that
goes on to Arrow needs none of that per value: Arrow parses text columns in C. ``select_raw``
sends the query through pymysql, reads the column definitions with pymysql, then walks the row
packets in large socket reads, slicing each length-encoded value out of the buffer into its
column. ``RawResult.driver_value`` turns one raw value into exactly what the connection's own
cursor would have returned (same encoding and converter choice as pymysql's result reader), for
the rows and columns that need the per-value path.

Protocol (classic, as pymysql speaks it: no CLIENT_DEPRECATE_EOF): column count, one column
definition per column, EOF; row packets; EOF. A row is a sequence of length-encoded strings,
``0xFB`` for NULL. A payload of 16 MiB - 1 continues in the next packet. An error packet
(``0xFF``) mid-result is raised as pymysql raises it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pymysql import converters, err
from pymysql.connections import TEXT_TYPES, FieldDescriptorPacket, MysqlPacket
from pymysql.constants import COMMAND, FIELD_TYPE

from cdc_console.core.untyped import Connection, DriverRow, DriverValue

MAX_PACKET_LEN = 0xFFFFFF
_READ_SIZE = 1 << 20

RawValue = bytes | None


class _Reader(Protocol):
    """The connection's buffered socket file (``conn._rfile``)."""

    def read1(self, size: int = -1, /) -> bytes: ...


Decoder = Callable[[bytes], DriverValue]


@dataclass
class RawResult:
    """The result's values per column (raw bytes or None), and how pymysql would decode each."""

    columns: list[list[RawValue]]
    decoders: list[Decoder]

    @property
    def row_count(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def driver_value(self, index: int, value: RawValue) -> DriverValue:
        return None if value is None else self.decoders[index](value)

    def driver_rows(self) -> list[DriverRow]:
        """Every row as the connection's cursor would have returned it."""
        decoded = [
            [None if v is None else decode(v) for v in column]
            for column, decode in zip(self.columns, self.decoders, strict=True)
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
    columns: list[list[RawValue]] = [[] for _ in range(count)]
    _read_rows(conn, columns)
    return RawResult(columns, decoders)


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


def _read_rows(conn: Connection, columns: list[list[RawValue]]) -> None:
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    rfile = conn._rfile
    appends = [column.append for column in columns]
    buf = b""
    pos = 0
    seq = conn._next_seq_id
    while True:
        # One packet: 3-byte length, 1-byte sequence number, payload.
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
        start = pos + 4
        pos = start + length
        payload = buf
        if length == MAX_PACKET_LEN:
            parts = [buf[start:pos]]
            while True:  # a row of 16 MiB or more continues in the next packets
                while len(buf) - pos < 4:
                    buf, pos = _more(rfile, buf, pos, conn)
                more = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                seq = (seq + 1) % 256
                while len(buf) - pos < 4 + more:
                    buf, pos = _more(rfile, buf, pos, conn)
                parts.append(buf[pos + 4 : pos + 4 + more])
                pos += 4 + more
                if more < MAX_PACKET_LEN:
                    break
            payload = b"".join(parts)
            start, end = 0, len(payload)
        else:
            end = pos
        head = payload[start]
        if head == 0xFE and end - start < 9:  # EOF: end of the rows
            conn._next_seq_id = seq
            return
        if head == 0xFF:
            conn._next_seq_id = seq
            MysqlPacket(bytes(payload[start:end]), conn.encoding).raise_for_error()
        i = start
        for append in appends:
            size = payload[i]
            if size < 251:
                append(payload[i + 1 : i + 1 + size])
                i += 1 + size
                continue
            if size == 251:
                append(None)
                i += 1
                continue
            if size == 252:
                size, i = payload[i + 1] | payload[i + 2] << 8, i + 3
            elif size == 253:
                size = payload[i + 1] | payload[i + 2] << 8 | payload[i + 3] << 16
                i += 4
            else:
                size = int.from_bytes(payload[i + 1 : i + 9], "little")
                i += 9
            append(payload[i : i + size])
            i += size
        if i != end:
            conn._force_close()
            raise err.InternalError(
                f"row packet of {end - start} bytes held {i - start} bytes of values"
            )


def _more(rfile: _Reader, buf: bytes, pos: int, conn: Connection) -> tuple[bytes, int]:
    data = rfile.read1(_READ_SIZE)
    if not data:
        conn._force_close()
        raise err.OperationalError(2013, "Lost connection to MySQL server during query")
    return buf[pos:] + data, 0
