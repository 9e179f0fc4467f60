"""Operator commands over a real state database: lifecycle moves, refusals and planning effects.

The binlog side is faked (a head that moves by hand); what is checked is what the enumerator
plans after each command, as strings, the way Flink CDC's assigner tests do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.core.lifecycle import CommandStatus, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.reports import SplitResult, WindowResult
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.errors import SourceError
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.committer import commit_batch
from cdc_console.source.control import CommandProcessor, refusal
from cdc_console.state.store import StateStore
from tests.unit.test_assigner import ORDERS, USERS, Head, fake_split, schema

EVENTS = TableId("shop", "events")


def at(pos: int) -> BinlogOffset:
    return BinlogOffset("binlog.000001", pos)


def describe(table_id: TableId) -> TableSchema:
    if table_id.table == "nokey":
        raise SourceError("shop.nokey has no primary key", "set snapshot.chunk_key = {...}")
    return schema(table_id)


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    store = StateStore(tmp_path / "state.sqlite")
    for table_id in (ORDERS, USERS):
        store.ensure_table(table_id, "id", Lifecycle.SNAPSHOTTING)
        store.set_schema(table_id, schema(table_id))
    return store


class Pipeline:
    """The enumerator with its command processor, and a way to 'run' its batches."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.head = Head()
        self.processor = CommandProcessor(store, describe)
        self.assigner = HybridSplitAssigner(
            store, fake_split, self.head, range(5400, 5404), 3, self.processor
        )

    def step(self, hw: int | None = None, emitted: dict[str, int] | None = None) -> BatchPlan:
        """Plan one batch and commit it as if it ran; chunks finish at ``hw`` (default head)."""
        plan = self.assigner.next_plan()
        assert plan is not None
        mark = hw if hw is not None else self.head.pos
        results = [
            SplitResult(p.split.split_id, at(mark - 1), at(mark), 10, 0, 0.0, 5)
            for p in plan.snapshot
        ]
        window = WindowResult(emitted or {}, 0, {}) if plan.binlog else None
        commit_batch(self.store, plan, results, window)
        return plan

    def streaming(self) -> None:
        """Snapshot both tables and catch up: both STREAMING at head 100."""
        self.step(hw=90)
        self.step(hw=95)
        self.step()
        assert [t.state for t in self.store.tables()] == [Lifecycle.STREAMING, Lifecycle.STREAMING]

    def queue(self, kind: str, target: str | None = None, **args: int) -> int:
        return self.store.queue_command(kind, target, dict(args), issued_by="test")


def outcome(store: StateStore, command_id: int) -> tuple[str, str]:
    command = store.command(command_id)
    assert command is not None
    return command.status, command.reason or ""


def test_pause_stops_emitting_one_table_and_resume_catches_up_from_the_pause(
    store: StateStore,
) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    pipe.head.pos = 200
    pipe.step(emitted={"shop.orders": 4, "shop.users": 2})
    paused = pipe.queue("pause", "shop.orders")
    pipe.head.pos = 300
    plan = pipe.step()
    assert outcome(store, paused) == (
        CommandStatus.APPLIED,
        "shop.orders paused at binlog.000001:200 (was STREAMING)",
    )
    assert plan.binlog is not None
    assert str(plan.binlog) == "binlog [binlog.000001:200, binlog.000001:300) shop.users"
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.PAUSED and orders.paused_at == at(200)

    pipe.head.pos = 400
    pipe.step()
    resumed = pipe.queue("resume", "shop.orders")
    pipe.head.pos = 500
    plan = pipe.step()
    assert outcome(store, resumed)[0] == CommandStatus.APPLIED
    assert plan.binlog is not None
    # The window starts at the pause position for orders; users keeps its own resume point.
    assert str(plan.binlog) == (
        "binlog [binlog.000001:200, binlog.000001:500) shop.orders,shop.users"
    )
    filters = {str(f.table_id): f for f in plan.binlog.tables}
    assert filters["shop.orders"].resume_from == at(200)
    assert filters["shop.users"].resume_from == at(400)
    assert [t.state for t in store.tables()] == [Lifecycle.STREAMING, Lifecycle.STREAMING]


