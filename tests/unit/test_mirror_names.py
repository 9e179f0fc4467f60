"""Mirrors placed by name (``[sink] mirrors``): the paths, the config's refusals, the lake's
listing by table, and a start that would leave a mirror behind refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cdc_console.config import load_config
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableId
from cdc_console.errors import ConfigError
from cdc_console.sinks.lake_layout import changelog_path, mirror_path, table_of_folders
from cdc_console.sinks.maintenance import lake_tables
from cdc_console.sinks.mirror_places import check_mirror_places
from cdc_console.state.store import StateStore

USERS = TableId("shop", "users")
ORDERS = TableId("shop", "orders")
NAMES = {USERS: "analytics/users"}


def sink(tmp_path: Path, lines: str) -> dict[TableId, str]:
    path = tmp_path / "pipeline.toml"
    text = '[source]\ntables = ["shop.*"]\n[sink]\n' + textwrap.dedent(lines)
    path.write_text(text)
    return load_config(path).sink.mirrors


def test_a_named_mirror_and_its_change_feed_live_at_the_name(tmp_path: Path) -> None:
    assert sink(tmp_path, 'mirrors = { "shop.users" = "analytics/users" }') == NAMES
    root = tmp_path / "lake"
    assert mirror_path(root, USERS, NAMES) == root / "analytics" / "users"
    assert changelog_path(root, USERS, NAMES) == root / "_changelog" / "analytics" / "users"
    assert mirror_path(root, ORDERS, NAMES) == root / "shop" / "orders"
    assert table_of_folders("analytics", "users", NAMES) == USERS
    assert table_of_folders("shop", "orders", NAMES) == ORDERS
    for path in (mirror_path(root, USERS, NAMES), changelog_path(root, USERS, NAMES)):
        (path / "_delta_log").mkdir(parents=True)
    assert sorted((t.name, t.kind) for t in lake_tables(root, NAMES)) == [
        ("shop.users", "changelog"),
        ("shop.users", "mirror"),
    ]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            'mirrors = { "shop.*" = "a/b", "crm.*" = "a/b" }',
            "the mirror of shop.* too: a mirror holds one table, or the tables of one pattern",
        ),
        ('mirrors = { "shop.users" = "users" }', "must be a place and a name"),
        ('mirrors = { "shop.users" = "a/b/c" }', "must be a place and a name"),
        ('mirrors = { "shop.users" = "_changelog/u" }', "(_changelog holds the change feed)"),
        (
            'mirrors = { "shop.users" = "a/u", "shop.orders" = "a/u" }',
            "'a/u', the mirror of shop.users too: a mirror holds one table",
        ),
    ],
)
def test_a_place_that_cannot_hold_one_mirror_is_refused(
    tmp_path: Path, lines: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        sink(tmp_path, lines)
    assert message in str(info.value), str(info.value)


def test_a_start_that_would_leave_a_mirror_behind_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(USERS, "id", Lifecycle.STREAMING)
    # mirrored at its own db/t before any place was recorded
    (mirror_path(root, USERS) / "_delta_log").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        check_mirror_places(store, root, NAMES, [USERS])
    assert str(info.value).startswith(
        f"the mirror of shop.users is at {root}/shop/users, but [sink] mirrors now places it "
        f"at {root}/analytics/users"
    )
    assert f"move {root}/shop/users to {root}/analytics/users" in str(info.value)
    # once moved, the start goes on and the place is recorded; moving it back is refused too
    (root / "analytics").mkdir()
    (root / "shop" / "users").rename(root / "analytics" / "users")
    check_mirror_places(store, root, NAMES, [USERS])
    with pytest.raises(ConfigError):
        check_mirror_places(store, root, {}, [USERS])
    check_mirror_places(store, root, NAMES, [USERS])


def test_two_tables_placed_at_one_mirror_are_refused(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    # shop.orders is mirrored at its own shop/orders; users is placed there by name
    with pytest.raises(ConfigError) as info:
        check_mirror_places(store, tmp_path, {USERS: "shop/orders"}, [ORDERS, USERS])
    assert "shop.orders and shop.users would both be mirrored at" in str(info.value)


def test_status_says_how_a_mirror_differs_from_its_table(tmp_path: Path) -> None:
    from cdc_console.core.schema import ColumnInfo, TableSchema
    from cdc_console.status import mirror_shape, shape_note

    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[source]\ntables = ["shop.*"]\n[sink.mirrors]\n"shop.users" = "analytics/users"\n'
    )
    config = load_config(path)
    schema = TableSchema(
        USERS,
        (ColumnInfo("id", "int", "int(11)"), ColumnInfo("email", "varchar", "varchar(80)")),
        ("id",),
        "id",
        source_names=("id", "ssn", "email"),
    )
    shape = mirror_shape(config, USERS, schema)
    assert shape == {"left_out": ["ssn"], "mirror": "analytics/users"}
    assert shape_note(shape) == "leaves out ssn; mirror analytics/users"
    assert mirror_shape(config, ORDERS, None) is None
