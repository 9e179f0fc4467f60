"""The reader's census of binlog events and its reading of statement-logged DML, offline.

The real server's forms of each are in ``tests/integration/test_binlog_loud_events.py``.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from pymysqlreplication.constants import BINLOG

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.mysql.binlog_events import (
    CHANGE_FREE,
    DECODED,
    CompressedEventError,
    full_bitmap,
    is_opaque,
    plain_packet,
    uncompress,
)
from cdc_console.mysql.logged_statements import dml_targets, is_dml


def _t(name: str, db: str = "shop") -> TableId:
    return TableId(db, name)


@pytest.mark.parametrize(
    ("query", "targets"),
    [
        ("BEGIN", None),
        ("COMMIT", None),
        ("SAVEPOINT a", None),
        ("ALTER TABLE orders ADD COLUMN x INT", None),
        ("/*!40000 ALTER TABLE orders DISABLE KEYS */", None),
        ("UPDATE orders SET a = 1 WHERE id = 2", [_t("orders")]),
        ("update `orders` set a = 1", [_t("orders")]),
        ("UPDATE LOW_PRIORITY IGNORE other.orders SET a = 1", [_t("orders", "other")]),
        (
            "UPDATE orders o JOIN lines l ON o.id = l.oid SET o.total = l.sum",
            [_t("orders"), _t("lines")],
        ),
        ("UPDATE orders USE INDEX (k), lines AS l SET a = 1", [_t("orders"), _t("lines")]),
        ("/* app */ DELETE FROM orders WHERE id = 1", [_t("orders")]),
        ("DELETE QUICK FROM orders ORDER BY id LIMIT 3", [_t("orders")]),
        # the targets before FROM may be aliases: read as names, they err on the loud side
        (
            "DELETE o FROM orders o JOIN lines ON o.id = lines.oid",
            [_t("o"), _t("orders"), _t("lines")],
        ),
        ("DELETE FROM orders, lines USING orders JOIN lines", [_t("orders"), _t("lines")]),
        ("INSERT INTO orders VALUES (1)", [_t("orders")]),
        ("INSERT IGNORE orders SELECT * FROM archive", [_t("orders")]),
        ("insert into `we ird`.`t``x` values (1)", [_t("t`x", "we ird")]),
        ("REPLACE DELAYED INTO orders SET id = 1", [_t("orders")]),
        ("LOAD DATA INFILE '/tmp/x' INTO TABLE shop.orders", [_t("orders")]),
        ("-- note\nUPDATE orders SET a = 1", [_t("orders")]),
    ],
)
def test_dml_targets_name_the_tables_a_statement_may_change(
    query: str, targets: list[TableId] | None
) -> None:
    found = dml_targets(query, "shop")
    assert (None if found is None else list(dict.fromkeys(found))) == targets
    assert is_dml(query) == (targets is not None)


def test_a_dml_without_a_default_schema_names_only_qualified_tables() -> None:
    assert dml_targets("UPDATE orders SET a = 1", "") == []
    assert dml_targets("UPDATE shop.orders SET a = 1", "") == [_t("orders")]


def test_the_census_leaves_no_event_type_unclassified() -> None:
    """Every type is decoded, change-free or opaque; the row and query types are decoded,
    types that carry rows we cannot read are opaque, and so is any unknown number."""
    assert not CHANGE_FREE & DECODED
    for code in (BINLOG.QUERY_EVENT, BINLOG.WRITE_ROWS_EVENT_V1, BINLOG.UPDATE_ROWS_EVENT_V2):
        assert not is_opaque(code)
    for code in (0xA5, 0xA6, 0xA7, 0xA8):  # MariaDB compressed query and rows
        assert not is_opaque(code)
    for code in (
        0x28,  # MySQL TRANSACTION_PAYLOAD
        BINLOG.PARTIAL_UPDATE_ROWS_EVENT,
        BINLOG.INCIDENT_EVENT,
        BINLOG.EXECUTE_LOAD_QUERY_EVENT,
        BINLOG.PRE_GA_WRITE_ROWS_EVENT,
        0xA9,
        0x7F,
        0xFE,
    ):
        assert is_opaque(code), hex(code)
    for code in (BINLOG.XID_EVENT, BINLOG.MARIADB_GTID_EVENT, BINLOG.TABLE_MAP_EVENT):
        assert not is_opaque(code)


def _compressed(body: bytes, width: int = 1) -> bytes:
    return bytes([0x80 | width]) + len(body).to_bytes(width, "big") + zlib.compress(body)


def test_uncompress_reads_mariadbs_header_and_checks_the_length() -> None:
    for width in (1, 2, 3, 4):
        assert uncompress(_compressed(b"x" * 200, width)) == b"x" * 200
    with pytest.raises(CompressedEventError, match="header byte"):
        uncompress(b"\x01\x00")
    wrong = b"\x81\x05" + zlib.compress(b"abc")
    with pytest.raises(CompressedEventError, match="3 bytes uncompressed, the header says 5"):
        uncompress(wrong)


def test_plain_packet_inflates_a_compressed_row_event_keeping_its_place() -> None:
    """A WRITE_ROWS_COMPRESSED_EVENT_V1 becomes a WRITE_ROWS_EVENT_V1 with the same post-header
    and bitmap, the rows inflated, the same next position; its own size is returned."""
    rows = b"\xfc\x01\x00\x00\x00"
    post = (18).to_bytes(6, "little") + b"\x01\x00" + b"\x03" + b"\x07"
    body = post + _compressed(rows) + b"CRC!"
    size = 19 + len(body)
    header = struct.pack("<BIBIIIH", 0, 1700000000, 0xA6, 1, size, 4711, 0)

    class Packet:
        _data = header + body

    plain = plain_packet(Packet(), use_checksum=True)
    assert plain is not None
    packet, original = plain
    assert original == size
    _, _, kind, _, new_size, log_pos, _ = struct.unpack_from("<BIBIIIH", packet._data)
    assert (kind, log_pos) == (BINLOG.WRITE_ROWS_EVENT_V1, 4711)
    assert packet._data[20:] == post + rows + b"CRC!"
    assert new_size == 19 + len(post + rows + b"CRC!")

    class Other:
        _data = struct.pack("<BIBIIIH", 0, 0, BINLOG.XID_EVENT, 1, 31, 10, 0) + b"\x00" * 12

    assert plain_packet(Other(), use_checksum=True) is None


@pytest.mark.parametrize(
    ("bitmap", "columns", "full"),
    [
        (b"\x07", 3, True),
        (b"\x03", 3, False),
        (b"\xff", 8, True),
        (b"\xff\x01", 9, True),
        (b"\xff\x00", 9, False),
        (b"\x7f\x01", 9, False),
        (b"", 1, False),
    ],
)
def test_full_bitmap(bitmap: bytes, columns: int, full: bool) -> None:
    assert full_bitmap(bitmap, columns) is full


def test_a_held_change_keeps_its_cause_through_the_state_and_old_ones_read_as_ddl() -> None:
    at = BinlogOffset("binlog.000002", 4711)
    change = SchemaChange(at, at, "UPDATE t SET a = 1", ChangeCause.STATEMENT)
    assert SchemaChange.from_dict(change.to_dict()) == change
    ddl = SchemaChange(at, at, "ALTER TABLE t ADD c INT")
    assert "cause" not in ddl.to_dict()
    assert SchemaChange.from_dict(ddl.to_dict()).cause is ChangeCause.DDL
    assert ChangeCause.STATEMENT.heals and ChangeCause.PARTIAL_IMAGE.heals
    assert not ChangeCause.UNDECODABLE.heals and not ChangeCause.OPAQUE.heals


def test_a_statement_is_quoted_without_its_values() -> None:
    from cdc_console.mysql.logged_statements import without_literals

    query = (
        "UPDATE `shop`.`c1` SET ssn = 'SSN''12\\'3', n = 12.5e3, h = X'0aff', b = 0x1F, "
        'c = "q" WHERE id IN (1, 2) AND t3 = -4'
    )
    assert without_literals(query) == (
        "UPDATE `shop`.`c1` SET ssn = ?, n = ?, h = ?, b = ?, c = ? WHERE id IN (?, ?) AND t3 = -?"
    )
