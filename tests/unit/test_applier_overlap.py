"""The driver applies a staged binlog window in the background while the next one is read."""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdc_console.config import PipelineConfig, load_config
from cdc_console.core.lifecycle import BatchStatus, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.records import RecordDict
from cdc_console.core.reports import WindowResult
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks.base import SinkError
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.spark.applier import BatchApplier
from cdc_console.spark.protocol import ARROW_SCHEMA, pack_changes, to_batches, window_control
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")
SCHEMA = TableSchema(
    ORDERS,
    (
        ColumnInfo("id", "int", "int(11)", nullable=False),
        ColumnInfo("name", "varchar", "varchar(20)"),
    ),
    ("id",),
    "id",
)


def at(pos: int) -> BinlogOffset:
    return BinlogOffset("binlog.000001", pos)


class Head:
    def __init__(self) -> None:
        self.pos = 200

    def __call__(self) -> BinlogOffset:
        return at(self.pos)


@pytest.fixture
def config(tmp_path: Path) -> PipelineConfig:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        textwrap.dedent(
            """
            [source]
            tables = ["shop.orders"]
            [sink]
            kind = "delta"
            path = "lake"
            changelog = false
            """
        )
    )
    return load_config(path)


@pytest.fixture
def store(config: PipelineConfig) -> Iterator[StateStore]:
    store = StateStore(config.state_path)
    store.ensure_table(ORDERS, "id", Lifecycle.STREAMING, schema=SCHEMA)
    with store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.STREAMING, stream_from=at(100))
    yield store
    store.close()


class Frame:
    """What ``foreachBatch`` is given: only ``toArrow`` is used."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def toArrow(self) -> pa.Table:
        return self.table


def window_batch(plan: BatchPlan, ids: range, name: str) -> pa.Table:
    """A window's output as it reaches the driver: its inserts, packed, and its report."""
    assert plan.binlog is not None
    rows: list[RecordDict] = [
        {
            "database": "shop",
            "table": "orders",
            "op": "+I",
            "key": json.dumps([n]),
            "row": json.dumps({"id": n, "name": f"{name}{n}"}),
            "file_index": 1,
            "pos": plan.binlog.start.pos + n,
            "event_index": 0,
            "row_index": 0,
            "seq": n,
            "ts_ms": 1_700_000_000_000,
            "split_id": "",
        }
        for n in ids
    ]
    report = window_control(plan.batch_no, WindowResult({"shop.orders": len(rows)}, 0, {}))
    batches = list(to_batches(pack_changes(iter([*rows, report]))))
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


class Gate:
    """Holds the sink's apply until opened; counts the applies."""

    def __init__(self, applier: BatchApplier, fail: bool = False) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.applied: list[int] = []
        apply_batch = applier.sink.apply_batch

        def held(batch_id: int, *args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            assert self.opened.wait(10)
            if fail:
                raise SinkError("the lake's disk is full")
            self.applied.append(batch_id)
            return apply_batch(batch_id, *args, **kwargs)

        applier.sink.apply_batch = held  # type: ignore[method-assign]


def mirror_names(applier: BatchApplier) -> list[str]:
    from cdc_console.sinks.delta import DeltaSink

    assert isinstance(applier.sink, DeltaSink)
    return sorted(applier.sink.read_mirror(ORDERS).column("name").to_pylist())


def test_a_window_is_applied_while_the_next_is_planned_read_and_waits_its_turn(
    config: PipelineConfig, store: StateStore
) -> None:
    head = Head()
    assigner = HybridSplitAssigner(store, lambda schema: [], head, range(5400, 5403), 2)
    applier = BatchApplier(config, store)
    gate = Gate(applier)
    first = assigner.next_plan()
    assert first is not None
    applier(Frame(window_batch(first, range(1, 4), "a")), 0)  # returns with the apply held
    assert gate.entered.wait(10)
    row = store.batch(1)
    assert row is not None and row.status == BatchStatus.STAGED and row.plan_past

    head.pos = 300
    second = assigner.next_plan()  # planned past the batch still being applied
    assert second is not None and second.binlog is not None
    assert str(second.binlog.start) == "binlog.000001:200"
    nxt = threading.Thread(target=applier, args=(Frame(window_batch(second, range(4, 6), "b")), 1))
    nxt.start()
    nxt.join(0.3)
    assert nxt.is_alive(), "the next batch must wait for the one before"
    found = store.batch(2)
    assert found is not None and found.status == BatchStatus.PLANNED

    gate.opened.set()
    nxt.join(10)
    assert applier.wait_applied(10)
    assert gate.applied == [1, 2]
    assert [store.batch(n).status for n in (1, 2)] == [BatchStatus.APPLIED] * 2  # type: ignore[union-attr]
    assert store.committed_offset() == at(300)
    assert mirror_names(applier) == ["a1", "a2", "a3", "b4", "b5"]


def test_a_failed_background_apply_stops_the_job_and_the_next_start_applies_it(
    config: PipelineConfig, store: StateStore
) -> None:
    assigner = HybridSplitAssigner(store, lambda schema: [], Head(), range(5400, 5403), 2)
    applier = BatchApplier(config, store)
    gate = Gate(applier, fail=True)
    plan = assigner.next_plan()
    assert plan is not None
    applier(Frame(window_batch(plan, range(1, 3), "a")), 0)
    gate.opened.set()
    with pytest.raises(SinkError, match="disk is full"):
        applier.wait_applied(10)
    with pytest.raises(SinkError, match="disk is full"):
        applier.check()  # the job's loop asks twice a second
    row = store.batch(1)
    assert row is not None and row.status == BatchStatus.STAGED

    restarted = BatchApplier(config, store)
    assert restarted.recover() == 1
    assert mirror_names(restarted) == ["a1", "a2"]
    assert store.committed_offset() == at(200)


def test_without_overlap_and_for_other_batches_the_apply_is_done_on_return(
    config: PipelineConfig, store: StateStore
) -> None:
    assigner = HybridSplitAssigner(store, lambda schema: [], Head(), range(5400, 5403), 2)
    applier = BatchApplier(config, store)
    plan = assigner.next_plan()
    assert plan is not None
    applier.apply_arrow(window_batch(plan, range(1, 3), "a"))  # overlap off: recovery, tests
    row = store.batch(1)
    assert row is not None and row.status == BatchStatus.APPLIED and not row.plan_past
