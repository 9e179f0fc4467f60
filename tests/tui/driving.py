"""Driving the console in tests: wait for polls, read what is on screen, read the queue."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console
from textual.pilot import Pilot

from cdc_console.tui.app import ConsoleApp

SIZE = (150, 42)
#: How long a test waits for the console to get somewhere: generous, since the suite runs two
#: workers on two cores beside Spark jobs; a wait that passes costs only what it takes.
WAIT_SECONDS = 20.0


async def settle(pilot: Pilot[None], polls: int = 2, pipeline: str | None = None) -> None:
    """Wait until ``polls`` more state polls of ``pipeline`` reached the screen, the first
    after the first server probe (so the server's head is part of what is shown)."""
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    name = pipeline or app.current
    await until(pilot, lambda: app.probes[name] >= 1, f"the first probe of {name}")
    target = app.refreshes[name] + polls
    deadline = time.monotonic() + WAIT_SECONDS
    while app.refreshes[name] < target:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: no refresh arrived (errors: {app.poll_errors(name)})")
        await pilot.pause(0.01)
    await pilot.pause()


async def until(
    pilot: Pilot[None], condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def screen_text(app: ConsoleApp) -> str:
    """The screen as plain text, the way ``export_screenshot`` renders it."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def notifications(app: ConsoleApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]
