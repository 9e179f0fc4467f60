"""Names as users have them: written in a config or on a command line, read back from state,
and kept as lake folders."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import parse_table_pattern
from cdc_console.core.schema import TableId, parse_qualified
from cdc_console.errors import ConfigError
from cdc_console.sinks.lake_layout import folder_name, mirror_path, name_of_folder
from cdc_console.sinks.maintenance import lake_tables
from cdc_console.sinks.mirror_read import read_delta

NAMES = [
    TableId("shop", "orders"),
    TableId("customer3.0", "customers3.0"),
    TableId("shop", "special\"[`]$'"),
    TableId("shop", "t[12]"),
    TableId("shop", "*literal*"),
    TableId("`quoted`", "`t`"),
    TableId("日本", "テーブル 1"),
    TableId("a/b", "..\\x|y^z~%"),
]


@pytest.mark.parametrize("table_id", NAMES, ids=str)
def test_a_table_names_text_reads_back_as_that_table(table_id: TableId) -> None:
    assert TableId.parse(str(table_id)) == table_id
    pattern = parse_table_pattern(str(table_id))
    assert not pattern.is_pattern and pattern.matches(table_id.database, table_id.table)
    assert str(pattern) == str(table_id)


def test_quoted_parts_and_plain_parts() -> None:
    assert str(TableId("customer3.0", "customers")) == "`customer3.0`.customers"
    assert TableId.parse("customer3.0.customers") == TableId("customer3", "0.customers")
    assert TableId.parse("`a``b`.`c.d`") == TableId("a`b", "c.d")
    named = parse_qualified("`shop`.`orders*`")
    assert named is not None and named.table_quoted and named.table == "orders*"
    for bad in ("orders", "`shop.orders", "`shop`orders", "shop.", ".orders", "`shop`.`a`b"):
        assert parse_qualified(bad) is None, bad


def test_only_an_unquoted_star_is_special_in_source_tables() -> None:
    star = parse_table_pattern("shop.orders_*")
    assert star.is_pattern and star.matches("shop", "orders_2024")
    assert not star.matches("shop", "orders") and not star.matches("other", "orders_1")
    brackets = parse_table_pattern("shop.t[12]")
    assert not brackets.is_pattern
    assert brackets.matches("shop", "t[12]") and not brackets.matches("shop", "t1")
    question = parse_table_pattern("shop.t?")
    assert question.matches("shop", "t?") and not question.matches("shop", "tx")
    literal = parse_table_pattern("shop.`orders_*`")
    assert not literal.matches("shop", "orders_1") and literal.matches("shop", "orders_*")
    assert str(parse_table_pattern("`a.b`.x_*")) == "`a.b`.x_*"
    with pytest.raises(ConfigError, match=r"not 'database\.table'"):
        parse_table_pattern("sh*p.orders")
    assert parse_table_pattern("`sh*p`.orders").database == "sh*p"


@pytest.mark.parametrize("table_id", NAMES, ids=str)
def test_lake_folders_are_reversible_and_delta_rs_opens_them(
    table_id: TableId, tmp_path: Path
) -> None:
    for name in (table_id.database, table_id.table):
        folder = folder_name(name)
        assert name_of_folder(folder) == name
        assert "/" not in folder and "\\" not in folder and folder not in (".", "..")
    path = mirror_path(tmp_path, table_id)
    assert path.parent.parent == tmp_path
    write_deltalake(str(path), pa.table({"id": [1, 2]}))
    table = DeltaTable(str(path))
    table.merge(
        pa.table({"id": [2, 3]}), predicate="t.id = s.id", source_alias="s", target_alias="t"
    ).when_not_matched_insert_all().execute()
    assert read_delta(DeltaTable(str(path))).num_rows == 3
    assert [t.name for t in lake_tables(tmp_path)] == [str(table_id)]


def test_plain_names_keep_their_folders() -> None:
    for name in ("orders", "Order Items", "shop_2024", "a.b", "café", "x$y", "a-b"):
        assert folder_name(name) == name
