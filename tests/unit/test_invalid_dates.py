"""Zero and invalid dates follow one configured rule on every path (``core.invalid_dates``).

Each case gives an invalid value as pymysql returns it (the server's text) and as a binlog
decoder returns it (ours: the same text; the library, for pre-5.6 formats: ``None`` marked out
of range in ``none_sources``; the zero TIMESTAMP as epoch 0), and checks that both paths give
the rule's one canonical value (and, under ``text``, the source's text in the companion
column), and that a valid date is untouched.
"""

from __future__ import annotations

import datetime as dt
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from cdc_console.config import load_config
from cdc_console.core.invalid_dates import InvalidDateRules, InvalidDates, sentinel_text
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.schema import (
    ColumnInfo,
    TableId,
    TableSchema,
    schema_from_dict,
    schema_to_dict,
)
from cdc_console.errors import ConfigError
from cdc_console.mysql.probe import check_companions, with_invalid_dates
from cdc_console.source.evolution import Reread, reshaped_unseen
from cdc_console.status import mirror_shape, shape_note
from cdc_console.values.arrow import rows_to_table, table_to_rows
from cdc_console.values.canonical import RowNormalizer, normalize_value

SENTINEL = InvalidDates.SENTINEL
DATE = ColumnInfo("d", "date", "date")
DATETIME3 = ColumnInfo("dt", "datetime", "datetime(3)", datetime_precision=3)
TIMESTAMP0 = ColumnInfo("ts", "timestamp", "timestamp", datetime_precision=0)
ID = ColumnInfo("id", "int", "int(11)", nullable=False)

# (column, the snapshot's driver value, the binlog's driver value, its none_sources entry)
INVALID = [
    (DATE, "0000-00-00", None, "out of date range"),
    (DATE, "2024-04-31", None, "out of date range"),
    (DATETIME3, "2024-00-10 10:00:00.500", None, "out of datetime2 range"),
    (TIMESTAMP0, "0000-00-00 00:00:00", dt.datetime(1970, 1, 1), None),
]


def schema(*columns: ColumnInfo) -> TableSchema:
    return TableSchema(TableId("shop", "t"), (ID, *columns), ("id",), "id")


def test_the_sentinel_has_each_types_own_text_form() -> None:
    assert sentinel_text(TypeFamily.DATE, 0) == "0001-01-01"
    assert sentinel_text(TypeFamily.DATETIME, 3) == "0001-01-01 00:00:00.000"
    assert sentinel_text(TypeFamily.DATETIME, 0) == "0001-01-01 00:00:00"
    assert sentinel_text(TypeFamily.TIMESTAMP, 6) == "0001-01-01 00:00:00.000000Z"


@pytest.mark.parametrize(("column", "snapshot", "binlog", "why"), INVALID)
def test_null_rule_gives_null_on_both_paths(
    column: ColumnInfo, snapshot: str, binlog: object, why: str | None
) -> None:
    normalizer = RowNormalizer(schema(column))
    assert normalizer.snapshot_row([1, snapshot]) == {"id": 1, column.name: None}
    sources = {column.name: why} if why else {}
    assert normalizer.binlog_row({"id": 1, column.name: binlog}, sources) == {
        "id": 1,
        column.name: None,
    }


@pytest.mark.parametrize(("column", "snapshot", "binlog", "why"), INVALID)
def test_sentinel_rule_gives_the_sentinel_on_both_paths_and_in_the_mirror(
    column: ColumnInfo, snapshot: str, binlog: object, why: str | None
) -> None:
    ruled = replace(column, invalid_dates=SENTINEL)
    table = schema(ruled)
    normalizer = RowNormalizer(table)
    expected = sentinel_text(ruled.family or TypeFamily.DATE, ruled.datetime_precision or 0)
    from_snapshot = normalizer.snapshot_row([1, snapshot])
    sources = {column.name: why} if why else {}
    from_binlog = normalizer.binlog_row({"id": 1, column.name: binlog}, sources)
    assert from_snapshot == from_binlog == {"id": 1, column.name: expected}
    assert normalize_value(ruled, snapshot) == expected
    assert normalize_value(ruled, binlog, binlog=True, none_source=why) == expected
    # the mirror holds it as a real date and reads it back as the same canonical value
    mirrored = rows_to_table(table, [from_snapshot])
    assert table_to_rows(table, mirrored) == [from_snapshot]


