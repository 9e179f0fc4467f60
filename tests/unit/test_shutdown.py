"""Draining before a stop: no new plan, the planned batch waited for, an overdue one abandoned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc_console.core.plan import BatchPlan
from cdc_console.spark.shutdown import drain, in_flight
from cdc_console.state.store import StateStore


class FakeQuery:
    def __init__(self, active_trigger: bool = False) -> None:
        self.status: dict[str, Any] = {"isTriggerActive": active_trigger}
        self.isActive = True

    def exception(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def planned(store: StateStore, batch_no: int) -> None:
    store.create_batch(batch_no, BatchPlan(batch_no, ()).to_dict(), [])


def test_nothing_in_flight_stops_at_once_and_sets_the_flag(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    assert in_flight(store, FakeQuery()) is None
    assert drain(store, FakeQuery(), 60) is True
    assert store.draining()
    assert in_flight(store, FakeQuery(active_trigger=True)) == 1  # Spark is mid-trigger


def test_the_planned_batch_is_waited_for_until_it_applies(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    planned(store, 1)
    clock = Clock()
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(clock.now)
        if clock.now >= 1.0:
            with store.transaction() as conn:
                store.mark_applied(1, conn)

    assert in_flight(store, FakeQuery()) == 1
    assert drain(store, FakeQuery(), 60, tick=tick, clock=clock, sleep=clock.sleep) is True
    assert 1.0 <= clock.now < 2.0 and ticks


def test_a_batch_past_the_grace_is_abandoned(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    planned(store, 1)
    clock = Clock()
    assert drain(store, FakeQuery(), 5, clock=clock, sleep=clock.sleep) is False
    assert 5.0 <= clock.now < 5.5
