"""A binlog window read by several tasks in parts: where it is cut, how the reports merge and
what of a table is dropped after its change of shape."""

from __future__ import annotations

from cdc_console.config import config_from_dict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.records import ChangeRecord
from cdc_console.core.reports import WindowResult
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import BinlogSplit
from cdc_console.source.reshaped import drop_reshaped
from cdc_console.spark.partitions import BinlogTask
from cdc_console.spark.plan_tasks import window_parts
from cdc_console.spark.protocol import read_controls, window_control

MIB = 1 << 20


def config(server_id: str = "5400-5404", **pipeline: object):  # type: ignore[no-untyped-def]
    return config_from_dict(
        {"source": {"tables": ["shop.orders"], "server_id": server_id}, "pipeline": pipeline}
    )


def window(start: BinlogOffset, end: BinlogOffset) -> BinlogTask:
    return BinlogTask(BinlogSplit(start, end), 5400, ())


class Transactions:
    """Stands in for the server's ``transaction_starts``: transactions start every ``every``
    bytes of one file; remembers the byte positions it was asked about."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.asked: list[list[int]] = []

    def __call__(
        self, start: BinlogOffset, end: BinlogOffset, targets: list[int]
    ) -> list[BinlogOffset]:
        self.asked.append(targets)
        cuts: list[BinlogOffset] = []
        for target in targets:
            pos = -(-target // self.every) * self.every  # the first start at or after it
            if start.pos < pos < end.pos and (not cuts or pos > cuts[-1].pos):
                cuts.append(BinlogOffset(start.file, pos))
        return cuts


def describe(parts: list[BinlogTask]) -> list[str]:
    return [f"{p.server_id}: [{p.split.start}, {p.split.end})" for p in parts]


def test_a_large_window_is_cut_at_transaction_starts_into_parts_of_about_equal_bytes() -> None:
    whole = window(BinlogOffset("bin.000003", 4), BinlogOffset("bin.000003", 4 + 10 * MIB))
    starts = Transactions(every=1000)
    parts = window_parts(whole, config(), starts)
    assert starts.asked == [[4 + 5 * MIB]]
    # Ids 5401-5402 are the two chunk readers', 5404 is verification's: 5403 is spare.
    assert describe(parts) == [
        "5400: [bin.000003:4, bin.000003:5243000)",
        "5403: [bin.000003:5243000, bin.000003:10485764)",
    ]
    assert all(p.split.tables == whole.split.tables for p in parts)


def test_a_window_stays_whole_when_small_across_files_or_without_spare_ids() -> None:
    start = BinlogOffset("bin.000003", 4)
    starts = Transactions(every=1000)
    small = window(start, BinlogOffset("bin.000003", 4 + 3 * MIB))
    assert window_parts(small, config(), starts) == [small]
    two_files = window(start, BinlogOffset("bin.000004", 4 + 100 * MIB))
    assert window_parts(two_files, config(), starts) == [two_files]
    large = window(start, BinlogOffset("bin.000003", 4 + 100 * MIB))
    assert window_parts(large, config(binlog_readers=1), starts) == [large]
    assert window_parts(large, config(server_id="5400-5403"), starts) == [large]
    assert starts.asked == []
    many = window_parts(large, config(server_id="5400-5410", binlog_readers=4), starts)
    assert [p.server_id for p in many] == [5400, 5403, 5404, 5405]
    ends = [p.split.end for p in many]
    assert [p.split.start for p in many] == [start, *ends[:-1]]
    assert ends[-1] == large.split.end
    finer = window_parts(
        small, config(server_id="5400-5410", binlog_part_bytes="1MiB", binlog_readers=3), starts
    )
    assert len(finer) == 3


def test_fewer_parts_when_transactions_are_larger_than_the_parts() -> None:
    large = window(BinlogOffset("bin.000003", 4), BinlogOffset("bin.000003", 4 + 100 * MIB))
    settings = config(server_id="5400-5410", binlog_readers=4)
    # one transaction start in the middle: two parts, not four
    halves = window_parts(large, settings, Transactions(every=60 * MIB))
    assert describe(halves) == [
        "5400: [bin.000003:4, bin.000003:62914560)",
        "5403: [bin.000003:62914560, bin.000003:104857604)",
    ]
    # a window that is one transaction (or whose listing is refused) is read whole
    assert window_parts(large, settings, lambda start, end, targets: []) == [large]


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


def _change(table: str, pos: int, split_id: str = "") -> ChangeRecord:
    return ChangeRecord("shop", table, "+I", f"[{pos}]", "{}", 3, pos, 0, 0, 0, 0, split_id)


def test_a_later_parts_changes_after_a_change_of_shape_are_dropped() -> None:
    """A DDL on shop.orders at 900 in the first part: the later part decoded orders' rows in
    the new shape, which one reader of the whole window would never have emitted."""
    ddl = SchemaChange(BinlogOffset("bin.000003", 900), BinlogOffset("bin.000003", 990), "DDL")
    records = [
        _change("orders", 800),
        _change("items", 950),
        _change("orders", 900),
        _change("orders", 1200),
        _change("orders", 1300, split_id="shop.orders:2"),  # a chunk's row: not the window's
        _change("items", 1400),
    ]
    window = WindowResult({"shop.orders": 3, "shop.items": 2}, 0, {}, {"shop.orders": ddl})
    kept, counted = drop_reshaped(records, window)
    assert [(r.table, r.pos) for r in kept] == [
        ("orders", 800),
        ("items", 950),
        ("orders", 1300),
        ("items", 1400),
    ]
    assert counted == WindowResult({"shop.orders": 1, "shop.items": 2}, 0, {}, {"shop.orders": ddl})


def test_a_window_without_changes_of_shape_keeps_every_change() -> None:
    records = [_change("orders", 800), _change("orders", 900)]
    window = WindowResult({"shop.orders": 2}, 0, {}, {})
    assert drop_reshaped(records, window) == (records, window)
    assert drop_reshaped(records, None) == (records, None)
