"""Planning the next window while the driver applies the last one, and only when that is exact."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cdc_console.core.lifecycle import BatchStatus, CommandKind, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.reports import WindowResult
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import BinlogSplit, TableStreamFilter
from cdc_console.errors import SourceError
from cdc_console.source import plan_past
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.committer import commit_batch
from cdc_console.source.failover import follow_failover
from cdc_console.spark.applier import plans_past
from cdc_console.spark.protocol import Reports
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")


def at(pos: int) -> BinlogOffset:
    return BinlogOffset("binlog.000001", pos, gtid="0-1-1")


class Head:
    def __init__(self) -> None:
        self.pos = 300

    def __call__(self) -> BinlogOffset:
        return at(self.pos)


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    """Two tables streaming from position 100."""
    store = StateStore(tmp_path / "state.sqlite")
    for table_id in (ORDERS, USERS):
        store.ensure_table(table_id, "id", Lifecycle.STREAMING)
        schema = TableSchema(
            table_id, (ColumnInfo("id", "int", "int(11)", nullable=False),), ("id",), "id"
        )
        store.set_schema(table_id, schema)
        with store.transaction() as conn:
            store.move_table(table_id, conn, Lifecycle.STREAMING, stream_from=at(100))
    return store


@pytest.fixture
def head() -> Head:
    return Head()


@pytest.fixture
def assigner(store: StateStore, head: Head) -> HybridSplitAssigner:
    return HybridSplitAssigner(store, lambda schema: [], head, range(5400, 5403), 2)


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_past, "WAIT_SECONDS", 0.3)


def staged(store: StateStore, plan: BatchPlan, tmp_path: Path, past: bool = True) -> None:
    store.mark_staged(plan.batch_no, str(tmp_path / f"batch-{plan.batch_no}"), 1, plan_past=past)


def window(plan: BatchPlan | None) -> str:
    assert plan is not None and plan.binlog is not None
    starts = ",".join(str(f.resume_from.pos) for f in plan.binlog.tables if f.resume_from)
    return f"{plan.batch_no}: {plan.binlog} from {starts}"


def test_a_staged_window_is_planned_past_from_its_end(
    store: StateStore, head: Head, assigner: HybridSplitAssigner, tmp_path: Path
) -> None:
    first = assigner.next_plan()
    assert window(first) == (
        "1: binlog [binlog.000001:100, binlog.000001:300) shop.orders,shop.users from 100,100"
    )
    assert first is not None
    staged(store, first, tmp_path)
    head.pos = 500
    second = assigner.next_plan()
    assert window(second) == (
        "2: binlog [binlog.000001:300, binlog.000001:500) shop.orders,shop.users from 300,300"
    )
    assert second is not None
    # The same plan comes back until it is applied, and the first is still not committed.
    assert assigner.next_plan() == second
    assert store.committed_offset() is None
    assert [t.stream_from for t in store.tables()] == [at(100), at(100)]
    # Committed in order, the state ends where planning the two one after the other would.
    commit_batch(store, first, [], WindowResult({"shop.orders": 2}, 0, {}))
    commit_batch(store, second, [], WindowResult({"shop.users": 1}, 0, {}))
    assert store.committed_offset() == at(500)
    assert [t.stream_from for t in store.tables()] == [at(500), at(500)]
    assert [t.events_applied for t in store.tables()] == [2, 1]


def test_nothing_new_past_a_staged_window_plans_nothing(
    store: StateStore, assigner: HybridSplitAssigner, tmp_path: Path
) -> None:
    first = assigner.next_plan()
    assert first is not None
    staged(store, first, tmp_path)
    assert assigner.next_plan() is None  # the head is the window's end


def test_a_window_not_marked_is_waited_for(
    store: StateStore, head: Head, assigner: HybridSplitAssigner, tmp_path: Path
) -> None:
    first = assigner.next_plan()
    assert first is not None
    staged(store, first, tmp_path, past=False)
    head.pos = 500
    clock = time.monotonic()
    assert assigner.next_plan() == first  # not applied within the wait: no new batch
    assert time.monotonic() - clock >= 0.3

    committer = threading.Timer(0.1, lambda: commit_batch(store, first, [], WindowResult()))
    committer.start()
    second = assigner.next_plan()  # waits for the commit, then plans from the state
    committer.join()
    assert window(second) == (
        "2: binlog [binlog.000001:300, binlog.000001:500) shop.orders,shop.users from 300,300"
    )


def hold_a_table(store: StateStore) -> None:
    change = SchemaChange(at(150), at(160), "ALTER TABLE orders ADD COLUMN x INT")
    with store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.STREAMING, schema_pending=change)
    held = store.table(ORDERS)
    assert held is not None and held.schema_pending == change


def catch_up_another(store: StateStore) -> None:
    """A table that finished its snapshot after the window was planned."""
    late = TableId("shop", "late")
    store.ensure_table(late, "id", Lifecycle.SNAPSHOTTING)
    with store.transaction() as conn:
        store.move_table(late, conn, Lifecycle.CATCHING_UP, stream_from=at(200))


def move_orders(store: StateStore) -> None:
    with store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.STREAMING, stream_from=at(120))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: s.queue_command(CommandKind.REDUMP, "shop.users"), id="command"),
        pytest.param(lambda s: s.set_draining(True), id="draining"),
        pytest.param(hold_a_table, id="held at a schema change"),
        pytest.param(catch_up_another, id="a table catching up"),
        pytest.param(move_orders, id="a table moved since the plan"),
    ],
)
def test_anything_the_commit_could_change_makes_the_planner_wait(
    store: StateStore, head: Head, assigner: HybridSplitAssigner, tmp_path: Path, change: object
) -> None:
    first = assigner.next_plan()
    assert first is not None
    staged(store, first, tmp_path)
    change(store)  # type: ignore[operator]
    row = store.last_batch()
    assert row is not None and row.status == BatchStatus.STAGED and row.plan_past
    assert not plan_past.may_plan_past(store, row)
    head.pos = 500
    assert assigner.next_plan() == first


def test_only_a_window_without_chunks_or_a_change_of_shape_is_marked() -> None:
    filters = (TableStreamFilter(ORDERS, at(100)),)
    window_plan = BatchPlan(4, (), BinlogSplit(at(100), at(300), filters), 5400, at(300))
    clean = Reports((4,), (), WindowResult({"shop.orders": 3}, 0, {}))
    assert plans_past(window_plan, clean)
    reshaped = WindowResult(
        {"shop.orders": 3}, 0, {}, {"shop.orders": SchemaChange(at(150), at(160), "ALTER")}
    )
    assert not plans_past(window_plan, Reports((4,), (), reshaped))
    assert not plans_past(replace(window_plan, binlog=None), clean)


def test_a_failover_is_followed_only_once_no_batch_is_staged(
    store: StateStore, assigner: HybridSplitAssigner, tmp_path: Path
) -> None:
    store.set_source_identity("old-server")
    first = assigner.next_plan()
    assert first is not None
    staged(store, first, tmp_path)
    with pytest.raises(SourceError, match="staged and not yet applied") as raised:
        follow_failover(store, "new-server", lambda gtid: at(7))
    assert raised.value.transient
    assert store.source_identity() == "old-server"
    commit_batch(store, first, [], WindowResult())
    assert follow_failover(store, "new-server", lambda gtid: at(7)) is not None
    assert store.source_identity() == "new-server"
