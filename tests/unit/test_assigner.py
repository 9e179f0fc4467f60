"""Planning and committing batches over a real state database, with a fake splitter and head."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan, BatchTiming
from cdc_console.core.reports import NO_POSITION, SplitResult, WindowResult
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import SnapshotSplit
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.committer import commit_batch
from cdc_console.source.evolution import Reread
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")


def schema(table_id: TableId) -> TableSchema:
    return TableSchema(
        table_id, (ColumnInfo("id", "int", "int(11)", nullable=False),), ("id",), "id"
    )


def fake_split(table: TableSchema) -> list[SnapshotSplit]:
    bounds = {"orders": [None, 1000, 2000, None]}.get(table.table_id.table, [None, None])
    return [
        SnapshotSplit(table.table_id, i, "id", ChunkRange(a, b))
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    ]


class Head:
    def __init__(self) -> None:
        self.pos = 100

    def __call__(self) -> BinlogOffset:
        return BinlogOffset("binlog.000001", self.pos)


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    store = StateStore(tmp_path / "state.sqlite")
    for table_id in (ORDERS, USERS):
        store.ensure_table(table_id, "id", Lifecycle.SNAPSHOTTING)
        store.set_schema(table_id, schema(table_id))
    return store


def finish(
    store: StateStore, plan: BatchPlan, hw: dict[str, int], window: WindowResult | None = None
) -> list[str]:
    results = [
        SplitResult(
            p.split.split_id,
            BinlogOffset("binlog.000001", hw[p.split.split_id] - 1),
            BinlogOffset("binlog.000001", hw[p.split.split_id]),
            10,
            0,
            0.0,
            5,
        )
        for p in plan.snapshot
    ]
    return commit_batch(store, plan, results, window)


def test_snapshot_then_catch_up_then_stream(store: StateStore) -> None:
    head = Head()
    assigner = HybridSplitAssigner(store, fake_split, head, range(5400, 5403), 2)
    plan = assigner.next_plan()
    assert plan is not None
    assert [str(p.split) for p in plan.snapshot] == [
        "shop.orders (-inf, 1000)",
        "shop.orders [1000, 2000)",
    ]
    assert [p.server_id for p in plan.snapshot] == [5401, 5402]
    assert plan.binlog is None
    # The same plan comes back until it is applied: a replay reads the same splits.
    again = assigner.next_plan()
    assert again is not None and again.to_dict() == plan.to_dict()

    finish(store, plan, {"shop.orders:0": 150, "shop.orders:1": 120})
    plan2 = assigner.next_plan()
    assert plan2 is not None and plan2.batch_no == 2
    assert [str(p.split) for p in plan2.snapshot] == [
        "shop.orders [2000, +inf)",
        "shop.users (-inf, +inf)",
    ]
    head.pos = 300
    changes = finish(store, plan2, {"shop.orders:2": 200, "shop.users:0": 250})
    assert changes == [
        "shop.orders: snapshot finished, CATCHING_UP from binlog.000001:120",
        "shop.users: snapshot finished, CATCHING_UP from binlog.000001:250",
    ]

    plan3 = assigner.next_plan()
    assert plan3 is not None and plan3.binlog is not None and not plan3.snapshot
    assert (
        str(plan3.binlog) == "binlog [binlog.000001:120, binlog.000001:300) shop.orders,shop.users"
    )
    orders_filter = plan3.binlog.tables[0]
    assert [str(f) for f in orders_filter.finished_splits] == [
        "shop.orders (-inf, 1000) hw=binlog.000001:150",
        "shop.orders [1000, 2000) hw=binlog.000001:120",
        "shop.orders [2000, +inf) hw=binlog.000001:200",
    ]
    changes = commit_batch(store, plan3, [], WindowResult({"shop.orders": 3}, 1, {}))
    assert [t.state for t in store.tables()] == [Lifecycle.STREAMING, Lifecycle.STREAMING]
    assert store.committed_offset() == BinlogOffset("binlog.000001", 300)
    assert store.table(ORDERS) is not None and store.table(ORDERS).events_applied == 3  # type: ignore[union-attr]

    # Nothing new on the server: no batch.
    assert assigner.next_plan() is None
    head.pos = 400
    plan4 = assigner.next_plan()
    assert plan4 is not None and plan4.binlog is not None
    assert all(f.finished_splits == () for f in plan4.binlog.tables)
    assert str(plan4.binlog).startswith("binlog [binlog.000001:300, binlog.000001:400)")


def test_finished_splits_survive_a_restart(store: StateStore, tmp_path: Path) -> None:
    assigner = HybridSplitAssigner(store, fake_split, Head(), range(5400, 5403), 2)
    plan = assigner.next_plan()
    assert plan is not None
    finish(store, plan, {"shop.orders:0": 150, "shop.orders:1": 120})
    store.close()

    reopened = StateStore(tmp_path / "state.sqlite")
    calls: list[TableId] = []

    def must_not_resplit(table: TableSchema) -> list[SnapshotSplit]:
        calls.append(table.table_id)
        return fake_split(table)

    assigner = HybridSplitAssigner(reopened, must_not_resplit, Head(), range(5400, 5403), 2)
    plan2 = assigner.next_plan()
    assert plan2 is not None
    assert [str(p.split) for p in plan2.snapshot] == [
        "shop.orders [2000, +inf)",
        "shop.users (-inf, +inf)",
    ]
    assert calls == []  # both tables were split before the restart; nothing is split again
    states = {s.split.split_id: s.status for s in reopened.splits(ORDERS)}
    assert states == {
        "shop.orders:0": "FINISHED",
        "shop.orders:1": "FINISHED",
        "shop.orders:2": "ASSIGNED",
    }
    assert reopened.table(ORDERS).state == Lifecycle.SNAPSHOTTING  # type: ignore[union-attr]
    assert Lifecycle.CATCHING_UP != Lifecycle.SNAPSHOTTING


def test_chunks_share_reader_server_ids_round_robin(store: StateStore) -> None:
    """More chunks than reader ids: ids repeat, and each id's chunks form one sequential group."""
    assigner = HybridSplitAssigner(store, fake_split, Head(), range(5400, 5405), 3, readers=2)
    plan = assigner.next_plan()
    assert plan is not None
    assert [p.server_id for p in plan.snapshot] == [5401, 5402, 5401]
    assert [(sid, [str(p.split) for p in group]) for sid, group in plan.reader_groups()] == [
        (5401, ["shop.orders (-inf, 1000)", "shop.orders [2000, +inf)"]),
        (5402, ["shop.orders [1000, 2000)"]),
    ]


