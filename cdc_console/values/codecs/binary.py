"""The byte families: BINARY, BYTES (VARBINARY, *BLOB, spatial WKB) and MariaDB's fixed-binary
types (UUID, INET4, INET6).

* The canonical value of bytes is their standard base64; a chunk key keeps the bytes.
* BINARY(n): pymysql returns the zero-padded n bytes, the binlog strips trailing ``0x00`` bytes
  (``x'00000000'`` arrives as ``''``); both are padded to n.
* Every empty binary value arrives from the binlog as the *str* ``''``: the reference decoder
  "decodes" with the pseudo-codec ``binary``, which fails (and returns the bytes) except for
  empty input.
* UUID, INET4, INET6 travel as the text the server prints: the snapshot reads that text, the
  binlog carries the bytes, which ``values.fixed_binary`` formats as the server does.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue, RawKey
from cdc_console.values import fixed_binary
from cdc_console.values.codecs.base import (
    ColumnPlan,
    Converter,
    FamilyCodec,
    KeyConverter,
    SinkType,
    StoredKind,
    length_of,
)


def as_bytes(value: DriverValue) -> bytes:
    """A binary driver value's bytes (the binlog gives '' as a str for an empty value)."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _base64(value: DriverValue) -> CanonicalValue:
    return base64.b64encode(as_bytes(value)).decode("ascii")


def _from_base64(value: DriverValue) -> RawKey:
    return base64.b64decode(str(value))


def padded_bytes(length: int) -> Callable[[DriverValue], bytes]:
    """BINARY(n) as the server stores it: the binlog strips trailing zero bytes, pymysql does not."""

    def conv(value: DriverValue) -> bytes:
        data = as_bytes(value)
        if len(data) < length:
            data += bytes(length - len(data))
        return data

    return conv


def _padded_base64(length: int) -> Converter:
    pad = padded_bytes(length)

    def conv(value: DriverValue) -> CanonicalValue:
        return base64.b64encode(pad(value)).decode("ascii")

    return conv


class BinaryCodec(FamilyCodec):
    """BINARY(n): fixed length, zero-padded on both paths."""

    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _padded_base64(length_of(column, 1))
        return ColumnPlan(conv, conv)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return padded_bytes(length_of(column, 1))

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        pad = padded_bytes(length_of(column, 1))
        return lambda value: pad(base64.b64decode(str(value)))

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.BINARY)


class BytesCodec(FamilyCodec):
    """VARBINARY, the BLOBs and spatial values (their WKB)."""

    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(_base64, _base64)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return as_bytes

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _from_base64

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.BINARY)


class FixedBinaryCodec(FamilyCodec):
    """UUID, INET4, INET6: the server's text on both paths, which is also their chunk key
    (their order is the server's, ``core.keys``)."""

    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(fixed_binary.snapshot_text, fixed_binary.binlog_converter(self.family))

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return plan.binlog if binlog else plan.snapshot
