"""One codec object per MySQL type family, and the row and Arrow paths dispatching only through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cdc_console.core.mysqltypes import MYSQL_TYPES, TypeFamily
from cdc_console.core.schema import ColumnInfo
from cdc_console.values import arrow, canonical
from cdc_console.values.codecs import FAMILY_CODECS, StoredKind, codec_of
from cdc_console.values.codecs.base import FamilyCodec

VALUES = Path(canonical.__file__).parent


def test_every_family_has_one_codec_of_its_own() -> None:
    assert set(FAMILY_CODECS) == set(TypeFamily)
    for family, codec in FAMILY_CODECS.items():
        assert isinstance(codec, FamilyCodec)
        assert codec.family is family
    assert len({id(codec) for codec in FAMILY_CODECS.values()}) == len(TypeFamily)


def test_a_type_without_a_family_has_no_codec() -> None:
    with pytest.raises(canonical.UnsupportedColumnType, match="'c'"):
        codec_of(ColumnInfo("c", "vector", "vector(3)"))


@pytest.mark.parametrize("module", ["canonical.py", "arrow.py"])
def test_rows_and_arrow_dispatch_through_the_codecs_not_on_families(module: str) -> None:
    """A ``match`` or an ``if`` over families in these modules is a family's form living
    outside its codec; the one reference left is the companion of a TIMESTAMP's zero."""
    tree = ast.parse((VALUES / module).read_text())
    matches = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Match)]
    assert not matches, f"{module} matches on something at lines {matches}"
    families = [
        (node.lineno, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "TypeFamily"
    ]
    allowed = [(line, attr) for line, attr in families if attr == "TIMESTAMP"]
    assert families == (allowed if module == "canonical.py" else [])


def test_every_stored_kind_converts_both_ways() -> None:
    assert set(arrow._DECODERS) == set(StoredKind)
    assert set(arrow._ENCODERS) == set(StoredKind)


@pytest.mark.parametrize("data_type", sorted(MYSQL_TYPES))
def test_a_familys_sink_type_is_what_arrow_stores(data_type: str) -> None:
    column = ColumnInfo("c", data_type, data_type, numeric_precision=10, numeric_scale=2)
    stored = codec_of(column).stored_as(column)
    codec = arrow.codec_for(column)
    assert codec.kind is stored.kind
    assert codec.value_range == stored.value_range
