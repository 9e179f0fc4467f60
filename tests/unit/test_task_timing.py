"""Each task reports the time it spent in our code, apart from the time Spark held its batches:
what splits the lag's read stage into reading and decoding and Spark's share."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from cdc_console.config import SourceConfig
from cdc_console.core.records import RecordDict
from cdc_console.spark import tasks
from cdc_console.spark.partitions import NoopTask, PlanPartition
from cdc_console.spark.protocol import CONTROL_OP, noop_control, read_controls

PRODUCE_SECONDS = 0.05
HOLD_SECONDS = 0.3


def controls(batches: list[pa.RecordBatch]) -> list[RecordDict]:
    table = pa.Table.from_batches(batches).drop_columns(["payload"])
    return [r for r in table.to_pylist() if r["op"] == CONTROL_OP]


def test_a_task_ends_with_its_time_in_our_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_partition(partition: PlanPartition) -> Iterator[RecordDict]:
        for _ in range(2):
            time.sleep(PRODUCE_SECONDS)  # reading and decoding
            yield noop_control(partition.batch_no)

    monkeypatch.setattr(tasks, "run_partition", slow_partition)
    seen: list[pa.RecordBatch] = []
    for batch in tasks.read_partition(PlanPartition(4, NoopTask(), SourceConfig())):
        seen.append(batch)
        time.sleep(HOLD_SECONDS)  # Spark holding the batch: not ours
    reports = read_controls(controls(seen))
    assert reports.batch_numbers == (4,)
    assert len(reports.task_seconds) == 1
    busy = reports.read_seconds
    assert busy is not None
    assert 2 * PRODUCE_SECONDS <= busy < HOLD_SECONDS


def test_the_longest_task_bounds_the_batchs_read() -> None:
    parts = [
        batch
        for seconds in (0.5, 2.0, 1.25)
        for batch in tasks.to_batches(iter([tasks.task_control(9, seconds)]))
    ]
    assert read_controls(controls(parts)).read_seconds == 2.0
    assert read_controls([]).read_seconds is None


def test_a_noop_partition_still_reports_its_time() -> None:
    found = list(tasks.read_partition(PlanPartition(3, NoopTask(), SourceConfig())))
    kinds = [r["key"] for r in controls(found)]
    assert kinds == ["noop", "task"]
