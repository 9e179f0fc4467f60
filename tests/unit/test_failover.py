"""Re-mapping the state to a promoted replica by GTID, with the GTID look-up faked.

The real look-up against two MariaDB servers in replication is
``tests/integration/test_gtid_failover.py``; here: what is rewritten, what is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.reports import SplitResult
from cdc_console.core.schema import TableId
from cdc_console.core.splits import (
    BinlogSplit,
    FinishedSnapshotSplitInfo,
    SnapshotSplit,
    TableStreamFilter,
)
from cdc_console.errors import SourceError
from cdc_console.source.failover import follow_failover
from cdc_console.state.store import StateStore

ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")
PRIMARY, REPLICA = "mariadb server_id=1", "mariadb server_id=2"


def old(pos: int, seq: int, file: str = "binlog.000007") -> BinlogOffset:
    return BinlogOffset(file, pos, gtid=f"0-1-{seq}")


#: where the replica holds each GTID state: other file names, other offsets
ON_REPLICA = {f"0-1-{seq}": BinlogOffset("replica-bin.000002", 1000 + seq) for seq in range(100)}


def translate(gtid: str) -> BinlogOffset:
    return ON_REPLICA[gtid]


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.STREAMING, old(500, 50))
    store.ensure_table(USERS, "id", Lifecycle.SNAPSHOTTING)
    split = SnapshotSplit(USERS, 0, "id", ChunkRange(None, 10))
    store.add_splits(USERS, [split, SnapshotSplit(USERS, 1, "id", ChunkRange(10, None))])
    with store.transaction() as conn:
        store.finish_split(
            split, SplitResult(split.split_id, old(300, 30), old(400, 40), 9, 0, 0.0, 1), conn
        )
        store.set_offset("committed", old(500, 50), conn)
    return store


def test_the_first_server_is_recorded_and_the_same_one_changes_nothing(store: StateStore) -> None:
    assert follow_failover(store, PRIMARY, translate) is None
    assert store.source_identity() == PRIMARY
    before = store.stored_positions()
    assert follow_failover(store, PRIMARY, translate) is None
    assert store.stored_positions() == before


def test_a_new_server_gets_every_position_and_the_pending_plan_by_gtid(store: StateStore) -> None:
    follow_failover(store, PRIMARY, translate)
    finished = FinishedSnapshotSplitInfo(
        SnapshotSplit(USERS, 0, "id", ChunkRange(None, 10)), old(400, 40)
    )
    window = BinlogSplit(
        old(500, 50),
        old(900, 90),
        (
            TableStreamFilter(ORDERS, old(500, 50)),
            TableStreamFilter(USERS, old(400, 40), (finished,)),
        ),
    )
    pending = BatchPlan(3, (), window, 5400, old(900, 90))
    store.create_batch(3, pending.to_dict(), [])

    message = follow_failover(store, REPLICA, translate)
    assert message is not None and message.startswith(
        "source failover followed: mariadb server_id=1 -> mariadb server_id=2; 4 stored "
        "position(s) re-mapped by GTID (4 distinct GTID state(s)), batch 3's plan too"
    )
    assert store.source_identity() == REPLICA
    orders = store.table(ORDERS)
    assert orders is not None and orders.stream_from == BinlogOffset("replica-bin.000002", 1050)
    assert orders.stream_from.gtid == "0-1-50"
    assert store.committed_offset() == BinlogOffset("replica-bin.000002", 1050)
    assert [str(f) for f in store.finished_splits(USERS)] == [
        "shop.users (-inf, 10) hw=replica-bin.000002:1040"
    ]
    replanned = store.batch(3)
    assert replanned is not None and replanned.status == "planned"
    assert str(replanned.plan.binlog) == (
        "binlog [replica-bin.000002:1050, replica-bin.000002:1090) shop.orders,shop.users"
    )
    assert [str(f) for f in replanned.plan.binlog.tables[1].finished_splits] == [  # type: ignore[union-attr]
        "shop.users (-inf, 10) hw=replica-bin.000002:1040"
    ]
    assert any(e.message == message for e in store.events())


def test_a_position_inside_a_transaction_keeps_its_place_in_it(store: StateStore) -> None:
    follow_failover(store, PRIMARY, translate)
    inside = BinlogOffset("binlog.000007", 500, events_to_skip=2, rows_to_skip=3, gtid="0-1-50")
    with store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.STREAMING, stream_from=inside)
    follow_failover(store, REPLICA, translate)
    orders = store.table(ORDERS)
    assert orders is not None and orders.stream_from is not None
    assert orders.stream_from.to_dict() == {
        "file": "replica-bin.000002",
        "pos": 1050,
        "events": 2,
        "rows": 3,
        "gtid": "0-1-50",
    }


def test_file_positions_only_refuse_to_follow(store: StateStore) -> None:
    follow_failover(store, PRIMARY, translate)
    with pytest.raises(SourceError, match=r"source\.position is \"file\""):
        follow_failover(store, REPLICA, translate, mode="file")
    assert store.source_identity() == PRIMARY


def test_a_position_without_gtid_refuses_and_changes_nothing(store: StateStore) -> None:
    follow_failover(store, PRIMARY, translate)
    with store.transaction() as conn:
        store.set_offset("committed", BinlogOffset("binlog.000007", 500), conn)
    before = store.stored_positions()
    with pytest.raises(SourceError, match=r"1 stored position\(s\) carry no GTID"):
        follow_failover(store, REPLICA, translate)
    assert store.stored_positions() == before and store.source_identity() == PRIMARY


def test_a_server_lacking_transactions_refuses_and_changes_nothing(store: StateStore) -> None:
    follow_failover(store, PRIMARY, translate)
    before = store.stored_positions()

    def lacking(gtid: str) -> BinlogOffset:
        raise SourceError(f"the source server cannot resume this pipeline at GTID {gtid}")

    with pytest.raises(SourceError, match="cannot resume this pipeline at GTID"):
        follow_failover(store, REPLICA, lacking)
    assert store.stored_positions() == before and store.source_identity() == PRIMARY


def test_a_parked_table_neither_blocks_a_failover_nor_keeps_old_coordinates(
    store: StateStore,
) -> None:
    follow_failover(store, PRIMARY, translate)
    with store.transaction() as conn:  # parked at a DDL: a position without GTID
        store.move_table(
            ORDERS, conn, Lifecycle.NEEDS_REDUMP, stream_from=BinlogOffset("binlog.000007", 450)
        )
    follow_failover(store, REPLICA, translate)
    orders = store.table(ORDERS)
    assert orders is not None and orders.state == Lifecycle.NEEDS_REDUMP
    assert orders.stream_from is None
    assert store.committed_offset() == BinlogOffset("replica-bin.000002", 1050)
