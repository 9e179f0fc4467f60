"""MySQL -> Delta/Arrow types and the canonical-value codecs (no server: hand-built columns)."""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.values.arrow import (
    SinkTypeError,
    arrow_schema,
    codec_for,
    columns_to_table,
    rows_to_table,
    table_to_rows,
)


def col(
    data_type: str,
    column_type: str | None = None,
    *,
    name: str = "c",
    precision: int | None = None,
    scale: int | None = None,
    dt_precision: int | None = None,
) -> ColumnInfo:
    return ColumnInfo(
        name=name,
        data_type=data_type,
        column_type=column_type or data_type,
        numeric_precision=precision,
        numeric_scale=scale,
        datetime_precision=dt_precision,
    )


MAPPING: list[tuple[ColumnInfo, pa.DataType]] = [
    (col("tinyint", "tinyint(4)"), pa.int8()),
    (col("tinyint", "tinyint(3) unsigned"), pa.int16()),
    (col("tinyint", "tinyint(1)"), pa.int8()),
    (col("smallint", "smallint(6)"), pa.int16()),
    (col("smallint", "smallint(5) unsigned"), pa.int32()),
    (col("mediumint", "mediumint(9)"), pa.int32()),
    (col("mediumint", "mediumint(8) unsigned"), pa.int64()),
    (col("int", "int(11)"), pa.int32()),
    (col("int", "int(10) unsigned"), pa.int64()),
    (col("int", "int(10) unsigned zerofill"), pa.int64()),
    (col("bigint", "bigint(20)"), pa.int64()),
    (col("bigint", "bigint(20) unsigned"), pa.decimal128(20, 0)),
    (col("year", "year(4)"), pa.int16()),
    (col("bit", "bit(1)", precision=1), pa.int64()),
    (col("bit", "bit(63)", precision=63), pa.int64()),
    (col("bit", "bit(64)", precision=64), pa.decimal128(20, 0)),
    (col("decimal", "decimal(10,3)", precision=10, scale=3), pa.decimal128(10, 3)),
    (col("decimal", "decimal(38,0)", precision=38, scale=0), pa.decimal128(38, 0)),
    (col("decimal", "decimal(39,2)", precision=39, scale=2), pa.string()),
    (col("decimal", "decimal(65,30)", precision=65, scale=30), pa.string()),
    (col("float"), pa.float32()),
    (col("double"), pa.float64()),
    (col("date"), pa.date32()),
    (col("datetime", "datetime(6)", dt_precision=6), pa.timestamp("us")),
    (col("timestamp", "timestamp(3)", dt_precision=3), pa.timestamp("us", tz="UTC")),
    (col("time", "time(6)", dt_precision=6), pa.string()),
    (col("char", "char(3)"), pa.string()),
    (col("varchar", "varchar(255)"), pa.string()),
    (col("longtext"), pa.string()),
    (col("enum", "enum('a','b')"), pa.string()),
    (col("set", "set('a','b')"), pa.string()),
    (col("json"), pa.string()),
    (col("binary", "binary(16)"), pa.binary()),
    (col("varbinary", "varbinary(10)"), pa.binary()),
    (col("blob"), pa.binary()),
    (col("geometry"), pa.binary()),
    (col("point"), pa.binary()),
    (col("uuid"), pa.string()),
]


@pytest.mark.parametrize(("column", "expected"), MAPPING, ids=[c.column_type for c, _ in MAPPING])
def test_type_mapping(column: ColumnInfo, expected: pa.DataType) -> None:
    assert codec_for(column).arrow_type == expected


