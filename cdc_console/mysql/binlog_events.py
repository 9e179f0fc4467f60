"""Every binlog event type a window reader can meet: decoded, known to change no row, or loud.

A reader that asks pymysqlreplication for only the event types it understands passes over all
the others without a word, and some of those carry row changes: MariaDB's compressed row and
query events (``log_bin_compress``), MySQL's transaction payload (``binlog_transaction_
compression``, zstd) and partial JSON updates, an incident (events the server lost), and any
type a newer server invents. So the census here is explicit: a type is either one the reader
decodes, one known to carry no change of any table's rows, or an :class:`OpaqueEvent` that the
reader reports, so that the tables it may touch are held rather than silently left behind.

MariaDB's compressed events are turned back into their plain form (:func:`plain_packet`), as a
replica's I/O thread does: the header byte ``0x80 | n``, then the uncompressed length in ``n``
big-endian bytes, then a zlib stream, in place of a query event's SQL text or a row event's
rows (after the column bitmaps).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import pymysql.protocol
from pymysqlreplication.constants import BINLOG

from cdc_console.core.untyped import BinlogLibObject

#: MariaDB's compressed event types (``log_bin_compress``)
QUERY_COMPRESSED_EVENT = 0xA5
#: compressed row event type -> its plain type (MariaDB writes the v1 forms only)
COMPRESSED_ROWS = {
    0xA6: BINLOG.WRITE_ROWS_EVENT_V1,
    0xA7: BINLOG.UPDATE_ROWS_EVENT_V1,
    0xA8: BINLOG.DELETE_ROWS_EVENT_V1,
}
#: MariaDB's v2 compressed row types: never written by MariaDB, not decoded
COMPRESSED_ROWS_V2 = frozenset({0xA9, 0xAA, 0xAB})
TRANSACTION_PAYLOAD_EVENT = 0x28
ROW_TYPES = frozenset(
    {
        BINLOG.WRITE_ROWS_EVENT_V1,
        BINLOG.UPDATE_ROWS_EVENT_V1,
        BINLOG.DELETE_ROWS_EVENT_V1,
        BINLOG.WRITE_ROWS_EVENT_V2,
        BINLOG.UPDATE_ROWS_EVENT_V2,
        BINLOG.DELETE_ROWS_EVENT_V2,
    }
)
#: Event types that carry no change of any table's rows: the transaction frame (GTIDs, XID),
#: the file frame (format, rotate, stop, checkpoints, GTID lists), table maps, and the context
#: a logged statement runs in (INTVAR, RAND, USER_VAR: the statement itself is a Query event,
#: read on its own), annotations, heartbeats, the pieces of a LOAD DATA file (the statement
#: that loads it is an Execute_load_query event, not in this set).
CHANGE_FREE = frozenset(
    {
        BINLOG.START_EVENT_V3,
        BINLOG.STOP_EVENT,
        BINLOG.ROTATE_EVENT,
        BINLOG.INTVAR_EVENT,
        BINLOG.APPEND_BLOCK_EVENT,
        BINLOG.DELETE_FILE_EVENT,
        BINLOG.RAND_EVENT,
        BINLOG.USER_VAR_EVENT,
        BINLOG.FORMAT_DESCRIPTION_EVENT,
        BINLOG.XID_EVENT,
        BINLOG.BEGIN_LOAD_QUERY_EVENT,
        BINLOG.TABLE_MAP_EVENT,
        BINLOG.HEARTBEAT_LOG_EVENT,
        BINLOG.IGNORABLE_LOG_EVENT,
        BINLOG.ROWS_QUERY_LOG_EVENT,
        BINLOG.GTID_LOG_EVENT,
        BINLOG.ANONYMOUS_GTID_LOG_EVENT,
        BINLOG.PREVIOUS_GTIDS_LOG_EVENT,
        0x24,  # TRANSACTION_CONTEXT (group replication)
        0x25,  # VIEW_CHANGE (group replication)
        BINLOG.XA_PREPARE_EVENT,
        0x29,  # HEARTBEAT_LOG_EVENT_V2
        0x2A,  # GTID_TAGGED_LOG_EVENT (MySQL 8.3+)
        BINLOG.MARIADB_ANNOTATE_ROWS_EVENT,
        BINLOG.MARIADB_BINLOG_CHECKPOINT_EVENT,
        BINLOG.MARIADB_GTID_EVENT,
        BINLOG.MARIADB_GTID_GTID_LIST_EVENT,
        BINLOG.MARIADB_START_ENCRYPTION_EVENT,
    }
)
#: types the window reader decodes itself (statements, rows, compressed forms of both)
DECODED = frozenset({BINLOG.QUERY_EVENT, QUERY_COMPRESSED_EVENT, *ROW_TYPES, *COMPRESSED_ROWS})

#: what to tell the user for the opaque types we know by name
_FIXES = {
    TRANSACTION_PAYLOAD_EVENT: (
        "a compressed transaction (MySQL's binlog_transaction_compression)",
        "SET GLOBAL binlog_transaction_compression = OFF (and in my.cnf), then "
        "cdc-console redump --table {table}",
    ),
    BINLOG.PARTIAL_UPDATE_ROWS_EVENT: (
        "a partial JSON update (MySQL's binlog_row_value_options = PARTIAL_JSON)",
        "SET GLOBAL binlog_row_value_options = '' (and in my.cnf), then "
        "cdc-console redump --table {table}",
    ),
    BINLOG.INCIDENT_EVENT: (
        "an incident: the server says changes may be missing from its binlog here",
        "cdc-console redump --table {table}",
    ),
    BINLOG.EXECUTE_LOAD_QUERY_EVENT: (
        "a LOAD DATA logged as a statement",
        "SET GLOBAL binlog_format = 'ROW' and keep writers from changing it, then "
        "cdc-console redump --table {table}",
    ),
    **{
        code: (
            "a compressed row event of a form MariaDB does not write",
            "SET GLOBAL log_bin_compress = OFF, then cdc-console redump --table {table}",
        )
        for code in COMPRESSED_ROWS_V2
    },
}


@dataclass(frozen=True, slots=True)
class OpaqueEvent:
    """An event that may carry row changes and is not decoded: where it starts and ends, its
    type, and the table it names when it names one (a row event's table map), else None."""

    event_type: int
    start: int
    log_pos: int
    schema: str | None = None
    table: str | None = None
    #: why it could not be decoded, when it is a type that normally is
    error: str = ""

    @property
    def description(self) -> str:
        known = _FIXES.get(self.event_type)
        what = (
            known[0]
            if known
            else f"an event of type {self.event_type:#04x} this reader does not know"
        )
        return f"{what}{': ' + self.error if self.error else ''}"

    def fix(self, table: str) -> str:
        known = _FIXES.get(self.event_type)
        if known is None:
            return (
                f"cdc-console redump --table {table} once the server writes events this "
                "version reads (report the event type)"
            )
        return known[1].format(table=table)


def is_opaque(event_type: int) -> bool:
    return event_type not in CHANGE_FREE and event_type not in DECODED


class CompressedEventError(ValueError):
    pass


def uncompress(data: bytes | memoryview) -> bytes:
    """MariaDB's compressed body: ``0x80 | n``, the length in ``n`` big-endian bytes, zlib."""
    if not data or (data[0] & 0xE0) != 0x80:
        raise CompressedEventError("not a compressed body (bad header byte)")
    width = data[0] & 0x07
    if not 1 <= width <= 4 or len(data) < 1 + width:
        raise CompressedEventError(f"a length of {width} bytes")
    length = int.from_bytes(data[1 : 1 + width], "big")
    body = zlib.decompress(bytes(data[1 + width :]))
    if len(body) != length:
        raise CompressedEventError(f"{len(body)} bytes uncompressed, the header says {length}")
    return body


# OK byte, then the v4 event header: timestamp, type, server id, event size, next position, flags
EVENT_HEADER = struct.Struct("<xIBIIIH")
#: where an event's body starts in a packet (the OK byte and the 19-byte header before it)
HEADER_END = 20
_ROWS_POST_HEADER = 8
_QUERY_POST_HEADER = 13


def _lenenc(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(data[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def plain_packet(packet: BinlogLibObject, use_checksum: bool) -> tuple[BinlogLibObject, int] | None:
    """A MariaDB compressed query or row event as the plain event it stands for (a new packet,
    and the compressed event's own size, which positions must keep); None for any other event.
    Raises :class:`CompressedEventError` (or ``zlib.error``) when the body does not inflate."""
    data: bytes = packet._data
    if len(data) < HEADER_END:
        return None
    kind = data[5]
    if kind != QUERY_COMPRESSED_EVENT and kind not in COMPRESSED_ROWS:
        return None
    timestamp, _, server_id, size, log_pos, flags = EVENT_HEADER.unpack_from(data)
    tail = 4 if use_checksum else 0
    body_end = HEADER_END + size - 19 - tail
    if kind == QUERY_COMPRESSED_EVENT:
        status_length = int.from_bytes(data[HEADER_END + 11 : HEADER_END + 13], "little")
        schema_length = data[HEADER_END + 8]
        pos = HEADER_END + _QUERY_POST_HEADER + status_length + schema_length + 1
        plain = BINLOG.QUERY_EVENT
    else:
        pos = HEADER_END + _ROWS_POST_HEADER
        columns, pos = _lenenc(data, pos)
        images = 2 if COMPRESSED_ROWS[kind] == BINLOG.UPDATE_ROWS_EVENT_V1 else 1
        pos += images * ((columns + 7) // 8)
        plain = COMPRESSED_ROWS[kind]
    if pos > body_end:
        raise CompressedEventError("the event ends before its compressed part")
    inflated = uncompress(memoryview(data)[pos:body_end])
    new_size = (pos - HEADER_END) + len(inflated) + 19 + tail
    header = struct.pack("<BIBIIIH", 0, timestamp, plain, server_id, new_size, log_pos, flags)
    rebuilt = header + data[HEADER_END:pos] + inflated + data[body_end : body_end + tail]
    return pymysql.protocol.MysqlPacket(rebuilt, "utf8"), size


def full_bitmap(bitmap: bytes, columns: int) -> bool:
    """Whether a row event's columns-present bitmap names every one of ``columns``."""
    whole, rest = divmod(columns, 8)
    if len(bitmap) < whole + (1 if rest else 0):
        return False
    if bitmap[:whole] != b"\xff" * whole:
        return False
    return not rest or (bitmap[whole] & ((1 << rest) - 1)) == (1 << rest) - 1
