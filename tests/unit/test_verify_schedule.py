"""``[verify] every``: when the job starts a verification, and that it never starts two."""

from __future__ import annotations

from pathlib import Path

from cdc_console.config import config_from_dict
from cdc_console.core.lifecycle import Lifecycle, Verdict
from cdc_console.core.schema import TableId
from cdc_console.spark.verify_schedule import VerifySchedule
from cdc_console.state.store import StateStore, VerificationRow

ORDERS = TableId("shop", "orders")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_verification_starts_every_period_after_the_last_and_never_twice(
    tmp_path: Path,
) -> None:
    doc = {
        "source": {"user": "cdc", "password_env": "X", "tables": ["shop.*"]},
        "state": {"path": str(tmp_path / "state.sqlite")},
        "verify": {"every": "1h"},
    }
    config = config_from_dict(doc, base=tmp_path, path=tmp_path / "pipeline.toml")
    store = StateStore(config.state_path)
    clock = Clock()
    launched: list[float] = []
    running: set[int] = set()

    def launch(config_path: Path, log_path: Path) -> int:
        assert config_path == tmp_path / "pipeline.toml"
        launched.append(clock.now)
        running.add(len(launched))
        return len(launched)

    try:
        schedule = VerifySchedule(
            config, store, clock=clock, launch=launch, alive=running.__contains__
        )
        store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
        clock.now += 3_601
        assert schedule.tick() is None  # nothing streams yet: nothing to verify
        with store.transaction() as conn:
            store.move_table(ORDERS, conn, Lifecycle.CATCHING_UP)
            store.move_table(ORDERS, conn, Lifecycle.STREAMING)
        clock.now += 11
        assert schedule.tick() == 1
        clock.now += 3_700
        assert schedule.tick() is None  # still running
        running.clear()
        verdict = VerificationRow(ORDERS, 0, clock.now, None, Verdict.EQUAL, 10, 0, 0, 0, {})
        store.record_verification(verdict)
        clock.now += 1_800
        assert schedule.tick() is None  # half an hour after the last verdict
        clock.now += 1_801
        assert schedule.tick() == 2
        assert [e.message.split(":")[0] for e in store.events(10) if e.kind == "verify"] == [
            "scheduled verification started (every 1 h 00 min)"
        ] * 2
    finally:
        store.close()


def test_off_by_default(tmp_path: Path) -> None:
    doc = {"source": {"user": "cdc", "password_env": "X", "tables": ["shop.*"]}}
    config = config_from_dict(doc, base=tmp_path, path=tmp_path / "pipeline.toml")
    store = StateStore(tmp_path / "state.sqlite")
    try:
        schedule = VerifySchedule(config, store, launch=lambda *_: 1 / 0)
        assert schedule.tick() is None
    finally:
        store.close()
