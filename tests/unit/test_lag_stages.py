"""Where the lag is: each batch's cycle cut into stages that add up to the time covered."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cdc_console.core.lifecycle import BatchStatus
from cdc_console.figures import LagStage, change_stages, lag_stages
from cdc_console.state.rows import AppliedBatch
from cdc_console.state.store import StateStore


def batch(
    no: int,
    created: float,
    staged: float | None,
    applied: float | None,
    plan: float = 0.0,
    held: float = 0.0,
) -> AppliedBatch:
    return AppliedBatch(no, created, plan, staged, held, applied)


def test_each_cycle_is_cut_at_its_planning_staging_and_commit() -> None:
    batches = [
        batch(1, 90.0, 91.0, 100.0),
        # waits 1 s for its trigger, plans 0.5 s, reads 2 s, waits 3 s for maintenance, commits 1 s
        batch(2, 101.5, 103.5, 107.5, plan=0.5, held=3.0),
        batch(3, 108.0, 108.5, 110.0, plan=0.2),
    ]
    found = lag_stages(batches, now=110.0)
    assert found.seconds == pytest.approx(
        {
            LagStage.TRIGGER: 1.0 + 0.3,
            LagStage.SERVER: 0.5 + 0.2,
            LagStage.READ: 2.0 + 0.5,
            LagStage.SPARK: 0.0,  # the tasks did not time themselves
            LagStage.MAINTENANCE: 3.0,
            LagStage.COMMIT: 1.0 + 1.5,
        }
    )
    assert found.covered == pytest.approx(10.0)  # from batch 1's commit to batch 3's
    assert found.describe() == "lake maintenance took 3.0 s of the last 10 s"


def test_the_batch_in_flight_counts_up_to_now_in_the_stage_it_is_in() -> None:
    stuck_in_commit = [batch(1, 0.0, 1.0, 2.0), batch(2, 3.0, 4.0, None)]
    found = lag_stages(stuck_in_commit, now=44.0)
    assert found.seconds[LagStage.COMMIT] == pytest.approx(40.0)
    assert found.covered == pytest.approx(42.0)
    assert found.describe() == "the sink's commit took 40 s of the last 42 s"
    reading = lag_stages([batch(1, 0.0, 1.0, 2.0), batch(2, 3.0, None, None)], now=13.0)
    assert reading.seconds[LagStage.READ] == pytest.approx(10.0)


def test_only_the_window_counts_and_overlapping_batches_count_once() -> None:
    long_ago = batch(1, 0.0, 1.0, 2.0)
    # planned while batch 1 was still applied (plan past): its time before 2.0 is batch 1's
    overlapping = batch(2, 1.5, 3.0, 4.0)
    found = lag_stages([long_ago, overlapping], now=4.0, window=1.5)
    assert found.covered == pytest.approx(1.5)  # 2.5 .. 4.0
    assert found.seconds[LagStage.READ] == pytest.approx(0.5)
    assert found.seconds[LagStage.COMMIT] == pytest.approx(1.0)
    assert lag_stages([long_ago], now=100.0).describe() == "no batch in the last minute"


def test_the_state_gives_the_batches_around_the_window(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    for no in (1, 2, 3):
        store.create_batch(no, {"batch_no": no}, [], plan_seconds=0.25)
    with store.transaction() as conn:
        for no, applied in ((1, 10.0), (2, 20.0)):
            conn.execute(
                "UPDATE batches SET status = ?, staged_at = ?, applied_at = ? WHERE batch_no = ?",
                (BatchStatus.APPLIED, applied - 1, applied, no),
            )
    store.note_held(2, 0.5)
    found = store.applied_batches(since=15.0)
    assert [(b.batch_no, b.applied_at, b.held_seconds) for b in found] == [
        (1, 10.0, 0.0),
        (2, 20.0, 0.5),
        (3, None, 0.0),
    ]
    assert found[0].plan_seconds == 0.25


def test_a_changes_stages_run_from_its_write_to_its_batchs_commit() -> None:
    # written at 100.2, while the batch before was being applied; the next batch began planning
    # at 101.0 (planned at 101.25), was staged at 102.0, waited 0.25 s for maintenance and was
    # applied at 102.5
    applied = batch(2, created=101.25, plan=0.25, staged=102.0, held=0.25, applied=102.5)
    found = change_stages(100.2, applied)
    assert found.covered == pytest.approx(2.3)
    assert {s.key: round(v, 3) for s, v in found.seconds.items()} == {
        "trigger": 0.8,
        "server": 0.25,
        "read": 0.75,
        "spark": 0.0,
        "maintenance": 0.25,
        "commit": 0.25,
    }
    # a change written while its batch was being planned waited only for the rest of it
    during = change_stages(101.1, applied)
    assert during.seconds[LagStage.TRIGGER] == 0.0
    assert during.seconds[LagStage.SERVER] == pytest.approx(0.15)
    assert during.covered == pytest.approx(1.4)


def test_the_commit_is_split_by_table_and_the_largest_named() -> None:
    batches = [
        batch(1, 90.0, 91.0, 100.0),
        # commits 8 s: the sink timed orders at 6 s and users at 2 s
        replace(
            batch(2, 101.0, 102.0, 110.0), table_seconds={"shop.orders": 6.0, "shop.users": 2.0}
        ),
    ]
    found = lag_stages(batches, now=110.0)
    assert found.seconds[LagStage.COMMIT] == pytest.approx(8.0)
    assert found.commit_by_table == pytest.approx({"shop.orders": 6.0, "shop.users": 2.0})
    assert found.describe() == "the sink's commit took 8.0 s of the last 10 s (shop.orders 6.0 s)"
    assert found.to_dict()["commit_by_table"] == {"shop.orders": 6.0, "shop.users": 2.0}
    # a window that sees only half the commit counts half of each table's
    half = lag_stages(batches, now=110.0, window=4.0)
    assert half.commit_by_table == pytest.approx({"shop.orders": 3.0, "shop.users": 1.0})


def test_the_state_keeps_each_tables_commit_time(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.create_batch(1, {"batch_no": 1}, [], plan_seconds=0.1)
    store.note_table_seconds(1, {"shop.orders": 1.23456})
    assert store.applied_batches(since=0.0)[0].table_seconds == {"shop.orders": 1.235}


def test_the_read_stage_is_split_into_our_readers_time_and_sparks() -> None:
    # planned at 101, staged at 105: the longest task spent 1 s in our readers, so 3 s of the
    # 4 s were Spark's (scheduling, the Arrow hop into the JVM, staging)
    read = replace(batch(2, 101.0, 105.0, 106.0), read_seconds=1.0)
    found = lag_stages([batch(1, 90.0, 91.0, 100.0), read], now=106.0)
    assert found.seconds[LagStage.READ] == pytest.approx(1.0)
    assert found.seconds[LagStage.SPARK] == pytest.approx(3.0)
    assert found.covered == pytest.approx(6.0)
    assert found.describe() == "Spark's batch took 3.0 s of the last 6.0 s"
    assert found.to_dict()["spark_seconds"] == 3.0
    # a window that sees half of the span counts half of each share
    half = lag_stages([batch(1, 90.0, 91.0, 100.0), read], now=106.0, window=3.0)
    assert half.seconds[LagStage.READ] == pytest.approx(0.5)
    assert half.seconds[LagStage.SPARK] == pytest.approx(1.5)
    # not staged yet, or not measured: all of it counts as reading
    reading = replace(batch(2, 101.0, None, None), read_seconds=1.0)
    assert lag_stages([batch(1, 90.0, 91.0, 100.0), reading], now=103.0).seconds == pytest.approx(
        {**dict.fromkeys(LagStage, 0.0), LagStage.TRIGGER: 1.0, LagStage.READ: 2.0}
    )
    # a task clock that ran past the span (clocks apart) leaves Spark no negative share
    over = replace(batch(2, 101.0, 102.0, 103.0), read_seconds=5.0)
    found = lag_stages([batch(1, 90.0, 91.0, 100.0), over], now=103.0)
    assert found.seconds[LagStage.SPARK] == 0.0
    assert found.seconds[LagStage.READ] == pytest.approx(1.0)


def test_the_state_keeps_the_read_seconds_of_a_staged_batch(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.create_batch(1, {"batch_no": 1}, [], plan_seconds=0.1)
    store.create_batch(2, {"batch_no": 2}, [], plan_seconds=0.1)
    store.mark_staged(1, str(tmp_path / "batch-1.parquet"), 3, read_seconds=0.75)
    store.mark_staged(2, str(tmp_path / "batch-2.parquet"), 3)
    assert [b.read_seconds for b in store.applied_batches(since=0.0)] == [0.75, None]