def test_state_schema_is_versioned(store: StateStore) -> None:
    assert store.schema_version >= 1


def test_a_draining_job_gets_its_planned_batch_again_and_no_new_one(store: StateStore) -> None:
    assigner = HybridSplitAssigner(store, fake_split, Head(), range(5400, 5403), 2)
    plan = assigner.next_plan()
    assert plan is not None
    store.set_draining(True)
    again = assigner.next_plan()
    assert again is not None and again.to_dict() == plan.to_dict()  # the batch in flight
    finish(store, plan, {"shop.orders:0": 150, "shop.orders:1": 120})
    assert assigner.next_plan() is None
    store.set_draining(False)
    follow = assigner.next_plan()
    assert follow is not None and follow.batch_no == 2


def snapshot_all(store: StateStore, assigner: HybridSplitAssigner) -> None:
    """Both tables' chunks in one batch (8 per batch), finished with marks 110 to 140."""
    plan = assigner.next_plan()
    assert plan is not None
    hws = {"shop.orders:0": 110, "shop.orders:1": 120, "shop.orders:2": 130, "shop.users:0": 140}
    finish(store, plan, hws)


def test_a_table_whose_binlog_was_purged_is_parked_and_the_others_go_on(
    store: StateStore,
) -> None:
    """ORDERS was paused in binlog.000001; the server purged it meanwhile. Resumed, ORDERS is
    parked in NEEDS_REDUMP (with the fix in the events) and USERS keeps streaming."""
    files = ["binlog.000001", "binlog.000002"]
    head = Head()
    assigner = HybridSplitAssigner(
        store, fake_split, head, range(5400, 5403), 8, binlog_files=lambda: list(files)
    )
    snapshot_all(store, assigner)
    head.pos = 200
    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    commit_batch(store, plan, [], WindowResult({}, 0, {}))
    assert [t.state for t in store.tables()] == [Lifecycle.STREAMING, Lifecycle.STREAMING]

    with store.transaction() as conn:  # as CommandProcessor._pause does
        store.move_table(ORDERS, conn, Lifecycle.PAUSED, resume_state=Lifecycle.STREAMING)
    files[:] = ["binlog.000002", "binlog.000003"]  # PURGE BINARY LOGS TO 'binlog.000002'
    head_at = BinlogOffset("binlog.000003", 500)
    assigner.read_head = lambda: head_at
    with store.transaction() as conn:  # resumed: catches up from binlog.000001:200, purged
        store.move_table(ORDERS, conn, Lifecycle.CATCHING_UP, resume_state=None)
    with store.transaction() as conn:
        store.move_table(
            USERS, conn, Lifecycle.STREAMING, stream_from=BinlogOffset("binlog.000002", 4)
        )

    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    assert str(plan.binlog) == "binlog [binlog.000002:4, binlog.000003:500) shop.users"
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.NEEDS_REDUMP
    parked = [e for e in store.events() if e.level == "error"]
    assert len(parked) == 1 and parked[0].table_id == "shop.orders"
    assert "must read the binlog from binlog.000001:200" in parked[0].message
    assert "oldest binlog is now binlog.000002" in parked[0].message
    assert "Fix: cdc-console redump --table shop.orders" in parked[0].message


