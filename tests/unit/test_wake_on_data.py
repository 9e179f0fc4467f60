"""``[spark] wake_on_data``: the planner waits for the binlog to move, looking at its head every
50 ms while it moves and backing off to 0.4 s while it does not, and plans as soon as it can."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.config import config_from_dict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.spark import planner as planner_module
from cdc_console.spark.planner import WAKE_POLL_LONGEST_SECONDS, WAKE_POLL_SECONDS, Planner


class Clock:
    """``time.sleep`` and ``time.monotonic`` for the planner: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 3))
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **spark: object) -> Planner:
    config = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "spark": {"trigger_seconds": 2, **spark}},
        base=tmp_path,
    )
    return Planner(config)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(planner_module.time, "sleep", found.sleep)
    monkeypatch.setattr(planner_module.time, "monotonic", found.monotonic)
    return found


def test_an_idle_binlog_is_looked_at_less_and_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    found = planner(tmp_path, monkeypatch)
    monkeypatch.setattr(found, "next_plan", lambda: None)
    monkeypatch.setattr(found, "_quick_head", lambda: BinlogOffset("binlog.000001", 4))
    assert found.wait_for_plan() is None
    # 50, 100, 200, 400 ms, then 400 ms until the trigger's 2 s are over
    assert clock.sleeps == [0.05, 0.1, 0.2, 0.4, 0.4, 0.4, 0.4, 0.05]
    assert found.wait_for_plan() is None
    assert clock.sleeps[8:10] == [WAKE_POLL_LONGEST_SECONDS, WAKE_POLL_LONGEST_SECONDS]


def test_a_moving_binlog_is_looked_at_soon_and_planned_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    found = planner(tmp_path, monkeypatch)
    found._wake_poll = WAKE_POLL_LONGEST_SECONDS  # idle before
    plan = BatchPlan(1, (), None, 5400, None)
    # the head as each look finds it: standing, then moved (the batch in flight still holds
    # the next plan), then moved again (planned)
    heads = iter([4, 4, 200, 300])
    plans = iter([None, None, plan])
    monkeypatch.setattr(found, "_quick_head", lambda: BinlogOffset("binlog.000001", next(heads)))
    monkeypatch.setattr(found, "next_plan", lambda: next(plans))
    assert found.wait_for_plan() is plan
    # after the head moved it is looked at again 50 ms later, not after the idle back-off
    assert clock.sleeps == [WAKE_POLL_LONGEST_SECONDS, WAKE_POLL_LONGEST_SECONDS, WAKE_POLL_SECONDS]


def test_without_wake_on_data_the_planner_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    found = planner(tmp_path, monkeypatch, wake_on_data=False)
    monkeypatch.setattr(found, "next_plan", lambda: None)
    assert found.wait_for_plan() is None
    assert clock.sleeps == []
