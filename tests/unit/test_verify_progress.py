"""A verification under way and its finish-time estimate: kept in the state while it runs,
estimated as a read is, shown by ``status``, the metrics and the console's top bar."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.openmetrics.exposition import generate_latest

from cdc_console.config import load_config
from cdc_console.figures import verify_estimate
from cdc_console.metrics.server import JobMetrics
from cdc_console.state.store import StateStore, VerifyProgress
from cdc_console.status import HeadProbe, collect_status, format_status
from cdc_console.verify.verifier import _told
from tests.tui.canned import HEAD, SERVER_LOGS, build_state, write_config
from tests.unit.test_metrics import samples, value

#: four of eight chunks compared: two in the first 10 s, two in the next 10 s
HALFWAY = VerifyProgress(os.getpid(), 100.0, 8, ((2, 100.0, 110.0), (2, 110.0, 120.0)))


def test_the_state_keeps_the_progress_while_it_runs_and_drops_it_after(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    assert store.verify_progress() is None
    begun = store.begin_verify(8)
    assert (begun.pid, begun.chunks_total, begun.chunks_done) == (os.getpid(), 8, 0)
    noted = store.note_verified(begun, 3, begun.started_at)
    assert store.verify_progress() == noted and noted.chunks_done == 3
    store.end_verify()
    assert store.verify_progress() is None


def test_a_verification_whose_process_is_gone_is_not_under_way(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    store = StateStore(tmp_path / "state.sqlite")
    store.note_verified(replace(store.begin_verify(8), pid=int(gone.stdout)), 2, 0.0)
    assert store.verify_progress() is None


def test_the_estimate_is_the_chunks_left_at_the_pace_of_those_compared() -> None:
    found = verify_estimate(HALFWAY, now=120.0)
    assert (found.chunks_done, found.chunks_total) == (4, 8)
    assert found.finish is not None
    assert found.finish.seconds == pytest.approx(20.0)  # 4 left at 0.2 chunks/s
    assert found.finish.low < 20.0 < found.finish.high
    assert found.describe().startswith("verifying: 4 of 8 chunks, about 20 s left (")
    assert verify_estimate(replace(HALFWAY, groups=HALFWAY.groups[:0]), 120.0).describe() == (
        "verifying: 0 of 8 chunks, no estimate yet"
    )


def test_status_and_metrics_show_the_verification_under_way(tmp_path: Path) -> None:
    config_path = write_config(tmp_path)
    config = load_config(config_path)
    build_state(config.state_path)
    store = StateStore(config.state_path)
    try:
        quiet = collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
        assert quiet.verifying is None
        begun = store.begin_verify(8)
        noted = store.note_verified(begun, 2, time.time() - 20.0)
        store.note_verified(noted, 2, time.time() - 10.0)
        status = collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
        found = samples(
            generate_latest(JobMetrics(config, store, lambda: status).registry).decode()
        )
    finally:
        store.close()
    assert status.verifying is not None
    assert (status.verifying["chunks_done"], status.verifying["chunks_total"]) == (4, 8)
    assert "verifying: 4 of 8 chunks" in format_status(status)
    assert value(found, "cdc_verify_chunks_left") == 4
    expected = value(found, "cdc_verify_finish_seconds", bound="expected")
    assert value(found, "cdc_verify_finish_seconds", bound="low") <= expected
    assert 0 < expected <= value(found, "cdc_verify_finish_seconds", bound="high")


def test_a_progress_the_state_cannot_take_costs_the_estimate_not_the_verification() -> None:
    def locked() -> VerifyProgress:
        raise sqlite3.OperationalError("database is locked")

    assert _told(locked) is None
    assert _told(lambda: HALFWAY) == HALFWAY