def test_a_table_whose_shape_changed_in_the_window_is_parked_at_the_ddl(
    store: StateStore,
) -> None:
    head = Head()
    assigner = HybridSplitAssigner(store, fake_split, head, range(5400, 5403), 8)
    snapshot_all(store, assigner)
    head.pos = 300
    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    ddl_at = BinlogOffset("binlog.000001", 200)
    changes = commit_batch(
        store,
        plan,
        [],
        WindowResult(
            {"shop.orders": 2, "shop.users": 1},
            0,
            {},
            {"shop.users": SchemaChange(ddl_at, ddl_at, "ALTER TABLE users ADD COLUMN extra INT")},
        ),
    )
    orders, users = store.table(ORDERS), store.table(USERS)
    assert orders is not None and orders.state == Lifecycle.STREAMING
    assert orders.stream_from == BinlogOffset("binlog.000001", 300)
    assert users is not None and users.state == Lifecycle.NEEDS_REDUMP
    assert users.stream_from == ddl_at and users.events_applied == 1
    assert changes[-1].startswith(
        "shop.users changed shape at binlog.000001:200 (ALTER TABLE users ADD COLUMN extra INT): "
        "parked (NEEDS_REDUMP)"
    )
    head.pos = 400
    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    assert str(plan.binlog) == "binlog [binlog.000001:300, binlog.000001:400) shop.orders"