def test_sentinel_rule_leaves_null_and_valid_dates_alone() -> None:
    ruled = replace(DATE, invalid_dates=SENTINEL)
    normalizer = RowNormalizer(schema(ruled))
    assert normalizer.snapshot_row([1, None]) == {"id": 1, "d": None}
    assert normalizer.binlog_row({"id": 1, "d": None}, {"d": "null"}) == {"id": 1, "d": None}
    assert normalizer.binlog_row({"id": 1, "d": None}, {}) == {"id": 1, "d": None}
    assert normalizer.snapshot_row([1, dt.date(2024, 4, 30)]) == {"id": 1, "d": "2024-04-30"}


def test_the_rule_is_stored_with_the_schema_only_when_it_is_not_the_default() -> None:
    plain = schema(DATE)
    assert "invalid_dates" not in schema_to_dict(plain)["columns"][1]  # type: ignore[index,operator]
    ruled = schema(replace(DATE, invalid_dates=SENTINEL))
    assert schema_from_dict(schema_to_dict(ruled)) == ruled
    assert schema_from_dict(schema_to_dict(plain)) == plain


def test_a_changed_rule_reads_the_table_again_and_says_why() -> None:
    old = schema(DATE, DATETIME3)
    new = schema(replace(DATE, invalid_dates=SENTINEL), DATETIME3)
    outcome = reshaped_unseen(old, new)
    assert isinstance(outcome, Reread)
    assert outcome.reason == "pipeline.invalid_dates changed for column d null -> sentinel"
    assert outcome.schema == new


def load(tmp_path: Path, pipeline: str) -> InvalidDateRules:
    path = tmp_path / "pipeline.toml"
    text = '[source]\ntables = ["shop.*"]\n[pipeline]\n' + textwrap.dedent(pipeline)
    path.write_text(text)
    return load_config(path).invalid_dates


def test_rules_come_by_type_table_and_column_and_the_closest_wins(tmp_path: Path) -> None:
    rules = load(
        tmp_path,
        """
        invalid_dates = { date = "sentinel" }
        [pipeline.invalid_dates_for]
        "shop.orders" = { shipped = "null", made = "sentinel" }
        "shop.o*" = "sentinel"
        """,
    )
    columns = (
        ColumnInfo("shipped", "date", "date"),
        ColumnInfo("made", "datetime", "datetime"),
        ColumnInfo("other", "timestamp", "timestamp"),
        ColumnInfo("note", "varchar", "varchar(5)"),
    )
    orders = TableSchema(TableId("shop", "orders"), (ID, *columns), ("id",), "id")
    ruled = {c.name: c.invalid_dates for c in with_invalid_dates(orders, rules).columns}
    assert ruled == {
        "id": "null",
        "shipped": "null",
        "made": "sentinel",
        "other": "sentinel",
        "note": "null",
    }
    items = TableSchema(TableId("shop", "items"), (ID, *columns), ("id",), "id")
    ruled = {c.name: c.invalid_dates for c in with_invalid_dates(items, rules).columns}
    assert ruled == {
        "id": "null",
        "shipped": "sentinel",
        "made": "null",
        "other": "null",
        "note": "null",
    }
    assert load(tmp_path, "").by_family == {
        TypeFamily.DATE: "null",
        TypeFamily.DATETIME: "null",
        TypeFamily.TIMESTAMP: "null",
    }


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ('invalid_dates = "zero"', 'pipeline.invalid_dates must be one of "null", "sentinel"'),
        (
            'invalid_dates = { time = "sentinel" }',
            "pipeline.invalid_dates has a rule for 'time', which is not one of date, datetime",
        ),
        (
            'invalid_dates_for = { "shop.t" = { d = 1 } }',
            'pipeline.invalid_dates_for."shop.t".d must be one of "null", "sentinel", "text", not 1',
        ),
    ],
)
def test_a_wrong_rule_names_the_key_and_the_choices(
    tmp_path: Path, pipeline: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, pipeline)
    assert message in str(info.value), str(info.value)


TEXT = InvalidDates.TEXT
TIMESTAMP3 = ColumnInfo("ts", "timestamp", "timestamp(3)", datetime_precision=3)

# (column, the snapshot's driver value, the binlog decoders' value, the companion's text)
INVALID_TEXTS = [
    (DATE, "0000-00-00", "0000-00-00", "0000-00-00"),
    (DATE, "2024-04-31", "2024-04-31", "2024-04-31"),
    (DATE, "0000-01-01", "0000-01-01", "0000-01-01"),
    (DATETIME3, "2024-00-10 10:00:00.500", "2024-00-10 10:00:00.500", "2024-00-10 10:00:00.500"),
    (TIMESTAMP0, "0000-00-00 00:00:00", dt.datetime(1970, 1, 1), "0000-00-00 00:00:00"),
    (TIMESTAMP3, "0000-00-00 00:00:00.000", dt.datetime(1970, 1, 1), "0000-00-00 00:00:00.000"),
]


