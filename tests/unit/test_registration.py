"""Registering the captured tables at start-up, over a real state database: new, retired,
named again, and changed while the job was down (followed as ``schema_changes`` says)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig, config_from_dict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.core.schema_change import SchemaChange
from cdc_console.errors import SchemaChangedError
from cdc_console.source.registration import TableRegistration
from cdc_console.state.store import StateStore
from tests.unit.test_assigner import ORDERS, USERS, schema

HEAD = BinlogOffset("binlog.000007", 4711)
WIDER = replace(
    schema(ORDERS),
    columns=(*schema(ORDERS).columns, ColumnInfo("note", "varchar", "varchar(20)")),
)

Followed = tuple[TableId, SchemaChange | None, str, str, TableSchema | None]


def config(**pipeline: object) -> PipelineConfig:
    return config_from_dict({"source": {"tables": ["shop.*"]}, "pipeline": pipeline})


class Start:
    """One start-up's registration; counts the head reads and records what was followed."""

    def __init__(self, store: StateStore, cfg: PipelineConfig) -> None:
        self.heads = 0
        self.followed: list[Followed] = []

        def head() -> BinlogOffset:
            self.heads += 1
            return HEAD

        def followed(*told: object) -> None:
            self.followed.append(told)  # type: ignore[arg-type]

        self.registration = TableRegistration(store, cfg, head, followed)

    def register(self, *schemas: TableSchema) -> None:
        self.registration.register(list(schemas))


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    return StateStore(tmp_path / "state.sqlite")


def states(store: StateStore) -> dict[str, str]:
    return {str(t.table_id): str(t.state) for t in store.tables()}


def test_new_tables_snapshot_and_keep_their_described_shape(store: StateStore) -> None:
    start = Start(store, config())
    start.register(schema(ORDERS), schema(USERS))
    assert states(store) == {"shop.orders": "SNAPSHOTTING", "shop.users": "SNAPSHOTTING"}
    assert store.schemas() == {ORDERS: schema(ORDERS), USERS: schema(USERS)}
    assert start.heads == 0  # a snapshot does not start from the head


def test_latest_offset_streams_from_the_head_read_once(store: StateStore) -> None:
    cfg = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "snapshot": {"startup_mode": "latest-offset"}}
    )
    start = Start(store, cfg)
    start.register(schema(ORDERS), schema(USERS))
    assert states(store) == {"shop.orders": "STREAMING", "shop.users": "STREAMING"}
    orders = store.table(ORDERS)
    assert orders is not None and orders.stream_from == HEAD
    assert start.heads == 1


def test_a_table_left_out_of_the_config_retires_and_resumes_when_named_again(
    store: StateStore,
) -> None:
    Start(store, config()).register(schema(ORDERS), schema(USERS))
    Start(store, config()).register(schema(ORDERS))
    assert states(store)["shop.users"] == "REMOVED"
    Start(store, config()).register(schema(ORDERS), schema(USERS))
    assert states(store)["shop.users"] == "SNAPSHOTTING"


def test_a_table_changed_while_down_is_read_again_and_the_history_told(
    store: StateStore,
) -> None:
    Start(store, config()).register(schema(ORDERS), schema(USERS))
    start = Start(store, config())
    start.register(WIDER, schema(USERS))
    assert states(store) == {"shop.orders": "REDUMP", "shop.users": "SNAPSHOTTING"}
    assert store.schemas()[ORDERS] == WIDER
    [(table_id, change, outcome, _detail, shape)] = start.followed
    assert (table_id, change, outcome, shape) == (ORDERS, None, "re-read", WIDER)


def test_park_parks_the_changed_table_alone(store: StateStore) -> None:
    Start(store, config()).register(schema(ORDERS), schema(USERS))
    start = Start(store, config(schema_changes="park"))
    start.register(WIDER, schema(USERS))
    assert states(store) == {"shop.orders": "NEEDS_REDUMP", "shop.users": "SNAPSHOTTING"}
    [(_, _, outcome, detail, shape)] = start.followed
    assert (outcome, detail, shape) == ("parked", 'schema_changes is "park"', None)


def test_stop_refuses_the_start_with_the_fix(store: StateStore) -> None:
    Start(store, config()).register(schema(ORDERS))
    with pytest.raises(SchemaChangedError, match="changed shape while the pipeline was stopped"):
        Start(store, config(schema_changes="stop")).register(WIDER)
