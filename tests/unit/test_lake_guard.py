"""The job refuses a lake that is ahead of its state database (a reset state would otherwise
make the sink skip every batch up to the lake's last one as an already-applied retry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.config import load_config
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableId
from cdc_console.errors import ConfigError
from cdc_console.sinks.changelog_json import ChangelogJsonSink
from cdc_console.spark.job import PipelineJob
from cdc_console.spark.start_checks import check_lake_matches_state
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")


class Lake:
    def __init__(self, applied: dict[TableId, int]) -> None:
        self.applied = applied

    def applied_batch(self, table_id: TableId) -> int | None:
        return self.applied.get(table_id)


@pytest.fixture
def job(tmp_path: Path) -> PipelineJob:
    path = tmp_path / "pipeline.toml"
    path.write_text('[source]\ntables = ["shop.orders"]\n')
    return PipelineJob(load_config(path))


def test_lake_ahead_of_a_fresh_state_is_refused(job: PipelineJob, tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    with pytest.raises(ConfigError) as info:
        check_lake_matches_state(store, Lake({ORDERS: 7}), job.config.sink.path)
    assert "already holds batch 7" in str(info.value) and "up to 0" in str(info.value)
    assert "move the lake folder" in info.value.hint
    store.close()


def test_lake_behind_or_equal_to_the_state_is_fine(job: PipelineJob, tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    check_lake_matches_state(store, Lake({}), job.config.sink.path)  # no mirror yet
    # a sink without batch numbers (the base class's applied_batch: it cannot tell)
    check_lake_matches_state(store, ChangelogJsonSink(tmp_path / "json"), job.config.sink.path)
    store.create_batch(1, {"batch": 1, "snapshot": [], "binlog": None}, [])
    check_lake_matches_state(store, Lake({ORDERS: 1}), job.config.sink.path)
    store.close()
