"""The table lifecycle: one table of moves, and the state database refuses any other."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.core.lifecycle import (
    TRANSITIONS,
    CommandKind,
    IllegalTransition,
    Lifecycle,
    check_move,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")


def moves_from(state: Lifecycle | None) -> list[str]:
    return sorted(str(target) for (source, target) in TRANSITIONS if source == state)


def test_the_moves_each_state_allows() -> None:
    assert moves_from(None) == ["SNAPSHOTTING", "STREAMING"]
    assert moves_from(Lifecycle.SNAPSHOTTING) == [
        "CATCHING_UP",
        "NEEDS_REDUMP",  # its shape changed mid-snapshot in a way the mirror cannot follow
        "PAUSED",
        "REDUMP",
        "REMOVED",
        "SNAPSHOT_DONE",
    ]
    assert moves_from(Lifecycle.CATCHING_UP) == [
        "NEEDS_REDUMP",
        "PAUSED",
        "REDUMP",
        "REMOVED",
        "STREAMING",
    ]
    assert moves_from(Lifecycle.STREAMING) == ["NEEDS_REDUMP", "PAUSED", "REDUMP", "REMOVED"]
    assert moves_from(Lifecycle.PAUSED) == [
        "CATCHING_UP",
        "NEEDS_REDUMP",
        "REDUMP",
        "REMOVED",
        "SNAPSHOTTING",
    ]
    assert moves_from(Lifecycle.REDUMP) == [
        "CATCHING_UP",
        "NEEDS_REDUMP",
        "PAUSED",
        "REMOVED",
        "SNAPSHOT_DONE",
    ]
    assert moves_from(Lifecycle.SNAPSHOT_DONE) == ["REDUMP", "REMOVED"]
    assert moves_from(Lifecycle.REMOVED) == ["CATCHING_UP", "SNAPSHOTTING", "SNAPSHOT_DONE"]
    assert moves_from(Lifecycle.NEEDS_REDUMP) == ["REDUMP", "REMOVED"]


def test_every_state_can_be_left_and_reached() -> None:
    sources = {source for source, _ in TRANSITIONS}
    targets = {target for _, target in TRANSITIONS}
    assert set(Lifecycle) <= sources
    assert set(Lifecycle) <= targets


def test_a_move_outside_the_table_names_what_is_allowed() -> None:
    assert check_move(ORDERS, Lifecycle.CATCHING_UP, Lifecycle.STREAMING) == (
        "caught up with the main stream"
    )
    assert check_move(ORDERS, "STREAMING", Lifecycle.STREAMING) == "unchanged"
    with pytest.raises(IllegalTransition) as raised:
        check_move(ORDERS, Lifecycle.STREAMING, Lifecycle.SNAPSHOTTING)
    assert str(raised.value) == (
        "shop.orders: no lifecycle move from STREAMING to SNAPSHOTTING "
        "(from STREAMING a table may go to NEEDS_REDUMP, PAUSED, REDUMP, REMOVED)"
    )
    with pytest.raises(IllegalTransition, match="from new to CATCHING_UP"):
        check_move(ORDERS, None, Lifecycle.CATCHING_UP)


def test_state_values_are_the_stored_and_shown_strings() -> None:
    assert [str(s) for s in Lifecycle] == [
        "SNAPSHOTTING",
        "CATCHING_UP",
        "STREAMING",
        "PAUSED",
        "REDUMP",
        "SNAPSHOT_DONE",
        "REMOVED",
        "NEEDS_REDUMP",
    ]
    assert CommandKind.REDUMP == "redump" and CommandKind.ADD_TABLE == "add-table"
    assert [s for s in Lifecycle if s.reads_chunks] == [Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP]
    assert [s for s in Lifecycle if s.reads_binlog] == [
        Lifecycle.CATCHING_UP,
        Lifecycle.STREAMING,
    ]


def test_the_store_moves_tables_only_through_the_table(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    with pytest.raises(IllegalTransition):
        store.ensure_table(ORDERS, "id", Lifecycle.PAUSED)
    assert store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    position = BinlogOffset("binlog.000001", 400)
    with store.transaction() as conn:
        was = store.move_table(ORDERS, conn, Lifecycle.CATCHING_UP, stream_from=position)
    assert was == Lifecycle.SNAPSHOTTING
    table = store.table(ORDERS)
    assert table is not None
    assert table.state is Lifecycle.CATCHING_UP and table.stream_from == position

    with pytest.raises(IllegalTransition), store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.SNAPSHOT_DONE, stream_from=None)
    table = store.table(ORDERS)
    assert table is not None
    assert table.state is Lifecycle.CATCHING_UP and table.stream_from == position  # untouched

    with (
        pytest.raises(ValueError, match="a state change is move_table's"),
        store.transaction() as c,
    ):
        store.update_table(ORDERS, c, state=Lifecycle.STREAMING)
    with pytest.raises(LookupError), store.transaction() as conn:
        store.move_table(TableId("shop", "nope"), conn, Lifecycle.STREAMING)
    store.close()


def test_a_table_captured_again_resumes_where_it_stopped() -> None:
    from cdc_console.core.lifecycle import readmitted_state

    cases = [(s, c, o) for s in (False, True) for c in (False, True) for o in (False, True)]
    found = {case: readmitted_state(*case) for case in cases}
    assert found[True, False, False] == Lifecycle.CATCHING_UP
    assert found[True, False, True] == Lifecycle.SNAPSHOT_DONE
    assert {found[c] for c in cases if not c[0] or c[1]} == {Lifecycle.SNAPSHOTTING}
    assert all((Lifecycle.REMOVED, state) in TRANSITIONS for state in found.values())