@pytest.mark.parametrize(("column", "snapshot", "binlog", "text"), INVALID_TEXTS)
def test_text_rule_keeps_the_sources_text_in_a_companion_on_both_paths(
    column: ColumnInfo, snapshot: str, binlog: object, text: str
) -> None:
    ruled = replace(column, invalid_dates=TEXT)
    table = schema(ruled)
    companion = f"{column.name}__text"
    assert [c.name for c in table.companions] == [companion]
    assert table.row_names == ["id", column.name, companion]
    normalizer = RowNormalizer(table)
    expected = {"id": 1, column.name: None, companion: text}
    assert normalizer.snapshot_row([1, snapshot]) == expected
    assert normalizer.binlog_row({"id": 1, column.name: binlog}, {}) == expected
    # the mirror holds the date column as a date (NULL) and the text beside it
    mirrored = rows_to_table(table, [expected])
    assert mirrored.schema.names == ["id", column.name, companion]
    assert table_to_rows(table, mirrored) == [expected]


def test_text_rule_leaves_the_companion_null_for_null_and_valid_dates() -> None:
    table = schema(replace(DATE, invalid_dates=TEXT))
    normalizer = RowNormalizer(table)
    assert normalizer.snapshot_row([1, None]) == {"id": 1, "d": None, "d__text": None}
    assert normalizer.snapshot_row([1, dt.date(2024, 4, 30)]) == {
        "id": 1,
        "d": "2024-04-30",
        "d__text": None,
    }
    assert normalizer.binlog_row({"id": 1, "d": None}, {"d": "null"}) == {
        "id": 1,
        "d": None,
        "d__text": None,
    }


def test_a_partial_image_patches_the_companion_only_with_its_date() -> None:
    table = schema(replace(DATE, invalid_dates=TEXT), DATETIME3)
    normalizer = RowNormalizer(table)
    assert normalizer.binlog_columns({"id": 1, "dt": None}) == {"id": 1, "dt": None}
    assert normalizer.binlog_columns({"id": 1, "d": "2024-02-30"}) == {
        "id": 1,
        "d": None,
        "d__text": "2024-02-30",
    }


def test_text_rule_refuses_a_date_the_decoder_gave_no_text_for() -> None:
    """A pre-5.6 temporal column goes through the library, which gives None for an invalid
    date: its text is lost, so the table stops (and parks) rather than mirror a NULL text."""
    normalizer = RowNormalizer(schema(replace(DATE, invalid_dates=TEXT)))
    with pytest.raises(ValueError, match="'d' holds an invalid date, and the decoder"):
        normalizer.binlog_row({"id": 1, "d": None}, {"d": "out of date range"})


def test_the_companion_is_derived_not_stored_and_joins_a_counted_tables_identity() -> None:
    ruled = schema(replace(DATE, invalid_dates=TEXT))
    data = schema_to_dict(ruled)
    assert [c["name"] for c in data["columns"]] == ["id", "d"]  # type: ignore[index,union-attr]
    assert schema_from_dict(data).row_names == ["id", "d", "d__text"]
    counted = replace(ruled, primary_key=(), counted=True)
    assert counted.key_columns == ("id", "d", "d__text")
    # two rows that differ only in which invalid date they hold stay two rows
    normalizer = RowNormalizer(counted)
    first = normalizer.snapshot_row([1, "2024-04-31"])
    second = normalizer.snapshot_row([1, "2024-02-30"])
    assert normalizer.key_of(first) != normalizer.key_of(second)


def test_a_companion_that_would_take_a_columns_name_is_refused() -> None:
    clash = schema(replace(DATE, invalid_dates=TEXT), ColumnInfo("D__TEXT", "int", "int"))
    with pytest.raises(ConfigError) as info:
        check_companions(clash)
    assert "companion column d__text would take the name of one of its columns" in str(info.value)
    fine = schema(replace(DATE, invalid_dates=TEXT))
    assert check_companions(fine) is fine


def test_text_is_a_rule_of_the_config(tmp_path: Path) -> None:
    rules = load(tmp_path, 'invalid_dates_for = { "shop.t" = { d = "text" } }')
    assert with_invalid_dates(schema(DATE), rules).column("d").invalid_dates is TEXT


def test_status_names_the_companions_a_mirror_adds(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text('[source]\ntables = ["shop.*"]\n')
    config = load_config(path)
    stored = schema(replace(DATE, invalid_dates=TEXT), DATETIME3)
    shape = mirror_shape(config, TableId("shop", "t"), stored)
    assert shape == {"companions": ["d__text"]}
    assert shape_note(shape) == "invalid dates' text in d__text"
