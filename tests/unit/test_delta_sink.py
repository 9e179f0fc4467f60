"""DeltaSink: MERGE semantics, per-key order, idempotent retries, changelog, range replace."""

from __future__ import annotations

import base64
import itertools
import json
import pickle
import random
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from cdc_console.config import LakeConfig
from cdc_console.core.records import FIELD_NAMES, ChangeRecord
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.sinks import delta as delta_module
from cdc_console.sinks import delta_merge
from cdc_console.sinks.base import (
    REFUSED,
    KeyBounds,
    ReplaceRange,
    SinkError,
    SinkSchemaError,
    TypedChunk,
)
from cdc_console.sinks.change_columns import ChangeColumns
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.spark.protocol import RECORD_SCHEMA
from cdc_console.values.arrow import rows_to_table, table_to_rows

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "Order Items")


def orders_schema() -> TableSchema:
    return TableSchema(
        ORDERS,
        (
            ColumnInfo("id", "bigint", "bigint(20)", nullable=False, numeric_precision=19),
            ColumnInfo("name", "varchar", "varchar(50)"),
            ColumnInfo("amount", "decimal", "decimal(10,2)", numeric_precision=10, numeric_scale=2),
            ColumnInfo("updated", "datetime", "datetime(6)", datetime_precision=6),
        ),
        ("id",),
        "id",
    )


def items_schema() -> TableSchema:
    """Composite key, upper case and spaces in names, an unsigned BIGINT key part."""
    return TableSchema(
        ITEMS,
        (
            ColumnInfo("Order Id", "bigint", "bigint(20) unsigned", nullable=False),
            ColumnInfo("Line", "varchar", "varchar(10)", nullable=False),
            ColumnInfo("qty", "int", "int(11)"),
        ),
        ("Order Id", "Line"),
        "Order Id",
    )


SCHEMAS = {ORDERS: orders_schema(), ITEMS: items_schema()}


def order(
    key: int, name: str = "x", amount: str = "1.00", updated: str = "2024-01-01 00:00:00.000000"
) -> dict[str, Any]:
    return {"id": key, "name": name, "amount": amount, "updated": updated}


class Feed:
    """Change records with growing binlog positions and batch sequence numbers, like a reader."""

    def __init__(self) -> None:
        self.pos = itertools.count(1000, 10)
        self.seq = itertools.count()

    def rec(
        self,
        op: str,
        row: dict[str, Any],
        table: TableId = ORDERS,
        split_id: str = "",
        pos: int | None = None,
    ) -> ChangeRecord:
        schema = SCHEMAS[table]
        key = [row[c] for c in schema.key_columns]
        return ChangeRecord(
            database=table.database,
            table=table.table,
            op=op,
            key=json.dumps(key),
            row=json.dumps(row),
            file_index=1,
            pos=next(self.pos) if pos is None else pos,
            event_index=0,
            row_index=0,
            seq=next(self.seq),
            ts_ms=1_700_000_000_000,
            split_id=split_id,
        )

    def update(self, before: dict[str, Any], after: dict[str, Any]) -> list[ChangeRecord]:
        position = next(self.pos)
        return [self.rec("-U", before, pos=position), self.rec("+U", after, pos=position)]


def mirror(sink: DeltaSink, table: TableId = ORDERS) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The mirror read back with plain delta-rs, as canonical rows by key."""
    schema = SCHEMAS[table]
    data = read_delta(DeltaTable(str(sink.mirror_path(table))))
    rows = table_to_rows(schema, data)
    state = {tuple(r[c] for c in schema.key_columns): r for r in rows}
    assert len(state) == len(rows), "duplicate keys in the mirror"
    return state


def by_id(*rows: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {(r["id"],): r for r in rows}


def as_columns(records: Sequence[ChangeRecord]) -> ChangeColumns:
    """Records as the job hands them to the sink: Arrow columns (``spark.protocol``)."""
    return ChangeColumns(pa.Table.from_pylist([r.to_dict() for r in records], schema=RECORD_SCHEMA))


@pytest.fixture(autouse=True, params=["objects", "columns"])
def records_as(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: records as a list of objects, and as the job's ``ChangeColumns``
    (whose plain MERGE folds the columns, ``fold_columns``, and builds no objects)."""
    if request.param == "columns":
        apply_batch = DeltaSink.apply_batch

        def with_columns(
            self: DeltaSink, batch_id: int, schemas: Any, records: Any, *rest: Any, **named: Any
        ) -> Any:
            return apply_batch(self, batch_id, schemas, as_columns(records), *rest, **named)

        monkeypatch.setattr(DeltaSink, "apply_batch", with_columns)
    return str(request.param)


@pytest.fixture(params=["copy-on-write", "deletion-vectors"])
def sink(tmp_path: Path, request: pytest.FixtureRequest) -> DeltaSink:
    """Every test of a sink's behaviour on both kinds of mirror (``[lake] deletion_vectors``)."""
    return DeltaSink(
        tmp_path / "delta", lake=LakeConfig(deletion_vectors=request.param == "deletion-vectors")
    )


