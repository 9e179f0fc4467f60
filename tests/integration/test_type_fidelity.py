"""*One canonical value* (README, "The invariants") against a real server: the snapshot and the binlog yield the same canonical rows.

One table holds every type family at its edges. A writer session in ``+05:30`` inserts and updates
rows; the same rows are then read (a) by the snapshot path — ``connect()`` (session UTC), the
normalizer's SELECT list, ``RowNormalizer.snapshot_row`` — and (b) by the binlog path — the window
between two ``current_position`` reads decoded by pymysqlreplication, ``RowNormalizer.binlog_row``.
Both are compared with each other *and* with hand-written canonical values, so a bug that broke
both paths the same way would still fail here.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.mysql.connection import connect, query
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import load_table_schema
from cdc_console.values.canonical import RowNormalizer
from tests.conftest import SourceDb

pytestmark = pytest.mark.mysql

U64_MAX = 2**64 - 1
NINES = "9" * 35 + "." + "9" * 30

DDL = """
CREATE TABLE fidelity (
  id INT PRIMARY KEY,
  dec65 DECIMAL(65,30) NULL,
  dt6 DATETIME(6) NULL,
  ts3 TIMESTAMP(3) NULL DEFAULT NULL,
  d DATE NULL,
  t6 TIME(6) NULL,
  t3 TIME(3) NULL,
  t1 TIME(1) NULL,
  t0 TIME NULL,
  j JSON NULL,
  vb VARBINARY(16) NULL,
  bl BLOB NULL,
  bin4 BINARY(4) NULL,
  txt TEXT CHARACTER SET utf8mb4 NULL,
  vc VARCHAR(32) CHARACTER SET utf8mb4 NULL,
  ch CHAR(8) NULL,
  e ENUM('small','medium','large') NULL,
  s SET('red','green','blue') NULL,
  s_nn SET('x','y') NOT NULL DEFAULT '',
  b5 BIT(5) NULL,
  b64 BIT(64) NULL,
  ubig BIGINT UNSIGNED NULL,
  ti TINYINT NULL,
  tu TINYINT UNSIGNED NULL,
  f FLOAT NULL,
  dbl DOUBLE NULL,
  y YEAR NULL
) CHARACTER SET utf8mb4
"""

COLUMNS = [
    "id", "dec65", "dt6", "ts3", "d", "t6", "t3", "t1", "t0", "j", "vb", "bl", "bin4", "txt",
    "vc", "ch", "e", "s", "s_nn", "b5", "b64", "ubig", "ti", "tu", "f", "dbl", "y",
]  # fmt: skip

INSERTS = [
    # Positive extremes; ts3 is a +05:30 wall-clock literal.
    "INSERT INTO fidelity VALUES (1, '" + NINES + "', '2024-01-02 03:04:05.000001', "
    "'2024-01-02 03:04:05.123', '2024-02-29', '838:59:59.999999', '12:34:56.789', "
    '\'23:59:59.9\', \'838:59:59\', \'{"b": 1.5, "a": [1, "x", true, null], "u": "😀"}\', '
    "x'00ff00fe80', x'0000ff80', 'ab', 'héllo 😀 𝄞', 'trailing  ', 'abc  ', 'medium', "
    "'blue,red', 'y,x', b'10101', 0xFFFFFFFFFFFFFFFF, 18446744073709551615, -128, 255, "
    "1234567, 0.1e0 + 0.2e0, 1901)",
    # Negative extremes, empty values, zero bytes; ts3 is the smallest TIMESTAMP.
    "INSERT INTO fidelity VALUES (2, '-0.000000000000000000000000000001', "
    "'1000-01-01 00:00:00.000000', '1970-01-01 05:30:01.000', '1000-01-01', "
    "'-838:59:59.000001', '-00:00:01.5', '-12:00:00.1', '-01:00:00', '[]', x'', x'', "
    "x'00000000', '', '', '', 'small', '', '', b'00000', 0, 0, 127, 0, -1.5, "
    "-1.7976931348623157e308, 2155)",
    # NULL in every nullable column.
    "INSERT INTO fidelity (id, s_nn) VALUES (3, 'x')",
    # Middle values; ts3 is the largest TIMESTAMP; YEAR 0000; trailing zero bytes.
    "INSERT INTO fidelity VALUES (4, '12.5', '9999-12-31 23:59:59.999999', "
    "'2038-01-19 08:44:07.999', '9999-12-31', '25:00:00.5', '-838:59:59.999', '-00:00:00.1', "
    '\'00:00:00\', \'{"n": 1e2, "deep": {"z": [{"b": 1, "a": 2}]}}\', x\'610000\', '
    "x'c328', x'00010000', 'Ünïcödé', '日本語', 'x', 'large', 'green', 'x', b'00001', "
    "0x8000000000000000, 9223372036854775808, 0, 128, 0.1, 1/3e0, 0)",
]
# Zero and invalid dates need a lenient sql_mode.
ZERO_DATES = (
    "INSERT INTO fidelity (id, d, dt6, ts3, s_nn) VALUES "
    "(5, '2024-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 'x')"
)
UPDATES = [
    "UPDATE fidelity SET s = '', t6 = '-00:00:00.000001', ts3 = '2000-06-15 12:00:00.5', "
    "dec65 = -dec65, bin4 = 'z', j = JSON_SET(j, '$.c', 2), f = 16777217, b64 = 1, "
    "ubig = ubig - 1, y = 1999, e = NULL, txt = CONCAT(txt, '!') WHERE id = 1",
    "UPDATE fidelity SET s = NULL, s_nn = 'x,y' WHERE id = 2",
    "UPDATE fidelity SET s = 'blue,green', d = '2001-02-03', j = '{\"k\": null}', "
    "t0 = '-00:00:01' WHERE id = 3",
]


def b64(hexstr: str) -> str:
    return base64.b64encode(bytes.fromhex(hexstr)).decode("ascii")


_NULL_ROW: dict[str, Any] = dict.fromkeys(COLUMNS)

EXPECTED_INSERTED: dict[int, dict[str, Any]] = {
    1: {
        "id": 1,
        "dec65": NINES,
        "dt6": "2024-01-02 03:04:05.000001",
        "ts3": "2024-01-01 21:34:05.123Z",  # 03:04:05.123 at +05:30
        "d": "2024-02-29",
        "t6": "838:59:59.999999",
        "t3": "12:34:56.789",
        "t1": "23:59:59.9",
        "t0": "838:59:59",
        "j": '{"a":[1,"x",true,null],"b":1.5,"u":"😀"}',
        "vb": b64("00ff00fe80"),
        "bl": b64("0000ff80"),
        "bin4": b64("61620000"),
        "txt": "héllo 😀 𝄞",
        "vc": "trailing  ",
        "ch": "abc",
        "e": "medium",
        "s": "red,blue",
        "s_nn": "x,y",
        "b5": 21,
        "b64": U64_MAX,
        "ubig": U64_MAX,
        "ti": -128,
        "tu": 255,
        "f": 1234567.0,  # a plain SELECT would say 1234570
        "dbl": 0.30000000000000004,
        "y": 1901,
    },
    2: {
        "id": 2,
        "dec65": "-0.000000000000000000000000000001",
        "dt6": "1000-01-01 00:00:00.000000",
        "ts3": "1970-01-01 00:00:01.000Z",
        "d": "1000-01-01",
        "t6": "-838:59:59.000001",
        "t3": "-00:00:01.500",
        "t1": "-12:00:00.1",
        "t0": "-01:00:00",
        "j": "[]",
        "vb": "",
        "bl": "",
        "bin4": "AAAAAA==",
        "txt": "",
        "vc": "",
        "ch": "",
        "e": "small",
        "s": "",
        "s_nn": "",
        "b5": 0,
        "b64": 0,
        "ubig": 0,
        "ti": 127,
        "tu": 0,
        "f": -1.5,
        "dbl": -1.7976931348623157e308,
        "y": 2155,
    },
    3: {**_NULL_ROW, "id": 3, "s_nn": "x"},
    4: {
        "id": 4,
        "dec65": "12.500000000000000000000000000000",
        "dt6": "9999-12-31 23:59:59.999999",
        "ts3": "2038-01-19 03:14:07.999Z",
        "d": "9999-12-31",
        "t6": "25:00:00.500000",
        "t3": "-838:59:59.999",
        "t1": "-00:00:00.1",
        "t0": "00:00:00",
        "j": '{"deep":{"z":[{"a":2,"b":1}]},"n":100.0}',
        "vb": b64("610000"),
        "bl": b64("c328"),
        "bin4": b64("00010000"),
        "txt": "Ünïcödé",
        "vc": "日本語",
        "ch": "x",
        "e": "large",
        "s": "green",
        "s_nn": "x",
        "b5": 1,
        "b64": 2**63,
        "ubig": 2**63,
        "ti": 0,
        "tu": 128,
        "f": 0.10000000149011612,
        "dbl": 0.3333333333333333,
        "y": 0,
    },
    5: {**_NULL_ROW, "id": 5, "s_nn": "x"},  # zero/invalid dates are None
}

EXPECTED_FINAL: dict[int, dict[str, Any]] = copy.deepcopy(EXPECTED_INSERTED)
EXPECTED_FINAL[1].update(
    s="",
    t6="-00:00:00.000001",
    ts3="2000-06-15 06:30:00.500Z",
    dec65="-" + NINES,
    bin4=b64("7a000000"),
    j='{"a":[1,"x",true,null],"b":1.5,"c":2,"u":"😀"}',
    f=16777216.0,
    b64=1,
    ubig=U64_MAX - 1,
    y=1999,
    e=None,
    txt="héllo 😀 𝄞!",
)
EXPECTED_FINAL[2].update(s=None, s_nn="x,y")
EXPECTED_FINAL[3].update(s="green,blue", d="2001-02-03", j='{"k":null}', t0="-00:00:01")


@pytest.fixture
def cdc_conn(source_db: SourceDb) -> Iterator[pymysql.connections.Connection]:
    conn = connect(source_db.source_config())
    try:
        yield conn
    finally:
        conn.close()


def read_binlog_window(
    source_db: SourceDb, start: BinlogOffset, end: BinlogOffset
) -> list[tuple[str, dict[str, Any]]]:
    """Decoded row images in (start, end]: ('insert', row) and ('update', row), in order."""
    config = source_db.source_config()
    stream = BinLogStreamReader(
        connection_settings={
            "host": config.host,
            "port": config.port,
            "user": config.user,
            "passwd": config.password(),
        },
        server_id=5499,
        is_mariadb=False,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent],
        only_schemas=[source_db.name],
    )
    images: list[tuple[str, dict[str, Any]]] = []
    try:
        for event in stream:
            if BinlogOffset(stream.log_file, event.packet.log_pos) > end:
                break
            assert event.table == "fidelity"
            kind = "insert" if isinstance(event, WriteRowsEvent) else "update"
            images.extend((kind, row) for row in event.rows)
    finally:
        stream.close()
    return images


def test_snapshot_and_binlog_agree_on_every_type(
    source_db: SourceDb, cdc_conn: pymysql.connections.Connection
) -> None:
    source_db.execute(DDL)
    writer = source_db.connect()
    try:
        with writer.cursor() as cur:
            cur.execute("SET time_zone = '+05:30'")
            start = current_position(writer)
            for statement in INSERTS:
                cur.execute(statement)
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(ZERO_DATES)
            cur.execute("SET SESSION sql_mode = DEFAULT")
            for statement in UPDATES:
                cur.execute(statement)
            end = current_position(writer)
            # The stored instant is not the literal: the writer's zone shifted it.
            cur.execute("SELECT ts3 FROM fidelity WHERE id = 4")
            assert cur.fetchone() == (dt.datetime(2038, 1, 19, 8, 44, 7, 999000),)
    finally:
        writer.close()
    assert end > start

    loaded = load_table_schema(cdc_conn, TableId(source_db.name, "fidelity"))
    assert loaded.column_names == COLUMNS
    # MariaDB's JSON is LONGTEXT + CHECK (json_valid(j)): load_table_schema reports it as json.
    assert loaded.column("j").data_type == "json"
    schema = loaded
    normalizer = RowNormalizer(schema)

    # (a) the snapshot path, through the UTC session connect() opens
    raw_snapshot = query(
        cdc_conn, f"SELECT {normalizer.select_list} FROM {schema.table_id.quoted()} ORDER BY id"
    )
    snapshot = {row[0]: normalizer.snapshot_row(row) for row in raw_snapshot}

    # (b) the binlog path, over exactly the window of our writes
    images = read_binlog_window(source_db, start, end)
    assert [kind for kind, _ in images] == ["insert"] * 5 + ["update"] * 3
    inserted: dict[int, dict[str, Any]] = {}
    before: dict[int, dict[str, Any]] = {}
    after: dict[int, dict[str, Any]] = {}
    for kind, row in images:
        if kind == "insert":
            image = normalizer.binlog_row(row["values"], row["none_sources"])
            inserted[image["id"]] = image
        else:
            old = normalizer.binlog_row(row["before_values"], row["before_none_sources"])
            new = normalizer.binlog_row(row["after_values"], row["after_none_sources"])
            before[old["id"]] = old
            after[new["id"]] = new
    replayed = {**inserted, **after}

    for key in EXPECTED_INSERTED:
        assert inserted[key] == EXPECTED_INSERTED[key], f"binlog insert image of id {key}"
    for key, image in before.items():
        assert image == EXPECTED_INSERTED[key], f"binlog before image of id {key}"
    for key, image in after.items():
        assert image == EXPECTED_FINAL[key], f"binlog after image of id {key}"
    for key in EXPECTED_FINAL:
        assert snapshot[key] == EXPECTED_FINAL[key], f"snapshot row of id {key}"
        assert snapshot[key] == replayed[key], f"snapshot vs binlog for id {key}"
        assert list(snapshot[key]) == list(replayed[key]) == COLUMNS
        for column, value in snapshot[key].items():
            assert type(value) is type(replayed[key][column]), (key, column)
    assert normalizer.key_of(snapshot[1]) == normalizer.key_of(replayed[1]) == (1,)

    # Without the JSON marking (today's load_table_schema on MariaDB) both paths still agree:
    # the column is plain text, stored verbatim.
    plain = RowNormalizer(
        replace(
            loaded,
            columns=tuple(
                replace(c, data_type="longtext") if c.name == "j" else c for c in loaded.columns
            ),
        )
    )
    plain_snapshot = {
        row[0]: plain.snapshot_row(row)
        for row in query(
            cdc_conn, f"SELECT {plain.select_list} FROM {loaded.table_id.quoted()} ORDER BY id"
        )
    }
    plain_replayed: dict[int, dict[str, Any]] = {}
    for kind, row in images:
        values, sources = (
            (row["values"], row["none_sources"])
            if kind == "insert"
            else (row["after_values"], row["after_none_sources"])
        )
        image = plain.binlog_row(values, sources)
        plain_replayed[image["id"]] = image
    assert plain_snapshot == plain_replayed
    assert plain_snapshot[4]["j"] == '{"n": 1e2, "deep": {"z": [{"b": 1, "a": 2}]}}'


def test_float_needs_the_exact_select_expression(
    source_db: SourceDb, cdc_conn: pymysql.connections.Connection
) -> None:
    """Why the snapshot must use ``select_list``: FLOAT text has 6 significant digits."""
    source_db.execute(
        "CREATE TABLE floats (id INT PRIMARY KEY, f FLOAT)",
        "INSERT INTO floats VALUES (1, 1234567), (2, 16777217), (3, 0.1), (4, 3.40282e38)",
    )
    schema = load_table_schema(cdc_conn, TableId(source_db.name, "floats"))
    normalizer = RowNormalizer(schema)
    table = schema.table_id.quoted()
    naive = [
        normalizer.snapshot_row(r)["f"]
        for r in query(cdc_conn, f"SELECT * FROM {table} ORDER BY id")
    ]
    exact = [
        normalizer.snapshot_row(r)["f"]
        for r in query(cdc_conn, f"SELECT {normalizer.select_list} FROM {table} ORDER BY id")
    ]
    assert exact == [1234567.0, 16777216.0, 0.10000000149011612, 3.402820018375656e38]
    assert naive[:2] == [1234570.0, 16777200.0]  # the server's rounded text: not the value
