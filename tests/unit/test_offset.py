from __future__ import annotations

import pytest

from cdc_console.core.offset import BinlogOffset, binlog_file_index


def test_orders_across_rotation_by_numeric_suffix() -> None:
    offsets = [
        BinlogOffset("binlog.1000000", 4),
        BinlogOffset("binlog.000002", 120),
        BinlogOffset("binlog.000002", 4),
        BinlogOffset("binlog.999999", 9_000_000),
    ]
    assert [str(o) for o in sorted(offsets)] == [
        "binlog.000002:4",
        "binlog.000002:120",
        "binlog.999999:9000000",
        "binlog.1000000:4",
    ]


def test_orders_inside_multi_row_events() -> None:
    a = BinlogOffset("binlog.000003", 500)
    b = BinlogOffset("binlog.000003", 500, events_to_skip=0, rows_to_skip=2)
    c = BinlogOffset("binlog.000003", 500, events_to_skip=1, rows_to_skip=0)
    assert a < b < c
    assert c.at_event_boundary() == a
    assert str(b) == "binlog.000003:500+0e2r"


def test_gtid_is_carried_but_not_ordered() -> None:
    a = BinlogOffset("binlog.000001", 10, gtid="0-1-5")
    b = BinlogOffset("binlog.000001", 10, gtid="0-1-9")
    assert a == b and hash(a) == hash(b)


def test_canonical_dict_round_trip() -> None:
    offset = BinlogOffset("mysql-bin.000007", 1234, 2, 3, gtid="0-1-77")
    assert offset.to_dict() == {
        "file": "mysql-bin.000007",
        "pos": 1234,
        "events": 2,
        "rows": 3,
        "gtid": "0-1-77",
    }
    assert BinlogOffset.from_dict(offset.to_dict()) == offset
    assert BinlogOffset("b.000001", 4).to_dict() == {"file": "b.000001", "pos": 4}


def test_rejects_malformed_offsets() -> None:
    with pytest.raises(ValueError, match="not a binlog file name"):
        BinlogOffset("binlog", 4)
    with pytest.raises(ValueError, match="negative"):
        BinlogOffset("binlog.000001", -1)
    assert binlog_file_index("x.000042") == 42