def test_insert_update_delete_in_one_batch(sink: DeltaSink) -> None:
    feed = Feed()
    seed = [feed.rec("+I", order(k, f"n{k}")) for k in (1, 2, 3)]
    stats = sink.apply_batch(0, SCHEMAS, seed)
    assert stats[ORDERS]["inserted"] == 3
    assert mirror(sink) == by_id(order(1, "n1"), order(2, "n2"), order(3, "n3"))

    batch = [
        *feed.update(order(1, "n1"), order(1, "renamed", "-12.50")),
        feed.rec("-D", order(2, "n2")),
        feed.rec("+I", order(4, "new", updated="2024-05-06 07:08:09.000123")),
    ]
    stats = sink.apply_batch(1, SCHEMAS, batch)[ORDERS]
    assert (stats["inserted"], stats["updated"], stats["deleted"]) == (1, 1, 1)
    assert stats["upserted"] == 2
    assert mirror(sink) == by_id(
        order(1, "renamed", "-12.50"),
        order(3, "n3"),
        order(4, "new", updated="2024-05-06 07:08:09.000123"),
    )


def test_typed_mirror_schema(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1, amount="99999999.99"))])
    data = read_delta(DeltaTable(str(sink.mirror_path(ORDERS))))
    assert data.schema.names == ["id", "name", "amount", "updated"]
    assert data.schema.field("amount").type == pa.decimal128(10, 2)
    assert data.schema.field("updated").type == pa.timestamp("us")
    assert str(data.column("amount")[0].as_py()) == "99999999.99"


def test_primary_key_change_and_delete_reinsert_within_one_batch(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in (1, 2, 3, 4)])
    position = next(feed.pos)
    batch = [
        # UPDATE orders SET id = 10 WHERE id = 1: -U old key, +U new key at one position.
        feed.rec("-U", order(1), pos=position),
        feed.rec("+U", order(10, "moved"), pos=position),
        # DELETE then INSERT of the same key: the new row wins.
        feed.rec("-D", order(2)),
        feed.rec("+I", order(2, "reborn")),
        # INSERT then DELETE of a new key: it never shows.
        feed.rec("+I", order(5)),
        feed.rec("-D", order(5)),
        # Update, then update again: the last image wins.
        *feed.update(order(3), order(3, "first")),
        *feed.update(order(3, "first"), order(3, "second")),
    ]
    sink.apply_batch(1, SCHEMAS, batch)
    assert mirror(sink) == by_id(
        order(2, "reborn"), order(3, "second"), order(4), order(10, "moved")
    )


def test_changes_across_batches_and_reinsert_later(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(1))])
    assert mirror(sink) == {}
    sink.apply_batch(2, SCHEMAS, [feed.rec("+I", order(1, "again"))])
    sink.apply_batch(3, SCHEMAS, feed.update(order(1, "again"), order(1, "final")))
    assert mirror(sink) == by_id(order(1, "final"))
    assert sink.applied_batch(ORDERS) == 3


def test_records_apply_in_position_order_not_list_order(sink: DeltaSink) -> None:
    feed = Feed()
    early = feed.rec("+I", order(1, "early"))
    late = feed.rec("-D", order(1, "early"))
    sink.apply_batch(0, SCHEMAS, [late, early])
    assert mirror(sink) == {}
    # Same position (one multi-row event): seq decides.
    a = feed.rec("+I", order(2, "a"), pos=5000)
    b = feed.rec("-D", order(2, "a"), pos=5000)
    c = feed.rec("+I", order(2, "c"), pos=5000)
    sink.apply_batch(1, SCHEMAS, [c, b, a])
    assert mirror(sink) == by_id(order(2, "c"))


def test_snapshot_row_sorts_before_a_binlog_change_at_the_same_position(sink: DeltaSink) -> None:
    """Snapshot and binlog readers number ``seq`` independently; at the split's HW the binlog
    change is the later one."""
    snapshot = ChangeRecord(
        "shop", "orders", "+I", "[1]", json.dumps(order(1, "dump")), 1, 500, 0, 0, 9, 0, "s:0"
    )
    binlog = ChangeRecord(
        "shop", "orders", "-D", "[1]", json.dumps(order(1, "dump")), 1, 500, 0, 0, 0, 0
    )
    sink.apply_batch(0, SCHEMAS, [binlog, snapshot])
    assert mirror(sink) == {}


def test_retried_batch_changes_nothing(sink: DeltaSink) -> None:
    feed = Feed()
    batch0 = [feed.rec("+I", order(k)) for k in (1, 2)]
    batch1 = [*feed.update(order(1), order(1, "b1")), feed.rec("-D", order(2))]
    sink.apply_batch(0, SCHEMAS, batch0)
    sink.apply_batch(1, SCHEMAS, batch1)
    mirror_version = DeltaTable(str(sink.mirror_path(ORDERS))).version()
    log_version = DeltaTable(str(sink.changelog_path(ORDERS))).version()
    expected = mirror(sink)

    again = sink.apply_batch(1, SCHEMAS, batch1)[ORDERS]
    assert again["mirror_skipped"] and again["changelog_skipped"]
    assert again["changelog_rows"] == 0 and again["upserted"] == 0
    # An older batch replayed (say, after restoring a checkpoint) is skipped as well.
    assert sink.apply_batch(0, SCHEMAS, batch0)[ORDERS]["mirror_skipped"]

    assert DeltaTable(str(sink.mirror_path(ORDERS))).version() == mirror_version
    assert DeltaTable(str(sink.changelog_path(ORDERS))).version() == log_version
    assert mirror(sink) == expected
    assert sink.read_changelog(ORDERS).num_rows == len(batch0) + len(batch1)


