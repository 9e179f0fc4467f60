"""The console on a live pipeline: it starts the job, pauses a table while a writer keeps
changing it, sees the job's acknowledgement, resumes the table, and the mirror converges to the
source row for row; then it stops the job. Real MariaDB, real Spark job, real processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.launcher import is_alive, stop_job
from cdc_console.tui.app import ConsoleApp
from cdc_console.tui.model import JobStatus, PipelineView
from cdc_console.tui.screens.confirm import ConfirmScreen
from tests.conftest import SourceDb
from tests.integration.harness import (
    Writer,
    caught_up,
    load,
    mirror_rows,
    source_rows,
    write_config,
)
from tests.tui.driving import SIZE, notifications, settle, until

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ROWS = 20_000


def create_tables(db: SourceDb) -> list[int]:
    db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), updated DATETIME(6)) ENGINE=InnoDB",
        f"INSERT INTO orders SELECT seq, CONCAT('c', seq % 97), seq / 100, NULL, "
        f"'2024-01-01 00:00:00.000001' FROM seq_1_to_{ROWS}",
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40)) ENGINE=InnoDB",
        "INSERT INTO customers SELECT seq, CONCAT('n', seq) FROM seq_1_to_500",
    )
    return list(range(1, ROWS, 997))


def table_state(app: ConsoleApp, table: str) -> str | None:
    view: PipelineView | None = app.view_of(app.current)
    found = view.table(table) if view else None
    return found.state if found else None


def job_status(app: ConsoleApp) -> JobStatus | None:
    view = app.view_of(app.current)
    return view.job.status if view else None


@pytest.mark.timeout(600)
async def test_pause_and_resume_from_the_console_converge(
    source_db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    targets = create_tables(source_db)
    config_path = write_config(source_db, tmp_path, chunk_size=4000)
    config = load(config_path)
    orders, customers = f"{source_db.name}.orders", f"{source_db.name}.customers"
    writer = Writer(source_db, "orders", targets, rate=40)
    app = ConsoleApp(config_paths=[str(config_path)])
    pid: int | None = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("s")
            await until(pilot, lambda: job_status(app) is JobStatus.RUNNING, "job running", 120)
            view = app.view_of(app.current)
            pid = view.job.pid if view else None
            await until(
                pilot,
                lambda: table_state(app, orders) == table_state(app, customers) == "STREAMING",
                "both tables streaming",
                240,
            )
            writer.start()
            app.select_table(orders)
            await settle(pilot)
            await pilot.press("p")
            await until(pilot, lambda: table_state(app, orders) == "PAUSED", "paused", 120)
            await until(
                pilot,
                lambda: any(f"pause {orders} applied" in n for n in notifications(app)),
                "the job's acknowledgement",
            )
            assert table_state(app, customers) == "STREAMING"
            await pilot.pause(3.0)
            await pilot.press("r")
            await until(pilot, lambda: table_state(app, orders) == "STREAMING", "resumed", 180)
            assert any(f"resume {orders} applied" in n for n in notifications(app))
            writer.stop()
            assert not writer.errors, writer.errors
            await until(pilot, lambda: caught_up(source_db, config), "caught up", 180)
            assert mirror_rows(config, source_db.name, "orders", "id") == source_rows(
                source_db, "orders", "id"
            )
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
            await pilot.press("y")
            await until(pilot, lambda: pid is not None and not is_alive(pid), "job exit", 120)
            await settle(pilot)
            assert job_status(app) is JobStatus.STOPPED
    finally:
        writer.stop_event.set()
        if pid is not None and is_alive(pid):
            stop_job(pid, 10)
