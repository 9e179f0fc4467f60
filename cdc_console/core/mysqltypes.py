"""Every MySQL column type cdc-console captures, in one table: its family and its path through
the pipeline.

A column's ``information_schema`` ``DATA_TYPE`` names it; :data:`MYSQL_TYPES` maps each name to
a :class:`TypeFamily`, and everything downstream dispatches on the family, never on the name:
the snapshot reader's text-mode decoding (``cdc_console.mysql.connection``), the family's codec
(``cdc_console.values.codecs``: its canonical value from either path, its chunk-key forms and its
Arrow/Delta type, one object per family), the snapshot's vectorised Arrow path
(``cdc_console.mysql.snapshot_arrow``), key ordering (``cdc_console.core.keys``) and chunk
splitting (``cdc_console.source.splitter``). Adding a type means one row here (and, for a new
family, one codec); ``tests/unit/test_mysqltypes.py`` and ``tests/unit/test_family_codecs.py``
then fail until every concern handles its family. The binlog decoder (``cdc_console.mysql.binlog_decode``) is the one exception: it works on
the binlog's wire type codes, below any ``DATA_TYPE``, exactly as the reference decoder does.

==========  ==================================  ===========================  ====================
family      DATA_TYPE names                     canonical value              Arrow / Delta
==========  ==================================  ===========================  ====================
INTEGER     tinyint ... bigint, bool(ean)       int (unsigned fixed)         int8..int64, wider
                                                                             when unsigned;
                                                                             BIGINT UNSIGNED
                                                                             decimal(20,0)
YEAR        year                                int                          int16 / short
DECIMAL     decimal, numeric, dec, fixed        text with exactly s digits   decimal(p,s); p>38
                                                                             exact string
FLOAT       float                               exact float32 value          float32 / float
DOUBLE      double, real, double precision      float                        float64 / double
BIT         bit                                 int                          int64, BIT(64)
                                                                             decimal(20,0)
CHAR        char                                text, trailing pad removed   string
STRING      varchar, *text, enum                text                         string
SET         set                                 members joined by ","        string
BINARY      binary                              base64, zero-padded          binary
BYTES       varbinary, *blob, spatial (WKB)     base64                       binary
DATE        date                                ISO date text                date32 / date
DATETIME    datetime                            ISO text, p digits           timestamp_ntz
TIMESTAMP   timestamp                           ISO text in UTC, "Z"         timestamp (UTC)
TIME        time                                ``[-]HH:MM:SS[.f]``          string
JSON        json (and guarded longtext)         canonical JSON text          string
UUID        uuid (MariaDB 10.7+)                the server's text            string
INET4       inet4 (MariaDB 10.10+)              the server's text            string
INET6       inet6 (MariaDB 10.5+)               the server's text            string
==========  ==================================  ===========================  ====================

MariaDB's fixed-binary types travel as the text the server prints for them: the binlog carries
their bytes, which ``values.fixed_binary`` formats the way the server does. Names not listed
(MySQL's ``vector``, anything a server adds) have no family: a table with such a column is
parked with :class:`UnsupportedColumnType` rather than mirrored inexactly.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Final


class TypeFamily(StrEnum):
    """Column types that travel the pipeline the same way."""

    INTEGER = "integer"
    YEAR = "year"
    DECIMAL = "decimal"
    FLOAT = "float"
    DOUBLE = "double"
    BIT = "bit"
    CHAR = "char"
    STRING = "string"
    SET = "set"
    BINARY = "binary"
    BYTES = "bytes"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    JSON = "json"
    UUID = "uuid"
    INET4 = "inet4"
    INET6 = "inet6"


class UnsupportedColumnType(ValueError):
    """A column type the snapshot and binlog paths cannot be made to agree on."""


#: Width in bits of each integer ``DATA_TYPE`` (``bool``/``boolean`` appear in some servers' output).
INTEGER_BITS: Final[MappingProxyType[str, int]] = MappingProxyType(
    {
        "tinyint": 8,
        "bool": 8,
        "boolean": 8,
        "smallint": 16,
        "mediumint": 24,
        "int": 32,
        "integer": 32,
        "bigint": 64,
    }
)

_SPATIAL = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
    "geomcollection",
)

_NAMES: dict[TypeFamily, tuple[str, ...]] = {
    TypeFamily.INTEGER: tuple(INTEGER_BITS),
    TypeFamily.YEAR: ("year",),
    TypeFamily.DECIMAL: ("decimal", "numeric", "dec", "fixed"),
    TypeFamily.FLOAT: ("float",),
    TypeFamily.DOUBLE: ("double", "real", "double precision"),
    TypeFamily.BIT: ("bit",),
    TypeFamily.CHAR: ("char",),
    TypeFamily.STRING: ("varchar", "tinytext", "text", "mediumtext", "longtext", "enum"),
    TypeFamily.SET: ("set",),
    TypeFamily.BINARY: ("binary",),
    TypeFamily.BYTES: ("varbinary", "tinyblob", "blob", "mediumblob", "longblob", *_SPATIAL),
    TypeFamily.DATE: ("date",),
    TypeFamily.DATETIME: ("datetime",),
    TypeFamily.TIMESTAMP: ("timestamp",),
    TypeFamily.TIME: ("time",),
    TypeFamily.JSON: ("json",),
    TypeFamily.UUID: ("uuid",),
    TypeFamily.INET4: ("inet4",),
    TypeFamily.INET6: ("inet6",),
}

MYSQL_TYPES: Final[MappingProxyType[str, TypeFamily]] = MappingProxyType(
    {name: family for family, names in _NAMES.items() for name in names}
)
"""``DATA_TYPE`` (lower case) -> its family: the only list of supported types."""

TEMPORAL: Final = frozenset({TypeFamily.DATE, TypeFamily.DATETIME, TypeFamily.TIMESTAMP})
"""Families whose server text Arrow parses in C, and which have MySQL "zero" values."""

TEXT_COLLATED: Final = frozenset({TypeFamily.CHAR, TypeFamily.STRING, TypeFamily.SET})
"""Families compared by collation (a chunk key on them sorts as the server's collation does)."""

FIXED_BINARY: Final[MappingProxyType[TypeFamily, int]] = MappingProxyType(
    {TypeFamily.UUID: 16, TypeFamily.INET4: 4, TypeFamily.INET6: 16}
)
"""MariaDB's fixed-binary types and their length in bytes (the binlog strips trailing zeros)."""


def family_of(data_type: str) -> TypeFamily | None:
    """The family of one ``DATA_TYPE``, or None for a type cdc-console does not capture."""
    return MYSQL_TYPES.get(data_type.lower().strip())


def is_enum(data_type: str) -> bool:
    """ENUM shares STRING's path but sorts by member number, not text (see the splitter)."""
    return data_type.lower().strip() == "enum"
