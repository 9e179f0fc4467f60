"""MySQL column -> Delta/Arrow type, and canonical JSON values <-> Arrow arrays.

Change records carry row images as canonical JSON (see ``cdc_console.values.canonical``): exact but
untyped. The sinks that store typed tables decode them here, column by column and vectorised where
Arrow can do it exactly, so the mirror holds faithful types a Spark or Delta user can query
directly. The rule: a value a Delta type cannot hold exactly is stored as an exact string or a
wider decimal, never rounded.

========================================  ==============================  ==========================
MySQL type (``ColumnInfo``)               Arrow type                      Delta type
========================================  ==============================  ==========================
TINYINT / TINYINT UNSIGNED                int8 / int16                    byte / short
SMALLINT / SMALLINT UNSIGNED              int16 / int32                   short / integer
MEDIUMINT, INT / ... UNSIGNED             int32 / int64                   integer / long
BIGINT                                    int64                           long
BIGINT UNSIGNED                           decimal128(20, 0)               decimal(20,0)
YEAR                                      int16                           short
BIT(n), n <= 63                           int64                           long
BIT(64)                                   decimal128(20, 0)               decimal(20,0)
DECIMAL(p, s), p <= 38                    decimal128(p, s)                decimal(p,s)
DECIMAL(p, s), p > 38 (up to 65)          string, exact, s digits         string
FLOAT                                     float32                         float
DOUBLE                                    float64                         double
DATE                                      date32                          date
DATETIME(p)                               timestamp[us] (no time zone)    timestamp_ntz
TIMESTAMP(p)                              timestamp[us, tz=UTC]           timestamp
TIME(p)                                   string ``[-]HH:MM:SS[.f]``      string
CHAR, VARCHAR, *TEXT, ENUM                string                          string
SET                                       string ``"a,b"``                string
JSON                                      string (canonical JSON text)    string
BINARY, VARBINARY, *BLOB, GEOMETRY, ...   binary                          binary
anything else (UUID, INET6, VECTOR, ...)  string (the canonical value)    string
========================================  ==============================  ==========================

Why these choices:

- Unsigned types widen to the next signed type so every value fits; BIGINT UNSIGNED and BIT(64)
  need 64 magnitude bits, which only ``decimal(20,0)`` holds exactly (2^64-1 has 20 digits).
- Delta decimals stop at precision 38; MySQL's reach 65, so wider ones stay exact strings with
  exactly ``s`` fractional digits (``DECIMAL(65,30)``), the form the normaliser produces.
- DATETIME is a wall-clock value (``timestamp_ntz``, which makes delta-rs enable the
  ``timestampNtz`` table feature: reader v3 / writer v7); TIMESTAMP is an instant, stored in UTC.
  Both keep microseconds, MySQL's finest precision.
- TIME spans ``-838:59:59`` to ``838:59:59`` and is a duration, not a time of day: no Delta type
  fits, so it keeps its canonical text.
- MySQL "zero" and invalid dates (``0000-00-00``, ``2021-00-00``, ``2021-02-30`` under
  ``ALLOW_INVALID_DATES``) have no Delta value: their canonical value is already the column's
  rule (``core.invalid_dates``: NULL or the sentinel; under ``text`` a companion string
  column holds the source's text), and any such text still met is NULL.
- Every field is nullable: a delete's MERGE source row carries only the key columns, and a later
  ``ALTER TABLE ... NULL`` must not make past schemas reject writes.

``to_canonical`` is the inverse of the decoder for everything but unknown types and nulled zero
dates (FLOAT too: its canonical value is already the exact float32 value, which float32 storage
keeps); the sinks use it to compare mirror keys with change-record keys, and the tests to compare
a mirror with its source.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc

from cdc_console.core.schema import COUNT_COLUMN, ColumnInfo, TableSchema
from cdc_console.core.untyped import ArrowValue
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.values.codecs import FAMILY_CODECS, SinkType, StoredKind

UNSIGNED_BIGINT_TYPE = pa.decimal128(20, 0)

_INT_TYPES: dict[int, pa.DataType] = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
_DATE_SHAPE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


class SinkTypeError(ValueError):
    """A canonical value does not fit its column's sink type (a normaliser or schema bug)."""


