"""One table of MySQL types: every listed type is handled by every concern, unlisted ones by none.

Adding a ``DATA_TYPE`` to ``cdc_console.core.mysqltypes`` (or a family) must make these fail until
the canonical value, the chunk-key form, the Arrow/Delta type and the snapshot's text decoding all
know it; a type left out must be refused, not mirrored as a guess.
"""

from __future__ import annotations

import pytest

from cdc_console.core.keys import KeyOrder
from cdc_console.core.mysqltypes import (
    FIXED_BINARY,
    MYSQL_TYPES,
    TEXT_COLLATED,
    TypeFamily,
    family_of,
)
from cdc_console.core.schema import ColumnInfo
from cdc_console.mysql.connection import text_mode_decoders
from cdc_console.values.arrow import codec_for
from cdc_console.values.canonical import (
    UnsupportedColumnType,
    chunk_key_converter,
    normalize_value,
    snapshot_converter,
)


def _column(data_type: str) -> ColumnInfo:
    column_type = {
        "decimal": "decimal(10,2)",
        "numeric": "numeric(10,2)",
        "dec": "dec(10,2)",
        "fixed": "fixed(10,2)",
        "enum": "enum('a','b')",
        "set": "set('a','b')",
        "binary": "binary(4)",
        "bit": "bit(8)",
    }.get(data_type, data_type)
    return ColumnInfo(
        name="c",
        data_type=data_type,
        column_type=column_type,
        numeric_precision=10 if data_type in ("decimal", "numeric", "dec", "fixed") else None,
        numeric_scale=2 if data_type in ("decimal", "numeric", "dec", "fixed") else None,
        enum_values=("a", "b") if data_type in ("enum", "set") else (),
    )


def test_every_family_has_types_and_every_type_one_family() -> None:
    assert set(MYSQL_TYPES.values()) == set(TypeFamily)
    assert all(name == name.lower().strip() for name in MYSQL_TYPES)


@pytest.mark.parametrize("data_type", sorted(MYSQL_TYPES))
def test_every_listed_type_is_handled_by_every_concern(data_type: str) -> None:
    column = _column(data_type)
    assert column.family is MYSQL_TYPES[data_type]
    assert normalize_value(column, None) is None
    snapshot_converter(column)
    assert callable(chunk_key_converter(column)) and callable(
        chunk_key_converter(column, binlog=True)
    )
    assert codec_for(column).kind != "text", "a listed type fell through to the unknown-type codec"
    text_mode_decoders([column])
    KeyOrder.for_column(column)


@pytest.mark.parametrize("family", list(TypeFamily))
def test_types_of_one_family_share_their_sink_type(family: TypeFamily) -> None:
    names = [name for name, f in MYSQL_TYPES.items() if f is family]
    kinds = {codec_for(_column(name)).kind for name in names}
    assert len(kinds) == 1, f"{family}: {names} map to codecs {kinds}"
    if family is not TypeFamily.INTEGER:
        assert len({str(codec_for(_column(name)).arrow_type) for name in names}) == 1
    decoders = {text_mode_decoders([_column(name)])[0] for name in names}
    assert len(decoders) == 1, f"{family}: {names} decode snapshot text differently"


def test_text_decoding_is_for_exactly_the_families_read_as_text() -> None:
    decoded = {
        family
        for name, family in MYSQL_TYPES.items()
        if text_mode_decoders([_column(name)])[0] is not None
    }
    assert decoded == {
        TypeFamily.DECIMAL,
        TypeFamily.DATE,
        TypeFamily.DATETIME,
        TypeFamily.TIMESTAMP,
    }


def test_collated_families_sort_by_collation() -> None:
    for name, family in MYSQL_TYPES.items():
        order = KeyOrder.for_column(_column(name))
        special = family in TEXT_COLLATED or family in FIXED_BINARY
        assert (order.description != "natural") == special, name


@pytest.mark.parametrize("data_type", ["vector", "xml"])
def test_an_unlisted_type_is_refused_not_guessed(data_type: str) -> None:
    column = ColumnInfo("c", data_type, data_type)
    assert family_of(data_type) is None and column.family is None
    with pytest.raises(UnsupportedColumnType, match="'c'"):
        normalize_value(column, "x")
    assert codec_for(column).kind == "text"
    assert text_mode_decoders([column]) == [None]


def test_family_lookup_ignores_case_and_padding() -> None:
    assert family_of(" BIGINT ") is TypeFamily.INTEGER
    assert family_of("Double Precision") is TypeFamily.DOUBLE
