"""What the CLI checks before it queues a command (no job, no Spark): add-table for a table the
source does not have is refused, and a command already pending is not queued twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.errors import ExitCode
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import create_orders, load, run_cli, write_config

pytestmark = [pytest.mark.mysql]


def test_add_table_checks_the_source_and_a_pending_command_is_not_queued_twice(
    source_db: SourceDb, tmp_path: Path
) -> None:
    create_orders(source_db, 10)
    source_db.execute("CREATE TABLE refunds (id INT PRIMARY KEY)")
    config_path = write_config(source_db, tmp_path, tables=[f"{source_db.name}.orders"])
    StateStore(load(config_path).state_path).close()  # the state a first run leaves

    missing = run_cli("add-table", "--config", str(config_path), f"{source_db.name}.refnds")
    assert missing.returncode == ExitCode.OPERATOR_ACTION, missing.stdout + missing.stderr
    assert f"{source_db.name}.refnds does not exist on the source" in missing.stderr
    assert "SHOW TABLES IN" in missing.stderr

    first = run_cli("add-table", "--config", str(config_path), f"{source_db.name}.refunds")
    assert first.returncode == 0, first.stderr
    assert "queued" in first.stdout
    again = run_cli("add-table", "--config", str(config_path), f"{source_db.name}.refunds")
    assert again.returncode == ExitCode.OPERATOR_ACTION
    assert "is already queued (#1, pending)" in again.stderr

    store = StateStore(load(config_path).state_path)
    try:
        assert [(c.kind, c.target) for c in store.pending_commands()] == [
            ("add-table", f"{source_db.name}.refunds")
        ]
    finally:
        store.close()
