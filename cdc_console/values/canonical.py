"""One canonical value per stored value, whichever path read it.

This is the *One canonical value* invariant (README, "The invariants").

A row reaches the pipeline two ways: the snapshot SELECT (pymysql, default converters, session
``time_zone = '+00:00'``) and the binlog (pymysqlreplication 1.0.17, ``binlog_row_metadata=FULL``).
The two drivers disagree on the Python shape of almost every non-trivial type, and the sink merges
rows from both by key, so any disagreement shows up as a phantom update or a row that never
converges. This module maps both shapes onto one canonical, JSON-friendly value per SQL type; the
Delta sink is built on exactly this contract:

===================================  =============================================================
SQL type                             canonical value
===================================  =============================================================
NULL                                 ``None``
tinyint … bigint (±unsigned), year   ``int``
decimal(p, s)                        ``str`` with exactly ``s`` fraction digits, no exponent, no
                                     ``-0``
float                                ``float`` holding the exact float32 value
double                               ``float`` (``-0.0`` folded to ``0.0``, as for float)
bit(n)                               ``int``
char/varchar/*text/enum              ``str`` (CHAR without trailing spaces)
set                                  ``str``: members in definition order joined by ``,``
binary/varbinary/*blob/geometry      ``str``: standard base64 of the bytes (BINARY(n) zero-padded
                                     to n bytes)
date                                 ``"YYYY-MM-DD"``; zero/invalid dates -> the column's rule
datetime(p)                          ``"YYYY-MM-DD HH:MM:SS[.f{p}]"``; zero/invalid -> its rule
timestamp(p)                         the UTC instant, same text plus ``"Z"``; zero -> its rule
time(p)                              ``"[-]HH:MM:SS[.f{p}]"``, hours up to 838
json                                 ``json.dumps(v, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False)``
===================================  =============================================================

What each driver really returns, measured against MariaDB 10.11 (and read from the 1.0.17
decoder for MySQL-only shapes), and what we do about it:

* FLOAT: the server formats FLOAT text with 6 significant digits, so a plain ``SELECT f`` gives
  ``1234570.0`` for a stored ``1234567`` while the binlog has the exact float32. No client-side
  fix exists (the digits are gone), so the snapshot must select ``f + 0e0`` (a DOUBLE carrying the
  exact float32): :func:`select_expression` / :attr:`RowNormalizer.select_list` do that. DOUBLE
  text is shortest-round-trip and already exact; it goes through the same expression anyway.
* BINARY(n): pymysql returns the zero-padded n bytes, the binlog strips trailing ``0x00`` bytes
  (``x'00000000'`` arrives as ``''``). We pad to n.
* Every empty binary value (BINARY, VARBINARY, BLOB) arrives from the binlog as the *str* ``''``:
  the decoder "decodes" with the pseudo-codec ``binary``, which fails (and returns the bytes)
  except for empty input.
* SET: pymysql gives ``'a,c'``, the binlog a Python ``set``, and for the empty set ``None`` — the
  same as SQL NULL. The decoder records why in ``row["none_sources"]`` (``"empty set"`` vs
  ``"null"``); :meth:`RowNormalizer.binlog_row` takes it. Without it, ``None`` on a NOT NULL SET
  column still becomes ``''``; on a nullable one it stays ``None`` (ambiguous: pass none_sources).
* BIT: pymysql gives big-endian bytes, the binlog a ``'0101'`` string.
* YEAR: the binlog decodes ``0000`` as ``1900`` (byte 0 + 1900); 1900 is not a storable YEAR, so
  we map it back to ``0``.
* TIMESTAMP: both give a naive UTC datetime (the snapshot because its session is UTC). The zero
  timestamp arrives as the str ``'0000-00-00 00:00:00'`` from pymysql and as 1970-01-01 00:00:00
  (epoch 0, below TIMESTAMP's range) from the binlog: both follow the column's rule.
* DATE/DATETIME zero or invalid (``'0000-00-00'``, ``'2024-00-00'``, year 0): pymysql returns
  the raw str and so do our binlog decoders (the library, for pre-5.6 formats: ``None`` marked
  out of range in ``none_sources``); both become what the column's rule
  (``core.invalid_dates``) says: ``None``, or the sentinel ``0001-01-01``; under ``text`` the
  str also fills the column's companion.
* TIME(p > 0), negative with a non-zero fraction: the 1.0.17 decoder is wrong — it yields
  ``-(I + 1 - F)`` for the true ``-(I + F)`` (``-12:00:00.1`` decodes as ``-12:00:00.9``). The
  mapping is a bijection, so the binlog path inverts it (``_repair_time2``). Positive values and
  fsp 0 are decoded correctly. This repair is tied to the pinned decoder version.
* JSON: MariaDB's JSON is LONGTEXT with a ``json_valid()`` CHECK, and information_schema reports
  ``longtext``; both paths return the same text. Only columns whose ``data_type`` is ``json`` are
  canonicalised as JSON, so a MariaDB JSON column must be reported as ``json`` by the schema
  loader to get canonical JSON (otherwise it is, consistently, plain text). MySQL's binary JSON
  decodes to Python objects with *bytes* keys and strings, ``Decimal`` for decimals and
  ``datetime``/``time`` for temporals; we turn them into what ``json.loads`` of MySQL's JSON text
  would give (bytes -> str, Decimal -> float, temporals -> MySQL's text forms). A top-level JSON
  ``null`` literal is a value, kept apart from SQL NULL: it is the text ``"null"`` on both paths.
  MariaDB's binlog holds its text; MySQL's binary JSON decodes it to ``None``, which the
  decoder marks ``JSON_NULL_SOURCE`` in ``none_sources``. Without ``none_sources`` a binlog
  ``None`` in a nullable JSON column reads as NULL.
* Unsigned integers: with full metadata the binlog already gives the unsigned value; if the
  signedness metadata were missing it would give a negative number, which we wrap back.

* MariaDB's ``uuid``, ``inet4`` and ``inet6``: the server's text on the snapshot path; their
  bytes in the binlog, formatted as the server formats them (``values.fixed_binary``).

A type with no family raises :class:`UnsupportedColumnType` when the normalizer is built, so a
divergence is a clear start-up error rather than a silently drifting mirror.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache

from cdc_console.core.invalid_dates import InvalidDates, companion_name, sentinel_text, zero_text
from cdc_console.core.masks import masker
from cdc_console.core.mysqltypes import INTEGER_BITS, TypeFamily, UnsupportedColumnType
from cdc_console.core.schema import ColumnInfo, TableSchema, quote_ident
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalRow, CanonicalValue, RawKey
from cdc_console.values import fixed_binary

__all__ = [
    "CanonicalRow",
    "CanonicalValue",
    "RawKey",
    "RowNormalizer",
    "UnsupportedColumnType",
    "chunk_key_converter",
    "invalid_date_text",
    "normalize_value",
    "raw_chunk_key",
    "select_expression",
    "snapshot_converter",
]

#: The input of a converter is a driver's value (``DriverValue``: pymysql and
#: pymysqlreplication ship no types); the output is ``cdc_console.core.values``' types.
Converter = Callable[[DriverValue], CanonicalValue]
KeyConverter = Callable[[DriverValue], RawKey]

#: ``row["none_sources"]`` value pymysqlreplication gives an empty SET (``NONE_SOURCE.EMPTY_SET``).
EMPTY_SET_SOURCE = "empty set"
#: ``row["none_sources"]`` value our binlog decoder gives MySQL's JSON ``null`` literal, which
#: its binary JSON parser returns as ``None`` like a NULL
JSON_NULL_SOURCE = "json null"

_FLOAT32 = struct.Struct("<f")
_DECIMAL_CONTEXT = Context(prec=200, rounding=ROUND_HALF_EVEN)
_EPOCH = dt.datetime(1970, 1, 1)
_US_PER_S = 1_000_000
_LENGTH = re.compile(r"\((\d+)")


# --------------------------------------------------------------------------- converters
# Each converter receives a non-None raw value; NULL handling happens once, in the row loops.


def _unsigned(bits: int) -> Converter:
    """Wrap a negative value back: only possible when the binlog lacks signedness metadata."""
    modulus = 1 << bits

    def conv(value: int) -> CanonicalValue:
        return value if value >= 0 else value + modulus

    return conv


def _year(value: DriverValue) -> CanonicalValue:
    # The binlog stores YEAR as (year - 1900) in one byte, with 0 meaning 0000; the decoder adds
    # 1900 unconditionally, so 0000 arrives as 1900 (not a storable YEAR value).
    return 0 if value == 1900 else value


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


def _float32(value: DriverValue) -> CanonicalValue:
    """The exact float32 value as a Python float; ``-0.0`` folds to ``0.0`` (``+ 0.0``)."""
    try:
        exact: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
        return exact + 0.0
    except OverflowError:  # a decimal rendering rounded past FLT_MAX: keep what we were given
        return float(value) + 0.0


def _double(value: DriverValue) -> CanonicalValue:
    return float(value) + 0.0


def _bit(value: DriverValue) -> CanonicalValue:
    # pymysql: big-endian bytes; binlog: a string of '0'/'1' characters.
    if type(value) is str:
        return int(value, 2) if value else 0
    return int.from_bytes(value, "big")


def _char(value: str) -> CanonicalValue:
    # CHAR never keeps trailing spaces on retrieval; a session with PAD_CHAR_TO_FULL_LENGTH would
    # add them back on the snapshot path only.
    return value.rstrip(" ")


def _set_text(members: tuple[str, ...]) -> Converter:
    """SET as its member list in definition order; pymysql already sends that text."""

    def conv(value: DriverValue) -> CanonicalValue:
        if type(value) is str:
            return value
        chosen = [m for m in members if m in value]
        if len(chosen) != len(value):  # members unknown to our schema: keep them, deterministically
            chosen.extend(sorted(set(value).difference(members)))
        return ",".join(chosen)

    return conv


def _as_bytes(value: DriverValue) -> bytes:
    # The binlog gives '' (a str) for an empty binary value; nothing else arrives as str.
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _base64(value: DriverValue) -> CanonicalValue:
    return base64.b64encode(_as_bytes(value)).decode("ascii")


def _padded_bytes(length: int) -> Callable[[DriverValue], bytes]:
    """BINARY(n) as the server stores it: the binlog strips trailing zero bytes, pymysql does not."""

    def conv(value: DriverValue) -> bytes:
        data = _as_bytes(value)
        if len(data) < length:
            data += bytes(length - len(data))
        return data

    return conv


def _padded_base64(length: int) -> Converter:
    pad = _padded_bytes(length)

    def conv(value: DriverValue) -> CanonicalValue:
        return base64.b64encode(pad(value)).decode("ascii")

    return conv


def _date_text(invalid: CanonicalValue) -> Converter:
    def conv(value: dt.date | str) -> CanonicalValue:
        # pymysql returns the raw text of a date Python cannot hold ('0000-00-00',
        # '2024-00-00'); the binlog returns None (marked in none_sources) for the same values.
        if isinstance(value, str):
            return invalid
        return value.isoformat()

    return conv


def _date_value(value: dt.date | str) -> RawKey:
    return None if isinstance(value, str) else value


def _datetime_value(value: dt.datetime | str) -> RawKey:
    return None if isinstance(value, str) else value


def _timestamp_value(value: dt.datetime | str) -> dt.datetime | None:
    """A naive UTC datetime, or None for the zero timestamp (epoch 0 in the binlog)."""
    if isinstance(value, str) or value == _EPOCH:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _datetime_text(precision: int, invalid: CanonicalValue) -> Converter:
    width = 19 if precision <= 0 else 20 + min(precision, 6)

    def conv(value: dt.datetime | str) -> CanonicalValue:
        if isinstance(value, str):
            return invalid
        return value.isoformat(" ", "microseconds")[:width]

    return conv


def _timestamp_text(precision: int, invalid: CanonicalValue) -> Converter:
    width = 19 if precision <= 0 else 20 + min(precision, 6)

    def conv(value: dt.datetime | str) -> CanonicalValue:
        instant = _timestamp_value(value)
        if instant is None:
            return invalid
        return instant.isoformat(" ", "microseconds")[:width] + "Z"

    return conv


def _micros(value: dt.timedelta) -> int:
    return (value.days * 86400 + value.seconds) * _US_PER_S + value.microseconds


def _repair_time2(micros: int) -> int:
    """Invert pymysqlreplication 1.0.17's decoding of a negative TIME2 with a fraction.

    TIME2 stores a negative ``-(I + F)`` (I whole seconds, 0 < F < 1) as int part ``-(I + 1)``
    and fraction ``1 - F``; the decoder negates the int part (giving ``I + 1``), reads the
    fraction as a *signed* number (``-F``) and returns ``-(I + 1 - F)``. For a decoded magnitude
    ``A = I + (1 - F)``, ``I = floor(A)`` and ``F = 1 - frac(A)``. Whole seconds and positive
    values are decoded correctly and pass through.
    """
    if micros >= 0:
        return micros
    magnitude = -micros
    fraction = magnitude % _US_PER_S
    if not fraction:
        return micros
    return -(magnitude - fraction + (_US_PER_S - fraction))


def _time_text(precision: int, repair: bool) -> Converter:
    digits = max(0, min(precision, 6))

    def conv(value: DriverValue) -> CanonicalValue:
        micros = _micros(value)
        if repair:
            micros = _repair_time2(micros)
        sign = ""
        if micros < 0:
            sign = "-"
            micros = -micros
        seconds, fraction = divmod(micros, _US_PER_S)
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
        if digits:
            text += "." + f"{fraction:06d}"[:digits]
        return text

    return conv


def _time_value(repair: bool) -> KeyConverter:
    def conv(value: dt.timedelta) -> RawKey:
        if not repair:
            return value
        return dt.timedelta(microseconds=_repair_time2(_micros(value)))

    return conv


def _plain_json(value: DriverValue) -> object:
    """MySQL binary-JSON decoder output -> what ``json.loads`` of MySQL's JSON text would give."""
    if isinstance(value, dict):
        return {
            (k.decode("utf-8") if isinstance(k, bytes) else k): _plain_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(" ", "microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat("microseconds")
    if isinstance(value, dt.timedelta):
        return _time_text(6, False)(value)
    return value


def _json_text(decoded: bool) -> Converter:
    """Canonical JSON text. ``decoded``: the binlog may hand over already-parsed MySQL JSON."""

    def conv(value: DriverValue) -> CanonicalValue:
        if type(value) is str or (not decoded and isinstance(value, bytes)):
            parsed = json.loads(value)
        else:
            # MySQL binary JSON: a bytes value here is a decoded top-level JSON *string*.
            parsed = _plain_json(value)
        if parsed is None:
            return "null"
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    return conv


# --------------------------------------------------------------------------- per-column plans


def _length(column: ColumnInfo, default: int) -> int:
    match = _LENGTH.search(column.column_type)
    return int(match.group(1)) if match else default


def _precision(column: ColumnInfo) -> int:
    if column.datetime_precision is not None:
        return column.datetime_precision
    return _length(column, 0)


@dataclass(frozen=True)
class _Plan:
    """How one column is normalised. ``None`` converters mean identity (the common case)."""

    snapshot: Converter | None
    binlog: Converter | None
    #: canonical value for a binlog ``None`` in a NOT NULL column ('' for SET, 'null' for JSON)
    binlog_not_null: CanonicalValue = None
    is_set: bool = False
    #: a binlog None not marked NULL in ``none_sources`` is the JSON literal null
    is_json: bool = False
    #: what a zero or invalid date becomes (``core.invalid_dates``), for a binlog None the
    #: decoder marks out of range; None where it stays NULL
    invalid_date: CanonicalValue = None


def _family(column: ColumnInfo) -> TypeFamily:
    family = column.family
    if family is None:
        raise UnsupportedColumnType(
            f"column {column.name!r} has type {column.column_type!r}, which the snapshot and the "
            "binlog decode differently in ways cdc-console does not reconcile; exclude the table "
            "or change the column type"
        )
    return family


#: families whose values need one fixed converter, the same for the snapshot and the binlog
_SAME_CONVERTER: dict[TypeFamily, Converter | None] = {
    TypeFamily.FLOAT: _float32,
    TypeFamily.DOUBLE: _double,
    TypeFamily.BIT: _bit,
    TypeFamily.CHAR: _char,
    TypeFamily.STRING: None,
    TypeFamily.BYTES: _base64,
}

#: ``none_sources`` entries of a date the decoder found no calendar for
_INVALID_DATE_SOURCES = frozenset(
    {"out of date range", "out of datetime range", "out of datetime2 range"}
)


def _invalid_date(column: ColumnInfo) -> CanonicalValue:
    """The canonical value of a zero or invalid date in ``column`` (by its rule)."""
    family = column.family
    if column.invalid_dates is not InvalidDates.SENTINEL or family is None:
        return None  # NULL; under ``text`` its companion column holds the source's text
    return sentinel_text(family, _precision(column))


def invalid_date_text(value: DriverValue) -> str | None:
    """The source's text of a date column's driver value when it is an invalid date (the
    drivers hand those back as the server's text), else None: a ``text`` companion's value."""
    return value if type(value) is str else None


class _Companion:
    """Fills a ``text``-ruled date column's companion (``core.invalid_dates``) from the
    column's driver value: the source's text where the date is invalid, else None.

    pymysql hands back the server's own text for a date Python cannot hold, and the binlog
    decoders build the same text from the image's date parts (``mysql.row_images``); the
    binlog's zero TIMESTAMP is epoch 0, whose text is the zero value's.
    """

    def __init__(self, column: ColumnInfo) -> None:
        self.source = column.name
        self.name = companion_name(column.name)
        family = _family(column)
        self.zero = (
            zero_text(family, _precision(column)) if family is TypeFamily.TIMESTAMP else None
        )

    def snapshot(self, value: DriverValue) -> str | None:
        return invalid_date_text(value)

    def binlog(self, value: DriverValue, why: str | None) -> str | None:
        if type(value) is str:
            return value
        if self.zero is not None and value == _EPOCH:
            return self.zero
        if value is None and why in _INVALID_DATE_SOURCES:
            raise ValueError(
                f"column {self.source!r} holds an invalid date, and the decoder that read it "
                "from the binlog gave no text for it (the table's events went through "
                "python-mysql-replication: a column in a pre-5.6 temporal format, or an event of "
                "a kind left to it), so "
                'its invalid_dates rule \'text\' cannot hold: rule it "null" or "sentinel", or '
                "rebuild the table in today's formats (ALTER TABLE ... FORCE)"
            )
        return None


@lru_cache(maxsize=4096)
def _plan(column: ColumnInfo) -> _Plan:
    plan = _value_plan(column)
    if column.mask is None:
        return plan
    mask = masker(column.mask)

    def masked(base: Converter | None) -> Converter:
        if base is None:
            return mask
        return lambda value: mask(base(value))

    return _Plan(masked(plan.snapshot), masked(plan.binlog))


def _value_plan(column: ColumnInfo) -> _Plan:
    conv: Converter | None
    match family := _family(column):
        case TypeFamily.INTEGER:
            bits = INTEGER_BITS[column.data_type.lower().strip()]
            return _Plan(None, _unsigned(bits) if column.unsigned else None)
        case TypeFamily.YEAR:
            return _Plan(None, _year)
        case TypeFamily.SET:
            conv = _set_text(column.enum_values)
            not_null = "" if not column.nullable else None
            return _Plan(conv, conv, binlog_not_null=not_null, is_set=True)
        case TypeFamily.TIME:
            precision = _precision(column)
            return _Plan(_time_text(precision, False), _time_text(precision, precision > 0))
        case TypeFamily.JSON:
            return _Plan(
                _json_text(decoded=False),
                _json_text(decoded=True),
                binlog_not_null=None if column.nullable else "null",
                is_json=True,
            )
        case TypeFamily.UUID | TypeFamily.INET4 | TypeFamily.INET6:
            return _Plan(fixed_binary.snapshot_text, fixed_binary.binlog_converter(family))
        # the rest: one converter, shaped by the column or fixed, serves both sources
        case TypeFamily.DECIMAL:
            conv = _decimal_text(column.numeric_scale or 0)
        case TypeFamily.BINARY:
            conv = _padded_base64(_length(column, 1))
        case TypeFamily.DATE:
            conv = _date_text(invalid := _invalid_date(column))
            return _Plan(conv, conv, invalid_date=invalid)
        case TypeFamily.DATETIME:
            conv = _datetime_text(_precision(column), invalid := _invalid_date(column))
            return _Plan(conv, conv, invalid_date=invalid)
        case TypeFamily.TIMESTAMP:
            conv = _timestamp_text(_precision(column), _invalid_date(column))
        case _:
            conv = _SAME_CONVERTER[family]
    return _Plan(conv, conv)


@lru_cache(maxsize=4096)
def _key_plan(column: ColumnInfo, binlog: bool) -> KeyConverter | None:
    """Chunk keys keep the driver's comparable type (Decimal, bytes, date) instead of text."""
    match _family(column):
        case TypeFamily.DECIMAL:
            return _decimal_value
        case TypeFamily.BINARY:
            return _padded_bytes(_length(column, 1))
        case TypeFamily.BYTES:
            return _as_bytes
        case TypeFamily.DATE:
            return _date_value
        case TypeFamily.DATETIME:
            return _datetime_value
        case TypeFamily.TIMESTAMP:
            return _timestamp_value
        case TypeFamily.TIME:
            return _time_value(binlog and _precision(column) > 0)
        case TypeFamily.JSON | TypeFamily.UUID | TypeFamily.INET4 | TypeFamily.INET6:
            return _plan(column).binlog if binlog else _plan(column).snapshot
        case _:
            return _plan(column).binlog


def _decimal_value(value: DriverValue) -> RawKey:
    return value if type(value) is Decimal else Decimal(str(value))


# --------------------------------------------------------------------------- public API


def normalize_value(
    column: ColumnInfo, value: DriverValue, *, binlog: bool = False, none_source: str | None = None
) -> CanonicalValue:
    """The canonical value of one raw driver value; :class:`RowNormalizer` uses the same plans.

    ``binlog`` says the value came from pymysqlreplication (it needs the TIME2 repair and the
    NULL-vs-empty-SET rules); ``none_source`` is the decoder's ``none_sources`` entry for a
    ``None`` value, which tells an empty SET or a JSON ``null`` from NULL.
    """
    plan = _plan(column)
    if value is None:
        if binlog and plan.is_set and none_source == EMPTY_SET_SOURCE:
            return ""
        if binlog and plan.is_json and none_source == JSON_NULL_SOURCE:
            return "null"
        if binlog and none_source in _INVALID_DATE_SOURCES:
            return plan.invalid_date
        return plan.binlog_not_null if binlog else None
    conv = plan.binlog if binlog else plan.snapshot
    return value if conv is None else conv(value)


def snapshot_converter(column: ColumnInfo) -> Converter | None:
    """The snapshot path's converter of one column's non-NULL driver values (None: identity),
    as :class:`RowNormalizer` applies it; for callers that convert a column at a time."""
    return _plan(column).snapshot


def chunk_key_converter(column: ColumnInfo, *, binlog: bool = False) -> KeyConverter:
    """The function :func:`raw_chunk_key` applies, for callers that convert many keys."""
    conv = _key_plan(column, binlog)
    if conv is None:
        return _identity
    return _none_safe(conv)


def _identity(value: RawKey) -> RawKey:
    return value


def _none_safe(conv: KeyConverter) -> KeyConverter:
    def wrapped(value: DriverValue) -> RawKey:
        return None if value is None else conv(value)

    return wrapped


def raw_chunk_key(column: ColumnInfo, value: DriverValue, *, binlog: bool = False) -> RawKey:
    """A raw driver value as a Python object comparable with chunk boundaries.

    Chunk boundaries come from the server through pymysql; a key decoded from the binlog must be
    placed among them, so both shapes map to one comparable type: ``int`` for integers, YEAR and
    BIT, ``Decimal``, ``float``, ``str`` for character types (SET as its member text), ``bytes``
    for binary types (BINARY(n) zero-padded), ``date``/``datetime`` (TIMESTAMP as naive UTC;
    zero dates -> ``None``) and ``timedelta`` for TIME. Ordering by collation is
    :mod:`cdc_console.core.keys`' job, not this function's.
    """
    if value is None:
        return None
    conv = _key_plan(column, binlog)
    return value if conv is None else conv(value)


def select_expression(column: ColumnInfo) -> str:
    """The snapshot SELECT item for one column, aliased to the column's name.

    FLOAT must be read as ``col + 0e0``: the server renders FLOAT text with 6 significant digits
    (a stored 1234567 reads back as 1234570), while the binlog carries the exact float32, and a
    DOUBLE expression carries it exactly. DOUBLE is read the same way for uniformity (its text
    is already shortest-round-trip). Every other type is selected as is.
    """
    name = quote_ident(column.name)
    if column.family in (TypeFamily.FLOAT, TypeFamily.DOUBLE):
        return f"{name} + 0e0 AS {name}"
    return name


class RowNormalizer:
    """Canonical rows of one table from either path, with the per-column work planned once.

    ``__init__`` resolves one converter per column and keeps only the non-identity ones, so a row
    costs one ``dict(zip())`` plus one call per column that needs converting (integers and
    character columns cost nothing beyond the dict).
    """

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self._names: tuple[str, ...] = tuple(c.name for c in schema.columns)
        self._name_set = frozenset(self._names)
        #: columns the binlog's images carry that are never mirrored: dropped here, so their
        #: values never leave the reader
        self._left_out = frozenset(schema.left_out)
        plans = [(c.name, _plan(c)) for c in schema.columns]
        self._snapshot_convs: tuple[tuple[str, Converter], ...] = tuple(
            (name, plan.snapshot) for name, plan in plans if plan.snapshot is not None
        )
        self._binlog_convs: tuple[tuple[str, Converter], ...] = tuple(
            (name, plan.binlog) for name, plan in plans if plan.binlog is not None
        )
        # Columns where a binlog None may stand for a non-NULL value (empty SET, JSON null).
        self._set_columns: frozenset[str] = frozenset(n for n, p in plans if p.is_set)
        self._json_columns: frozenset[str] = frozenset(n for n, p in plans if p.is_json)
        self._binlog_nones: tuple[tuple[str, CanonicalValue], ...] = tuple(
            (name, plan.binlog_not_null)
            for name, plan in plans
            if plan.binlog_not_null is not None or plan.is_set or plan.is_json
        )
        # Date columns whose rule keeps an invalid date as a value (a sentinel), not NULL.
        self._invalid_dates: tuple[tuple[str, CanonicalValue], ...] = tuple(
            (name, plan.invalid_date) for name, plan in plans if plan.invalid_date is not None
        )
        # Date columns whose rule keeps an invalid date's text in a companion column.
        self._companions: tuple[_Companion, ...] = tuple(
            _Companion(c) for c in schema.columns if c.invalid_dates is InvalidDates.TEXT
        )
        # A routed table's rows name it (``TableSchema.origin``).
        self._origin: dict[str, str] = schema.origin
        self._key_names: tuple[str, ...] = tuple(schema.key_columns)
        missing = [k for k in self._key_names if k not in schema.row_names]
        if missing:
            raise ValueError(f"{schema.table_id}: key columns {missing} are not table columns")
        #: the snapshot SELECT list, in schema column order (see :func:`select_expression`)
        self.select_list: str = ", ".join(select_expression(c) for c in schema.columns)

    @property
    def column_names(self) -> tuple[str, ...]:
        return self._names

    def snapshot_row(self, values: Sequence[DriverValue]) -> CanonicalRow:
        """A pymysql row tuple, in schema column order (``SELECT {select_list}``) -> canonical."""
        if len(values) != len(self._names):
            raise ValueError(
                f"{self.schema.table_id}: snapshot row has {len(values)} values for "
                f"{len(self._names)} columns"
            )
        row = dict(zip(self._names, values, strict=False))
        for companion in self._companions:
            row[companion.name] = companion.snapshot(row[companion.source])
        for name, conv in self._snapshot_convs:
            value = row[name]
            if value is not None:
                row[name] = conv(value)
        if self._origin:
            row.update(self._origin)
        return row

    def binlog_row(
        self, values: Mapping[str, DriverValue], none_sources: Mapping[str, str] | None = None
    ) -> CanonicalRow:
        """A decoded row image (``row["values"]``, ``row["after_values"]``…) -> canonical.

        Pass the matching ``none_sources`` (``row["none_sources"]``, ``row["after_none_sources"]``)
        so an empty SET in a nullable column is told from NULL; without it such a value reads as
        NULL (a NOT NULL SET column is always right).
        """
        try:
            row = {name: values[name] for name in self._names}
        except KeyError as exc:
            raise ValueError(
                f"{self.schema.table_id}: binlog row lacks column {exc.args[0]!r} (has "
                f"{sorted(values)}); the table changed, or the server runs without "
                "binlog_row_metadata=FULL"
            ) from None
        return self._binlog(row, none_sources)

    def binlog_columns(
        self, values: Mapping[str, DriverValue], none_sources: Mapping[str, str] | None = None
    ) -> CanonicalRow:
        """``binlog_row`` of a partial image (``mysql.partial_images``): only the columns it
        holds, in schema order; a column the table does not have is an error."""
        unknown = [
            name for name in values if name not in self._name_set and name not in self._left_out
        ]
        if unknown:
            raise ValueError(f"{self.schema.table_id}: binlog row has no column {unknown[0]!r}")
        return self._binlog({n: values[n] for n in self._names if n in values}, none_sources)

    def _binlog(
        self, row: dict[str, DriverValue], none_sources: Mapping[str, str] | None
    ) -> CanonicalRow:
        whole = len(row) == len(self._names)
        for companion in self._companions:
            if whole or companion.source in row:
                why = none_sources.get(companion.source) if none_sources is not None else None
                row[companion.name] = companion.binlog(row[companion.source], why)
        for name, conv in self._binlog_convs:
            if not whole and name not in row:
                continue
            value = row[name]
            if value is not None:
                row[name] = conv(value)
        for name, not_null in self._binlog_nones:
            if not whole and name not in row:
                continue
            if row[name] is None:
                why = none_sources.get(name) if none_sources is not None else None
                if why == EMPTY_SET_SOURCE and name in self._set_columns:
                    row[name] = ""
                elif why == JSON_NULL_SOURCE and name in self._json_columns:
                    row[name] = "null"
                elif not_null is not None:
                    row[name] = not_null
        if none_sources is not None:
            for name, invalid in self._invalid_dates:
                if row.get(name, 0) is None and none_sources.get(name) in _INVALID_DATE_SOURCES:
                    row[name] = invalid
        if self._origin:
            row.update(self._origin)
        return row

    def key_of(self, row: Mapping[str, CanonicalValue]) -> tuple[CanonicalValue, ...]:
        """The canonical values of the key columns of a canonical row, in key order."""
        return tuple(row[name] for name in self._key_names)


def canonical_chunk_key(column: ColumnInfo, value: CanonicalValue) -> RawKey:
    """The inverse of normalisation for a chunk key: canonical value -> ``raw_chunk_key`` shape.

    A range replace (re-dump) must place the sink's keys, which hold canonical values (decimal
    text, ISO date text, base64 for binary), among the chunk boundaries, which are raw driver
    values; this maps the canonical form back so ``ChunkRange.contains`` can compare them.
    """
    if value is None:
        return None
    match column.family:
        case TypeFamily.DECIMAL:
            return Decimal(str(value))
        case TypeFamily.BINARY:
            return _padded_bytes(_length(column, 1))(base64.b64decode(str(value)))
        case TypeFamily.BYTES:
            return base64.b64decode(str(value))
        case TypeFamily.DATE:
            return dt.date.fromisoformat(str(value))
        case TypeFamily.DATETIME | TypeFamily.TIMESTAMP:
            return dt.datetime.fromisoformat(str(value).rstrip("Z"))
        case TypeFamily.TIME:
            return _parse_time(str(value))
        case _:
            return raw_chunk_key(column, value)


def _parse_time(text: str) -> dt.timedelta:
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micros = int((fraction + "000000")[:6]) if fraction else 0
    total = ((hours * 60 + minutes) * 60 + seconds) * _US_PER_S + micros
    return dt.timedelta(microseconds=sign * total)