@dataclass(frozen=True)
class ColumnCodec:
    """How one MySQL column is stored: its Arrow type and the codec between that and canonical.

    ``kind`` selects the conversion; it is derived once per column (``codec_for``) because the
    sinks convert whole columns of a batch at a time.
    """

    column: ColumnInfo
    arrow_type: pa.DataType
    kind: StoredKind
    # Integer kinds: the MySQL type's own range, narrower than the Arrow type's for unsigned and
    # MEDIUMINT types. A negative value in an unsigned column is the classic binlog-decoding bug
    # (signed reinterpretation), so it is refused rather than stored.
    value_range: tuple[int, int] | None = None

    @property
    def field(self) -> pa.Field:
        return pa.field(self.column.name, self.arrow_type, nullable=True)

    def to_arrow(self, values: Sequence[CanonicalValue]) -> pa.Array:
        """Canonical values (``None`` = NULL) -> an Arrow array of ``arrow_type``.

        Raises ``SinkTypeError`` naming the column when a value does not fit exactly.
        """
        try:
            return _DECODERS[self.kind](self, values)
        except SinkTypeError:
            raise
        except (pa.ArrowException, TypeError, ValueError, OverflowError, ArithmeticError) as exc:
            raise SinkTypeError(
                f"column {self.column.name!r} ({self.column.column_type}): {exc}"
            ) from exc

    def to_canonical(self, value: ArrowValue) -> CanonicalValue:
        """A Python value read back from Arrow (``as_py``) -> its canonical JSON value."""
        if value is None:
            return None
        return _ENCODERS[self.kind](self, value)

    def array_to_canonical(self, array: pa.Array | pa.ChunkedArray) -> list[CanonicalValue]:
        encode = _ENCODERS[self.kind]
        return [None if v is None else encode(self, v) for v in array.to_pylist()]


#: how each stored kind that is not simply text is held in Arrow
_ARROW_OF_KIND: dict[StoredKind, Callable[[SinkType], pa.DataType]] = {
    StoredKind.INT: lambda stored: _INT_TYPES[stored.bits],
    StoredKind.WIDE_INT: lambda stored: UNSIGNED_BIGINT_TYPE,
    StoredKind.DECIMAL: lambda stored: pa.decimal128(stored.precision, stored.scale),
    StoredKind.FLOAT: lambda stored: pa.float32() if stored.bits == 32 else pa.float64(),
    StoredKind.BINARY: lambda stored: pa.binary(),
    StoredKind.DATE: lambda stored: pa.date32(),
    StoredKind.DATETIME: lambda stored: pa.timestamp("us"),
    StoredKind.TIMESTAMP: lambda stored: pa.timestamp("us", tz="UTC"),
}


@lru_cache(maxsize=4096)
def codec_for(column: ColumnInfo) -> ColumnCodec:
    """The sink type of one column (see the module table): its family's ``stored_as``, in Arrow;
    a type with no family keeps its canonical value as text."""
    family = column.family
    if family is None:
        return ColumnCodec(column, pa.string(), StoredKind.TEXT)
    stored = FAMILY_CODECS[family].stored_as(column)
    arrow = _ARROW_OF_KIND.get(stored.kind)
    return ColumnCodec(
        column,
        pa.string() if arrow is None else arrow(stored),
        stored.kind,
        stored.value_range,
    )


def arrow_type(column: ColumnInfo) -> pa.DataType:
    return codec_for(column).arrow_type


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The typed schema of a table's rows as read from the source: source column names, in
    source column order, then the companions of its ``text``-ruled date columns
    (``TableSchema.row_columns``)."""
    return pa.schema([codec_for(c).field for c in schema.row_columns])


def mirror_schema(schema: TableSchema) -> pa.Schema:
    """The typed schema of a table's mirror: its rows' columns (``arrow_schema``), then the
    columns the source dropped that the mirror keeps (``TableSchema.retired_row_columns``),
    then, for a counted table, each row's multiplicity (``COUNT_COLUMN``)."""
    fields = [codec_for(c).field for c in (*schema.row_columns, *schema.retired_row_columns)]
    if schema.counted:
        fields.append(pa.field(COUNT_COLUMN, pa.int64(), nullable=False))
    return pa.schema(fields)