# (column, canonical values, the Python values Arrow must hold)
EDGE_VALUES: list[tuple[ColumnInfo, list[Any], list[Any]]] = [
    (col("tinyint", "tinyint(4)"), [-128, 127, None], [-128, 127, None]),
    (col("tinyint", "tinyint(3) unsigned"), [0, 255], [0, 255]),
    (col("smallint", "smallint(5) unsigned"), [65535], [65535]),
    (col("mediumint", "mediumint(8) unsigned"), [16777215], [16777215]),
    (col("int", "int(11)"), [-(2**31), 2**31 - 1], [-(2**31), 2**31 - 1]),
    (col("int", "int(10) unsigned"), [2**32 - 1], [2**32 - 1]),
    (col("bigint", "bigint(20)"), [-(2**63), 2**63 - 1], [-(2**63), 2**63 - 1]),
    (
        col("bigint", "bigint(20) unsigned"),
        [0, 2**63, 2**64 - 1, None],
        [Decimal(0), Decimal(2**63), Decimal(2**64 - 1), None],
    ),
    (col("year", "year(4)"), [1901, 2155, 0], [1901, 2155, 0]),
    (col("bit", "bit(63)", precision=63), [0, 2**63 - 1], [0, 2**63 - 1]),
    (col("bit", "bit(64)", precision=64), [2**64 - 1], [Decimal(2**64 - 1)]),
    (
        col("decimal", "decimal(10,3)", precision=10, scale=3),
        ["12.500", "-12.500", "-0.001", "0.000", "9999999.999", None],
        [
            Decimal("12.500"),
            Decimal("-12.500"),
            Decimal("-0.001"),
            Decimal("0.000"),
            Decimal("9999999.999"),
            None,
        ],
    ),
    (
        col("decimal", "decimal(38,10)", precision=38, scale=10),
        ["-9999999999999999999999999999.9999999999"],
        [Decimal("-9999999999999999999999999999.9999999999")],
    ),
    (
        col("decimal", "decimal(65,30)", precision=65, scale=30),
        ["-" + "9" * 35 + "." + "1" * 30, "0." + "0" * 29 + "1"],
        ["-" + "9" * 35 + "." + "1" * 30, "0." + "0" * 29 + "1"],
    ),
    (
        col("float"),
        [1.5, -0.25, 0, 0.10000000149011612, 3.4028234663852886e38, None],
        [1.5, -0.25, 0.0, 0.10000000149011612, 3.4028234663852886e38, None],
    ),
    (col("double"), [0.1, -1e308, 5e-324], [0.1, -1e308, 5e-324]),
    (
        col("date"),
        ["1000-01-01", "9999-12-31", "2024-02-29"],
        [dt.date(1000, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 2, 29)],
    ),
    (
        col("datetime", "datetime(6)", dt_precision=6),
        ["2021-09-22 10:52:12.123456", "1000-01-01 00:00:00.000000", None],
        [dt.datetime(2021, 9, 22, 10, 52, 12, 123456), dt.datetime(1000, 1, 1), None],
    ),
    (
        col("datetime", "datetime(3)", dt_precision=3),
        ["2021-09-22 10:52:12.189"],
        [dt.datetime(2021, 9, 22, 10, 52, 12, 189000)],
    ),
    (
        col("timestamp", "timestamp(6)", dt_precision=6),
        [
            "2021-09-22 02:52:12.000001Z",
            "1970-01-01 00:00:01.000000Z",
            "2038-01-19 03:14:07.999999Z",
        ],
        [
            dt.datetime(2021, 9, 22, 2, 52, 12, 1, tzinfo=dt.UTC),
            dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
            dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
        ],
    ),
    (
        col("time", "time(6)", dt_precision=6),
        ["-838:59:59.000000", "838:59:59.000000", "00:00:00.5"],
        ["-838:59:59.000000", "838:59:59.000000", "00:00:00.5"],
    ),
    (col("varchar", "varchar(10)"), ["", "héllo 🎉", None], ["", "héllo 🎉", None]),
    (col("set", "set('a','b')"), ["a,b", ""], ["a,b", ""]),
    (col("json"), ['{"a":[1,2.5,null]}'], ['{"a":[1,2.5,null]}']),
    (
        col("varbinary", "varbinary(10)"),
        [base64.b64encode(b"\x00\xff\x10").decode(), ""],
        [b"\x00\xff\x10", b""],
    ),
]


@pytest.mark.parametrize(
    ("column", "canonical", "expected"), EDGE_VALUES, ids=[c.column_type for c, _, _ in EDGE_VALUES]
)
def test_decode_edge_values_and_round_trip(
    column: ColumnInfo, canonical: list[Any], expected: list[Any]
) -> None:
    codec = codec_for(column)
    array = codec.to_arrow(canonical)
    assert array.type == codec.arrow_type
    values = array.to_pylist()
    assert values == expected
    for got, want in zip(values, expected, strict=True):
        assert type(got) is type(want)
    # The encoder is the decoder's inverse: a mirror read back compares with the source.
    assert codec.array_to_canonical(array) == [
        float(v) if isinstance(v, int) and column.data_type == "float" else v for v in canonical
    ]


def test_timestamp_is_an_instant_in_utc() -> None:
    array = codec_for(col("timestamp", "timestamp(0)", dt_precision=0)).to_arrow(
        ["2021-09-22 02:52:12Z"]
    )
    assert array.type.tz == "UTC"
    assert array.cast(pa.int64()).to_pylist() == [1632279132 * 1_000_000]