def test_crash_between_changelog_and_mirror_recovers_exactly_once(
    sink: DeltaSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    batch = feed.update(order(1), order(1, "after"))

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk went away")

    with monkeypatch.context() as patch:
        patch.setattr(delta_module, "merge_nets", crash)
        patch.setattr(delta_merge, "merge_by_deletion_vectors", crash)
        with pytest.raises(OSError):
            sink.apply_batch(1, SCHEMAS, batch)
    assert mirror(sink) == by_id(order(1))  # the MERGE did not happen
    stats = sink.apply_batch(1, SCHEMAS, batch)[ORDERS]
    assert stats["changelog_skipped"] and not stats["mirror_skipped"]
    assert mirror(sink) == by_id(order(1, "after"))
    assert sink.read_changelog(ORDERS).column("_op").to_pylist() == ["+I", "-U", "+U"]


def test_batch_that_changes_nothing_is_still_recorded(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    stats = sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(99))])[ORDERS]
    assert stats["deleted"] == 0
    assert sink.applied_batch(ORDERS) == 1
    assert sink.apply_batch(1, SCHEMAS, [feed.rec("-D", order(99))])[ORDERS]["mirror_skipped"]


def test_changelog_holds_every_change_typed_in_apply_order(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(4, SCHEMAS, [feed.rec("+I", order(1, amount="-0.05"))])
    sink.apply_batch(
        5,
        SCHEMAS,
        [*feed.update(order(1, amount="-0.05"), order(1, "u")), feed.rec("-D", order(1, "u"))],
    )
    log = sink.read_changelog(ORDERS)
    assert log.schema.names == [
        "id",
        "name",
        "amount",
        "updated",
        "_op",
        "_file_index",
        "_pos",
        "_event_index",
        "_row_index",
        "_seq",
        "_ts_ms",
        "_batch_id",
    ]
    assert log.schema.field("amount").type == pa.decimal128(10, 2)
    assert log.column("_op").to_pylist() == ["+I", "-U", "+U", "-D"]
    assert log.column("_batch_id").to_pylist() == [4, 5, 5, 5]
    assert log.column("name").to_pylist() == ["x", "x", "u", "u"]
    assert log.column("_pos").to_pylist() == [1000, 1010, 1010, 1020]
    assert [str(v) for v in log.column("amount").to_pylist()] == ["-0.05", "-0.05", "1.00", "1.00"]
    assert mirror(sink) == {}


def test_changelog_can_be_disabled(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path, changelog=False)
    stats = sink.apply_batch(0, SCHEMAS, [Feed().rec("+I", order(1))])[ORDERS]
    assert stats["changelog_skipped"] and stats["changelog_rows"] == 0
    assert not (tmp_path / "_changelog").exists()


def test_many_tables_in_one_batch_and_awkward_names(sink: DeltaSink) -> None:
    feed = Feed()
    line = {"Order Id": 2**64 - 1, "Line": "A", "qty": 1}
    records = [
        feed.rec("+I", order(1)),
        feed.rec("+I", line, table=ITEMS),
        feed.rec("+I", {**line, "Line": "a", "qty": 2}, table=ITEMS),
    ]
    stats = sink.apply_batch(0, SCHEMAS, records)
    assert set(stats) == {ORDERS, ITEMS}
    assert sink.mirror_path(ITEMS) == sink.root / "shop" / "Order Items"
    records = [feed.rec("+U", {**line, "qty": 7}, table=ITEMS)]
    sink.apply_batch(1, SCHEMAS, records)
    # 'A' and 'a' are distinct keys: keys compare exactly, as in the change records.
    assert mirror(sink, ITEMS) == {
        (2**64 - 1, "A"): {**line, "qty": 7},
        (2**64 - 1, "a"): {**line, "Line": "a", "qty": 2},
    }
    assert mirror(sink) == by_id(order(1))


def test_unknown_table_and_bad_rows_raise(sink: DeltaSink) -> None:
    feed = Feed()
    with pytest.raises(SinkError, match="no schema"):
        sink.apply_batch(0, {}, [feed.rec("+I", order(1))])
    with pytest.raises(SinkError, match="do not match"):
        sink.apply_batch(0, SCHEMAS, [feed.rec("+I", {"id": 1, "name": "x"})])
    with pytest.raises(SinkError, match="batch id"):
        sink.apply_batch(-1, SCHEMAS, [])
    # a backtick in a key column is no longer refused: MERGE assignments are spelled out
    backtick = TableSchema(
        TableId("shop", "bt"),
        (ColumnInfo("a`b", "int", "int(11)", nullable=False),),
        ("a`b",),
        "a`b",
    )
    rows = [
        ChangeRecord("shop", "bt", "+I", "[1]", '{"a`b":1}', 1, 5, 0, 0, 0, 0),
        ChangeRecord("shop", "bt", "+I", "[2]", '{"a`b":2}', 1, 6, 0, 0, 0, 0),
        ChangeRecord("shop", "bt", "-D", "[1]", '{"a`b":1}', 1, 7, 0, 0, 0, 0),
    ]
    sink.apply_batch(0, {backtick.table_id: backtick}, rows[:2])
    sink.apply_batch(1, {backtick.table_id: backtick}, rows[2:])
    assert sink.read_mirror(backtick.table_id).to_pylist() == [{"a`b": 2}]


def test_schema_change_is_refused(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    changed = TableSchema(
        ORDERS,
        (*orders_schema().columns[:2], ColumnInfo("amount", "double", "double")),
        ("id",),
        "id",
    )
    record = ChangeRecord(
        "shop", "orders", "+I", "[2]", '{"id":2,"name":"y","amount":1.5}', 1, 2, 0, 0, 0, 0
    )
    with pytest.raises(SinkSchemaError, match="re-dump the table"):
        sink.apply_batch(1, {ORDERS: changed}, [record])


def test_nullable_unique_key_matches_null(sink: DeltaSink) -> None:
    table = TableId("shop", "codes")
    schema = TableSchema(
        table,
        (ColumnInfo("code", "varchar", "varchar(5)", nullable=True), ColumnInfo("n", "int", "int")),
        (),
        "code",
    )

    def rec(op: str, code: str | None, n: int, pos: int) -> ChangeRecord:
        row = json.dumps({"code": code, "n": n})
        return ChangeRecord("shop", "codes", op, json.dumps([code]), row, 1, pos, 0, 0, 0, 0)

    sink.apply_batch(0, {table: schema}, [rec("+I", None, 1, 1), rec("+I", "a", 1, 2)])
    sink.apply_batch(1, {table: schema}, [rec("-U", None, 1, 3), rec("+U", None, 2, 3)])
    rows = table_to_rows(schema, sink.read_mirror(table))
    assert sorted(rows, key=lambda r: str(r["code"])) == [
        {"code": None, "n": 2},
        {"code": "a", "n": 1},
    ]


ALL_TYPES = TableSchema(
    TableId("shop", "all_types"),
    (
        ColumnInfo("id", "bigint", "bigint(20) unsigned", nullable=False),
        ColumnInfo("ti", "tinyint", "tinyint(4)"),
        ColumnInfo("tu", "tinyint", "tinyint(3) unsigned"),
        ColumnInfo("mi", "mediumint", "mediumint(8) unsigned"),
        ColumnInfo("yr", "year", "year(4)"),
        ColumnInfo("b1", "bit", "bit(1)", numeric_precision=1),
        ColumnInfo("b64", "bit", "bit(64)", numeric_precision=64),
        ColumnInfo("d", "decimal", "decimal(12,4)", numeric_precision=12, numeric_scale=4),
        ColumnInfo("dw", "decimal", "decimal(65,30)", numeric_precision=65, numeric_scale=30),
        ColumnInfo("f", "float", "float"),
        ColumnInfo("db", "double", "double"),
        ColumnInfo("dt", "date", "date"),
        ColumnInfo("dtm", "datetime", "datetime(6)", datetime_precision=6),
        ColumnInfo("ts", "timestamp", "timestamp(3)", datetime_precision=3),
        ColumnInfo("tm", "time", "time(1)", datetime_precision=1),
        ColumnInfo("e", "enum", "enum('a','b')"),
        ColumnInfo("s", "set", "set('a','b')"),
        ColumnInfo("j", "json", "json"),
        ColumnInfo("bin", "varbinary", "varbinary(8)"),
        ColumnInfo("g", "geometry", "geometry"),
        ColumnInfo("txt", "longtext", "longtext"),
    ),
    ("id",),
    "id",
)


def test_every_type_round_trips_through_delta(sink: DeltaSink) -> None:
    full = {
        "id": 2**64 - 1,
        "ti": -128,
        "tu": 255,
        "mi": 16777215,
        "yr": 2155,
        "b1": 1,
        "b64": 2**64 - 1,
        "d": "-12345678.0001",
        "dw": "-" + "9" * 35 + "." + "0" * 29 + "1",
        "f": 1.5,
        "db": -2.2250738585072014e-308,
        "dt": "1000-01-01",
        "dtm": "9999-12-31 23:59:59.999999",
        "ts": "2038-01-19 03:14:07.999Z",
        "tm": "-838:59:59.0",
        "e": "b",
        "s": "a,b",
        "j": '{"k":[1,"two",null]}',
        "bin": base64.b64encode(b"\x00\x01\xfe\xff").decode(),
        "g": base64.b64encode(b"\x00\x00\x00\x00\x01\x01").decode(),
        "txt": "ünïcödé 🎉\n",
    }
    nulls = {name: None for name in full} | {"id": 0}
    records = [
        ChangeRecord(
            "shop", "all_types", "+I", json.dumps([r["id"]]), json.dumps(r), 1, i, 0, 0, i, 0
        )
        for i, r in enumerate([full, nulls])
    ]
    sink.apply_batch(0, {ALL_TYPES.table_id: ALL_TYPES}, records)
    rows = table_to_rows(ALL_TYPES, sink.read_mirror(ALL_TYPES.table_id))
    assert sorted(rows, key=lambda r: r["id"]) == [nulls, full]


def test_replace_range_deletes_absent_keys_at_the_high_watermark(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 11)])

    def in_range(key_row: dict[str, Any]) -> bool:
        return bool(3 <= key_row["id"] < 8)

    hw = 5000
    batch = [
        # Binlog changes before HW (still in flight when the re-dump began).
        feed.rec("+I", order(20), pos=4000),  # outside the range: kept
        feed.rec("+I", order(6, "stale"), pos=4001),  # in range, gone at HW: deleted
        *[feed.rec("+I", order(k, "dump"), split_id="shop.orders:1", pos=hw) for k in (3, 5, 7)],
        feed.rec("+I", order(4, "later"), pos=6000),  # after HW: wins over the range delete
    ]
    replace = ReplaceRange(ORDERS, "shop.orders:1", in_range, ts_ms=1)
    stats = sink.apply_batch(1, SCHEMAS, batch, [replace])[ORDERS]
    # Mirror keys 4 and 6 are absent from the split and go at HW; 4 comes back after it.
    assert stats["range_deleted"] == 2
    assert mirror(sink) == by_id(
        order(1),
        order(2),
        order(3, "dump"),
        order(4, "later"),
        order(5, "dump"),
        order(7, "dump"),
        order(8),
        order(9),
        order(10),
        order(20),
    )
    log = sink.read_changelog(ORDERS).filter(pa.compute.equal(pa.compute.field("_batch_id"), 1))
    ops = list(zip(log.column("_op").to_pylist(), log.column("id").to_pylist(), strict=True))
    assert ops == [
        ("+I", 20),
        ("+I", 6),
        ("-D", 4),
        ("-D", 6),
        ("+I", 3),
        ("+I", 5),
        ("+I", 7),
        ("+I", 4),
    ]
    deleted_names = log.filter(pa.compute.equal(pa.compute.field("_op"), "-D")).column("name")
    assert deleted_names.to_pylist() == ["x", "stale"]  # before images
    # Retrying the batch is a no-op even though the range deletes were computed.
    assert sink.apply_batch(1, SCHEMAS, batch, [replace])[ORDERS]["mirror_skipped"]


