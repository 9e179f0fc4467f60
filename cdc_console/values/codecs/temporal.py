"""The temporal families: DATE, DATETIME, TIMESTAMP and TIME.

* DATE ``"YYYY-MM-DD"`` and DATETIME(p) ``"YYYY-MM-DD HH:MM:SS[.f{p}]"``: wall-clock text; a
  chunk key keeps the ``date``/``datetime``.
* TIMESTAMP(p): both drivers give a naive UTC datetime (the snapshot because its session is
  UTC); the canonical value is the instant's text plus ``"Z"``. The zero timestamp arrives as the
  str ``'0000-00-00 00:00:00'`` from pymysql and as 1970-01-01 00:00:00 (epoch 0, below
  TIMESTAMP's range) from the binlog: both follow the column's rule.
* Zero or invalid DATE/DATETIME (``'0000-00-00'``, ``'2024-00-00'``, year 0): pymysql returns the
  raw str and so do our binlog decoders (the library, for pre-5.6 formats: ``None`` marked out
  of range in ``none_sources``); both become what the column's rule (``core.invalid_dates``)
  says: ``None``, or the sentinel ``0001-01-01``; under ``text`` the str also fills the column's
  companion. A chunk key of such a value is ``None``.
* TIME(p) ``"[-]HH:MM:SS[.f{p}]"``, hours up to 838: a duration, no Delta type fits, so it is
  stored as its text. For p > 0, negative with a non-zero fraction, the 1.0.17 decoder is wrong:
  it yields ``-(I + 1 - F)`` for the true ``-(I + F)`` (``-12:00:00.1`` decodes as
  ``-12:00:00.9``). The mapping is a bijection, so the binlog path inverts it
  (:func:`repair_time2`). Positive values and fsp 0 are decoded correctly. This repair is tied to
  the pinned decoder version.
"""

from __future__ import annotations

import datetime as dt

from cdc_console.core.invalid_dates import InvalidDates, sentinel_text
from cdc_console.core.schema import ColumnInfo
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue, RawKey
from cdc_console.values.codecs.base import (
    ColumnPlan,
    Converter,
    FamilyCodec,
    KeyConverter,
    SinkType,
    StoredKind,
    precision_of,
)

#: the binlog's zero TIMESTAMP
EPOCH = dt.datetime(1970, 1, 1)
_US_PER_S = 1_000_000


def _invalid_date(column: ColumnInfo) -> CanonicalValue:
    """The canonical value of a zero or invalid date in ``column`` (by its rule)."""
    family = column.family
    if column.invalid_dates is not InvalidDates.SENTINEL or family is None:
        return None  # NULL; under ``text`` its companion column holds the source's text
    return sentinel_text(family, precision_of(column))


def _width(precision: int) -> int:
    return 19 if precision <= 0 else 20 + min(precision, 6)


def _date_text(invalid: CanonicalValue) -> Converter:
    def conv(value: dt.date | str) -> CanonicalValue:
        # pymysql returns the raw text of a date Python cannot hold ('0000-00-00',
        # '2024-00-00'); the binlog returns None (marked in none_sources) for the same values.
        if isinstance(value, str):
            return invalid
        return value.isoformat()

    return conv


def _calendar_value(value: dt.date | str) -> RawKey:
    return None if isinstance(value, str) else value


def _date_from_text(value: DriverValue) -> RawKey:
    return dt.date.fromisoformat(str(value))


def _datetime_from_text(value: DriverValue) -> RawKey:
    return dt.datetime.fromisoformat(str(value).rstrip("Z"))


def _datetime_text(precision: int, invalid: CanonicalValue) -> Converter:
    width = _width(precision)

    def conv(value: dt.datetime | str) -> CanonicalValue:
        if isinstance(value, str):
            return invalid
        return value.isoformat(" ", "microseconds")[:width]

    return conv


def _timestamp_value(value: dt.datetime | str) -> dt.datetime | None:
    """A naive UTC datetime, or None for the zero timestamp (epoch 0 in the binlog)."""
    if isinstance(value, str) or value == EPOCH:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _timestamp_text(precision: int, invalid: CanonicalValue) -> Converter:
    width = _width(precision)

    def conv(value: dt.datetime | str) -> CanonicalValue:
        instant = _timestamp_value(value)
        if instant is None:
            return invalid
        return instant.isoformat(" ", "microseconds")[:width] + "Z"

    return conv


class DateCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _date_text(invalid := _invalid_date(column))
        return ColumnPlan(conv, conv, invalid_date=invalid)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return _calendar_value

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _date_from_text

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.DATE)


class DatetimeCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _datetime_text(precision_of(column), invalid := _invalid_date(column))
        return ColumnPlan(conv, conv, invalid_date=invalid)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return _calendar_value

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _datetime_from_text

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.DATETIME)


class TimestampCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        conv = _timestamp_text(precision_of(column), _invalid_date(column))
        return ColumnPlan(conv, conv)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return _timestamp_value

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _datetime_from_text

    def stored_as(self, column: ColumnInfo) -> SinkType:
        return SinkType(StoredKind.TIMESTAMP)


def _micros(value: dt.timedelta) -> int:
    return (value.days * 86400 + value.seconds) * _US_PER_S + value.microseconds


def repair_time2(micros: int) -> int:
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


def time_text(precision: int, repair: bool) -> Converter:
    """A TIME value (``timedelta``) as ``[-]HH:MM:SS[.f{precision}]``; ``repair``: it came from
    the reference binlog decoder (:func:`repair_time2`)."""
    digits = max(0, min(precision, 6))

    def conv(value: DriverValue) -> CanonicalValue:
        micros = _micros(value)
        if repair:
            micros = repair_time2(micros)
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
        return dt.timedelta(microseconds=repair_time2(_micros(value)))

    return conv


def _parse_time(value: DriverValue) -> RawKey:
    text = str(value)
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micros = int((fraction + "000000")[:6]) if fraction else 0
    total = ((hours * 60 + minutes) * 60 + seconds) * _US_PER_S + micros
    return dt.timedelta(microseconds=sign * total)


class TimeCodec(FamilyCodec):
    def plan(self, column: ColumnInfo) -> ColumnPlan:
        precision = precision_of(column)
        return ColumnPlan(time_text(precision, False), time_text(precision, precision > 0))

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        return _time_value(binlog and precision_of(column) > 0)

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        return _parse_time
