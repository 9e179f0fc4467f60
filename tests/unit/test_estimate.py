"""Finish-time estimates of chunk reads, and their verdict against the binlog's expiry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.estimate import (
    ChunkTiming,
    FinishEstimate,
    estimate_finish,
    fits_expiry,
)
from cdc_console.core.lifecycle import BatchStatus, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan, ChunkBatchTiming, PlannedSplit
from cdc_console.core.schema import TableId
from cdc_console.core.splits import BinlogSplit, SnapshotSplit, TableStreamFilter
from cdc_console.figures import (
    ReadPacing,
    ReadVerdict,
    added_table_forecast,
    read_estimates,
    redump_forecast,
)
from cdc_console.state.rows import offset_json
from cdc_console.state.store import StateStore
from cdc_console.status import finish_note


def steady(chunks: int, seconds_each: float, start: float = 1000.0) -> list[ChunkTiming]:
    """Chunks read one after the other, each taking ``seconds_each``, 100 rows each."""
    return [
        ChunkTiming(start + i * seconds_each, start + (i + 1) * seconds_each, 100)
        for i in range(chunks)
    ]


def test_a_steady_read_is_estimated_at_its_pace_with_the_least_spread() -> None:
    found = estimate_finish(steady(10, 2.0), chunks_left=30)
    assert found is not None
    assert found.seconds == pytest.approx(60.0)
    assert found.low == pytest.approx(54.0) and found.high == pytest.approx(66.0)
    assert found.pace == pytest.approx(0.5)


def test_a_read_that_slowed_down_widens_the_range_toward_its_recent_pace() -> None:
    # five chunks at 1 s, then five at 3 s: the whole read's pace says 2 s a chunk, the
    # recent one 3 s
    fast = steady(5, 1.0)
    slow = steady(5, 3.0, start=fast[-1].finished_at)
    found = estimate_finish(fast + slow, chunks_left=10)
    assert found is not None
    assert found.seconds == pytest.approx(20.0)
    assert found.low == pytest.approx(18.0)
    assert found.high == pytest.approx(33.0)


def test_time_since_the_last_chunk_is_spent_up_to_one_chunks_time() -> None:
    done = steady(4, 5.0)
    found = estimate_finish(done, chunks_left=2, now=done[-1].finished_at + 4)
    assert found is not None and found.seconds == pytest.approx(6.0)
    # stalled for a minute (a job stopped, a busy source): one chunk's time off, no more
    late = estimate_finish(done, chunks_left=2, now=done[-1].finished_at + 60)
    assert late is not None and late.seconds == pytest.approx(5.0)


def test_too_few_chunks_give_no_estimate_and_nothing_left_is_done() -> None:
    assert estimate_finish(steady(1, 2.0), chunks_left=5) is None
    assert estimate_finish([], chunks_left=0) == FinishEstimate(0.0, 0.0, 0.0, 0, 0.0)


def test_chunks_of_one_batch_finishing_together_are_a_fast_read() -> None:
    together = [ChunkTiming(10.0, 12.0, 100), ChunkTiming(10.0, 12.0, 100)]
    found = estimate_finish(together, chunks_left=4)
    assert found is not None and found.seconds == pytest.approx(4.0)


def test_a_read_fits_the_expiry_only_with_its_margin() -> None:
    estimate = FinishEstimate(100.0, 90.0, 120.0, 10, 0.1)
    assert fits_expiry(estimate, None)  # the server never expires its binlog
    assert fits_expiry(estimate, 180.0)  # 120 s x 1.5 = 180 s
    assert not fits_expiry(estimate, 179.0)


def test_the_verdict_says_what_it_compared() -> None:
    estimate = FinishEstimate(100.0, 90.0, 120.0, 10, 0.1)
    assert ReadVerdict(estimate, 604800.0, "binlog_expire_logs_seconds=604800").describe() == (
        "the read takes about 1 min (1 min to 2 min); the server keeps a binlog 7 d 0 h "
        "(binlog_expire_logs_seconds=604800): it fits"
    )
    refused = ReadVerdict(estimate, 60.0, "binlog_expire_logs_seconds=60")
    assert not refused.fits
    assert refused.describe().startswith(
        "the read may take about 1 min (1 min to 2 min), and the server keeps a binlog 1 min "
        "(binlog_expire_logs_seconds=60): with a 1.5x margin it does not fit"
    )
    assert ReadVerdict(None, 60.0, "x").fits


def test_a_reading_table_notes_its_time_left() -> None:
    assert finish_note(FinishEstimate(190.0, 170.0, 220.0, 12, 0.1)) == "3 min left ±25 s"
    assert finish_note(FinishEstimate(0.0, 0.0, 0.0, 0, 0.0)) == ""
    assert finish_note(None) == "time left: after two chunks"


ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")


def read_chunks(
    store: StateStore, table_id: TableId, chunks: int, done: int, seconds_each: float
) -> None:
    """``chunks`` chunks of ``table_id``, the first ``done`` finished ``seconds_each`` apart."""
    splits = [
        SnapshotSplit(table_id, i, "id", ChunkRange(i * 100 or None, (i + 1) * 100))
        for i in range(chunks)
    ]
    store.add_splits(table_id, splits)
    for i, split in enumerate(splits[:done]):
        with store.transaction() as conn:
            conn.execute(
                "UPDATE splits SET status = 'FINISHED', rows = 100, started_at = ?, "
                "finished_at = ?, high_watermark = ? WHERE table_id = ? AND split_no = ?",
                (
                    1000.0 + i * seconds_each,
                    1000.0 + (i + 1) * seconds_each,
                    offset_json(BinlogOffset("binlog.000001", 4 + i)),
                    str(table_id),
                    split.split_no,
                ),
            )


def test_the_pipeline_estimates_each_reading_table_and_all_of_them(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    store.ensure_table(USERS, "id", Lifecycle.SNAPSHOTTING)
    read_chunks(store, ORDERS, chunks=10, done=4, seconds_each=2.0)
    read_chunks(store, USERS, chunks=3, done=1, seconds_each=2.0)
    found = read_estimates(store, store.tables(), now=1008.0)
    orders = found.tables[ORDERS]
    assert orders is not None and orders.chunks_left == 6
    assert orders.seconds == pytest.approx(12.0)
    assert found.tables[USERS] is None  # one chunk done: no pace yet
    assert found.total is not None and found.total.chunks_left == 8

    # a re-dump of orders takes as long as its last read of all ten chunks would
    forecast = redump_forecast(store, ORDERS, PACING)
    assert forecast is not None and forecast.seconds == pytest.approx(20.0)
    # an added table of 1,000 rows (ten chunks of 100) at the latest read's pace
    added = added_table_forecast(store, 1_000, PACING)
    assert added is not None and added.chunks_left == 10
    assert added.seconds == pytest.approx(20.0)


def test_a_table_not_split_yet_leaves_the_total_unknown(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    store.ensure_table(USERS, "id", Lifecycle.SNAPSHOTTING)
    read_chunks(store, ORDERS, chunks=10, done=4, seconds_each=2.0)
    found = read_estimates(store, store.tables(), now=1008.0)
    assert found.tables[USERS] is None and found.total is None
    assert added_table_forecast(StateStore(tmp_path / "empty.sqlite"), 1_000, PACING) is None


LIVE = TableId("shop", "live")
PACING = ReadPacing(BatchBudget(1.0, floor=1, ceiling=64), trigger_seconds=0.5)


def applied_batch(
    store: StateStore,
    no: int,
    seconds: float,
    chunks: int = 0,
    *,
    replace: bool = False,
    budget: float | None = 1.0,
) -> None:
    """An applied batch of ``chunks`` chunks of orders (re-dump chunks when ``replace``),
    planned under the chunk budget ``budget`` (None: none), ``seconds`` from planned to
    applied, with live streaming in its binlog window."""
    at = BinlogOffset("binlog.000001", 4)
    plan = BatchPlan(
        no,
        tuple(
            PlannedSplit(
                SnapshotSplit(ORDERS, i, "id", ChunkRange(i * 100, (i + 1) * 100)), 5401, replace
            )
            for i in range(chunks)
        ),
        BinlogSplit(at, at, (TableStreamFilter(LIVE, at),)),
        5400,
        at,
        budget_seconds=budget if chunks else None,
    )
    store.create_batch(no, plan.to_dict(), [], plan_seconds=0.0)
    with store.transaction() as conn:
        conn.execute(
            "UPDATE batches SET status = ?, created_at = ?, applied_at = ? WHERE batch_no = ?",
            (BatchStatus.APPLIED, 100.0 * no, 100.0 * no + seconds, no),
        )


def streaming_beside(tmp_path: Path) -> StateStore:
    """orders read once (ten chunks of 0.2 s, 100 rows each) and streaming, as live does."""
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    read_chunks(store, ORDERS, chunks=10, done=10, seconds_each=0.2)
    store.ensure_table(LIVE, "id", Lifecycle.STREAMING)
    return store


def test_the_state_tells_chunk_batches_by_kind_and_budget(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    applied_batch(store, 1, 3.0, chunks=64, budget=None)  # a first snapshot's
    applied_batch(store, 2, 0.3)  # streaming only
    applied_batch(store, 3, 0.9, chunks=1, replace=True)  # a re-dump's, under the budget
    assert [replace(b, seconds=round(b.seconds, 6)) for b in store.chunk_batch_timings(10)] == [
        ChunkBatchTiming(1, replacing=True, budget_seconds=1.0, seconds=0.9),
        ChunkBatchTiming(64, replacing=False, budget_seconds=None, seconds=3.0),
    ]


def test_a_redump_beside_a_streaming_table_before_any_budgeted_batch_is_a_floor(
    tmp_path: Path,
) -> None:
    store = streaming_beside(tmp_path)
    for no in range(1, 6):
        applied_batch(store, no, 0.4)
    # its last read went at 0.2 s a chunk; alone in a batch a chunk costs more than that, so
    # only the floor is known: one chunk a batch, each at least a trigger (0.5 s) or the
    # streaming batch (0.4 s) plus the chunk's share (0.2 s)
    forecast = redump_forecast(store, ORDERS, PACING)
    assert forecast is not None and forecast.at_least
    assert forecast.seconds == pytest.approx(10 * 0.6)
    verdict = ReadVerdict(forecast, 604800.0, "binlog_expire_logs_seconds=604800")
    assert verdict.describe().startswith("the read takes at least 6.0 s (no read of its kind under")
    # without a table streaming beside it, the read runs as its last one did
    unpaced = redump_forecast(store, ORDERS, replace(PACING, budget=BatchBudget(0, 1, 64)))
    assert unpaced is not None and not unpaced.at_least
    assert unpaced.seconds == pytest.approx(2.0)


def test_a_redump_goes_at_the_pace_of_the_budgeted_redump_batches_measured_last(
    tmp_path: Path,
) -> None:
    store = streaming_beside(tmp_path)
    for no, seconds in enumerate((0.4, 0.9, 1.1, 0.9, 1.4), start=1):
        applied_batch(store, no, seconds, chunks=1, replace=True)
    forecast = redump_forecast(store, ORDERS, PACING)
    assert forecast is not None and not forecast.at_least
    # 4.7 s for five chunks, the first batch counted as the trigger it took at the least
    assert forecast.seconds == pytest.approx(10 * 4.8 / 5)
    # the range: the quartiles of the batches' seconds per chunk (0.9 s and 1.1 s), or 10%
    assert forecast.low == pytest.approx(9.6 * 0.9)
    assert forecast.high == pytest.approx(10 * 1.1)


def test_batches_of_a_larger_budget_do_not_pace_a_budgeted_read(tmp_path: Path) -> None:
    store = streaming_beside(tmp_path)
    # a re-dump with no cap: all ten chunks in one 4 s batch, beside the streaming table
    applied_batch(store, 1, 4.0, chunks=10, replace=True, budget=None)
    # and one under a budget of 3 s
    applied_batch(store, 2, 3.5, chunks=3, replace=True, budget=3.0)
    forecast = redump_forecast(store, ORDERS, PACING)
    assert forecast is not None and forecast.at_least


def test_an_added_table_is_paced_by_filling_batches_and_a_redump_not(tmp_path: Path) -> None:
    store = streaming_beside(tmp_path)
    for no in range(1, 5):
        applied_batch(store, no, 1.0, chunks=1)  # an added table's chunks, under the budget
    added = added_table_forecast(store, 1_000, PACING)
    assert added is not None and not added.at_least and added.seconds == pytest.approx(10.0)
    # filling a new mirror costs less than replacing a mirror's rows: for a re-dump, a floor
    redump = redump_forecast(store, ORDERS, PACING)
    assert redump is not None and redump.at_least and redump.seconds == pytest.approx(10.0)
