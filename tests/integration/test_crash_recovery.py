"""*Crash-safe resume* (README, "The invariants"): a crash at any point loses nothing and re-reads no finished chunk.

The job is killed (SIGKILL to the driver, its JVM and its Python workers) mid-snapshot, then made
to die exactly between the sink commit and the state commit, then killed mid-stream while a writer
runs. After the last restart the mirror equals the source, the changelog has no binlog change twice,
and every chunk finished before a crash kept the watermark and finish time it had.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.spark.applier import CRASH_ENV
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    caught_up,
    change_feed_replay,
    changelog_replay,
    create_orders,
    finished_splits,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ROWS, CHUNK = 40_000, 2_000
PARTS = '[pipeline]\nbinlog_readers = 3\nbinlog_part_bytes = "1KiB"\nmax_window_bytes = "64KiB"\n'


def streaming_batches(config: PipelineConfig) -> int:
    store = StateStore(config.state_path)
    try:
        tables = store.tables()
        if not tables or any(t.state != Lifecycle.STREAMING for t in tables):
            return 0
        return store.last_applied_batch()
    finally:
        store.close()


def test_kill_minus_nine_at_three_points_converges(source_db: SourceDb, tmp_path: Path) -> None:
    create_orders(source_db, ROWS)
    # Small batches, so that kills land between them while chunks are still pending.
    # Every binlog window of 2 KiB or more is read in parts by up to three tasks.
    config_path = write_config(
        source_db,
        tmp_path,
        chunk_size=CHUNK,
        snapshot="chunks_per_batch = 4",
        extra=PARTS,
    )
    config = load(config_path)
    writer = Writer(source_db, "orders", list(range(1, ROWS, CHUNK)), rate=100)
    writer.start()

    # 1. mid-snapshot: some chunks finished, others not.
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: len(finished_splits(config)) >= 2, 180, "two finished chunks", job)
        job.kill()
    before_first = finished_splits(config)
    total = ROWS // CHUNK + 1
    assert 2 <= len(before_first) < total

    # 2. between the sink commit and the state commit of a batch.
    crash = JobProcess(config_path, env={CRASH_ENV: "after-sink"}).start()
    code = crash.wait(240)
    assert code != 0, crash.output()
    assert "crash point after-sink reached" in crash.output()

    # 3. mid-stream, with the writer still running.
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: "recovering staged batch" in job.output(), 120, "recovery", job)
        start = streaming_batches(config) or 0
        wait_for(lambda: streaming_batches(config) > start + 2, 240, "streaming batches", job)
        before_last = finished_splits(config)
        job.kill()

    writer.stop()
    assert not writer.errors, writer.errors
    final = JobProcess(config_path, args=["--until-caught-up"]).start()
    assert final.wait(300) == 0, final.output()
    assert caught_up(source_db, config)

    after = finished_splits(config)
    assert len(after) == len(before_last)
    for split_id, (hw, finished_at) in before_first.items():
        assert after[split_id] == (hw, finished_at), f"{split_id} was read again"
    for split_id, (hw, finished_at) in before_last.items():
        assert after[split_id] == (hw, finished_at), f"{split_id} was read again"

    expected = source_rows(source_db, "orders", "id")
    assert mirror_rows(config, source_db.name, "orders", "id") == expected
    replayed, binlog_changes, duplicates = changelog_replay(config, source_db.name, "orders", "id")
    assert duplicates == 0 and binlog_changes > 0
    assert [replayed[k] for k in sorted(replayed)] == expected
    # Each Delta commit carries its batch's app transaction, so a batch retried after the kill
    # adds nothing: the change data feed holds every change once, too.
    fed, contradictions = change_feed_replay(config, source_db.name, "orders", "id")
    assert contradictions == 0
    assert [fed[k] for k in sorted(fed)] == expected