def test_replace_range_of_an_empty_split(sink: DeltaSink) -> None:
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in range(1, 6)])
    replace = ReplaceRange(
        ORDERS, "shop.orders:0", lambda key: key["id"] <= 2, position=(1, 1, 0, 0)
    )
    stats = sink.apply_batch(1, SCHEMAS, [], [replace])[ORDERS]
    assert stats["range_deleted"] == 2 and stats["deleted"] == 2
    assert mirror(sink) == by_id(order(3), order(4), order(5))


def test_random_workload_matches_a_model(sink: DeltaSink) -> None:
    """Random inserts, updates, key changes and deletes over many batches, some retried."""
    rng = random.Random(7)
    feed = Feed()
    model: dict[int, dict[str, Any]] = {}
    for batch_id in range(12):
        records: list[ChangeRecord] = []
        for _ in range(rng.randint(0, 40)):
            choice = rng.random()
            if not model or choice < 0.35:
                key = rng.randint(1, 60)
                if key in model:
                    continue
                model[key] = order(
                    key, f"i{batch_id}", f"{rng.randint(-999, 999)}.{rng.randint(0, 99):02d}"
                )
                records.append(feed.rec("+I", model[key]))
            elif choice < 0.7:
                key = rng.choice(sorted(model))
                after = order(key, f"u{batch_id}", model[key]["amount"])
                records += feed.update(model[key], after)
                model[key] = after
            elif choice < 0.8:
                key = rng.choice(sorted(model))
                new = rng.randint(61, 120)
                if new in model:
                    continue
                position = next(feed.pos)
                before = model.pop(key)
                after = {**before, "id": new}
                records += [
                    feed.rec("-U", before, pos=position),
                    feed.rec("+U", after, pos=position),
                ]
                model[new] = after
            else:
                key = rng.choice(sorted(model))
                records.append(feed.rec("-D", model.pop(key)))
        rng.shuffle(records)  # the sink orders by position, not by list order
        sink.apply_batch(batch_id, SCHEMAS, records)
        if rng.random() < 0.3:
            sink.apply_batch(batch_id, SCHEMAS, records)
        assert mirror(sink) == {(k,): v for k, v in model.items()}, f"after batch {batch_id}"