def test_pipeline_pause_plans_nothing_until_resumed(store: StateStore) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    command = pipe.queue("pause")
    pipe.head.pos = 200
    assert pipe.assigner.next_plan() is None
    assert outcome(store, command)[0] == CommandStatus.APPLIED
    assert store.pipeline_paused()
    pipe.queue("resume")
    plan = pipe.step()
    assert plan.binlog is not None and str(plan.binlog).startswith("binlog [binlog.000001:100,")


def test_redump_replaces_ranges_then_catches_up_from_the_later_of_old_and_new_marks(
    store: StateStore,
) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    pipe.head.pos = 200
    pipe.step()
    command = pipe.queue("redump", "shop.orders")
    pipe.head.pos = 250
    plan = pipe.step(hw=240)
    assert "re-dump started, generation 1" in outcome(store, command)[1]
    assert [f"{p.split} replace={p.replace}" for p in plan.snapshot] == [
        "shop.orders (-inf, 1000) replace=True",
        "shop.orders [1000, 2000) replace=True",
        "shop.orders [2000, +inf) replace=True",
    ]
    assert plan.binlog is not None and [str(f.table_id) for f in plan.binlog.tables] == [
        "shop.users"
    ]
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.CATCHING_UP and orders.generation == 1
    assert orders.stream_from == at(240)
    assert {s.generation for s in store.splits(ORDERS)} == {1}


def test_one_chunk_redump_keeps_the_other_marks_and_resumes_from_the_stream_position(
    store: StateStore,
) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    pipe.head.pos = 200
    pipe.step()
    before = {s.split.split_id: s.high_watermark for s in store.splits(ORDERS)}
    command = pipe.queue("redump", "shop.orders", chunk=1)
    pipe.head.pos = 260
    plan = pipe.step(hw=150)  # a mark before the stream position must not rewind the table
    assert outcome(store, command)[0] == CommandStatus.APPLIED
    assert [f"{p.split} replace={p.replace}" for p in plan.snapshot] == [
        "shop.orders [1000, 2000) replace=True"
    ]
    after = {s.split.split_id: s.high_watermark for s in store.splits(ORDERS)}
    assert after["shop.orders:0"] == before["shop.orders:0"]
    assert after["shop.orders:1"] == at(150)
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.CATCHING_UP
    assert orders.stream_from == at(200)


def test_add_table_snapshots_while_the_others_stream_and_remove_keeps_streaming_others(
    store: StateStore,
) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    added = pipe.queue("add-table", "shop.events")
    pipe.head.pos = 200
    plan = pipe.step(hw=180)
    assert outcome(store, added) == (
        CommandStatus.APPLIED,
        "shop.events added: snapshotting on id while the others stream",
    )
    assert [str(p.split) for p in plan.snapshot] == ["shop.events (-inf, +inf)"]
    assert plan.binlog is not None
    assert [str(f.table_id) for f in plan.binlog.tables] == ["shop.orders", "shop.users"]
    events = store.table(EVENTS)
    assert (
        events is not None and events.origin == "command" and events.state == Lifecycle.CATCHING_UP
    )

    removed = pipe.queue("remove-table", "shop.users")
    pipe.head.pos = 300
    plan = pipe.step()
    assert outcome(store, removed)[0] == CommandStatus.APPLIED
    assert plan.binlog is not None
    assert [str(f.table_id) for f in plan.binlog.tables] == ["shop.events", "shop.orders"]
    users = store.table(USERS)
    assert users is not None and users.state == Lifecycle.REMOVED and users.removed_by == "command"

    back = pipe.queue("add-table", "shop.users")
    pipe.head.pos = 400
    pipe.step()
    assert outcome(store, back) == (
        CommandStatus.APPLIED,
        "shop.users captured again: CATCHING_UP from binlog.000001:200",
    )


@pytest.mark.parametrize(
    ("kind", "target", "args", "reason"),
    [
        ("pause", "shop.nope", {}, "unknown table shop.nope: the captured tables are"),
        ("resume", "shop.orders", {}, "shop.orders is not paused (it is STREAMING)"),
        ("resume", None, {}, "the pipeline is not paused"),
        ("redump", "shop.orders", {"chunk": 7}, "shop.orders has chunks 0 to 2, not 7"),
        ("add-table", "shop.orders", {}, "shop.orders is already captured (state STREAMING)"),
        ("add-table", "shop.nokey", {}, "shop.nokey has no primary key (fix: set"),
        ("add-table", "nodot", {}, "table name 'nodot' must be 'database.table'"),
    ],
)
def test_commands_the_state_cannot_accept_fail_with_the_reason(
    store: StateStore, kind: str, target: str | None, args: dict[str, int], reason: str
) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    command = store.queue_command(kind, target, args)
    pipe.head.pos = 200
    pipe.step()
    status, text = outcome(store, command)
    assert status == CommandStatus.FAILED
    assert text.startswith(reason)
    assert [t.state for t in store.tables()] == [Lifecycle.STREAMING, Lifecycle.STREAMING]