@pytest.mark.parametrize(
    ("outcome", "state", "logged"),
    [
        ("in place", Lifecycle.CATCHING_UP, "applied online (added column(s) extra); it goes on"),
        ("re-read", Lifecycle.REDUMP, "followed by reading it again online (TRUNCATE emptied"),
        ("park", Lifecycle.NEEDS_REDUMP, "not applied online: its key changed"),
    ],
)
def test_a_held_table_goes_on_in_place_is_read_again_or_is_parked(
    store: StateStore, outcome: str, state: Lifecycle, logged: str
) -> None:
    """What the planner's settle callback answers decides, before the next window is cut;
    USERS streams on whatever happens to ORDERS."""
    head = Head()
    wider = TableSchema(
        ORDERS, (*schema(ORDERS).columns, ColumnInfo("extra", "int", "int(11)")), ("id",), "id"
    )
    ddl_at, after = BinlogOffset("binlog.000001", 200), BinlogOffset("binlog.000001", 220)
    answers: dict[str, tuple[TableSchema, BinlogOffset] | Reread | str] = {
        "in place": (wider, after),
        "re-read": Reread("TRUNCATE emptied it without row events", wider),
        "park": "its key changed (id -> note)",
    }
    assigner = HybridSplitAssigner(
        store,
        fake_split,
        head,
        range(5400, 5403),
        8,
        settle_schema=lambda table, change: answers[outcome],
    )
    snapshot_all(store, assigner)
    head.pos = 300
    plan = assigner.next_plan()
    assert plan is not None
    change = SchemaChange(ddl_at, after, "ALTER TABLE orders ADD COLUMN extra INT")
    commit_batch(
        store,
        plan,
        [],
        WindowResult({"shop.orders": 1, "shop.users": 1}, 0, {}, {"shop.orders": change}),
        evolve=True,
    )
    held = store.table(ORDERS)
    assert held is not None and held.schema_pending and held.stream_from == ddl_at

    head.pos = 400
    plan = assigner.next_plan()
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == state and not orders.schema_pending
    assert any(logged in e.message for e in store.events()), [e.message for e in store.events()]
    assert plan is not None and plan.binlog is not None
    # the plan names the table reshaped in place, so its mirror takes the columns now
    assert plan.reshaped == ((ORDERS,) if outcome == "in place" else ())
    assert BatchPlan.from_dict(plan.to_dict()) == plan
    if outcome == "in place":
        assert orders.stream_from == after
        assert store.schemas()[ORDERS] == wider
        assert (
            str(plan.binlog)
            == "binlog [binlog.000001:220, binlog.000001:400) shop.orders,shop.users"
        )
    else:
        assert str(plan.binlog) == "binlog [binlog.000001:300, binlog.000001:400) shop.users"
    if outcome == "re-read":
        assert store.schemas()[ORDERS] == wider
        assert [str(s.split) for s in plan.snapshot] == [
            "shop.orders (-inf, 1000)",
            "shop.orders [1000, 2000)",
            "shop.orders [2000, +inf)",
        ]


def twenty_chunks(table: TableSchema) -> list[SnapshotSplit]:
    bounds = [None, *range(100, 2000, 100), None]
    return [
        SnapshotSplit(table.table_id, i, "id", ChunkRange(a, b))
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    ]


def took(store: StateStore, batch_no: int, seconds: float) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE batches SET applied_at = created_at + ? WHERE batch_no = ?",
            (seconds, batch_no),
        )


def test_while_a_table_streams_a_batch_carries_about_a_seconds_worth_of_chunks(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)  # an added table, say
    store.set_schema(ORDERS, schema(ORDERS))
    store.ensure_table(USERS, "id", Lifecycle.STREAMING, BinlogOffset("binlog.000001", 50))
    store.set_schema(USERS, schema(USERS))
    budget = BatchBudget(1.0, floor=2, ceiling=6)
    head = Head()
    assigner = HybridSplitAssigner(store, twenty_chunks, head, range(5400, 5403), 10, budget=budget)

    def next_batch(seconds: float, streams: bool = True) -> list[str]:
        plan = assigner.next_plan()
        assert plan is not None and (plan.binlog is not None) == streams
        # the plan says which budget paced its chunks (the forecast goes by it)
        assert plan.budget_seconds == (1.0 if streams else None)
        assert BatchPlan.from_dict(plan.to_dict()) == plan
        hw = {p.split.split_id: 60 + i for i, p in enumerate(plan.snapshot)}
        finish(store, plan, hw, WindowResult({}, 0, {}) if streams else None)
        took(store, plan.batch_no, seconds)
        head.pos += 10
        return [p.split.split_id for p in plan.snapshot]

    # nothing measured yet: one chunk per reader
    assert next_batch(1.0) == ["shop.orders:0", "shop.orders:1"]
    # 0.5 s a chunk (no chunk-free batch: the fixed part is charged to the chunks)
    assert len(next_batch(0.2)) == 2
    # chunks got cheaper: the median of 0.5 and 0.1 s a chunk fits 3 in a second
    assert len(next_batch(0.6)) == 3
    assert len(next_batch(0.5)) == 5  # 0.5, 0.1, 0.2: 0.2 s a chunk
    # with the table no longer streaming, nobody waits: a full batch
    with store.transaction() as conn:
        store.move_table(USERS, conn, Lifecycle.PAUSED, paused_at=BinlogOffset("binlog.000001", 50))
    assert len(next_batch(0.5, streams=False)) == 6


