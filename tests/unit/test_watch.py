"""What the job watches past its start-up checks: changes not logged as rows, and the server's
binlog settings, from the state to ``status`` (the metrics: ``test_monitoring.py``)."""

from __future__ import annotations

import time
from pathlib import Path

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.source.schema_follow import hold_for_evolution, park_on_schema_change
from cdc_console.state.store import StateStore
from cdc_console.status import collect_status, format_status
from tests.tui.canned import HEAD, SERVER_LOGS, build_state, write_config

ORDERS = TableId("shop", "orders")
AT = BinlogOffset("binlog.000041", 400)


def test_held_changes_are_counted_per_table_and_cause_ddl_aside(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    with store.transaction() as conn:
        store.move_table(ORDERS, conn, Lifecycle.CATCHING_UP)
        store.move_table(ORDERS, conn, Lifecycle.STREAMING)
    statement = SchemaChange(AT, AT, "UPDATE orders SET a = 1", ChangeCause.STATEMENT)
    with store.transaction() as conn:
        hold_for_evolution(store, conn, str(ORDERS), statement)
        hold_for_evolution(store, conn, str(ORDERS), SchemaChange(AT, AT, "ALTER TABLE x"))
        later = SchemaChange(
            BinlogOffset("binlog.000041", 900), AT, "DELETE FROM orders", ChangeCause.STATEMENT
        )
        hold_for_evolution(store, conn, str(ORDERS), later)
        partial = SchemaChange(AT, AT, "an update lacks columns", ChangeCause.PARTIAL_IMAGE)
        park_on_schema_change(store, conn, str(ORDERS), partial)
    held = {(str(h.table_id), h.cause): h for h in store.held_changes()}
    assert set(held) == {("shop.orders", "statement"), ("shop.orders", "partial-image")}
    assert held["shop.orders", "statement"].count == 2
    assert held["shop.orders", "statement"].last_what == "DELETE FROM orders"
    assert held["shop.orders", "statement"].last_position == BinlogOffset("binlog.000041", 900)
    messages = [e.message for e in store.events()]
    assert any(
        "shop.orders was changed by a statement the binlog logged as SQL, not as rows at "
        "binlog.000041:400 (UPDATE orders SET a = 1): held there until it is followed" in m
        for m in messages
    ), messages
    assert any(
        "shop.orders had a row logged without all its columns at binlog.000041:400" in m
        and "parked (NEEDS_REDUMP) so nothing it cannot apply exactly reaches its mirror" in m
        for m in messages
    ), messages


def test_a_source_setting_records_when_it_changed(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    assert store.record_source_setting("binlog_format", "ROW", "ROW", True)
    first = store.source_settings()[0]
    time.sleep(0.01)
    assert not store.record_source_setting("binlog_format", "ROW", "ROW", True)
    assert store.source_settings()[0].changed_at == first.changed_at
    assert store.record_source_setting("binlog_format", "STATEMENT", "ROW", False)
    now = store.source_settings()[0]
    assert (now.value, now.ok) == ("STATEMENT", False) and now.changed_at > first.changed_at


def test_status_says_which_setting_is_wrong_and_which_tables_were_held(tmp_path: Path) -> None:
    config_path = write_config(tmp_path)
    from cdc_console.config import load_config
    from cdc_console.status import HeadProbe

    config = load_config(config_path)
    build_state(config.state_path)
    store = StateStore(config.state_path)
    try:
        quiet = format_status(
            collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
        )
        assert "source setting" not in quiet and "not logged as rows" not in quiet
        store.record_source_setting("binlog_row_image", "MINIMAL", "FULL", False)
        store.record_source_setting("binlog_format", "ROW", "ROW", True)
        with store.transaction() as conn:
            store.count_held_change(ORDERS, "partial-image", AT, "an update lacks columns", conn)
        status = collect_status(config, store, probed=HeadProbe(HEAD, list(SERVER_LOGS)))
        text = format_status(status)
        assert "source setting: binlog_row_image is 'MINIMAL', not 'FULL'" in text
        assert "binlog_format" not in text
        assert "shop.orders: 1 partial-image, last at binlog.000041:400" in text
        orders = next(t for t in status.tables if t.table == "shop.orders")
        assert "not logged as rows: 1 partial-image, last 0 s ago" in orders.note
        document = status.to_dict()
        assert document["held_changes"][0]["table"] == "shop.orders"  # type: ignore[index]
    finally:
        store.close()
