"""Value normalisation without a server: each type, in both drivers' shapes, at its edges.

Every case gives the value as pymysql returns it (snapshot path) and as pymysqlreplication 1.0.17
decodes it (binlog path), measured against MariaDB 10.11 or read from the decoder for MySQL-only
shapes (binary JSON), and the one canonical value both must produce.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import struct
from decimal import Decimal
from typing import Any

import pytest
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import RowsEvent

from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.values.canonical import (
    JSON_NULL_SOURCE,
    RowNormalizer,
    UnsupportedColumnType,
    canonical_chunk_key,
    chunk_key_converter,
    normalize_value,
    raw_chunk_key,
    select_expression,
)

U64_MAX = 2**64 - 1


def col(
    name: str,
    data_type: str,
    column_type: str | None = None,
    *,
    nullable: bool = True,
    scale: int | None = None,
    dt_precision: int | None = None,
    members: tuple[str, ...] = (),
) -> ColumnInfo:
    return ColumnInfo(
        name=name,
        data_type=data_type,
        column_type=column_type or data_type,
        nullable=nullable,
        numeric_scale=scale,
        datetime_precision=dt_precision,
        enum_values=members,
    )


def f32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


TINY = col("t", "tinyint", "tinyint(4)")
TINY_U = col("tu", "tinyint", "tinyint(3) unsigned")
BIG_U = col("bu", "bigint", "bigint(20) unsigned")
YEAR = col("y", "year", "year(4)")
DEC_65_30 = col("d", "decimal", "decimal(65,30)", scale=30)
DEC_10_3 = col("d3", "decimal", "decimal(10,3)", scale=3)
DEC_10_0 = col("d0", "decimal", "decimal(10,0)", scale=0)
FLOAT = col("f", "float")
DOUBLE = col("db", "double")
BIT5 = col("b5", "bit", "bit(5)")
BIT64 = col("b64", "bit", "bit(64)")
CHAR = col("c", "char", "char(6)")
VARCHAR = col("v", "varchar", "varchar(20)")
TEXT = col("tx", "text")
ENUM = col("e", "enum", "enum('x','y')", members=("x", "y"))
SET = col("s", "set", "set('a','b','c')", members=("a", "b", "c"))
SET_NN = col("sn", "set", "set('a','b','c')", nullable=False, members=("a", "b", "c"))
BINARY4 = col("bin4", "binary", "binary(4)")
BINARY1 = col("bin1", "binary", "binary")
VARBINARY = col("vb", "varbinary", "varbinary(10)")
BLOB = col("bl", "blob")
GEOMETRY = col("g", "geometry")
DATE = col("dte", "date")
DATETIME6 = col("dt6", "datetime", "datetime(6)", dt_precision=6)
DATETIME3 = col("dt3", "datetime", "datetime(3)", dt_precision=3)
DATETIME0 = col("dt0", "datetime", dt_precision=0)
TIMESTAMP3 = col("ts3", "timestamp", "timestamp(3)", dt_precision=3)
TIMESTAMP0 = col("ts0", "timestamp", dt_precision=0)
TIME6 = col("t6", "time", "time(6)", dt_precision=6)
TIME3 = col("t3", "time", "time(3)", dt_precision=3)
TIME1 = col("t1", "time", "time(1)", dt_precision=1)
TIME0 = col("t0", "time", dt_precision=0)
JSON_COL = col("j", "json")
JSON_NN = col("jn", "json", nullable=False)
LONGTEXT = col("lt", "longtext")

GEOM_POINT = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0)

# (column, value as pymysql returns it, value as pymysqlreplication returns it, canonical)
CASES: list[tuple[ColumnInfo, Any, Any, Any]] = [
    (TINY, -128, -128, -128),
    (TINY, 127, 127, 127),
    (TINY_U, 255, 255, 255),
    (TINY_U, 0, 0, 0),
    (BIG_U, U64_MAX, U64_MAX, U64_MAX),
    (YEAR, 1999, 1999, 1999),
    (YEAR, 2155, 2155, 2155),
    (YEAR, 0, 1900, 0),  # the decoder adds 1900 to the stored byte, 0 included
    (
        DEC_65_30,
        Decimal("-1E-30"),
        Decimal("-1E-30"),
        "-0.000000000000000000000000000001",
    ),
    (
        DEC_65_30,
        Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        "12345678901234567890123456789012345.123456789012345678901234567890",
    ),
    (
        DEC_65_30,
        Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"),
        Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"),
        "-99999999999999999999999999999999999.999999999999999999999999999999",
    ),
    (DEC_65_30, Decimal("1.000000000000000000000000000000"), Decimal(1), "1." + "0" * 30),
    (DEC_10_3, Decimal("12.500"), Decimal("12.5"), "12.500"),
    (DEC_10_3, Decimal("0.000"), Decimal("-0.000"), "0.000"),
    (DEC_10_0, Decimal("12"), Decimal("1.2E+1"), "12"),
    (DEC_10_0, Decimal("-7"), Decimal("-7"), "-7"),
    # FLOAT: the snapshot selects `f + 0e0` and gets the float32 as a double; older text "1.1"
    # still rounds to the same float32.
    (FLOAT, 1.100000023841858, f32(1.1), f32(1.1)),
    (FLOAT, 1.1, f32(1.1), f32(1.1)),
    (FLOAT, 1234567.0, 1234567.0, 1234567.0),
    (FLOAT, 3.4028234663852886e38, 3.4028234663852886e38, 3.4028234663852886e38),
    (FLOAT, -1.5, -1.5, -1.5),
    (DOUBLE, 0.30000000000000004, 0.30000000000000004, 0.30000000000000004),
    (DOUBLE, 1.7976931348623157e308, 1.7976931348623157e308, 1.7976931348623157e308),
    (BIT5, b"\x05", "00101", 5),
    (BIT5, b"\x00", "00000", 0),
    (BIT5, b"\x1f", "11111", 31),
    (BIT64, b"\xff" * 8, "1" * 64, U64_MAX),
    (BIT64, b"\x80" + b"\x00" * 7, "1" + "0" * 63, 2**63),
    (CHAR, "ab", "ab", "ab"),
    (CHAR, "  a", "  a", "  a"),
    (CHAR, "ab    ", "ab", "ab"),  # PAD_CHAR_TO_FULL_LENGTH on the snapshot session
    (VARCHAR, "héllo😀", "héllo😀", "héllo😀"),
    (VARCHAR, "trail  ", "trail  ", "trail  "),
    (VARCHAR, "", "", ""),
    (TEXT, "𝄞 music", "𝄞 music", "𝄞 music"),
    (ENUM, "y", "y", "y"),
    (ENUM, "", "", ""),  # the invalid-value index 0 of a non-strict insert
    (SET, "a,c", {"c", "a"}, "a,c"),
    (SET, "a,b,c", {"b", "c", "a"}, "a,b,c"),
    (SET, "b", {"b"}, "b"),
    (BINARY4, b"ab\x00\x00", b"ab", b64(b"ab\x00\x00")),
    (BINARY4, b"\x00\x00\x00\x00", "", b64(b"\x00\x00\x00\x00")),  # empty arrives as str ''
    (BINARY4, b"\x00\x01\x00\x00", b"\x00\x01", b64(b"\x00\x01\x00\x00")),
    (BINARY4, b"\xff\xfe\xfd\xfc", b"\xff\xfe\xfd\xfc", b64(b"\xff\xfe\xfd\xfc")),
    (BINARY1, b"\x00", "", "AA=="),
    (VARBINARY, b"\x00\xff\x00", b"\x00\xff\x00", "AP8A"),
    (VARBINARY, b"a\x00", b"a\x00", b64(b"a\x00")),  # trailing zeros are data in VARBINARY
    (VARBINARY, b"", "", ""),
    (BLOB, b"\xff\x00\xfe", b"\xff\x00\xfe", b64(b"\xff\x00\xfe")),
    (BLOB, b"", "", ""),
    (GEOMETRY, GEOM_POINT, GEOM_POINT, b64(GEOM_POINT)),
    (DATE, dt.date(2024, 2, 29), dt.date(2024, 2, 29), "2024-02-29"),
    (DATE, dt.date(1, 1, 1), dt.date(1, 1, 1), "0001-01-01"),
    (DATE, dt.date(9999, 12, 31), dt.date(9999, 12, 31), "9999-12-31"),
    (
        DATETIME6,
        dt.datetime(2024, 1, 2, 3, 4, 5, 1),
        dt.datetime(2024, 1, 2, 3, 4, 5, 1),
        "2024-01-02 03:04:05.000001",
    ),
    (
        DATETIME6,
        dt.datetime(2024, 1, 2, 3, 4, 5),
        dt.datetime(2024, 1, 2, 3, 4, 5),
        "2024-01-02 03:04:05.000000",
    ),
    (
        DATETIME3,
        dt.datetime(999, 1, 2, 3, 4, 5, 120000),
        dt.datetime(999, 1, 2, 3, 4, 5, 120000),
        "0999-01-02 03:04:05.120",
    ),
    (DATETIME0, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1), "2024-01-01 00:00:00"),
    (
        TIMESTAMP3,
        dt.datetime(2024, 1, 1, 21, 34, 5, 123000),
        dt.datetime(2024, 1, 1, 21, 34, 5, 123000),
        "2024-01-01 21:34:05.123Z",
    ),
    (
        TIMESTAMP3,
        dt.datetime(2024, 1, 1, 21, 34, 5),
        dt.datetime(2024, 1, 1, 21, 34, 5),
        "2024-01-01 21:34:05.000Z",
    ),
    (
        TIMESTAMP0,
        dt.datetime(1970, 1, 1, 0, 0, 1),
        dt.datetime(1970, 1, 1, 0, 0, 1),
        "1970-01-01 00:00:01Z",
    ),
    (
        TIMESTAMP0,
        dt.datetime(2038, 1, 19, 3, 14, 7),
        dt.datetime(2038, 1, 19, 3, 14, 7),
        "2038-01-19 03:14:07Z",
    ),
    # TIME: pymysql's timedelta is right; the binlog decoder gets a negative value with a fraction
    # wrong (-(I + 1 - F) for -(I + F)), the canonical text is the true value.
    (
        TIME6,
        dt.timedelta(days=-35, seconds=3600, microseconds=999999),
        dt.timedelta(days=-35, seconds=3600, microseconds=1),
        "-838:59:59.000001",
    ),
    (
        TIME6,
        dt.timedelta(days=-1, seconds=86399, microseconds=500000),
        dt.timedelta(days=-1, seconds=86399, microseconds=500000),
        "-00:00:00.500000",
    ),
    (
        TIME6,
        dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
        dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
        "838:59:59.999999",
    ),
    (TIME6, dt.timedelta(0), dt.timedelta(0), "00:00:00.000000"),
    (
        TIME3,
        -dt.timedelta(hours=838, minutes=59, seconds=59, milliseconds=999),
        -dt.timedelta(hours=838, minutes=59, seconds=59, milliseconds=1),
        "-838:59:59.999",
    ),
    (
        TIME1,
        -dt.timedelta(hours=12, microseconds=100000),
        -dt.timedelta(hours=12, microseconds=900000),
        "-12:00:00.1",
    ),
    (TIME0, -dt.timedelta(hours=1), -dt.timedelta(hours=1), "-01:00:00"),
    (TIME0, dt.timedelta(hours=25, minutes=1), dt.timedelta(hours=25, minutes=1), "25:01:00"),
    (
        TIME0,
        dt.timedelta(hours=838, minutes=59, seconds=59),
        dt.timedelta(hours=838, minutes=59, seconds=59),
        "838:59:59",
    ),
    # JSON: text from pymysql; parsed MySQL binary JSON (bytes keys and strings) from the binlog.
    (
        JSON_COL,
        '{"b": 1.5, "a": [1, "x", true, null]}',
        {b"b": 1.5, b"a": [1, b"x", True, None]},
        '{"a":[1,"x",true,null],"b":1.5}',
    ),
    (
        JSON_COL,
        '{"b": 1.5, "a": [1, "x", true, null]}',
        '{"b": 1.5, "a": [1, "x", true, null]}',  # MariaDB: JSON is LONGTEXT in the binlog too
        '{"a":[1,"x",true,null],"b":1.5}',
    ),
    (JSON_COL, '{"d": 1.50}', {b"d": Decimal("1.50")}, '{"d":1.5}'),
    (JSON_COL, '"abc"', b"abc", '"abc"'),
    (JSON_COL, '{"k": "😀é"}', {b"k": "😀é".encode()}, '{"k":"😀é"}'),
    (JSON_COL, "[]", [], "[]"),
    (JSON_COL, "{}", {}, "{}"),
    (JSON_COL, "18446744073709551615", U64_MAX, "18446744073709551615"),
    (
        JSON_COL,
        '{"t": "2015-01-15 23:24:25.000000", "h": "23:24:25.000000"}',
        {b"t": dt.datetime(2015, 1, 15, 23, 24, 25), b"h": dt.time(23, 24, 25)},
        '{"h":"23:24:25.000000","t":"2015-01-15 23:24:25.000000"}',
    ),
    (JSON_NN, "null", None, "null"),
    (LONGTEXT, '{"b": 1}', '{"b": 1}', '{"b": 1}'),  # not marked json: plain text, both paths
]


def case_id(case: tuple[ColumnInfo, Any, Any, Any]) -> str:
    return f"{case[0].column_type}-{case[3]!r}"[:60]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_both_driver_shapes_give_the_canonical_value(
    case: tuple[ColumnInfo, Any, Any, Any],
) -> None:
    column, snapshot_raw, binlog_raw, expected = case
    snapshot = normalize_value(column, snapshot_raw)
    binlog = normalize_value(column, binlog_raw, binlog=True)
    assert snapshot == expected
    assert binlog == expected
    assert type(snapshot) is type(expected)
    assert type(binlog) is type(expected)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_row_normalizer_agrees_with_normalize_value(
    case: tuple[ColumnInfo, Any, Any, Any],
) -> None:
    column, snapshot_raw, binlog_raw, expected = case
    key = col("id", "int", "int(11)", nullable=False)
    schema = TableSchema(TableId("db", "t"), (key, column), ("id",), "id")
    normalizer = RowNormalizer(schema)
    assert normalizer.snapshot_row((7, snapshot_raw)) == {"id": 7, column.name: expected}
    assert normalizer.binlog_row({"id": 7, column.name: binlog_raw}) == {
        "id": 7,
        column.name: expected,
    }


NULLABLE_COLUMNS: list[ColumnInfo] = sorted(
    {c[0] for c in CASES if c[0].nullable}, key=lambda c: c.name
)


@pytest.mark.parametrize("column", NULLABLE_COLUMNS, ids=[c.name for c in NULLABLE_COLUMNS])
def test_null_is_none_on_both_paths(column: ColumnInfo) -> None:
    assert normalize_value(column, None) is None
    assert normalize_value(column, None, binlog=True) is None


def test_float_is_the_float32_value_and_minus_zero_folds() -> None:
    assert normalize_value(FLOAT, 1.1) == 1.100000023841858
    assert normalize_value(FLOAT, 16777217.0) == 16777216.0
    for raw in (-0.0, 0.0):
        for binlog in (False, True):
            value = normalize_value(FLOAT, raw, binlog=binlog)
            assert value == 0.0 and math.copysign(1.0, value) == 1.0
    value = normalize_value(DOUBLE, -0.0)
    assert math.copysign(1.0, value) == 1.0


def test_decimal_never_uses_an_exponent() -> None:
    assert normalize_value(DEC_65_30, Decimal("1E+34")) == "1" + "0" * 34 + "." + "0" * 30
    assert normalize_value(DEC_10_3, Decimal("1E-3")) == "0.001"
    assert normalize_value(DEC_10_3, Decimal("-0")) == "0.000"


@pytest.mark.parametrize(
    ("column", "snapshot_raw", "binlog_raw"),
    [
        (DATE, "0000-00-00", None),
        (DATE, "2024-00-00", None),
        (DATETIME6, "0000-00-00 00:00:00.000000", None),
        (DATETIME0, "0000-01-01 00:00:00", None),  # year 0: valid in MySQL, not in Python
        (TIMESTAMP0, "0000-00-00 00:00:00", dt.datetime(1970, 1, 1)),  # binlog: epoch 0
        (TIMESTAMP3, "0000-00-00 00:00:00.000", dt.datetime(1970, 1, 1)),
    ],
)
def test_zero_and_invalid_temporal_values_are_none(
    column: ColumnInfo, snapshot_raw: Any, binlog_raw: Any
) -> None:
    assert normalize_value(column, snapshot_raw) is None
    assert normalize_value(column, binlog_raw, binlog=True) is None


def test_timestamp_with_zone_is_converted_to_utc() -> None:
    aware = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert normalize_value(TIMESTAMP0, aware) == "2024-01-01 21:34:05Z"


def test_empty_set_from_the_binlog() -> None:
    """The decoder returns None for both an empty SET and NULL; none_sources tells them apart."""
    assert normalize_value(SET, "") == ""
    assert normalize_value(SET, None, binlog=True, none_source="empty set") == ""
    assert normalize_value(SET, None, binlog=True, none_source="null") is None
    assert normalize_value(SET, None, binlog=True) is None  # ambiguous without none_sources
    # A NOT NULL SET column cannot hold NULL, so None is the empty set even without a source.
    assert normalize_value(SET_NN, None, binlog=True) == ""
    assert normalize_value(SET_NN, "") == ""

    schema = TableSchema(
        TableId("db", "t"), (col("id", "int", nullable=False), SET, SET_NN), ("id",), "id"
    )
    normalizer = RowNormalizer(schema)
    values = {"id": 1, "s": None, "sn": None}
    assert normalizer.binlog_row(values, {"s": "empty set", "sn": "empty set"}) == {
        "id": 1,
        "s": "",
        "sn": "",
    }
    assert normalizer.binlog_row(values, {"s": "null", "sn": "empty set"}) == {
        "id": 1,
        "s": None,
        "sn": "",
    }
    assert normalizer.binlog_row(values) == {"id": 1, "s": None, "sn": ""}
    assert normalizer.snapshot_row((1, "", "")) == {"id": 1, "s": "", "sn": ""}
    assert normalizer.snapshot_row((1, None, "b")) == {"id": 1, "s": None, "sn": "b"}


def test_set_members_follow_the_definition_order_not_the_python_set_order() -> None:
    members = tuple(f"m{i}" for i in range(40))
    column = col("s", "set", "set(...)", members=members)
    chosen = {members[i] for i in (39, 2, 17, 0)}
    assert normalize_value(column, chosen, binlog=True) == "m0,m2,m17,m39"


def test_a_json_null_literal_stays_apart_from_sql_null() -> None:
    """The JSON value ``null`` is "null" on both paths; SQL NULL is None. MySQL's binlog decodes
    the literal to None, which the decoder marks ``JSON_NULL_SOURCE``."""
    assert normalize_value(JSON_COL, "null") == "null"
    assert normalize_value(JSON_COL, None) is None
    assert normalize_value(JSON_COL, "null", binlog=True) == "null"  # MariaDB text
    assert normalize_value(JSON_COL, None, binlog=True, none_source=JSON_NULL_SOURCE) == "null"
    assert normalize_value(JSON_COL, None, binlog=True, none_source="null") is None
    assert normalize_value(JSON_COL, None, binlog=True) is None
    assert normalize_value(JSON_NN, "null") == "null"
    assert normalize_value(JSON_NN, None, binlog=True) == "null"
    id_col = col("id", "int", nullable=False)
    normalizer = RowNormalizer(TableSchema(TableId("d", "t"), (id_col, JSON_COL), ("id",), "id"))
    images = [
        ({"id": 1, "j": None}, {"j": JSON_NULL_SOURCE}),
        ({"id": 2, "j": None}, {"j": "null"}),
    ]
    assert [normalizer.binlog_row(v, s)["j"] for v, s in images] == ["null", None]


def test_json_text_is_canonical() -> None:
    text = '{ "z" : {"y": [3, 2, {"b": 1, "a": 2}]}, "a": "é😀", "n": 1e2 }'
    canonical = normalize_value(JSON_COL, text)
    assert canonical == '{"a":"é😀","n":100.0,"z":{"y":[3,2,{"a":2,"b":1}]}}'
    assert json.loads(canonical) == json.loads(text)
    assert normalize_value(JSON_COL, text.encode()) == canonical  # bytes from the snapshot


def test_unsigned_without_signedness_metadata_wraps_back() -> None:
    assert normalize_value(BIG_U, -1, binlog=True) == U64_MAX
    assert normalize_value(TINY_U, -1, binlog=True) == 255
    medium = col("mu", "mediumint", "mediumint(8) unsigned")
    assert normalize_value(medium, -1, binlog=True) == 2**24 - 1
    assert normalize_value(col("iu", "int", "int(10) unsigned"), -(2**31), binlog=True) == 2**31
    assert normalize_value(TINY, -1, binlog=True) == -1


# ----------------------------------------------------------------- the TIME2 decoder repair


class _Packet:
    """Just enough of ``BinLogPacketWrapper`` to run the real TIME2 decoder on given bytes."""

    read_int_be_by_size = BinLogPacketWrapper.read_int_be_by_size
    read_int24_be = BinLogPacketWrapper.read_int24_be

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def read(self, size: int) -> bytes:
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk


class _Column:
    def __init__(self, fsp: int) -> None:
        self.fsp = fsp


def encode_time2(micros: int, fsp: int) -> bytes:
    """MySQL's ``my_time_packed_to_binary`` (C integer semantics), the on-disk/binlog TIME2."""
    sign = -1 if micros < 0 else 1
    seconds, fraction = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    packed = sign * ((((hours << 12) | (minutes << 6) | secs) << 24) + fraction)
    int_part = packed >> 24  # arithmetic shift: floor
    frac_part = -((-packed) % (1 << 24)) if packed < 0 else packed % (1 << 24)  # C remainder
    head = (0x800000 + int_part).to_bytes(3, "big")
    if fsp == 0:
        return head
    if fsp <= 2:
        return head + (int(frac_part / 10000) & 0xFF).to_bytes(1, "big")
    if fsp <= 4:
        return head + (int(frac_part / 100) & 0xFFFF).to_bytes(2, "big")
    return (packed + 0x800000000000).to_bytes(6, "big")