def test_the_budget_separates_a_batch_fixed_part_from_its_chunks() -> None:
    timings = [BatchTiming(0, 0.8), BatchTiming(4, 1.6), BatchTiming(0, 0.8), BatchTiming(8, 2.4)]
    assert BatchBudget.chunk_seconds(timings) == pytest.approx(
        0.2
    )  # (1.6 - 0.8) / 4, (2.4 - 0.8) / 8
    assert BatchBudget(1.0, floor=2, ceiling=64).chunks(timings, streaming=True) == 5
    assert BatchBudget(0.1, floor=2, ceiling=64).chunks(timings, streaming=True) == 2
    assert BatchBudget(60, floor=2, ceiling=64).chunks(timings, streaming=True) == 64
    assert BatchBudget(1.0, floor=2, ceiling=64).chunks(timings, streaming=False) == 64
    assert BatchBudget(0, floor=2, ceiling=64).chunks(timings, streaming=True) == 64
    assert BatchBudget.chunk_seconds([BatchTiming(0, 0.8)]) is None


def test_a_bounded_window_keeps_a_table_catching_up_until_past_its_last_chunk(
    store: StateStore,
) -> None:
    """A window bounded before the last chunk's high watermark must not let the table stream
    unfiltered: the changes between the cut and that watermark are in the chunk already."""
    head = Head()
    cuts: list[tuple[int, int]] = []

    def window_end(start: BinlogOffset, now: BinlogOffset) -> BinlogOffset:
        cuts.append((start.pos, now.pos))
        return BinlogOffset("binlog.000001", min(now.pos, start.pos + 100))

    assigner = HybridSplitAssigner(
        store, fake_split, head, range(5400, 5403), 4, window_end=window_end
    )
    plan = assigner.next_plan()
    assert plan is not None
    hws = {"shop.orders:0": 150, "shop.orders:1": 320, "shop.orders:2": 200, "shop.users:0": 250}
    finish(store, plan, hws)
    head.pos = 400

    ends = []
    states = []
    while (window := assigner.next_plan()) is not None:
        assert window.binlog is not None and not window.snapshot
        commit_batch(store, window, [], WindowResult())
        ends.append(window.binlog.end.pos)
        states.append([t.state.name for t in store.tables()])

    assert cuts[0] == (150, 400)
    assert ends == [250, 350, 400]
    # each table is filtered by its chunks until a window passed its last high watermark:
    # users' (250) with the first window, orders' (320) only with the second
    assert states == [
        ["CATCHING_UP", "STREAMING"],
        ["STREAMING", "STREAMING"],
        ["STREAMING", "STREAMING"],
    ]


