"""Partial row images (``binlog_row_image`` MINIMAL or NOBLOB) applied exactly.

The row shapes are those MariaDB 10.11 logs, as the binlog decoders return them (measured with
``CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(300), b TEXT)`` and ``k (a INT, b VARCHAR(10),
c TEXT)``, no key). A patch completes the row its key names in the mirror, in the same batch or
an earlier one; what cannot be applied exactly is refused, never given a NULL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc_console.core.records import ChangeRecord
from cdc_console.core.schema import TableId
from cdc_console.mysql.partial_images import halves, patchable, refusal
from cdc_console.sinks.base import REFUSED, SinkError
from cdc_console.sinks.delta import DeltaSink
from cdc_console.sinks.netting import patched_keys
from tests.unit.test_delta_sink import (
    ITEMS,
    ORDERS,
    SCHEMAS,
    Feed,
    as_columns,
    by_id,
    mirror,
    order,
)

GONE = "cols bitmap"
COLUMNS = ("id", "a", "b")
NEEDED = ("id",)

MINIMAL_UPDATE = {
    "before_values": {"id": 2, "a": None, "b": None},
    "before_none_sources": {"a": GONE, "b": GONE},
    "after_values": {"id": None, "a": "upd", "b": None},
    "after_none_sources": {"id": GONE, "b": GONE},
}
MINIMAL_DELETE = {
    "values": {"id": 11, "a": None, "b": None},
    "none_sources": {"a": GONE, "b": GONE},
}
MINIMAL_INSERT = {"values": {"id": 10, "a": "ins", "b": None}, "none_sources": {"b": GONE}}
MINIMAL_KEY_CHANGE = {
    "before_values": {"id": 1, "a": None, "b": None},
    "before_none_sources": {"a": GONE, "b": GONE},
    "after_values": {"id": 20, "a": None, "b": None},
    "after_none_sources": {"a": GONE, "b": GONE},
}
NOBLOB_UPDATE = {
    "before_values": {"id": 2, "a": "two", "b": None},
    "before_none_sources": {"b": GONE},
    "after_values": {"id": 2, "a": "nob", "b": None},
    "after_none_sources": {"b": GONE},
}
# a whole before image and an after image of the changed column only: completed to a whole row
WHOLE_BEFORE = {
    "before_values": {"id": 3, "a": "x", "b": "y"},
    "before_none_sources": {},
    "after_values": {"id": None, "a": None, "b": "z"},
    "after_none_sources": {"id": GONE, "a": GONE},
}


def test_rows_that_name_their_row_become_patches_and_deletes_by_key() -> None:
    assert refusal("update", [MINIMAL_UPDATE, NOBLOB_UPDATE], NEEDED) == ""
    assert halves("update", MINIMAL_UPDATE, COLUMNS) == [("+P", {"id": 2, "a": "upd"}, {})]
    assert halves("update", NOBLOB_UPDATE, COLUMNS) == [("+P", {"id": 2, "a": "nob"}, {})]
    assert refusal("delete", [MINIMAL_DELETE], NEEDED) == ""
    assert halves("delete", MINIMAL_DELETE, COLUMNS) == [("-P", {"id": 11}, {})]


def test_a_whole_before_image_completes_the_after_image() -> None:
    assert halves("update", WHOLE_BEFORE, COLUMNS) == [
        ("-U", {"id": 3, "a": "x", "b": "y"}, {}),
        ("+U", {"id": 3, "a": "x", "b": "z"}, {}),
    ]


def test_what_cannot_be_applied_exactly_is_refused_with_the_reason() -> None:
    assert refusal("insert", [MINIMAL_INSERT], NEEDED) == (
        "an INSERT's image lacks the columns it left to their defaults"
    )
    assert refusal("update", [MINIMAL_UPDATE, MINIMAL_KEY_CHANGE], NEEDED) == (
        "it changes key column id"
    )
    # a chunk key outside the primary key must be in the image too, to place the row
    assert refusal("update", [MINIMAL_UPDATE], ("id", "a")) == "its before image lacks key column a"
    assert refusal("delete", [MINIMAL_DELETE], None) == "this table's changes need whole images"


def test_only_tables_with_a_key_take_patches() -> None:
    counted = SCHEMAS[ORDERS].__class__(
        TableId("shop", "log"), SCHEMAS[ORDERS].columns, (), "id", counted=True
    )
    assert patchable([SCHEMAS[ORDERS], SCHEMAS[ITEMS], counted]) == {
        ORDERS: ("id",),
        ITEMS: ("Order Id", "Line"),
    }


def patch(feed: Feed, row: dict[str, Any], op: str = "+P", table: TableId = ORDERS) -> ChangeRecord:
    schema = SCHEMAS[table]
    record = feed.rec("+I", {c: row[c] for c in schema.key_columns}, table=table)
    return ChangeRecord(**{**record.to_dict(), "op": op, "row": json.dumps(row)})  # type: ignore[arg-type]


@pytest.fixture(params=["objects", "columns"])
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def apply(sink: DeltaSink, batch: int, records: list[ChangeRecord], shape: str) -> Any:
    given = as_columns(records) if shape == "columns" else records
    return sink.apply_batch(batch, SCHEMAS, given, isolate=True)


def test_a_patch_completes_the_mirrors_row_and_the_changelog_gets_whole_rows(
    tmp_path: Path, shape: str
) -> None:
    sink = DeltaSink(tmp_path / "delta")
    feed = Feed()
    apply(sink, 0, [feed.rec("+I", order(k, f"n{k}", f"{k}.00")) for k in (1, 2, 3)], shape)
    batch = [
        patch(feed, {"id": 1, "name": "patched"}),
        patch(feed, {"id": 2, "amount": "9.50"}),
        patch(feed, {"id": 2, "name": "twice"}),
        patch(feed, {"id": 3}, op="-P"),
    ]
    assert patched_keys(as_columns(batch) if shape == "columns" else batch) == {(1,), (2,), (3,)}
    stats = apply(sink, 1, batch, shape)[ORDERS]
    assert (stats["updated"], stats["deleted"]) == (2, 1)
    assert mirror(sink) == by_id(order(1, "patched", "1.00"), order(2, "twice", "9.50"))
    log = sink.read_changelog(ORDERS).to_pylist()[3:]
    assert [(r["_op"], r["id"], r["name"], str(r["amount"])) for r in log] == [
        ("-U", 1, "n1", "1.00"),
        ("+U", 1, "patched", "1.00"),
        ("-U", 2, "n2", "2.00"),
        ("+U", 2, "n2", "9.50"),
        ("-U", 2, "n2", "9.50"),
        ("+U", 2, "twice", "9.50"),
        ("-D", 3, "n3", "3.00"),
    ]


def test_a_patch_applies_to_a_row_the_same_batch_wrote(tmp_path: Path, shape: str) -> None:
    sink = DeltaSink(tmp_path / "delta", changelog=False)
    feed = Feed()
    batch = [
        feed.rec("+I", order(5, "new", "5.00")),
        patch(feed, {"id": 5, "name": "then patched"}),
        feed.rec("+I", {"Order Id": 2**64 - 1, "Line": "a b", "qty": 1}, table=ITEMS),
        patch(feed, {"Order Id": 2**64 - 1, "Line": "a b", "qty": 7}, table=ITEMS),
    ]
    apply(sink, 0, batch, shape)
    assert mirror(sink) == by_id(order(5, "then patched", "5.00"))
    assert list(mirror(sink, ITEMS).values()) == [{"Order Id": 2**64 - 1, "Line": "a b", "qty": 7}]


def test_a_patch_of_a_row_the_mirror_lacks_refuses_that_table_only(
    tmp_path: Path, shape: str
) -> None:
    sink = DeltaSink(tmp_path / "delta")
    feed = Feed()
    apply(sink, 0, [feed.rec("+I", order(1))], shape)
    stats = apply(
        sink,
        1,
        [
            patch(feed, {"id": 2, "name": "nowhere"}),
            feed.rec("+I", {"Order Id": 1, "Line": "x", "qty": 1}, table=ITEMS),
        ],
        shape,
    )
    assert "changes key [2], a row the mirror does not hold" in stats[ORDERS][REFUSED]
    assert "cdc-console redump --table shop.orders" in stats[ORDERS][REFUSED]
    assert REFUSED not in stats[ITEMS]
    assert mirror(sink) == by_id(order(1))
    # a deleted row is not patched back to life either
    with pytest.raises(SinkError, match="a row the mirror does not hold"):
        sink.apply_batch(2, SCHEMAS, [patch(feed, {"id": 1}, "-P"), patch(feed, {"id": 1})])


def test_a_patch_naming_a_column_the_table_lacks_is_refused(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "delta")
    feed = Feed()
    sink.apply_batch(0, SCHEMAS, [feed.rec("+I", order(1))])
    with pytest.raises(SinkError, match="names column 'colour', which the table does not have"):
        sink.apply_batch(1, SCHEMAS, [patch(feed, {"id": 1, "colour": "red"})])