def columns_to_table(
    schema: TableSchema, columns: Mapping[str, Sequence[CanonicalValue]]
) -> pa.Table:
    """Canonical values per column -> a typed Arrow table (every row column must be given)."""
    arrays = [codec_for(c).to_arrow(columns[c.name]) for c in schema.row_columns]
    return pa.Table.from_arrays(arrays, schema=arrow_schema(schema))


def rows_to_table(schema: TableSchema, rows: Iterable[Mapping[str, CanonicalValue]]) -> pa.Table:
    """Canonical row dicts -> a typed Arrow table; a column absent from a row is NULL."""
    materialised = list(rows)
    columns = {c.name: [row.get(c.name) for row in materialised] for c in schema.row_columns}
    return columns_to_table(schema, columns)


def table_to_rows(schema: TableSchema, table: pa.Table) -> list[CanonicalRow]:
    """A typed Arrow table (a mirror read back) -> canonical row dicts, in source column order.

    Columns of ``table`` that are not in ``schema`` are ignored; schema columns missing from
    ``table`` are an error.
    """
    kept = [c for c in schema.row_columns if c.name in table.column_names]
    names = [c.name for c in kept]
    columns = [codec_for(c).array_to_canonical(table.column(c.name)) for c in kept]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


# --- decoders: canonical -> Arrow -------------------------------------------------------------


def _check_types(
    codec: ColumnCodec, values: Sequence[CanonicalValue], allowed: tuple[type, ...]
) -> None:
    for value in values:
        if value is not None and type(value) not in allowed:
            raise SinkTypeError(
                f"column {codec.column.name!r} ({codec.column.column_type}): canonical value "
                f"{value!r} is a {type(value).__name__}, expected {'/'.join(t.__name__ for t in allowed)}"
            )


