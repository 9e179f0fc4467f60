"""The numeric families: INTEGER, YEAR, DECIMAL, FLOAT, DOUBLE and BIT.

* Unsigned integers: with full metadata the binlog already gives the unsigned value; if the
  signedness metadata were missing it would give a negative number, which we wrap back. In the
  sink, unsigned types widen to the next signed type so every value fits; BIGINT UNSIGNED and
  BIT(64) need 64 magnitude bits, which only ``decimal(20,0)`` holds exactly.
* YEAR: the binlog stores (year - 1900) in one byte, with 0 meaning 0000; the decoder adds 1900
  unconditionally, so 0000 arrives as 1900 (not a storable YEAR), which we map back to 0.
* DECIMAL: text with exactly ``s`` fraction digits, no exponent, no ``-0``; a chunk key keeps the
  ``Decimal``. Delta decimals stop at precision 38, MySQL's reach 65: wider ones stay exact text.
* FLOAT: the server formats FLOAT text with 6 significant digits (a stored 1234567 reads back as
  1234570) while the binlog has the exact float32; no client-side fix exists, so the snapshot
  selects ``f + 0e0``, a DOUBLE carrying the exact float32. DOUBLE text is shortest-round-trip
  and already exact; it goes through the same expression anyway. ``-0.0`` folds to ``0.0``.
* BIT: pymysql gives big-endian bytes, the binlog a ``'0101'`` string; both become the int.
"""

from __future__ import annotations

import re
import struct
from decimal import ROUND_HALF_EVEN, Context, Decimal

from cdc_console.core.mysqltypes import INTEGER_BITS, TypeFamily
from cdc_console.core.schema import ColumnInfo, quote_ident
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue, RawKey
from cdc_console.values.codecs.base import (
    ColumnPlan,
    Converter,
    FamilyCodec,
    KeyConverter,
    SinkType,
    StoredKind,
)

#: Delta's widest decimal
MAX_DELTA_DECIMAL_PRECISION = 38

#: integer width in bits -> the stored width of (signed, unsigned); 0: wider than any int
_STORED_BITS: dict[int, tuple[int, int]] = {
    8: (8, 16),
    16: (16, 32),
    24: (32, 64),
    32: (32, 64),
    64: (64, 0),
}
_FLOAT32 = struct.Struct("<f")
_DECIMAL_CONTEXT = Context(prec=200, rounding=ROUND_HALF_EVEN)
_BIT_WIDTH = re.compile(r"^\s*bit\s*\(\s*(\d+)\s*\)", re.IGNORECASE)


def _unsigned(bits: int) -> Converter:
    """Wrap a negative value back: only possible when the binlog lacks signedness metadata."""
    modulus = 1 << bits

    def conv(value: int) -> CanonicalValue:
        return value if value >= 0 else value + modulus

    return conv


class IntegerCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(None, _unsigned(self._bits(column)) if column.unsigned else None)

    def stored_as(self, column: ColumnInfo) -> SinkType:
        bits = self._bits(column)
        signed, unsigned = _STORED_BITS[bits]
        if not column.unsigned:
            return SinkType(
                StoredKind.INT, signed, value_range=(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            )
        kind = StoredKind.INT if unsigned else StoredKind.WIDE_INT
        return SinkType(kind, unsigned, value_range=(0, 2**bits - 1))

    @staticmethod
    def _bits(column: ColumnInfo) -> int:
        return INTEGER_BITS[column.data_type.lower().strip()]


def _year(value: DriverValue) -> CanonicalValue:
    return 0 if value == 1900 else value


class YearCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(None, _year)

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.INT, 16, value_range=(0, 2155))


def _decimal_text(scale: int) -> Converter:
    """Fixed-point text with exactly ``scale`` digits, exact for DECIMAL(65, 30).

    The default decimal context has 28 digits, too few to quantize DECIMAL(65, s) values, hence
    a private wide context. ``-0.000`` (a possible decoder output for a zero with the sign bit
    set) is folded to ``0.000``.
    """
    quantum = Decimal(1).scaleb(-scale)
    zero = format(Decimal(0).quantize(quantum), "f")

    def conv(value: DriverValue) -> CanonicalValue:
        if type(value) is not Decimal:
            value = Decimal(str(value))
        if not value:
            return zero
        return format(value.quantize(quantum, context=_DECIMAL_CONTEXT), "f")

    return conv


def _decimal_value(value: DriverValue) -> RawKey:
    return value if type(value) is Decimal else Decimal(str(value))


class DecimalCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _decimal_text(column.numeric_scale or 0)
        return ColumnPlan(conv, conv)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return _decimal_value

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _decimal_value

    def stored_as(self, column: ColumnInfo) -> SinkType:
        precision = column.numeric_precision
        if precision is None or precision > MAX_DELTA_DECIMAL_PRECISION:
            return SinkType(StoredKind.DECIMAL_TEXT)
        return SinkType(StoredKind.DECIMAL, precision=precision, scale=column.numeric_scale or 0)


def _float32(value: DriverValue) -> CanonicalValue:
    """The exact float32 value as a Python float; ``-0.0`` folds to ``0.0`` (``+ 0.0``)."""
    try:
        exact: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
        return exact + 0.0
    except OverflowError:  # a decimal rendering rounded past FLT_MAX: keep what we were given
        return float(value) + 0.0


def _double(value: DriverValue) -> CanonicalValue:
    return float(value) + 0.0


class FloatingCodec(FamilyCodec):
    """FLOAT (32 bits) and DOUBLE (64), both selected as a DOUBLE expression."""

    def __init__(self, family: TypeFamily, bits: int) -> None:
        super().__init__(family)
        self.bits = bits
        self._conv = _float32 if bits == 32 else _double

    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(self._conv, self._conv)

    def select_expression(self, column: ColumnInfo) -> str:
        name = quote_ident(column.name)
        return f"{name} + 0e0 AS {name}"

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.FLOAT, self.bits)


def _bit(value: DriverValue) -> CanonicalValue:
    if type(value) is str:
        return int(value, 2) if value else 0
    return int.from_bytes(value, "big")


def _bit_width(column: ColumnInfo) -> int:
    match = _BIT_WIDTH.match(column.column_type)
    if match:
        return int(match.group(1))
    return column.numeric_precision or 1


class BitCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        return ColumnPlan(_bit, _bit)

    def stored_as(self, column: ColumnInfo) -> SinkType:
        width = min(max(_bit_width(column), 1), 64)
        if width == 64:
            return SinkType(StoredKind.WIDE_INT, value_range=(0, 2**64 - 1))
        return SinkType(StoredKind.INT, 64, value_range=(0, 2**width - 1))
