"""Fixtures for the console tests: UTC clock display, a canned pipeline in a fresh directory."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_console.tui.data.monitor import PipelineMonitor
from tests.tui.canned import CannedJobs, CannedServer, canned_pipeline

ASYNC_TEST_TIMEOUT = 60.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests (Pilot needs an event loop) without an asyncio plugin."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    marker = pyfuncitem.get_closest_marker("timeout")
    timeout = float(marker.args[0]) - 5 if marker else ASYNC_TEST_TIMEOUT
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), timeout))
    return True


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times render in UTC whatever the machine's zone, so snapshots match everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def server() -> CannedServer:
    return CannedServer()


@pytest.fixture
def jobs() -> CannedJobs:
    return CannedJobs()


@pytest.fixture
def shop(workdir: Path, server: CannedServer, jobs: CannedJobs) -> PipelineMonitor:
    return canned_pipeline(workdir, server=server, jobs=jobs)