def test_unsigned_bigint_keys_beyond_int64_update_in_place(sink: DeltaSink) -> None:
    """Regression: delta-rs 1.6.6 clamps decimal(20,0) file statistics to the int64 range, which
    made its MERGE file pruning miss the row and insert a duplicate. The sink keeps statistics
    off such columns; readers that skip files by statistics then see every row too."""
    table = TableId("shop", "big")
    schema = TableSchema(
        table,
        (
            ColumnInfo("id", "bigint", "bigint(20) unsigned", nullable=False),
            ColumnInfo("n", "int", "int(11)"),
        ),
        ("id",),
        "id",
    )
    keys = [2**63, 2**64 - 1]

    def rec(key: int, n: int, pos: int) -> ChangeRecord:
        return ChangeRecord(
            "shop", "big", "+U", f"[{key}]", json.dumps({"id": key, "n": n}), 1, pos, 0, 0, 0, 0
        )

    for batch_id in range(3):
        sink.apply_batch(
            batch_id, {table: schema}, [rec(k, batch_id, i) for i, k in enumerate(keys)]
        )
    delta_table = DeltaTable(str(sink.mirror_path(table)))
    assert "`id`" not in delta_table.metadata().configuration.get(
        "delta.dataSkippingStatsColumns", ""
    )
    rows = table_to_rows(schema, read_delta(delta_table))
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": k, "n": 2} for k in keys]
    found = read_delta(
        delta_table, where=pc.field("id") == pa.scalar(Decimal(2**64 - 1), pa.decimal128(20, 0))
    )
    assert found.num_rows == 1


