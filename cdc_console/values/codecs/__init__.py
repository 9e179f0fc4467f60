"""One codec object per MySQL type family: the one registry every form of a value goes through.

``core.mysqltypes`` says which family each ``DATA_TYPE`` belongs to; :data:`FAMILY_CODECS` holds
that family's codec (``base.FamilyCodec``): its snapshot (text protocol) and binlog-image
converters into the canonical value, its chunk-key forms, its SELECT expression and its typed
sink form. ``values.canonical`` (rows) and ``values.arrow`` (typed columns) dispatch through it
and never on a family or type name, so adding a family is one codec class and one entry here,
which ``tests/unit/test_family_codecs.py`` holds complete.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from cdc_console.core.mysqltypes import TypeFamily, UnsupportedColumnType
from cdc_console.core.schema import ColumnInfo
from cdc_console.values.codecs.base import (
    EMPTY_SET_SOURCE,
    INVALID_DATE_SOURCES,
    JSON_NULL_SOURCE,
    ColumnPlan,
    Converter,
    FamilyCodec,
    KeyConverter,
    SinkType,
    StoredKind,
    precision_of,
)
from cdc_console.values.codecs.binary import BinaryCodec, BytesCodec, FixedBinaryCodec
from cdc_console.values.codecs.json_text import JsonCodec
from cdc_console.values.codecs.numbers import (
    BitCodec,
    DecimalCodec,
    FloatingCodec,
    IntegerCodec,
    YearCodec,
)
from cdc_console.values.codecs.temporal import (
    EPOCH,
    DateCodec,
    DatetimeCodec,
    TimeCodec,
    TimestampCodec,
)
from cdc_console.values.codecs.text import CharCodec, SetCodec, StringCodec

__all__ = [
    "EMPTY_SET_SOURCE",
    "EPOCH",
    "FAMILY_CODECS",
    "INVALID_DATE_SOURCES",
    "JSON_NULL_SOURCE",
    "ColumnPlan",
    "Converter",
    "FamilyCodec",
    "KeyConverter",
    "SinkType",
    "StoredKind",
    "codec_of",
    "precision_of",
]

FAMILY_CODECS: Final[MappingProxyType[TypeFamily, FamilyCodec]] = MappingProxyType(
    {
        codec.family: codec
        for codec in (
            IntegerCodec(TypeFamily.INTEGER),
            YearCodec(TypeFamily.YEAR),
            DecimalCodec(TypeFamily.DECIMAL),
            FloatingCodec(TypeFamily.FLOAT, 32),
            FloatingCodec(TypeFamily.DOUBLE, 64),
            BitCodec(TypeFamily.BIT),
            CharCodec(TypeFamily.CHAR),
            StringCodec(TypeFamily.STRING),
            SetCodec(TypeFamily.SET),
            BinaryCodec(TypeFamily.BINARY),
            BytesCodec(TypeFamily.BYTES),
            DateCodec(TypeFamily.DATE),
            DatetimeCodec(TypeFamily.DATETIME),
            TimestampCodec(TypeFamily.TIMESTAMP),
            TimeCodec(TypeFamily.TIME),
            JsonCodec(TypeFamily.JSON),
            FixedBinaryCodec(TypeFamily.UUID),
            FixedBinaryCodec(TypeFamily.INET4),
            FixedBinaryCodec(TypeFamily.INET6),
        )
    }
)


def codec_of(column: ColumnInfo) -> FamilyCodec:
    """The codec of ``column``'s family; a type with no family is refused, not guessed."""
    family = column.family
    if family is None:
        raise UnsupportedColumnType(
            f"column {column.name!r} has type {column.column_type!r}, which the snapshot and the "
            "binlog decode differently in ways cdc-console does not reconcile; exclude the table "
            "or change the column type"
        )
    return FAMILY_CODECS[family]