def decode_time2(data: bytes, fsp: int) -> dt.timedelta:
    event = RowsEvent.__new__(RowsEvent)
    event.packet = _Packet(data)
    result: dt.timedelta = event._RowsEvent__read_time2(_Column(fsp))
    return result


TIME2_SAMPLES = [
    0,
    1,
    -1,
    500_000,
    -500_000,
    -1_500_000,
    -100_000,
    -43_200_100_000,
    -10,
    -999_999,
    -3_020_399_000_001,  # -838:59:59.000001
    -3_020_399_999_999,
    3_020_399_999_999,
    -59_999_999,
    -3_599_000_001,
    -86_400_000_000,
    -90_061_123_456,
]


@pytest.mark.parametrize("fsp", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("micros", TIME2_SAMPLES)
def test_binlog_time2_repair_against_the_real_decoder(micros: int, fsp: int) -> None:
    unit = 10 ** (6 - fsp)
    micros = int(micros / unit) * unit  # what a TIME(fsp) column can hold (truncated)
    true = dt.timedelta(microseconds=micros)
    column = col("t", "time", f"time({fsp})", dt_precision=fsp)
    decoded = decode_time2(encode_time2(micros, fsp), fsp)
    assert normalize_value(column, decoded, binlog=True) == normalize_value(column, true)
    assert raw_chunk_key(column, decoded, binlog=True) == true
    assert raw_chunk_key(column, true) == true


def test_time2_decoder_is_still_wrong_for_negative_fractions() -> None:
    """Guards the repair: if a new decoder fixes the bug, the repair must go (and this fails)."""
    decoded = decode_time2(encode_time2(-43_200_100_000, 1), 1)
    assert decoded == -dt.timedelta(hours=12, microseconds=900_000)


# ----------------------------------------------------------------- chunk keys


@pytest.mark.parametrize(
    ("column", "snapshot_raw", "binlog_raw", "expected"),
    [
        (BIG_U, U64_MAX, U64_MAX, U64_MAX),
        (BIG_U, U64_MAX, -1, U64_MAX),
        (TINY, -128, -128, -128),
        (YEAR, 0, 1900, 0),
        (DEC_65_30, Decimal("1.5"), Decimal("1.5"), Decimal("1.5")),
        (FLOAT, 1.100000023841858, f32(1.1), f32(1.1)),
        (BIT5, b"\x05", "00101", 5),
        (CHAR, "ab  ", "ab", "ab"),
        (VARCHAR, "ü😀", "ü😀", "ü😀"),
        (ENUM, "x", "x", "x"),
        (SET, "a,c", {"c", "a"}, "a,c"),
        (BINARY4, b"ab\x00\x00", b"ab", b"ab\x00\x00"),
        (BINARY4, b"\x00" * 4, "", b"\x00" * 4),
        (VARBINARY, b"a\x00", b"a\x00", b"a\x00"),
        (VARBINARY, b"", "", b""),
        (DATE, dt.date(2024, 2, 29), dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
        (DATE, "0000-00-00", None, None),
        (
            DATETIME6,
            dt.datetime(2024, 1, 2, 3, 4, 5, 6),
            dt.datetime(2024, 1, 2, 3, 4, 5, 6),
            dt.datetime(2024, 1, 2, 3, 4, 5, 6),
        ),
        (TIMESTAMP0, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1)),
        (TIMESTAMP0, "0000-00-00 00:00:00", dt.datetime(1970, 1, 1), None),
        (
            TIME1,
            -dt.timedelta(hours=12, microseconds=100000),
            -dt.timedelta(hours=12, microseconds=900000),
            -dt.timedelta(hours=12, microseconds=100000),
        ),
        (JSON_COL, '{"b":1,"a":2}', {b"b": 1, b"a": 2}, '{"a":2,"b":1}'),
    ],
)
def test_raw_chunk_key_gives_one_comparable_value_from_both_shapes(
    column: ColumnInfo, snapshot_raw: Any, binlog_raw: Any, expected: Any
) -> None:
    assert raw_chunk_key(column, snapshot_raw) == expected
    assert raw_chunk_key(column, binlog_raw, binlog=True) == expected
    convert = chunk_key_converter(column, binlog=True)
    assert convert(binlog_raw) == expected
    assert convert(None) is None
    if expected is not None:
        assert type(raw_chunk_key(column, snapshot_raw)) is type(expected)


def test_raw_chunk_keys_order_like_the_server() -> None:
    keys = [raw_chunk_key(BIG_U, v, binlog=True) for v in (-1, 0, 2**63, -(2**63))]
    assert sorted(keys) == [0, 2**63, 2**63, U64_MAX]
    decimals = [raw_chunk_key(DEC_10_3, Decimal(v)) for v in ("10.000", "9.5", "-1")]
    assert sorted(decimals) == [Decimal("-1"), Decimal("9.5"), Decimal("10.000")]
    binaries = [raw_chunk_key(BINARY4, v, binlog=True) for v in (b"\x01", "", b"\x00\x01")]
    assert sorted(binaries) == [b"\x00\x00\x00\x00", b"\x00\x01\x00\x00", b"\x01\x00\x00\x00"]


# ----------------------------------------------------------------- RowNormalizer


def wide_schema() -> TableSchema:
    columns = (
        col("id", "bigint", "bigint(20) unsigned", nullable=False),
        col("k2", "varchar", "varchar(10)", nullable=False),
        DEC_10_3,
        FLOAT,
        DOUBLE,
        VARCHAR,
        TIMESTAMP3,
        BINARY4,
        SET,
    )
    return TableSchema(TableId("shop", "orders"), columns, ("id", "k2"), "id")


def test_snapshot_and_binlog_rows_in_schema_order_and_keys() -> None:
    normalizer = RowNormalizer(wide_schema())
    snapshot = normalizer.snapshot_row(
        (
            U64_MAX,
            "k",
            Decimal("1.5"),
            1.100000023841858,
            0.5,
            "x",
            dt.datetime(2024, 1, 1, 0, 0, 0, 1000),
            b"a\x00\x00\x00",
            "b,c",
        )
    )
    binlog = normalizer.binlog_row(
        {
            "s": {"c", "b"},
            "bin4": b"a",
            "ts3": dt.datetime(2024, 1, 1, 0, 0, 0, 1000),
            "v": "x",
            "db": 0.5,
            "f": f32(1.1),
            "d3": Decimal("1.500"),
            "k2": "k",
            "id": U64_MAX,
        }
    )
    expected = {
        "id": U64_MAX,
        "k2": "k",
        "d3": "1.500",
        "f": f32(1.1),
        "db": 0.5,
        "v": "x",
        "ts3": "2024-01-01 00:00:00.001Z",
        "bin4": b64(b"a\x00\x00\x00"),
        "s": "b,c",
    }
    assert snapshot == expected
    assert binlog == expected
    assert list(snapshot) == list(binlog) == normalizer.schema.column_names
    assert normalizer.key_of(snapshot) == (U64_MAX, "k")
    assert normalizer.key_of(binlog) == normalizer.key_of(snapshot)


def test_rows_with_all_nulls() -> None:
    normalizer = RowNormalizer(wide_schema())
    nulls = (1, "k", *([None] * 7))
    expected = dict(zip(normalizer.column_names, nulls, strict=True))
    assert normalizer.snapshot_row(nulls) == expected
    assert normalizer.binlog_row(dict(expected)) == expected


def test_row_shape_errors_name_the_problem() -> None:
    normalizer = RowNormalizer(wide_schema())
    with pytest.raises(ValueError, match="2 values for 9 columns"):
        normalizer.snapshot_row((1, "k"))
    with pytest.raises(ValueError, match="binlog_row_metadata=FULL"):
        normalizer.binlog_row({"UNKNOWN_COL0": 1, "UNKNOWN_COL1": "k"})


def test_select_list_reads_float_exactly() -> None:
    normalizer = RowNormalizer(wide_schema())
    assert normalizer.select_list == (
        "`id`, `k2`, `d3`, `f` + 0e0 AS `f`, `db` + 0e0 AS `db`, `v`, `ts3`, `bin4`, `s`"
    )
    assert select_expression(col("we`ird", "float")) == "`we``ird` + 0e0 AS `we``ird`"


@pytest.mark.parametrize("data_type", ["vector", "frobnicate"])
def test_unsupported_types_fail_at_construction(data_type: str) -> None:
    schema = TableSchema(TableId("db", "t"), (col("id", "int"), col("x", data_type)), ("id",), "id")
    with pytest.raises(UnsupportedColumnType, match="'x'"):
        RowNormalizer(schema)


def test_identity_columns_are_not_converted() -> None:
    """The hot path: integer and character columns are not even visited per row."""
    columns = (
        col("id", "int", nullable=False),
        col("name", "varchar", "varchar(10)"),
        col("n", "bigint"),
    )
    normalizer = RowNormalizer(TableSchema(TableId("db", "t"), columns, ("id",), "id"))
    assert normalizer._snapshot_convs == ()
    assert normalizer._binlog_convs == ()
    marker = object()
    assert normalizer.snapshot_row((1, marker, 2))["name"] is marker


@pytest.mark.parametrize(
    ("column", "raw"),
    [
        (col("k", "bigint", "bigint(20) unsigned"), U64_MAX),
        (col("k", "int"), -42),
        (col("k", "decimal", "decimal(65,30)", scale=30), Decimal("-1.5")),
        (col("k", "varchar"), "Ärger"),
        (col("k", "char", "char(4)"), "ab"),
        (col("k", "binary", "binary(4)"), b"\x00\x01\x00\x00"),
        (col("k", "varbinary"), b"\xff\x00"),
        (col("k", "date"), dt.date(2024, 2, 29)),
        (col("k", "datetime", "datetime(6)", dt_precision=6), dt.datetime(2024, 1, 1, 1, 2, 3, 4)),
        (col("k", "datetime", "datetime"), dt.datetime(2024, 1, 1, 1, 2, 3)),
        (
            col("k", "timestamp", "timestamp(3)", dt_precision=3),
            dt.datetime(2024, 1, 1, 0, 0, 0, 5000),
        ),
        (col("k", "time", "time(6)", dt_precision=6), dt.timedelta(hours=-30, microseconds=-5)),
        (col("k", "time", "time"), dt.timedelta(hours=838, minutes=59, seconds=59)),
        (col("k", "year"), 2024),
    ],
)
def test_canonical_chunk_keys_map_back_to_raw_keys(column: ColumnInfo, raw: Any) -> None:
    """A re-dump compares the sink's canonical keys with raw chunk boundaries."""
    canonical = normalize_value(column, raw)
    assert canonical_chunk_key(column, canonical) == raw_chunk_key(column, raw)
