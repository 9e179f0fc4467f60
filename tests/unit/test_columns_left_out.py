"""Columns left out of the mirror (``[pipeline] exclude_columns``): never selected, dropped from
the binlog's images as they are decoded, and a change of the rule reads the table again."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cdc_console.config import load_config
from cdc_console.core.schema import (
    ColumnInfo,
    TableId,
    TableSchema,
    schema_from_dict,
    schema_to_dict,
)
from cdc_console.errors import ConfigError
from cdc_console.mysql.probe import with_columns_left_out
from cdc_console.source.evolution import Reread, reshaped_unseen
from cdc_console.values.canonical import RowNormalizer

CUSTOMERS = TableId("shop", "customers")
COLUMNS = (
    ColumnInfo("id", "int", "int(11)", nullable=False),
    ColumnInfo("email", "varchar", "varchar(80)"),
    ColumnInfo("SSN", "char", "char(11)"),
    ColumnInfo("note", "text", "text"),
)
WHOLE = TableSchema(CUSTOMERS, COLUMNS, ("id",), "id")


def rules(tmp_path: Path, pipeline: str) -> dict[str, tuple[str, ...]]:
    path = tmp_path / "pipeline.toml"
    path.write_text('[source]\ntables = ["shop.*"]\n[pipeline]\n' + textwrap.dedent(pipeline))
    return load_config(path).exclude_columns


def test_a_left_out_column_is_gone_from_the_schema_but_not_from_the_binlogs_order(
    tmp_path: Path,
) -> None:
    found = rules(tmp_path, 'exclude_columns = { "shop.cust*" = ["ssn"], "shop.other" = ["x"] }')
    assert found == {"shop.cust*": ("ssn",), "shop.other": ("x",)}
    schema = with_columns_left_out(WHOLE, found)
    assert schema.column_names == ["id", "email", "note"]  # names match in any case
    assert schema.left_out == ("SSN",)
    assert schema.binlog_names == ["id", "email", "SSN", "note"]
    assert schema_from_dict(schema_to_dict(schema)) == schema
    assert "SSN" not in RowNormalizer(schema).select_list
    # a table the rule does not name is untouched
    assert with_columns_left_out(WHOLE, {"shop.other": ("ssn",)}) is WHOLE
    assert WHOLE.binlog_names == WHOLE.column_names and "source_names" not in schema_to_dict(WHOLE)


def test_the_binlogs_images_lose_the_left_out_column_as_they_are_decoded() -> None:
    normalizer = RowNormalizer(with_columns_left_out(WHOLE, {"shop.customers": ("ssn",)}))
    image = {"id": 7, "email": "a@b", "SSN": "123-45-6789", "note": "n"}
    assert normalizer.binlog_row(image) == {"id": 7, "email": "a@b", "note": "n"}
    # a partial image (MINIMAL) that holds it: dropped too, not an unknown column
    assert normalizer.binlog_columns({"id": 7, "SSN": "987-65-4321"}) == {"id": 7}


def test_a_column_that_names_rows_cannot_be_left_out() -> None:
    with pytest.raises(ConfigError) as info:
        with_columns_left_out(WHOLE, {"shop.customers": ("email", "ID")})
    assert "leaves out id of shop.customers, which tells its rows apart" in str(info.value)
    assert "remove id from exclude_columns for shop.customers" in str(info.value)


def test_a_rule_that_is_not_a_list_of_names_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        rules(tmp_path, 'exclude_columns = { "shop.customers" = "ssn" }')
    assert 'pipeline.exclude_columns."shop.customers" must be a list of column names' in str(
        info.value
    )


def test_a_changed_rule_reads_the_table_again() -> None:
    mirrored = with_columns_left_out(WHOLE, {})
    left_out = with_columns_left_out(WHOLE, {"shop.customers": ("ssn",)})
    outcome = reshaped_unseen(mirrored, left_out)
    assert isinstance(outcome, Reread)
    assert outcome.reason == "pipeline.exclude_columns changed: it now leaves out SSN"
    back = reshaped_unseen(left_out, mirrored)
    assert isinstance(back, Reread)
    assert back.reason == "pipeline.exclude_columns changed: it now mirrors SSN"


def test_a_misspelt_column_of_a_named_table_is_refused_not_mirrored() -> None:
    with pytest.raises(ConfigError) as info:
        with_columns_left_out(WHOLE, {"shop.customers": ("snn",)})
    assert "names snn of shop.customers, which has no such column" in str(info.value)
    # a pattern may cover tables without the column
    assert with_columns_left_out(WHOLE, {"shop.*": ("snn",)}) is WHOLE


def test_a_rule_change_beside_a_retyped_column_is_not_a_plain_reread() -> None:
    mirrored = with_columns_left_out(WHOLE, {})
    retyped = TableSchema(
        CUSTOMERS,
        (COLUMNS[0], ColumnInfo("email", "int", "int(11)"), *COLUMNS[2:]),
        ("id",),
        "id",
    )
    outcome = reshaped_unseen(
        mirrored, with_columns_left_out(retyped, {"shop.customers": ("ssn",)})
    )
    # the retyped column decides, as it would alone (parked: its type family changed)
    assert isinstance(outcome, str) and "email" in outcome
