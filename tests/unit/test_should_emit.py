"""``should_emit``: a change is emitted only after the high watermark of the chunk owning its key."""

from __future__ import annotations

import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.keys import KeyOrder
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import ColumnInfo, TableId
from cdc_console.core.schema_change import ChangeCause
from cdc_console.core.splits import FinishedSnapshotSplitInfo, SnapshotSplit, TableStreamFilter
from cdc_console.source.binlog_reader import SplitWatermarks, UnplacedKey, should_emit

T = TableId("shop", "orders")


def at(pos: int, rows: int = 0, file: str = "binlog.000001") -> BinlogOffset:
    return BinlogOffset(file, pos, 0, rows)


def finished(no: int, start: object, end: object, hw: int) -> FinishedSnapshotSplitInfo:
    return FinishedSnapshotSplitInfo(SnapshotSplit(T, no, "id", ChunkRange(start, end)), at(hw))


INT_ORDER = KeyOrder.for_column(ColumnInfo("id", "int", "int(11)"))
SPLITS = (finished(0, None, 100, 1000), finished(1, 100, 200, 3000), finished(2, 200, None, 2000))


def marks(resume_from: BinlogOffset | None = None) -> SplitWatermarks:
    return SplitWatermarks(TableStreamFilter(T, resume_from or at(1000), SPLITS), INT_ORDER)


def test_change_before_its_chunks_high_watermark_is_already_in_the_snapshot() -> None:
    m = marks()
    assert not should_emit(m, at(2500), 150)  # chunk [100, 200) finished at 3000
    assert should_emit(m, at(2500), 50)  # chunk (-inf, 100) finished at 1000
    assert should_emit(m, at(2500), 250)  # chunk [200, +inf) finished at 2000


def test_change_exactly_at_the_high_watermark_is_emitted() -> None:
    m = marks()
    assert should_emit(m, at(3000), 150)
    assert not should_emit(m, at(2999), 150)


def test_chunk_boundaries_are_half_open() -> None:
    m = marks()
    assert should_emit(m, at(1500), 99)
    assert not should_emit(m, at(1500), 100)
    assert not should_emit(m, at(1500), 199)
    assert not should_emit(m, at(1500), 200)  # [200, +inf) finished at 2000
    assert should_emit(m, at(2000), 200)


def test_after_the_largest_high_watermark_everything_streams() -> None:
    m = marks()
    for key in (-(10**12), 0, 150, 10**12):
        assert should_emit(m, at(3000, rows=5), key)
        assert should_emit(m, at(1, file="binlog.000002"), key)


def test_changes_before_the_resume_position_were_already_delivered() -> None:
    m = marks(resume_from=at(3500))
    assert not should_emit(m, at(3400), 50)
    assert should_emit(m, at(3500), 50)


def test_string_keys_are_placed_in_the_servers_collation_order() -> None:
    column = ColumnInfo("code", "varchar", "varchar(10)", collation="utf8mb4_general_ci")
    order = KeyOrder.for_column(column)
    splits = (
        FinishedSnapshotSplitInfo(SnapshotSplit(T, 0, "code", ChunkRange(None, "b")), at(100)),
        FinishedSnapshotSplitInfo(SnapshotSplit(T, 1, "code", ChunkRange("b", None)), at(900)),
    )
    m = SplitWatermarks(TableStreamFilter(T, at(100), splits), order)
    # In Python 'B' < 'a', but under utf8mb4_general_ci 'a' < 'b' <= 'B'.
    assert not should_emit(m, at(500), "B")  # owned by [b, +inf), finished at 900
    assert should_emit(m, at(500), "a")  # owned by (-inf, b), finished at 100
    assert not should_emit(m, at(500), "Zebra")


def test_a_key_no_finished_chunk_owns_is_never_passed_over_in_silence() -> None:
    """Chunks always cover the key space; a key none owns (a gap left by a bug, an order that
    disagrees with the server's) raises, and the reader holds the table to read it again."""
    gapped = (finished(0, None, 100, 1000), finished(2, 200, None, 2000))
    m = SplitWatermarks(TableStreamFilter(T, at(1000), gapped), INT_ORDER)
    with pytest.raises(UnplacedKey, match="150"):
        should_emit(m, at(1500), 150)
    assert should_emit(m, at(1500), 50)
    # a NULL chunk key is the first chunk's (it sorts first, as in the server's ORDER BY)
    assert should_emit(m, at(1500), None) and not should_emit(m, at(900), None)
    assert ChangeCause.UNPLACED.heals


def test_a_key_of_a_chunk_being_read_again_is_that_reads() -> None:
    """A chunk repaired while its table catches up is pending, not finished: a change on its
    keys is passed over (the chunk's read holds it); one outside every chunk still raises."""
    gapped = (finished(0, None, 100, 1000), finished(2, 200, 300, 2000))
    pending = (ChunkRange(100, 200),)
    m = SplitWatermarks(TableStreamFilter(T, at(1000), gapped, pending), INT_ORDER)
    assert not should_emit(m, at(1500), 150)
    with pytest.raises(UnplacedKey, match="350"):
        should_emit(m, at(1500), 350)
    again = TableStreamFilter.from_dict(TableStreamFilter(T, at(1), gapped, pending).to_dict())
    assert again.pending_ranges == pending
