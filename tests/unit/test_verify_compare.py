"""The comparison at the heart of ``verify``: exact per key, blind to representation."""

from __future__ import annotations

from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.values.arrow import rows_to_table
from cdc_console.verify.compare import Difference, DifferenceKind, Fold, compare, overlay, typed

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "items")


def orders_schema() -> TableSchema:
    return TableSchema(
        ORDERS,
        (
            ColumnInfo("id", "bigint", "bigint(20)", nullable=False, numeric_precision=19),
            ColumnInfo("name", "varchar", "varchar(50)"),
            ColumnInfo("amount", "decimal", "decimal(10,2)", numeric_precision=10, numeric_scale=2),
            ColumnInfo("updated", "datetime", "datetime(6)", datetime_precision=6),
            ColumnInfo("blob", "blob", "blob"),
        ),
        ("id",),
        "id",
    )


def order(key: int, **changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": key,
        "name": f"n{key}",
        "amount": f"{key}.10",
        "updated": "2024-01-02 03:04:05.123456",
        "blob": "AAE=",
    }
    row.update(changes)
    return row


def table(rows: list[dict[str, object]]) -> object:
    return rows_to_table(orders_schema(), rows)


def shown(found: list[Difference]) -> list[str]:
    return [
        f"{d.kind} {d.key} " + ",".join(f"{c}={s!r}/{m!r}" for c, (s, m) in d.columns.items())
        for d in found
    ]


def test_equal_rows_in_any_order_are_equal() -> None:
    schema = orders_schema()
    source = table([order(1), order(2), order(3)])
    mirror = table([order(3), order(1), order(2)])
    assert compare(schema, source, mirror) == []


def test_each_kind_of_difference_is_named_with_its_key_and_columns() -> None:
    schema = orders_schema()
    source = table([order(1), order(2), order(3), order(4)])
    mirror = table(
        [
            order(1, amount="1.11"),
            order(3, updated="2024-01-02 03:04:05.123457", blob="AAA="),
            order(4),
            order(9),
        ]
    )
    assert shown(compare(schema, source, mirror)) == [
        "differs (1,) amount='1.10'/'1.11'",
        "missing (2,) ",
        "differs (3,) updated='2024-01-02 03:04:05.123456'/'2024-01-02 03:04:05.123457',"
        "blob='AAE='/'AAA='",
        "extra (9,) ",
    ]


def test_null_against_a_value_differs_and_null_against_null_does_not() -> None:
    schema = orders_schema()
    source = table([order(1, name=None), order(2, name=None)])
    mirror = table([order(1, name=None), order(2, name="")])
    found = compare(schema, source, mirror)
    assert [(d.kind, d.key, d.columns) for d in found] == [
        (DifferenceKind.DIFFERS, (2,), {"name": (None, "")})
    ]


def test_a_mirror_with_retired_columns_compares_on_the_source_columns() -> None:
    schema = orders_schema()
    mirror = table([order(1)]).append_column("gone", rows_to_table(schema, [order(1)])["name"])
    assert compare(schema, table([order(1)]), typed(schema, mirror)) == []


def test_a_fold_replaces_and_deletes_rows_by_key() -> None:
    schema = orders_schema()
    base = table([order(1), order(2), order(3)])
    fold = Fold()
    fold.upsert((2,), order(2, name="changed"))
    fold.delete((3,))
    fold.upsert((7,), order(7))
    folded = overlay(schema, base, fold)
    expected = table([order(1), order(2, name="changed"), order(7)])
    assert compare(schema, folded, expected) == []


def test_a_fold_applies_partial_row_images_to_each_sides_own_row() -> None:
    """A patch (a MINIMAL/NOBLOB update) changes only its columns of the row the side holds; on a
    row the fold already holds whole it applies there; a side without the row still lacks it."""
    schema = orders_schema()
    base = table([order(1), order(2), order(3)])
    fold = Fold()
    fold.patch((1,), {"id": 1, "name": "patched"})
    fold.patch((1,), {"id": 1, "amount": "9.99"})
    fold.upsert((2,), order(2, name="whole"))
    fold.patch((2,), {"id": 2, "blob": None})
    fold.patch((3,), {"id": 3, "name": "gone"})
    fold.delete((3,))
    fold.patch((8,), {"id": 8, "name": "nowhere"})
    folded = overlay(schema, base, fold)
    expected = table([order(1, name="patched", amount="9.99"), order(2, name="whole", blob=None)])
    assert compare(schema, folded, expected) == []