def test_source_database_named_like_the_changelog_is_refused(sink: DeltaSink) -> None:
    schema = TableSchema(
        TableId("_changelog", "t"), (ColumnInfo("id", "int", "int(11)"),), ("id",), "id"
    )
    record = ChangeRecord("_changelog", "t", "+I", "[1]", '{"id":1}', 1, 1, 0, 0, 0, 0)
    with pytest.raises(SinkError, match="_changelog"):
        sink.apply_batch(0, {schema.table_id: schema}, [record])


def test_change_record_contract() -> None:
    record = ChangeRecord(
        "shop", "orders", "-U", "[1001]", '{"id":1001,"name":"x"}', 3, 120, 1, 2, 7, 99, ""
    )
    assert ChangeRecord.from_dict(record.to_dict()) == record
    assert list(record.to_dict()) == list(FIELD_NAMES)
    assert pickle.loads(pickle.dumps(record)) == record
    assert record.table_id == ORDERS
    assert record.sort_key == (3, 120, 1, 2, 1, 7)
    assert record.position == (3, 120, 1, 2)
    assert record.key_values() == (1001,)
    assert record.row_dict() == {"id": 1001, "name": "x"}
    assert not record.is_upsert and not record.is_snapshot
    assert str(record) == (
        '-U shop.orders key=[1001] @3:120/1/2 seq=7 (binlog) {"id":1001,"name":"x"}'
    )
    snapshot = ChangeRecord("shop", "orders", "+I", "[1]", "{}", 0, 4, 0, 0, 0, 0, "shop.orders:3")
    assert snapshot.is_upsert and snapshot.is_snapshot and "split shop.orders:3" in str(snapshot)
    with pytest.raises(ValueError, match="op"):
        ChangeRecord("shop", "orders", "U", "[1]", "{}", 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="unknown"):
        ChangeRecord.from_dict({**record.to_dict(), "extra": 1})
    with pytest.raises(ValueError, match="JSON list"):
        ChangeRecord("shop", "orders", "+I", "1", "{}", 0, 0, 0, 0, 0, 0).key_values()


def typed_chunk(split_id: str, keys: range, pos: int) -> TypedChunk:
    rows = rows_to_table(orders_schema(), [order(k, f"s{k}") for k in keys])
    return TypedChunk(split_id, (1, pos, -1, 0), 1_700_000_000_000, rows)


def test_typed_snapshot_chunks_are_appended_once(sink: DeltaSink) -> None:
    """First-snapshot chunks append (no MERGE), log +I at their HW, and a retry is skipped."""
    chunks = [
        typed_chunk("shop.orders:0", range(1, 4), 500),
        typed_chunk("shop.orders:1", range(4, 6), 700),
    ]
    stats = sink.apply_batch(3, SCHEMAS, [], appends={ORDERS: chunks})[ORDERS]
    assert (stats["inserted"], stats["changelog_rows"]) == (5, 5)
    assert mirror(sink) == by_id(*(order(k, f"s{k}") for k in range(1, 6)))
    log = sink.read_changelog(ORDERS)
    assert log.column("_op").to_pylist() == ["+I"] * 5
    assert log.column("_pos").to_pylist() == [500, 500, 500, 700, 700]
    assert log.column("_event_index").to_pylist() == [-1] * 5
    assert log.column("_seq").to_pylist() == [0, 1, 2, 0, 1]
    assert log.column("_batch_id").to_pylist() == [3] * 5

    again = sink.apply_batch(3, SCHEMAS, [], appends={ORDERS: chunks})[ORDERS]
    assert again["mirror_skipped"] and again["changelog_skipped"]
    assert len(mirror(sink)) == 5 and sink.read_changelog(ORDERS).num_rows == 5

    # Later binlog changes MERGE into the appended rows as into any others.
    feed = Feed()
    sink.apply_batch(4, SCHEMAS, [*feed.update(order(2, "s2"), order(2, "new"))])
    assert mirror(sink)[(2,)] == order(2, "new")


def test_typed_chunks_and_records_of_one_table_never_mix(sink: DeltaSink) -> None:
    feed = Feed()
    with pytest.raises(SinkError, match="both typed snapshot chunks and change records"):
        sink.apply_batch(
            1,
            SCHEMAS,
            [feed.rec("+I", order(9))],
            appends={ORDERS: [typed_chunk("shop.orders:0", range(1, 2), 5)]},
        )


def test_typed_chunk_in_the_wrong_shape_is_refused(sink: DeltaSink) -> None:
    wrong = TypedChunk("shop.orders:0", (1, 5, -1, 0), 0, pa.table({"id": [1]}))
    with pytest.raises(SinkSchemaError, match=r"typed rows of shop\.orders:0"):
        sink.apply_batch(1, SCHEMAS, [], appends={ORDERS: [wrong]})
    assert not DeltaTable.is_deltatable(str(sink.mirror_path(ORDERS)))


