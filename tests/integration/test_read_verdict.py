"""A re-dump or an added table that would outlast the binlog it needs is refused before it
starts (``--force`` starts it anyway), against a real MariaDB whose expiry the test sets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc_console.cli import main
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import load, write_config
from tests.unit.test_estimate import read_chunks

pytestmark = pytest.mark.mysql


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``cdc-console ARGS`` in this process (a subprocess would spend seconds importing)."""

    def run(*args: str) -> Ran:
        code = main(list(args))
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


@pytest.fixture
def expiry(source_db: SourceDb) -> Iterator[SourceDb]:
    """The server's expiry as the test sets it, put back afterwards."""
    (before,) = source_db.rows("SELECT @@GLOBAL.binlog_expire_logs_seconds")
    try:
        yield source_db
    finally:
        source_db.sandbox.execute(f"SET GLOBAL binlog_expire_logs_seconds = {before[0]}")


def test_a_read_that_would_outlast_the_binlog_is_refused_unless_forced(
    expiry: SourceDb, tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    db = expiry
    db.execute(
        "CREATE TABLE orders (id INT PRIMARY KEY)",
        "CREATE TABLE refunds (id INT PRIMARY KEY)",
        "INSERT INTO refunds SELECT seq FROM seq_1_to_5000",
        "ANALYZE TABLE refunds",
    )
    config_path = write_config(db, tmp_path, tables=[f"{db.name}.orders"])
    config = load(config_path)
    orders = TableId(db.name, "orders")
    config.state_path.parent.mkdir(parents=True, exist_ok=True)
    store = StateStore(config.state_path)
    store.ensure_table(orders, "id", Lifecycle.STREAMING, BinlogOffset("binlog.000001", 4))
    # its last read: ten chunks of 100 rows, 2 s each, so a re-dump takes about 20 s
    read_chunks(store, orders, chunks=10, done=10, seconds_each=2.0)
    store.close()
    args = ("--config", str(config_path))

    db.sandbox.execute("SET GLOBAL binlog_expire_logs_seconds = 3600")
    fits = run_cli("redump", *args, "--table", f"{db.name}.orders")
    assert fits.returncode == 0, fits.stderr
    assert "finish time: the read takes about 20 s (18 s to 22 s); the server keeps a binlog " in (
        fits.stdout
    )
    assert "(binlog_expire_logs_seconds=3600): it fits" in fits.stdout

    db.sandbox.execute("SET GLOBAL binlog_expire_logs_seconds = 30")
    store = StateStore(config.state_path)
    store.db.execute("DELETE FROM commands")
    store.close()
    refused = run_cli("redump", *args, "--table", f"{db.name}.orders")
    assert refused.returncode != 0
    assert "the read may outlast the binlog it needs" in refused.stderr, refused.stderr
    assert "with a 1.5x margin it does not fit" in refused.stderr
    assert "binlog_expire_logs_seconds = 604800" in refused.stderr  # the fix
    forced = run_cli("redump", *args, "--table", f"{db.name}.orders", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "--force: queued anyway" in forced.stdout

    # an added table: its rows (the server's estimate) at the pace of the last read, 50 rows/s
    added = run_cli("add-table", *args, f"{db.name}.refunds")
    assert added.returncode != 0 and "does not fit" in added.stderr, added.stderr
    assert run_cli("add-table", *args, f"{db.name}.refunds", "--force").returncode == 0


def test_check_warns_when_the_reads_under_way_may_outlast_the_binlog(
    expiry: SourceDb, tmp_path: Path, run_cli: Callable[..., Ran]
) -> None:
    db = expiry
    db.execute("CREATE TABLE orders (id INT PRIMARY KEY)")
    config_path = write_config(db, tmp_path, tables=[f"{db.name}.orders"])
    config = load(config_path)
    orders = TableId(db.name, "orders")
    config.state_path.parent.mkdir(parents=True, exist_ok=True)
    store = StateStore(config.state_path)
    store.ensure_table(orders, "id", Lifecycle.SNAPSHOTTING)
    # 4 of 100 chunks done, 2 s each: about 192 s left
    read_chunks(store, orders, chunks=100, done=4, seconds_each=2.0)
    store.close()
    db.sandbox.execute("SET GLOBAL binlog_expire_logs_seconds = 60")
    checked = run_cli("check", "--config", str(config_path))
    assert checked.returncode == 0, checked.stdout  # a warning, not an error
    line = next(x for x in checked.stdout.splitlines() if "finish_time" in x)
    assert line.startswith(
        "⚠ finish_time: chunk reads under way (96 chunks left): the read may take about 3 min"
    ), line
    assert "fix: keep binlogs longer" in line
    db.sandbox.execute("SET GLOBAL binlog_expire_logs_seconds = 86400")
    checked = run_cli("check", "--config", str(config_path))
    line = next(x for x in checked.stdout.splitlines() if "finish_time" in x)
    assert line.startswith("✓ finish_time: chunk reads under way (96 chunks left)"), line