def test_a_failed_chunk_parks_its_table_and_the_batch_commits_the_rest(store: StateStore) -> None:
    """A chunk whose read failed for good (``SplitResult.failed``) parks its table; the other
    chunks of the batch finish; a later plan never reads the parked table's chunks."""
    assigner = HybridSplitAssigner(store, fake_split, Head(), range(5400, 5403), 8)
    plan = assigner.next_plan()
    assert plan is not None
    results = [
        SplitResult(
            p.split.split_id,
            BinlogOffset("binlog.000001", 100),
            BinlogOffset("binlog.000001", 110),
            10,
            0,
            0.0,
            5,
        )
        if p.split.table_id == ORDERS
        else SplitResult(
            p.split.split_id,
            NO_POSITION,
            NO_POSITION,
            0,
            0,
            0.0,
            0,
            failed="ValueError: a value its reader cannot take",
        )
        for p in plan.snapshot
    ]
    commit_batch(store, plan, results, None)
    states = {str(t.table_id): t.state for t in store.tables()}
    assert states == {"shop.orders": Lifecycle.CATCHING_UP, "shop.users": Lifecycle.NEEDS_REDUMP}
    parked = [e.message for e in store.events() if e.level == "error"]
    assert parked == [
        "shop.users parked (NEEDS_REDUMP): chunk shop.users:0 could not be read: ValueError: a "
        "value its reader cannot take. Nothing of it past its mirror was applied; the other "
        "tables go on. Fix the cause (a value its mirror type cannot hold, a type or shape "
        "changed outside the binlog), then cdc-console redump --table shop.users"
    ]
    later = assigner.next_plan()
    assert later is None or all(p.split.table_id != USERS for p in later.snapshot)


def test_a_table_the_sink_refused_is_parked_where_its_mirror_is(store: StateStore) -> None:
    head = Head()
    assigner = HybridSplitAssigner(store, fake_split, head, range(5400, 5403), 8)
    snapshot_all(store, assigner)
    head.pos = 200
    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    commit_batch(store, plan, [], WindowResult({}, 0, {}))
    head.pos = 300
    plan = assigner.next_plan()
    assert plan is not None and plan.binlog is not None
    commit_batch(
        store,
        plan,
        [],
        WindowResult({"shop.orders": 2, "shop.users": 1}, 0, {}),
        refused={"shop.users": "SinkTypeError: 'x' is a str, expected int"},
    )
    orders, users = store.table(ORDERS), store.table(USERS)
    assert orders is not None and users is not None
    assert (orders.state, orders.stream_from) == (
        Lifecycle.STREAMING,
        BinlogOffset("binlog.000001", 300),
    )
    assert (users.state, users.stream_from) == (
        Lifecycle.NEEDS_REDUMP,
        BinlogOffset("binlog.000001", 200),
    )
    assert store.committed_offset() == BinlogOffset("binlog.000001", 300)
    later = assigner.next_plan()
    assert later is None or all(
        f.table_id != USERS for f in (later.binlog.tables if later.binlog else ())
    )


def test_a_tail_that_cannot_be_split_again_is_read_whole(store: StateStore) -> None:
    """Splitting the open last chunk again only keeps reads small: when the server refuses the
    query (the table went away meanwhile, say), the chunk is handed out as it is."""
    import pymysql

    from cdc_console.source.assigner import SnapshotSplitAssigner

    def refuse(_schema: TableSchema, _tail: ChunkRange) -> list[ChunkRange]:
        raise pymysql.err.ProgrammingError(1146, "Table 'shop.orders' doesn't exist")

    assigner = SnapshotSplitAssigner(store, fake_split, refuse)
    got = assigner.next_splits([schema(ORDERS)], 10)
    assert [str(s.range) for s in got] == ["(-inf, 1000)", "[1000, 2000)", "[2000, +inf)"]


def test_a_table_the_server_will_not_split_is_parked_and_the_others_split(
    store: StateStore,
) -> None:
    """Gone between being listed and being split: that table parks with the reason and the
    fix, the other's chunks are handed out, and the plan does not fail."""
    import pymysql

    from cdc_console.source.assigner import SnapshotSplitAssigner

    def split(table: TableSchema) -> list[SnapshotSplit]:
        if table.table_id == ORDERS:
            raise pymysql.err.ProgrammingError(1146, "Table 'shop.orders' doesn't exist")
        return fake_split(table)

    got = SnapshotSplitAssigner(store, split).next_splits([schema(ORDERS), schema(USERS)], 10)
    assert [s.split_id for s in got] == ["shop.users:0"]
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.NEEDS_REDUMP
    said = [e.message for e in store.events() if "shop.orders parked" in e.message]
    assert said and "doesn't exist" in said[0] and "redump --table shop.orders" in said[0]