def test_redump_of_a_removed_table_is_refused_with_what_to_do(store: StateStore) -> None:
    with store.transaction() as conn:
        store.move_table(USERS, conn, Lifecycle.REMOVED, removed_by="command")
    reason = refusal("redump", "shop.users", {}, store.tables(), False)
    assert reason is not None
    assert (
        "cannot be re-dumped: add it back first with 'cdc-console add-table shop.users'" in reason
    )


def test_chunk_redump_waits_for_the_snapshot(store: StateStore) -> None:
    reason = refusal("redump", "shop.orders", {"chunk": 0}, store.tables(), False)
    assert reason is not None and "SNAPSHOTTING: its chunks are still being read" in reason


def test_commands_wait_while_a_planned_batch_is_unapplied(store: StateStore) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    pipe.head.pos = 200
    first = pipe.assigner.next_plan()
    assert first is not None
    command = pipe.queue("pause", "shop.orders")
    again = pipe.assigner.next_plan()
    assert again is not None and again.to_dict() == first.to_dict()
    assert outcome(store, command)[0] == CommandStatus.PENDING


def test_pause_during_snapshot_holds_its_chunks(store: StateStore) -> None:
    pipe = Pipeline(store)
    pipe.queue("pause", "shop.users")
    plan = pipe.step(hw=90)
    assert [str(p.split) for p in plan.snapshot] == [
        "shop.orders (-inf, 1000)",
        "shop.orders [1000, 2000)",
        "shop.orders [2000, +inf)",
    ]
    users = store.table(USERS)
    assert (
        users is not None
        and users.state == Lifecycle.PAUSED
        and users.resume_state == Lifecycle.SNAPSHOTTING
    )
    pipe.queue("resume", "shop.users")
    plan = pipe.step(hw=95)
    assert [str(p.split) for p in plan.snapshot] == ["shop.users (-inf, +inf)"]
    assert Lifecycle.REDUMP != Lifecycle.PAUSED


def test_chunk_repairs_can_be_queued_together(store: StateStore) -> None:
    pipe = Pipeline(store)
    pipe.streaming()
    first = pipe.queue("redump", "shop.orders", chunk=0)
    second = pipe.queue("redump", "shop.orders", chunk=2)
    pipe.head.pos = 200
    plan = pipe.step()
    assert outcome(store, first)[0] == CommandStatus.APPLIED
    assert outcome(store, second)[0] == CommandStatus.APPLIED
    assert [str(p.split) for p in plan.snapshot] == [
        "shop.orders (-inf, 1000)",
        "shop.orders [2000, +inf)",
    ]
    full = refusal("redump", "shop.users", {"chunk": 0}, store.tables(), False)
    assert full is None


def test_a_parked_table_takes_only_a_whole_table_redump(store: StateStore) -> None:
    pipeline = Pipeline(store)
    pipeline.streaming()
    with store.transaction() as conn:  # what the planner does when its binlog is purged
        store.move_table(ORDERS, conn, Lifecycle.NEEDS_REDUMP)
    for kind, args in (("pause", {}), ("resume", {}), ("redump", {"chunk": 0})):
        reason = refusal(kind, "shop.orders", args, store.tables(), False)
        assert reason is not None and reason.startswith(
            "shop.orders is parked (NEEDS_REDUMP): its binlog was purged or its shape changed"
        ), (kind, reason)
        assert reason.endswith("run 'cdc-console redump --table shop.orders'")
    command = pipeline.queue("redump", "shop.orders")
    pipeline.head.pos = 200
    pipeline.step()
    assert outcome(store, command)[0] == "applied"
    orders = store.table(ORDERS)
    assert orders is not None and orders.state in (Lifecycle.REDUMP, Lifecycle.CATCHING_UP)
