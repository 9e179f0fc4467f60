"""Tables routed into one mirror (``[sink] mirrors`` with a table pattern): the config reads the
route, each row names its table, which joins the key, and the Delta sink applies each table's
batches once, replaces one table's range without touching the others', and gives the mirror
the union of their columns."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.config import MirrorPlaces, TablePattern, config_from_dict
from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import (
    ColumnInfo,
    TableId,
    TableSchema,
    schema_from_dict,
    schema_to_dict,
)
from cdc_console.errors import ConfigError
from cdc_console.sinks.base import ReplaceRange
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.mirror_places import check_mirror_places
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.values.canonical import RowNormalizer

A, B = TableId("user_1", "user_table_1_1"), TableId("user_2", "user_table_2_1")
PLACES = MirrorPlaces(
    {}, ((TablePattern("user_*", "user_table_*", database_glob=True), "crm/users"),)
)
ID = ColumnInfo("id", "bigint", "bigint(20)", nullable=False)
NAME = ColumnInfo("name", "varchar", "varchar(20)")
AGE = ColumnInfo("age", "int", "int(11)")


def shard(table_id: TableId, *extra: ColumnInfo) -> TableSchema:
    return TableSchema(table_id, (ID, NAME, *extra), ("id",), "id", routed=True)


def test_a_pattern_in_sink_mirrors_routes_every_table_it_matches() -> None:
    config = config_from_dict(
        {
            "source": {"tables": ["user_1.*", "user_2.*"]},
            "sink": {"mirrors": {"user_*.user_table_*": "crm/users", "user_1.x": "crm/x"}},
        }
    )
    places = config.sink.mirrors
    assert places[A] == places[B] == "crm/users"
    assert places.routed(A) and not places.routed(TableId("user_1", "x"))
    assert TableId("other", "user_table_1") not in places
    assert dict(places) == {TableId("user_1", "x"): "crm/x"}
    with pytest.raises(ConfigError, match="only the delta sink does"):
        config_from_dict(
            {
                "source": {"tables": ["user_1.*", "user_2.*"]},
                "sink": {"kind": "changelog-json", "mirrors": {"user_*.t": "crm/users"}},
            }
        )


def test_a_routed_tables_rows_name_it_and_its_key_holds_its_name() -> None:
    schema = shard(A)
    assert schema.key_columns == ("id", "_cdc_database", "_cdc_table")
    assert schema.row_names == ["id", "name", "_cdc_database", "_cdc_table"]
    assert schema_from_dict(schema_to_dict(schema)) == schema
    origin = {"_cdc_database": "user_1", "_cdc_table": "user_table_1_1"}
    normalizer = RowNormalizer(schema)
    assert normalizer.snapshot_row([1, "a"]) == {"id": 1, "name": "a", **origin}
    assert normalizer.binlog_row({"id": 1, "name": "a"}) == {"id": 1, "name": "a", **origin}
    assert normalizer.binlog_columns({"id": 1}) == {"id": 1, **origin}
    clash = replace(schema, columns=(ID, ColumnInfo("_cdc_table", "int", "int")))
    assert "a column _cdc_table" in clash.uncaptured


def test_routed_tables_share_their_place_and_no_one_else_may(tmp_path: Path) -> None:
    from cdc_console.state.store import StateStore

    store = StateStore(tmp_path / "state.sqlite")
    try:
        check_mirror_places(store, tmp_path, PLACES, [A, B])
        crowded = MirrorPlaces({TableId("shop", "users"): "crm/users"}, PLACES.routes)
        with pytest.raises(ConfigError, match="both be mirrored at"):
            check_mirror_places(store, tmp_path, crowded, [TableId("shop", "users"), A])
    finally:
        store.close()


class Shards:
    """Change records of routed tables, keyed as the reader keys them."""

    def __init__(self) -> None:
        self.pos = 1000

    def rec(
        self, schema: TableSchema, op: str, row: dict[str, Any], split: str = ""
    ) -> ChangeRecord:
        full = {**row, **schema.origin}
        self.pos += 10
        return ChangeRecord(
            database=schema.table_id.database,
            table=schema.table_id.table,
            op=op,
            key=json.dumps([full[c] for c in schema.key_columns]),
            row=json.dumps(full),
            file_index=1,
            pos=self.pos,
            event_index=0,
            row_index=0,
            seq=self.pos,
            ts_ms=1_700_000_000_000,
            split_id=split,
        )


def rows(sink: DeltaSink) -> list[tuple[Any, ...]]:
    data = read_delta(DeltaTable(str(sink.mirror_path(A)))).to_pylist()
    names = ("_cdc_table", "id", "name", "age")
    return sorted(tuple(r.get(n) for n in names) for r in data)


def test_the_sink_applies_each_routed_table_once_into_one_mirror(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, names=PLACES)
    assert sink.mirror_path(A) == sink.mirror_path(B) == tmp_path / "crm" / "users"
    feed = Shards()
    a, b = shard(A), shard(B)
    schemas = {A: a, B: b}
    one = [feed.rec(a, "+I", {"id": 1, "name": "a1"}), feed.rec(a, "+I", {"id": 2, "name": "a2"})]
    one += [feed.rec(b, "+I", {"id": 1, "name": "b1"}), feed.rec(b, "+I", {"id": 3, "name": "b3"})]
    stats = sink.apply_batch(1, schemas, one)
    assert stats[A]["upserted"] == stats[B]["upserted"] == 2  # the second is not "already applied"
    assert rows(sink) == [
        ("user_table_1_1", 1, "a1", None),
        ("user_table_1_1", 2, "a2", None),
        ("user_table_2_1", 1, "b1", None),
        ("user_table_2_1", 3, "b3", None),
    ]
    # one shard gains a column: the mirror takes it, the other shard's rows hold NULL
    b_aged = shard(B, AGE)
    schemas = {A: a, B: b_aged}
    two = [feed.rec(b_aged, "+U", {"id": 1, "name": "b1", "age": 5})]
    two += [feed.rec(a, "+U", {"id": 1, "name": "a1!"})]
    sink.apply_batch(2, schemas, two)
    assert rows(sink) == [
        ("user_table_1_1", 1, "a1!", None),
        ("user_table_1_1", 2, "a2", None),
        ("user_table_2_1", 1, "b1", 5),
        ("user_table_2_1", 3, "b3", None),
    ]
    # a re-dump of shard A over all its keys finds only id 2: A's id 1 goes, B's id 1 stays
    own = a.origin

    def all_of_a(key_row: dict[str, Any]) -> bool:
        return all(key_row.get(k) == v for k, v in own.items())

    replaces = [ReplaceRange(A, "user_1.user_table_1_1:0", all_of_a, (1, 1, 0, 0))]
    three = [feed.rec(a, "+I", {"id": 2, "name": "a2"}, split="user_1.user_table_1_1:0")]
    three += [feed.rec(b_aged, "-D", {"id": 3, "name": "b3", "age": None})]
    sink.apply_batch(3, schemas, three, replaces)
    after = rows(sink)
    assert after == [
        ("user_table_1_1", 2, "a2", None),
        ("user_table_2_1", 1, "b1", 5),
    ]
    # the batch again (a retry after a crash): each table sees its own record of it
    again = sink.apply_batch(3, schemas, three, replaces)
    assert again[A]["mirror_skipped"] and again[B]["mirror_skipped"]
    assert rows(sink) == after


def test_status_says_a_routed_mirror_is_shared() -> None:
    from cdc_console.status import mirror_shape, shape_note

    config = config_from_dict(
        {
            "source": {"tables": ["user_1.*", "user_2.*"]},
            "sink": {"mirrors": {"user_*.user_table_*": "crm/users"}},
        }
    )
    shape = mirror_shape(config, A, shard(A))
    assert shape == {"mirror": "crm/users", "routed": True}
    assert shape_note(shape) == "mirror crm/users (shared by its route; rows name their table)"


def test_a_column_in_the_change_feed_alone_does_not_refuse_the_other_tables(
    tmp_path: Path,
) -> None:
    """A crash between one table's change-feed commit (which added a column) and its mirror
    commit leaves the column in the feed only; the next table of the route still applies."""
    from deltalake.schema import Field

    sink = DeltaSink(tmp_path, names=PLACES)
    feed = Shards()
    a, b = shard(A), shard(B)
    sink.apply_batch(1, {A: a, B: b}, [feed.rec(a, "+I", {"id": 1, "name": "a1"})])
    log = DeltaTable(str(sink.changelog_path(B)))
    log.alter.add_columns([Field("age", "integer", nullable=True)])
    stats = sink.apply_batch(2, {A: a, B: b}, [feed.rec(a, "+U", {"id": 1, "name": "a1!"})])
    assert stats[A]["upserted"] == 1
    assert rows(sink) == [("user_table_1_1", 1, "a1!", None)]


def test_a_retyped_shard_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from cdc_console.sinks.base import SinkSchemaError

    sink = DeltaSink(tmp_path, names=PLACES)
    feed = Shards()
    a, b = shard(A), shard(B)
    sink.apply_batch(1, {A: a, B: b}, [feed.rec(b, "+I", {"id": 1, "name": "b1"})])
    retyped = replace(b, columns=(ID, ColumnInfo("name", "int", "int(11)")))
    with pytest.raises(SinkSchemaError, match="a shared mirror is not migrated in place"):
        sink.apply_batch(2, {A: a, B: retyped}, [feed.rec(retyped, "+I", {"id": 2, "name": 7})])


def test_a_routed_table_whose_key_differs_from_its_routes_is_parked() -> None:
    from cdc_console.mysql.table_checks import route_keys

    config = config_from_dict(
        {
            "source": {"tables": ["user_1.*", "user_2.*"]},
            "sink": {"mirrors": {"user_*.user_table_*": "crm/users"}},
        }
    )
    region = ColumnInfo("region", "varchar", "varchar(8)", nullable=False)
    odd = TableSchema(B, (ID, NAME, region), ("id", "region"), "id", routed=True)
    kept, results = route_keys(config, [shard(A), odd])
    assert [t.table_id for t in kept] == [A, B]
    assert not kept[0].refused
    assert kept[1].refused.startswith(
        "user_2.user_table_2_1 is routed into crm/users with the key id bigint(20), region "
        "varchar(8), where user_1.user_table_1_1 has id bigint(20)"
    )
    assert [r.name for r in results] == ["route user_2.user_table_2_1"]
    same, none = route_keys(config, [shard(A), shard(B)])
    assert not any(t.refused for t in same) and none == []


def test_a_table_routed_anew_starts_only_with_its_re_dump_queued(tmp_path: Path) -> None:
    from cdc_console.core.lifecycle import CommandKind
    from cdc_console.state.store import StateStore

    store = StateStore(tmp_path / "state.sqlite")
    try:
        alone = MirrorPlaces({A: "crm/users"})
        check_mirror_places(store, tmp_path, alone, [A])
        (tmp_path / "crm" / "users" / "_delta_log").mkdir(parents=True)
        # the same place, now by a pattern: its rows there lack their origin
        with pytest.raises(ConfigError, match="still holds its rows without the origin"):
            check_mirror_places(store, tmp_path, PLACES, [A])
        # its own place before, a shared one now: it must be read again
        own = MirrorPlaces({})
        store2 = StateStore(tmp_path / "state2.sqlite")
        try:
            (tmp_path / "user_1" / "user_table_1_1" / "_delta_log").mkdir(parents=True)
            check_mirror_places(store2, tmp_path, own, [A])
            with pytest.raises(ConfigError, match="its rows there must be read again"):
                check_mirror_places(store2, tmp_path, PLACES, [A])
            store2.queue_command(CommandKind.REDUMP, str(A), {})
            check_mirror_places(store2, tmp_path, PLACES, [A])  # the re-dump reads it anew
            check_mirror_places(store2, tmp_path, PLACES, [A])  # and the next start is plain
        finally:
            store2.close()
    finally:
        store.close()


def test_lake_commands_find_a_shards_shared_mirror_by_the_shards_name(tmp_path: Path) -> None:
    from cdc_console.commands.lake import _chosen
    from cdc_console.sinks.maintenance import lake_tables

    config = config_from_dict(
        {
            "source": {"tables": ["user_1.*", "user_2.*"]},
            "sink": {"path": str(tmp_path), "mirrors": {"user_*.user_table_*": "crm/users"}},
        }
    )
    (tmp_path / "crm" / "users" / "_delta_log").mkdir(parents=True)
    found = lake_tables(config.sink.path, config.sink.mirrors)
    chosen = _chosen(config, str(A), found, "mirror")
    assert [t.path for t in chosen] == [tmp_path / "crm" / "users"]
