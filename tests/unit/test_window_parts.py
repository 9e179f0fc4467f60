"""A binlog window read by several tasks in parts: where it is cut and how the reports merge."""

from __future__ import annotations

from cdc_console.config import config_from_dict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import BinlogSplit
from cdc_console.source.committer import WindowResult
from cdc_console.spark.planner import window_parts
from cdc_console.spark.protocol import BinlogTask, read_controls, window_control

MIB = 1 << 20


def config(server_id: str = "5400-5404", **pipeline: object):  # type: ignore[no-untyped-def]
    return config_from_dict(
        {"source": {"tables": ["shop.orders"], "server_id": server_id}, "pipeline": pipeline}
    )


def window(start: BinlogOffset, end: BinlogOffset) -> BinlogTask:
    return BinlogTask(BinlogSplit(start, end), 5400, ())


def describe(parts: list[BinlogTask]) -> list[str]:
    return [f"{p.server_id}: [{p.split.start}, {p.split.end}) from {p.emit_from}" for p in parts]


def test_a_large_window_is_cut_in_equal_byte_parts_each_read_from_the_window_start() -> None:
    whole = window(BinlogOffset("bin.000003", 4), BinlogOffset("bin.000003", 4 + 10 * MIB))
    parts = window_parts(whole, config())
    # Ids 5401-5402 are the two chunk readers', 5404 is verification's: 5403 is spare.
    assert describe(parts) == [
        "5400: [bin.000003:4, bin.000003:5242884) from None",
        "5403: [bin.000003:4, bin.000003:10485764) from bin.000003:5242884",
    ]
    assert all(p.split.tables == whole.split.tables for p in parts)


def test_a_window_stays_whole_when_small_across_files_or_without_spare_ids() -> None:
    start = BinlogOffset("bin.000003", 4)
    small = window(start, BinlogOffset("bin.000003", 4 + 7 * MIB))
    assert window_parts(small, config()) == [small]
    two_files = window(start, BinlogOffset("bin.000004", 4 + 100 * MIB))
    assert window_parts(two_files, config()) == [two_files]
    large = window(start, BinlogOffset("bin.000003", 4 + 100 * MIB))
    assert window_parts(large, config(binlog_readers=1)) == [large]
    assert window_parts(large, config(server_id="5400-5403")) == [large]
    many = window_parts(large, config(server_id="5400-5410", binlog_readers=4))
    assert [p.server_id for p in many] == [5400, 5403, 5404, 5405]
    cuts = [p.split.end.pos for p in many]
    assert cuts == sorted(cuts) and cuts[-1] == large.split.end.pos
    assert [p.emit_from.pos if p.emit_from else None for p in many] == [None, *cuts[:-1]]
    finer = window_parts(
        small, config(server_id="5400-5410", binlog_part_bytes="1MiB", binlog_readers=3)
    )
    assert len(finer) == 3


def test_the_parts_reports_merge_into_the_whole_windows() -> None:
    early = SchemaChange(BinlogOffset("bin.000003", 900), BinlogOffset("bin.000003", 990), "a")
    late = SchemaChange(BinlogOffset("bin.000003", 5000), BinlogOffset("bin.000003", 5100), "b")
    first = WindowResult({"shop.orders": 3, "shop.items": 1}, 2, {"shop.orders": 10}, {})
    second = WindowResult(
        {"shop.orders": 4},
        5,
        {"shop.orders": 30, "shop.items": 20},
        {"shop.orders": late, "shop.items": late},
    )
    third = WindowResult({}, 0, {}, {"shop.orders": early})
    reports = read_controls([window_control(7, r) for r in (first, second, third)])
    assert reports.batch_numbers == (7,)
    assert reports.window == WindowResult(
        {"shop.orders": 7, "shop.items": 1},
        7,
        {"shop.orders": 30, "shop.items": 20},
        {"shop.orders": early, "shop.items": late},
    )
