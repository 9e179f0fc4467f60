"""The acceptance run: 100k rows in 13 chunks, read by 2 parallel readers while a writer changes
rows at chunk boundaries, moves keys between chunks and runs one UPDATE spanning three chunks; then
streaming. After the writer stops, the Delta mirror equals the source row for row and the changelog
replays to the source with no binlog change applied twice.

It runs on a real Spark standalone cluster (a master and two one-core workers, ``cluster.py``),
the job pointed at ``spark://…`` by ``--master`` and nothing else changed: its chunk readers and
binlog task run in the workers' executors. ``local[2]`` is what every other integration test
runs on, and ``local-cluster`` the clean-stop test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.cluster import master_state, standalone_cluster
from tests.integration.harness import (
    JobProcess,
    Writer,
    caught_up,
    change_feed_replay,
    changelog_replay,
    last_run,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

CHUNK = 8096
ROWS = 100_000


def create_orders(db: SourceDb) -> list[int]:
    db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), updated DATETIME(6)) ENGINE=InnoDB",
        f"INSERT INTO orders SELECT seq, CONCAT('c', seq % 97), seq / 100, NULL, "
        f"'2024-01-01 00:00:00.000001' FROM seq_1_to_{ROWS}",
    )
    # Evenly split from min=1: boundaries at 1 + k*CHUNK. Target rows on both sides of each.
    bounds = [1 + k * CHUNK for k in range(1, ROWS // CHUNK + 1)]
    return sorted({b + d for b in bounds for d in (-1, 0, 1)})


def all_streaming(config: PipelineConfig) -> bool:
    if not config.state_path.exists():
        return False
    store = StateStore(config.state_path)
    try:
        tables = store.tables()
        return bool(tables) and all(t.state == Lifecycle.STREAMING for t in tables)
    finally:
        store.close()


def test_snapshot_while_writing_then_stream_converges(source_db: SourceDb, tmp_path: Path) -> None:
    targets = create_orders(source_db)
    # Every binlog window of 2 KiB or more is read in parts by up to three tasks, and none
    # runs past the first transaction 64 KiB after its start: the backlog the writer leaves
    # during the snapshot is bounded, yet a loaded machine still drains it (16 KiB windows
    # fell behind the writer's 30 KB/s on CI).
    parts = (
        '[pipeline]\nbinlog_readers = 3\nbinlog_part_bytes = "1KiB"\nmax_window_bytes = "64KiB"\n'
    )
    config_path = write_config(source_db, tmp_path, chunk_size=CHUNK, extra=parts)
    config = load(config_path)
    writer = Writer(source_db, "orders", targets)
    with standalone_cluster(tmp_path / "cluster") as (url, ui_port):
        converge_on(source_db, config_path, config, writer, url, ui_port)
    assert last_run(config).master == url
    check_the_run(source_db, config_path, config)


def converge_on(
    source_db: SourceDb,
    config_path: Path,
    config: PipelineConfig,
    writer: Writer,
    url: str,
    ui_port: int,
) -> None:
    with running(JobProcess(config_path, args=["--master", url])) as job:
        writer.start()

        def some_chunks_done() -> bool:
            if not config.state_path.exists():
                return False
            store = StateStore(config.state_path)
            try:
                splits = store.splits(store.tables()[0].table_id) if store.tables() else []
                return sum(s.status == SplitStatus.FINISHED for s in splits) >= 2
            finally:
                store.close()

        wait_for(some_chunks_done, 180, "the first finished chunks", job)
        # One multi-row UPDATE spanning three chunks, while some chunks are done and some not.
        source_db.execute(
            f"UPDATE orders SET note = 'span', amount = amount + 100 "
            f"WHERE id BETWEEN {CHUNK - 50} AND {3 * CHUNK + 50}"
        )
        wait_for(lambda: all_streaming(config), 300, "every table streaming", job)
        writer.stop()
        assert not writer.errors, writer.errors
        assert writer.ops > 100
        wait_for(lambda: caught_up(source_db, config), 120, "the final catch-up", job)
        apps = master_state(ui_port).get("activeapps", [])
        assert isinstance(apps, list) and len(apps) == 1, apps
        assert apps[0]["cores"] == 2, apps  # one executor core on each worker
        job.terminate()
        assert job.wait(120) == 0, job.output()
        assert job.log_path is not None
        log_text = job.log_path.read_text()
        assert "read in 3 parts" in log_text, "no window was read in parts"
        assert "bounded at" in log_text, "no window was bounded by max_window_bytes"


def check_the_run(source_db: SourceDb, config_path: Path, config: PipelineConfig) -> None:
    store = StateStore(config.state_path)
    table_id = store.tables()[0].table_id
    splits = store.splits(table_id)
    assert len(splits) >= 10
    assert all(s.status == SplitStatus.FINISHED and s.high_watermark is not None for s in splits)
    assert sum(s.rows or 0 for s in splits) >= ROWS * 0.9

    expected = source_rows(source_db, "orders", "id")
    mirror = mirror_rows(config, source_db.name, "orders", "id")
    assert len(mirror) == len(expected)
    assert mirror == expected

    status = subprocess.run(
        [sys.executable, "-m", "cdc_console", "status", "--config", str(config_path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(status.stdout)
    assert [(t["state"], t["chunks_done"], t["chunks_total"]) for t in report["tables"]] == [
        ("STREAMING", len(splits), len(splits))
    ]
    assert report["bytes_behind"] == 0 and report["event_lag_ms"] == 0
    assert report["committed"]["file"] == report["head"]["file"]
    assert report["committed"]["pos"] == report["head"]["pos"] and report["head"]["gtid"]

    replayed, binlog_changes, duplicates = changelog_replay(config, source_db.name, "orders", "id")
    assert duplicates == 0
    # Snapshot rows are not counted (event_index -1): at least the -U/+U pairs of the UPDATE that
    # spans three chunks came through the binlog.
    assert binlog_changes >= 2 * (2 * CHUNK)
    assert [replayed[k] for k in sorted(replayed)] == expected

    # The mirror's own change data feed (Spark's readChangeFeed, delta-rs load_cdf) replays to
    # the source too, with no change twice.
    fed, contradictions = change_feed_replay(config, source_db.name, "orders", "id")
    assert contradictions == 0
    assert [fed[k] for k in sorted(fed)] == expected