def test_datetime_precision_in_canonical_form() -> None:
    codec = codec_for(col("datetime", "datetime(2)", dt_precision=2))
    assert codec.to_canonical(dt.datetime(2021, 1, 2, 3, 4, 5, 120000)) == "2021-01-02 03:04:05.12"
    codec = codec_for(col("datetime", "datetime", dt_precision=0))
    assert codec.to_canonical(dt.datetime(21, 1, 2, 3, 4, 5)) == "0021-01-02 03:04:05"
    codec = codec_for(col("timestamp", "timestamp(1)", dt_precision=1))
    instant = dt.datetime(2021, 1, 2, 3, 4, 5, 100000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert codec.to_canonical(instant) == "2021-01-02 01:04:05.1Z"


@pytest.mark.parametrize(
    ("column", "bad"),
    [
        (col("tinyint", "tinyint(4)"), 128),
        (col("tinyint", "tinyint(3) unsigned"), -1),
        (col("tinyint", "tinyint(3) unsigned"), 256),
        (col("mediumint", "mediumint(9)"), 2**23),
        (col("int", "int(10) unsigned"), -1),
        (col("bit", "bit(3)", precision=3), 8),
        (col("int", "int(11)"), 1.5),
        (col("int", "int(11)"), True),
        (col("int", "int(11)"), "1"),
        (col("bigint", "bigint(20) unsigned"), 2**64),
        (col("bigint", "bigint(20) unsigned"), -1),
        (col("decimal", "decimal(5,2)", precision=5, scale=2), "1.234"),
        (col("decimal", "decimal(5,2)", precision=5, scale=2), "12345.00"),
        (col("decimal", "decimal(5,2)", precision=5, scale=2), "abc"),
        (col("varchar", "varchar(10)"), 5),
        (col("varbinary", "varbinary(10)"), "not base64!"),
        (col("datetime", "datetime(0)", dt_precision=0), "2021-09-22 10:52:12Z"),
        (col("datetime", "datetime(0)", dt_precision=0), "yesterday"),
        (col("timestamp", "timestamp(0)", dt_precision=0), "2021-09-22 10:52:12"),
        (col("date"), "2021/09/22"),
    ],
)
def test_values_that_do_not_fit_raise(column: ColumnInfo, bad: Any) -> None:
    with pytest.raises(SinkTypeError, match="'c'"):
        codec_for(column).to_arrow([None, bad])


def test_zero_and_invalid_dates_become_null() -> None:
    dates = codec_for(col("date")).to_arrow(
        ["0000-00-00", "2021-00-10", "2021-02-30", "2021-03-01"]
    )
    assert dates.to_pylist() == [None, None, None, dt.date(2021, 3, 1)]
    stamps = codec_for(col("datetime", "datetime(0)", dt_precision=0)).to_arrow(
        ["0000-00-00 00:00:00", "2021-01-01 00:00:00"]
    )
    assert stamps.to_pylist() == [None, dt.datetime(2021, 1, 1)]
    instants = codec_for(col("timestamp", "timestamp(0)", dt_precision=0)).to_arrow(
        ["0000-00-00 00:00:00Z"]
    )
    assert instants.to_pylist() == [None]


def test_decimal_accepts_integers_and_wide_decimal_pads_scale() -> None:
    narrow = codec_for(col("decimal", "decimal(5,2)", precision=5, scale=2))
    assert narrow.to_arrow([12]).to_pylist() == [Decimal("12.00")]
    wide = codec_for(col("decimal", "decimal(40,3)", precision=40, scale=3))
    assert wide.to_arrow([7, "1.250"]).to_pylist() == ["7.000", "1.250"]


def test_unknown_types_keep_the_canonical_value_as_text() -> None:
    codec = codec_for(col("vector"))
    assert codec.to_arrow(["::1", {"a": 1}, 5, None]).to_pylist() == ["::1", '{"a":1}', "5", None]


def test_schema_and_table_conversions() -> None:
    schema = TableSchema(
        TableId("shop", "orders"),
        (
            ColumnInfo("Order ID", "bigint", "bigint(20) unsigned", nullable=False),
            ColumnInfo("amount", "decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2),
            ColumnInfo("at", "timestamp", "timestamp(6)", datetime_precision=6),
        ),
        ("Order ID",),
        "Order ID",
    )
    typed = arrow_schema(schema)
    assert typed.names == ["Order ID", "amount", "at"]
    assert all(f.nullable for f in typed)
    rows = [
        {"Order ID": 2**64 - 1, "amount": "-3.50", "at": "2024-01-01 00:00:00.000001Z"},
        {"Order ID": 1, "amount": None},
    ]
    table = rows_to_table(schema, rows)
    assert table.schema == typed
    assert table_to_rows(schema, table) == [rows[0], {**rows[1], "at": None}]
    with pytest.raises(KeyError):
        columns_to_table(schema, {"Order ID": [1]})