def test_a_dropped_column_keeps_its_values_in_the_mirror(
    sink: DeltaSink,
) -> None:
    """After ``DROP COLUMN name`` the table is read without it (``retired``): the mirror's rows
    keep the value they held, even when updated; rows inserted since hold NULL; the changelog,
    which records the source's row images, holds NULL."""
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k, f"n{k}")) for k in (1, 2, 3)])
    full = orders_schema()
    dropped = TableSchema(
        ORDERS,
        tuple(c for c in full.columns if c.name != "name"),
        ("id",),
        "id",
        retired=(full.column("name"),),
    )

    def short(key: int, amount: str = "1.00") -> dict[str, Any]:
        return {k: v for k, v in order(key, amount=amount).items() if k != "name"}

    batch = [
        feed.rec("+U", short(1, "2.00")),
        feed.rec("+I", short(4)),
        feed.rec("-D", short(3)),
    ]
    stats = sink.apply_batch(1, {ORDERS: dropped}, batch)[ORDERS]
    assert (stats["inserted"], stats["updated"], stats["deleted"]) == (1, 1, 1)
    data = read_delta(DeltaTable(str(sink.mirror_path(ORDERS))))
    assert sorted(data.column_names) == ["amount", "id", "name", "updated"]
    names = dict(zip(data.column("id").to_pylist(), data.column("name").to_pylist(), strict=True))
    assert names == {1: "n1", 2: "n2", 4: None}
    assert mirror(sink)[(1,)]["amount"] == "2.00"
    log = DeltaTable(str(sink.changelog_path(ORDERS))).to_pyarrow_table()
    assert log.filter(pa.compute.equal(log.column("_batch_id"), 1)).column("name").null_count == 3


def test_a_column_added_online_joins_mirror_and_changelog_in_the_batch_commit(
    sink: DeltaSink,
) -> None:
    """No commit of the mirror or the changelog ever has the new column without its first
    rows: readers see the schema change and the rows of the new shape at one version."""
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(k)) for k in (1, 2)])
    mirror_path, log_path = sink.mirror_path(ORDERS), sink.changelog_path(ORDERS)
    before = DeltaTable(str(mirror_path)).version(), DeltaTable(str(log_path)).version()
    full = orders_schema()
    wider = TableSchema(
        ORDERS, (*full.columns, ColumnInfo("label", "varchar", "varchar(10)")), ("id",), "id"
    )
    batch = [
        feed.rec("+U", {**order(1), "label": "new"}),
        feed.rec("+I", {**order(3), "label": "x"}),
    ]
    sink.apply_batch(1, {ORDERS: wider}, batch)
    mirror, log = DeltaTable(str(mirror_path)), DeltaTable(str(log_path))
    assert (mirror.version(), log.version()) == (before[0] + 1, before[1] + 1)
    assert "label" in mirror.schema().to_arrow().names and "label" in log.schema().to_arrow().names
    labels = dict(
        zip(
            read_delta(mirror).column("id").to_pylist(),
            read_delta(mirror).column("label").to_pylist(),
            strict=True,
        )
    )
    assert labels == {1: "new", 2: None, 3: "x"}
    # a retry of the batch changes nothing
    sink.apply_batch(1, {ORDERS: wider}, batch)
    assert DeltaTable(str(mirror_path)).version() == before[0] + 1


@pytest.mark.parametrize("bounds", [(20, 40), (None, 15), (90, None)])
def test_integer_bounds_read_less_of_the_mirror_and_change_nothing(
    tmp_path: Path, bounds: tuple[int | None, int | None]
) -> None:
    """A re-dump range with ``KeyBounds`` reads only the files that may hold its keys, and its
    result (mirror, deletes, changelog) is the one a full scan gives: across files written by
    MERGE, by the snapshot writer and holding NULL-free integer keys at both ends."""
    start, end = bounds

    def in_range(key_row: dict[str, Any]) -> bool:
        key = key_row["id"]
        return (start is None or key >= start) and (end is None or key < end)

    def run(root: Path, hint: KeyBounds | None) -> tuple[dict[tuple[Any, ...], Any], list[Any]]:
        sink = DeltaSink(root, lake=LakeConfig(target_file_size=64 * 1024))
        chunks = [typed_chunk(f"shop.orders:{n}", range(n * 25, (n + 1) * 25), 100) for n in (0, 2)]
        sink.apply_batch(0, SCHEMAS, [], appends={ORDERS: chunks})
        feed = Feed()
        sink.apply_batch(1, SCHEMAS, [feed.rec("+I", order(k)) for k in range(25, 50)])
        sink.apply_batch(2, SCHEMAS, [feed.rec("+I", order(k)) for k in range(75, 100)])
        kept = [k for k in range(100) if in_range({"id": k}) and k % 3 == 0]
        rows = [feed.rec("+I", order(k, "dump"), split_id="shop.orders:9", pos=9000) for k in kept]
        replace = ReplaceRange(ORDERS, "shop.orders:9", in_range, ts_ms=1, bounds=hint)
        sink.apply_batch(3, SCHEMAS, rows, [replace])
        log = sink.read_changelog(ORDERS)
        return mirror(sink), sorted(zip(log["_op"].to_pylist(), log["id"].to_pylist(), strict=True))

    hinted = run(tmp_path / "hinted", KeyBounds("id", start, end))
    scanned = run(tmp_path / "scanned", None)
    assert hinted == scanned
    assert 0 < sum(1 for op, _ in hinted[1] if op == "-D") < 100


