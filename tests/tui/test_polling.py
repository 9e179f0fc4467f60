"""The console's polls keep going when the event loop is held up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import textual._time
from textual.app import App

from cdc_console.tui.polling import one_shot

STALLED = "stalled-timer"


def clock_stalling_in(task_name: str, stall: float) -> Callable[[], float]:
    """The monotonic clock, except that inside the task named ``task_name`` every look is
    ``stall`` seconds later than the one before: that task's loop is held up between looks."""
    offset = 0.0

    def get_time() -> float:
        nonlocal offset
        task = asyncio.current_task()
        if task is not None and task.get_name() == task_name:
            offset += stall
        return time.monotonic() + offset

    return get_time


async def fires(schedule: Callable[[App[None], Callable[[], None]], object]) -> bool:
    fired: list[bool] = []
    app: App[None] = App()
    async with app.run_test() as pilot:
        schedule(app, lambda: fired.append(True))
        for _ in range(100):
            await pilot.pause(0.01)
            if fired:
                break
    return bool(fired)


async def test_a_one_shot_fires_even_when_the_loop_was_held_up_longer_than_its_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(textual._time, "get_time", clock_stalling_in(STALLED, 0.1))
    # The trap avoided: Textual's own set_timer drops its only tick under such a stall.
    assert not await fires(lambda app, callback: app.set_timer(0.05, callback, name=STALLED))
    assert await fires(lambda app, callback: one_shot(app, 0.05, callback, name=STALLED))
    assert await fires(lambda app, callback: one_shot(app, 0.05, callback))