def _strings(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> Sequence[str | None]:
    """``values``, checked to be text (or NULL)."""
    _check_types(codec, values, (str,))
    return cast("Sequence[str | None]", values)


def _ints(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> Sequence[int | None]:
    """``values``, checked to be integers (or NULL) in the column's range."""
    _check_types(codec, values, (int,))
    checked = cast("Sequence[int | None]", values)
    _check_range(codec, checked)
    return checked


def _check_range(codec: ColumnCodec, values: Sequence[int | None]) -> None:
    if codec.value_range is None:
        return
    low, high = codec.value_range
    for value in values:
        if value is not None and not low <= value <= high:
            raise SinkTypeError(
                f"column {codec.column.name!r} ({codec.column.column_type}): {value} is outside "
                f"{low}..{high}"
            )


def _decode_int(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    # pyarrow silently truncates 1.5 to 1 for an integer type; a float here is a normaliser bug.
    values = _ints(codec, values)
    return pa.array(values, type=codec.arrow_type)


def _decode_wide_int(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    values = _ints(codec, values)
    return pa.array(values, type=codec.arrow_type)


def _decode_decimal(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    # Arrow's string -> decimal cast is exact and refuses to round ("would cause data loss").
    if all(v is None or type(v) is str for v in values):
        return pc.cast(pa.array(values, type=pa.string()), codec.arrow_type)
    _check_types(codec, values, (str, int))
    decimals = [None if v is None else Decimal(v) for v in values]
    return pa.array(decimals, type=codec.arrow_type)


def _decode_decimal_text(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    _check_types(codec, values, (str, int))
    scale = codec.column.numeric_scale or 0
    out: list[str | None] = []
    for value in values:
        if value is None or type(value) is str:
            out.append(value)
        else:
            out.append(f"{Decimal(value):.{scale}f}")
    return pa.array(out, type=pa.string())


def _decode_float(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    _check_types(codec, values, (float, int))
    return pa.array(values, type=codec.arrow_type)


def _decode_string(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    _check_types(codec, values, (str,))
    return pa.array(values, type=pa.string())


def _decode_text(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    """Unknown types: keep the canonical value, serialising non-strings as compact JSON."""
    out = [
        v if v is None or type(v) is str else json.dumps(v, separators=(",", ":")) for v in values
    ]
    return pa.array(out, type=pa.string())


def _decode_binary(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    texts = _strings(codec, values)
    try:
        raw = [None if v is None else base64.b64decode(v, validate=True) for v in texts]
    except binascii.Error as exc:
        raise SinkTypeError(
            f"column {codec.column.name!r} ({codec.column.column_type}): not base64: {exc}"
        ) from exc
    return pa.array(raw, type=pa.binary())


def _zero_or_invalid_date(text: str) -> bool:
    """True for a date-shaped value no calendar holds (zero month/day, Feb 30): it becomes NULL.

    Year 0 is kept (Arrow's proleptic calendar has it; it is a leap year like 2000).
    """
    match = _DATE_SHAPE.match(text)
    if not match:
        return False
    year, month, day = (int(g) for g in match.groups())
    try:
        dt.date(year or 2000, month, day)
    except ValueError:
        return True
    return False


def _decode_temporal(codec: ColumnCodec, values: Sequence[CanonicalValue]) -> pa.Array:
    """Arrow's strict ISO-8601 cast; zero/invalid dates are nulled first, only if it fails.

    The cast rejects a zone on DATETIME and requires one ('Z') on TIMESTAMP.
    """
    texts = _strings(codec, values)
    try:
        return pc.cast(pa.array(texts, type=pa.string()), codec.arrow_type)
    except pa.ArrowInvalid:
        pass
    cleaned = [None if v is None or _zero_or_invalid_date(v) else v for v in texts]
    return pc.cast(pa.array(cleaned, type=pa.string()), codec.arrow_type)


_DECODERS: dict[StoredKind, Callable[[ColumnCodec, Sequence[CanonicalValue]], pa.Array]] = {
    StoredKind.INT: _decode_int,
    StoredKind.WIDE_INT: _decode_wide_int,
    StoredKind.DECIMAL: _decode_decimal,
    StoredKind.DECIMAL_TEXT: _decode_decimal_text,
    StoredKind.FLOAT: _decode_float,
    StoredKind.STRING: _decode_string,
    StoredKind.TEXT: _decode_text,
    StoredKind.BINARY: _decode_binary,
    StoredKind.DATE: _decode_temporal,
    StoredKind.DATETIME: _decode_temporal,
    StoredKind.TIMESTAMP: _decode_temporal,
}


# --- encoders: Arrow (as_py) -> canonical ---------------------------------------------------


def _fraction(codec: ColumnCodec, microsecond: int) -> str:
    precision = codec.column.datetime_precision
    if precision is None:  # unknown precision: lose nothing, add nothing
        return f".{microsecond:06d}".rstrip("0") if microsecond else ""
    if precision <= 0:
        return ""
    return "." + f"{microsecond:06d}"[:precision]


def _format_date(value: dt.date) -> str:
    # strftime("%Y") does not zero-pad years below 1000 on glibc.
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _format_datetime(codec: ColumnCodec, value: dt.datetime) -> str:
    return (
        f"{_format_date(value)} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        f"{_fraction(codec, value.microsecond)}"
    )


def _encode_int(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return int(value)


def _encode_decimal(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    scale = codec.column.numeric_scale or 0
    try:
        return f"{Decimal(value):.{scale}f}"
    except InvalidOperation as exc:  # pragma: no cover - Arrow only hands out finite decimals
        raise SinkTypeError(f"column {codec.column.name!r}: {value!r} is not a decimal") from exc


def _encode_float(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return float(value)


def _encode_str(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return str(value)


def _encode_binary(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return base64.b64encode(bytes(value)).decode("ascii")


def _encode_date(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return _format_date(value)


def _encode_datetime(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    return _format_datetime(codec, value)


def _encode_timestamp(codec: ColumnCodec, value: ArrowValue) -> CanonicalValue:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return _format_datetime(codec, value) + "Z"


_ENCODERS: dict[StoredKind, Callable[[ColumnCodec, ArrowValue], CanonicalValue]] = {
    StoredKind.INT: _encode_int,
    StoredKind.WIDE_INT: _encode_int,
    StoredKind.DECIMAL: _encode_decimal,
    StoredKind.DECIMAL_TEXT: _encode_str,
    StoredKind.FLOAT: _encode_float,
    StoredKind.STRING: _encode_str,
    StoredKind.TEXT: _encode_str,
    StoredKind.BINARY: _encode_binary,
    StoredKind.DATE: _encode_date,
    StoredKind.DATETIME: _encode_datetime,
    StoredKind.TIMESTAMP: _encode_timestamp,
}