def test_isolated_a_table_whose_values_its_mirror_cannot_hold_is_refused_alone(
    sink: DeltaSink,
) -> None:
    """With ``isolate`` (the job's way) one table's bad share of a batch is refused with why,
    the other table of the batch is applied; without it, the batch raises."""
    feed = Feed()
    bad = feed.rec("+I", {"Order Id": 1, "Line": "a", "qty": "lots"}, table=ITEMS)
    good = feed.rec("+I", order(7))
    with pytest.raises(ValueError, match="is a str, expected int"):
        sink.apply_batch(0, SCHEMAS, [good, bad])
    stats = sink.apply_batch(1, SCHEMAS, [good, bad], isolate=True)
    assert "is a str, expected int" in str(stats[ITEMS][REFUSED])
    assert not stats[ORDERS].get(REFUSED)
    assert list(mirror(sink)) == [(7,)]


def test_a_native_panic_in_one_tables_share_refuses_that_table_alone(
    sink: DeltaSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs panics (pyo3's PanicException, a BaseException) on what one table holds; with
    ``isolate`` that table is refused and the others applied, as for any table fault."""
    panic = type("PanicException", (BaseException,), {})
    applied = DeltaSink._apply_table

    def apply(self: DeltaSink, batch_id: int, schema: TableSchema, *rest: Any) -> Any:
        if schema.table_id == ITEMS:
            raise panic("Invalid object store url.: External(InvalidDomainCharacter)")
        return applied(self, batch_id, schema, *rest)

    monkeypatch.setattr(DeltaSink, "_apply_table", apply)
    feed = Feed()
    item = feed.rec("+I", {"Order Id": 1, "Line": "a", "qty": 2}, table=ITEMS)
    stats = sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(7)), item], isolate=True)
    assert "InvalidDomainCharacter" in str(stats[ITEMS][REFUSED])
    assert list(mirror(sink)) == [(7,)]
    with pytest.raises(BaseException, match="InvalidDomainCharacter"):
        sink.apply_batch(1, SCHEMAS, [item])


def test_a_table_reshaped_in_place_takes_its_new_columns_without_a_row(sink: DeltaSink) -> None:
    """A column added online reaches the mirror's schema in the DDL's batch, rows or not: a
    commit that only adds the column, once (a retry of the batch finds it applied)."""
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    old = SCHEMAS[ORDERS]
    wider = TableSchema(
        ORDERS, (*old.columns, ColumnInfo("label", "varchar", "varchar(10)")), ("id",), "id"
    )
    schemas = {**SCHEMAS, ORDERS: wider}
    version = DeltaTable(str(sink.mirror_path(ORDERS))).version()
    stats = sink.apply_batch(1, schemas, [], reshaped=[ORDERS])
    assert not stats[ORDERS].get(REFUSED)
    table = DeltaTable(str(sink.mirror_path(ORDERS)))
    assert "label" in [f.name for f in table.schema().fields]
    assert table.version() == version + 1
    assert read_delta(table).column("label").to_pylist() == [None]
    assert sink.apply_batch(1, schemas, [], reshaped=[ORDERS])[ORDERS]["mirror_skipped"]
    assert DeltaTable(str(sink.mirror_path(ORDERS))).version() == version + 1


def test_a_redump_into_a_shape_the_rows_cannot_take_keeps_the_old_mirror_aside(
    sink: DeltaSink,
) -> None:
    """A column retyped so that its values no longer fit (text 'age1' into an INT): the re-dump
    fills a fresh mirror, and the old one stays readable beside it, as it was."""
    table = TableId("shop", "people")
    text = TableSchema(
        table,
        (
            ColumnInfo("id", "int", "int(11)", nullable=False),
            ColumnInfo("age", "varchar", "varchar(10)"),
        ),
        ("id",),
        "id",
    )
    number = TableSchema(
        table,
        (
            ColumnInfo("id", "int", "int(11)", nullable=False),
            ColumnInfo("age", "int", "int(11)"),
        ),
        ("id",),
        "id",
    )

    def rec(op: str, row: dict[str, Any], pos: int, split_id: str = "") -> ChangeRecord:
        return ChangeRecord(
            "shop", "people", op, json.dumps([row["id"]]), json.dumps(row), 1, pos, 0, 0, 0, 0,
            split_id=split_id,
        )  # fmt: skip

    sink.apply_batch(0, {table: text}, [rec("+I", {"id": 1, "age": "age1"}, 10)])
    replace = ReplaceRange(table, "shop.people:0", lambda key: True, position=(1, 20, 0, 0))
    dump = [rec("+I", {"id": 1, "age": 41}, 20, "shop.people:0")]
    for _ in range(2):  # a retried batch finds the work done
        sink.apply_batch(1, {table: number}, dump, [replace])
    assert sink.read_mirror(table).to_pylist() == [{"id": 1, "age": 41}]
    (aside,) = sink.mirror_path(table).parent.glob("people.before-v*")
    assert read_delta(DeltaTable(str(aside))).to_pylist() == [{"id": 1, "age": "age1"}]
