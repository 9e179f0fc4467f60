"""What a family codec is: one object per MySQL type family, owning that family's every form.

A column's value has four forms in the pipeline: what the snapshot's text protocol hands back
(pymysql), what a binlog row image decodes to (our decoders, byte for byte as
pymysqlreplication), its canonical value (``core.values``: exact, JSON-friendly, the same
whichever path read it), and its typed sink form (Arrow/Delta). Each family's codec says, for one
column of that family:

* :meth:`FamilyCodec.plan`: the text-protocol and binlog-image converters into the canonical
  value, and what a binlog ``None`` stands for (NULL, an empty SET, JSON ``null``, an invalid
  date under its rule);
* :meth:`FamilyCodec.key` / :meth:`FamilyCodec.canonical_key`: the comparable form of a chunk key
  from a driver value and back from a canonical one;
* :meth:`FamilyCodec.select_expression`: how the snapshot SELECTs the column;
* :meth:`FamilyCodec.stored_as`: the sink type, as data (:class:`SinkType`); ``values.arrow``
  turns it into an Arrow type, so this package never imports pyarrow (the streaming planner
  imports it and must stay small).

Where the binlog decoders reproduce a quirk of the reference decoder (kept byte for byte, so the
library stays a drop-in fallback), the family's binlog converter is the one place that undoes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import ColumnInfo, quote_ident
from cdc_console.core.untyped import DriverValue
from cdc_console.core.values import CanonicalValue, RawKey

#: The input of a converter is a driver's value (``DriverValue``: pymysql and
#: pymysqlreplication ship no types); the output is ``cdc_console.core.values``' types.
Converter = Callable[[DriverValue], CanonicalValue]
KeyConverter = Callable[[DriverValue], RawKey]

#: ``row["none_sources"]`` value pymysqlreplication gives an empty SET (``NONE_SOURCE.EMPTY_SET``).
EMPTY_SET_SOURCE = "empty set"
#: ``row["none_sources"]`` value our binlog decoder gives MySQL's JSON ``null`` literal, which
#: its binary JSON parser returns as ``None`` like a NULL
JSON_NULL_SOURCE = "json null"
#: ``none_sources`` entries of a date the decoder found no calendar for
INVALID_DATE_SOURCES = frozenset(
    {"out of date range", "out of datetime range", "out of datetime2 range"}
)

_LENGTH = re.compile(r"\((\d+)")


def length_of(column: ColumnInfo, default: int) -> int:
    """The first number in the column's type (``binary(16)`` -> 16), else ``default``."""
    match = _LENGTH.search(column.column_type)
    return int(match.group(1)) if match else default


def precision_of(column: ColumnInfo) -> int:
    """A temporal column's fractional digits."""
    if column.datetime_precision is not None:
        return column.datetime_precision
    return length_of(column, 0)


@dataclass(frozen=True)
class ColumnPlan:
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


class StoredKind(StrEnum):
    """How a typed sink stores a column: each kind has one conversion from canonical values."""

    INT = "int"
    WIDE_INT = "wide_int"  # 64 magnitude bits: decimal(20,0)
    DECIMAL = "decimal"
    DECIMAL_TEXT = "decimal_text"  # wider than a Delta decimal: exact text
    FLOAT = "float"
    STRING = "string"
    TEXT = "text"  # a type with no family: the canonical value kept as text
    BINARY = "binary"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True)
class SinkType:
    """A column's typed sink form as data: its kind, the width or precision that kind needs
    (``bits`` for INT and FLOAT, ``precision``/``scale`` for DECIMAL), and, for integer kinds,
    the MySQL type's own range, narrower than the stored type's for unsigned and MEDIUMINT
    types (a negative value in an unsigned column is the classic binlog-decoding bug)."""

    kind: StoredKind
    bits: int = 0
    precision: int = 0
    scale: int = 0
    value_range: tuple[int, int] | None = None


class FamilyCodec:
    """One MySQL type family's forms; the defaults are those of a family whose driver values
    are already canonical and comparable (STRING). Subclasses override what differs."""

    def __init__(self, family: TypeFamily) -> None:
        self.family = family

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.family.name})"

    def plan(self, column: ColumnInfo) -> ColumnPlan:
        """The text-protocol (snapshot) and binlog-image converters of ``column``."""
        return ColumnPlan(None, None)

    def key(self, column: ColumnInfo, plan: ColumnPlan, binlog: bool) -> KeyConverter | None:
        """The chunk-key form of a non-NULL driver value (None: the value as it is).

        Chunk keys keep the driver's comparable type (``Decimal``, ``bytes``, ``date``) where
        the canonical value is text; a family whose canonical value compares as the server
        does uses its value converter (``plan``, masks included) of the binlog path, which
        accepts both drivers' shapes.
        """
        return plan.binlog

    def canonical_key(self, column: ColumnInfo) -> KeyConverter | None:
        """The inverse of normalisation for a chunk key (canonical value -> :meth:`key`'s
        form), or None where :meth:`key` of the canonical value gives it."""
        return None

    def select_expression(self, column: ColumnInfo) -> str:
        """The snapshot SELECT item for ``column``, aliased to its name."""
        return quote_ident(column.name)

    def stored_as(self, column: ColumnInfo) -> SinkType:
        """The column's typed sink form."""
        return SinkType(StoredKind.STRING)
