"""The `?` key list, the `/` filter and the `o`/`O` sort, driven through Pilot over the
canned pipeline. The help's expectations are read from the classes' BINDINGS, so a key added
without showing up in the help fails here."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console
from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input, Static

from cdc_console.tui.app import ConsoleApp
from cdc_console.tui.data.monitor import PipelineMonitor
from cdc_console.tui.screens.events import EventsScreen
from cdc_console.tui.screens.help import HelpScreen, describe
from cdc_console.tui.screens.tables import TablesScreen
from cdc_console.tui.widgets.filter_bar import FilterBar
from cdc_console.tui.widgets.keyed_table import KeyedTable
from cdc_console.tui.widgets.row_order import Row, natural, visible
from tests.tui.canned import state_store
from tests.tui.driving import SIZE, screen_text, settle, until


def bindings(declared: list[BindingType]) -> list[Binding]:
    return list(Binding.make_bindings(declared))


def help_text(app: ConsoleApp) -> str:
    """What the open help overlay lists, as plain text."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(app.screen.query_one("#help-body", Static).content)
    return console.export_text()


def lists(text: str, key: str, description: str) -> bool:
    """Whether ``text`` has a line giving ``key`` (maybe among others keys) for ``description``."""
    pattern = rf"(?<!\S){re.escape(key)}(?: \S+)*? {{2,}}{re.escape(description)}(?!\w)"
    return re.search(pattern, text) is not None


def tables_of(app: ConsoleApp) -> KeyedTable:
    return app.screen.query_one("#tables", KeyedTable)


async def on_customers(pilot: Pilot[None]) -> None:
    """Highlight shop.customers: 12 splits below rather than 2,000, so each key is quick where
    the 2,000 are not the point."""
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    tables_of(app).select_key("shop.customers")
    await until(pilot, lambda: app.selected_table == "shop.customers", "selection")
    splits = app.screen.query_one("#splits", KeyedTable)
    await until(pilot, lambda: splits.total_rows == 12, "the customers' splits")


async def open_help(pilot: Pilot[None]) -> str:
    app = pilot.app
    assert isinstance(app, ConsoleApp)
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help overlay")
    await pilot.pause()
    return help_text(app)


def assert_lists_every_binding(
    app: ConsoleApp, text: str, *owners: type[App[None] | Screen[None]]
) -> None:
    for owner in owners:
        for binding in bindings(owner.BINDINGS):
            key = app.get_key_display(binding)
            if owner.__module__.startswith("cdc_console"):
                assert binding.description, f"{owner.__name__}: {binding.key} has no description"
            # Textual's own keys without a description are listed by their action's name
            description = binding.description or describe(binding)
            assert lists(text, key, description), (owner.__name__, key, description)


async def test_help_lists_every_key_of_the_app_and_the_screen(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = await open_help(pilot)
        assert "Everywhere" in text and "This screen: Tables" in text
        assert_lists_every_binding(app, text, ConsoleApp, App, TablesScreen, Screen)
        assert lists(text, "q", "Quit") and lists(text, "/", "Filter") and lists(text, "?", "Help")
        assert lists(text, "^p", "palette")  # Textual's own, added at run time
        # what does not apply now says so: orders is not paused, the job is running
        assert "Resume table (not now)" in text and "Start job (not now)" in text
        assert "Focused table (#tables)" in text and lists(text, "↓", "Cursor down")


async def test_help_closes_with_question_mark_escape_or_q(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_customers(pilot)
        for key in ("question_mark", "escape", "q"):
            await open_help(pilot)
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, TablesScreen), f"{key} to close")
            assert app.is_running
            assert app.focused is tables_of(app)
        await settle(pilot)


async def test_help_follows_the_screen_in_view(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        text = await open_help(pilot)
        assert "This screen: Events" in text
        assert_lists_every_binding(app, text, ConsoleApp, EventsScreen)
        assert not lists(text, "/", "Filter") and not lists(text, "p", "Pause table")


async def test_filter_narrows_the_tables_and_escape_restores_them(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_customers(pilot)
        tables = tables_of(app)
        every = tables.keys
        assert len(every) == 7
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"PAY")
        await until(pilot, lambda: tables.keys == ["shop.payments"], "the filter to narrow")
        # the cursor's table was hidden: the cursor and the splits pane moved to a shown one
        await until(pilot, lambda: app.selected_table == "shop.payments", "the selection")
        assert "filter /PAY 1 of 7 shown" in screen_text(app)
        await pilot.press("backspace", "backspace", "backspace", *"ing")
        want = ["shop.customers", "shop.orders", "shop.payments", "shop.products"]
        await until(pilot, lambda: tables.keys == want, "matches on any visible column")
        await pilot.press("escape")
        await until(pilot, lambda: tables.keys == every, "escape to show every table")
        assert app.focused is tables
        assert not app.screen.query_one(FilterBar).display
        assert "filter /" not in screen_text(app)


async def test_the_filter_survives_refreshes_and_rows_update_in_place(
    shop: PipelineMonitor, workdir: Path
) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_customers(pilot)
        tables = tables_of(app)
        await pilot.press("slash", *"stream", "enter")
        want = ["shop.customers", "shop.payments"]
        await until(pilot, lambda: tables.keys == want, "the filter")
        assert app.focused is tables and not app.screen.query_one(FilterBar).display
        store = state_store(workdir)
        with store.transaction() as conn:
            conn.execute("UPDATE tables SET events_applied=99999 WHERE table_id='shop.customers'")
            conn.execute("UPDATE tables SET events_applied=55555 WHERE table_id='shop.orders'")
        store.close()
        await settle(pilot, 3)
        assert tables.keys == want
        assert [c.plain for c in tables.get_row("shop.customers")][4] == "99,999"
        text = screen_text(app)
        assert "filter /stream 2 of 7 shown (esc clears)" in text and "55,555" not in text
        await pilot.press("escape")  # on the table, with the prompt closed: clears it too
        await until(pilot, lambda: len(tables.keys) == 7, "escape on the table")
        assert "55,555" in screen_text(app)


async def test_a_poll_arriving_before_the_highlight_keeps_the_moved_cursor(
    shop: PipelineMonitor,
) -> None:
    """The cursor moves at once; the selection follows when its highlight message is handled.
    A poll shown in between must not put the cursor back on the old selection (it did: the
    cursor bounced back, and the selection with it)."""
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tables = tables_of(app)
        before = app.selected_table
        assert before is not None and before != "shop.customers"
        view = app.view_of("shop")
        assert view is not None and isinstance(app.screen, TablesScreen)
        tables.select_key("shop.customers")
        app.screen.show(view)  # the poll, before the highlight is handled
        await until(pilot, lambda: app.selected_table == "shop.customers", "selection", 5)
        assert tables.cursor_key == "shop.customers"
        app.screen.show(view)
        await pilot.pause()
        assert tables.cursor_key == "shop.customers" == app.selected_table


async def test_filter_on_the_splits_takes_any_key_as_text(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_customers(pilot)
        splits = app.screen.query_one("#splits", KeyedTable)
        await pilot.press("tab")
        assert app.focused is splits
        await pilot.press("slash", *"equal?q")  # q and ? are text here, not quit or help
        assert app.screen.query_one("#filter-input", Input).value == "equal?q"
        await pilot.press("backspace", "backspace")
        await until(pilot, lambda: splits.row_count == 11, "the verified splits")
        assert "shop.customers:3" not in splits.keys
        await settle(pilot)
        assert splits.row_count == 11 and len(tables_of(app).keys) == 7
        assert "filter /equal 11 of 12 shown" in screen_text(app)
        assert isinstance(app.screen, TablesScreen) and app.is_running


async def test_sort_orders_reverses_and_keeps_the_cursor_on_its_row(
    shop: PipelineMonitor, workdir: Path
) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tables = tables_of(app)
        unsorted = tables.keys
        tables.select_key("shop.payments")
        await until(pilot, lambda: app.selected_table == "shop.payments", "selection")
        await pilot.press("o")
        assert tables.sort_column == "table" and tables.keys == sorted(unsorted)
        await pilot.press("o", "o", "o")
        assert tables.sort_column == "rows" and not tables.sort_reverse
        view = app.view_of("shop")
        assert view is not None
        by_rows = [t.table for t in sorted(view.tables, key=lambda t: t.rows_snapshotted)]
        assert tables.keys == by_rows
        assert tables.cursor_key == "shop.payments" and app.selected_table == "shop.payments"
        assert "rows read▲" in screen_text(app) and "sorted by rows read, ascending" in screen_text(
            app
        )

        await pilot.press("O")
        assert tables.keys == by_rows[::-1] and tables.cursor_key == "shop.payments"
        assert "rows read▼" in screen_text(app)

        store = state_store(workdir)  # the poll's numbers move payments to the top
        with store.transaction() as conn:
            conn.execute(
                "UPDATE tables SET rows_snapshotted=9999999 WHERE table_id='shop.payments'"
            )
        store.close()
        await until(pilot, lambda: tables.keys[0] == "shop.payments", "the re-sorted refresh")
        await settle(pilot)
        assert tables.sort_column == "rows" and tables.sort_reverse
        assert tables.cursor_key == "shop.payments" and tables.cursor_row == 0
        assert app.selected_table == "shop.payments"

        await pilot.press(*"o" * 6)  # past the last column: the poll's own order again
        assert tables.sort_column is None and tables.keys == unsorted
        assert "▲" not in screen_text(app) and "▼" not in screen_text(app)


async def test_sort_puts_rows_without_a_value_last_and_a_header_click_sorts(
    shop: PipelineMonitor,
) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await on_customers(pilot)
        tables = tables_of(app)
        x = sum(column.get_render_width(tables) for column in list(tables.columns.values())[:6])
        for reverse in (False, True):
            await pilot.click(tables, offset=(x + 2, 0))
            await until(pilot, lambda r=reverse: tables.sort_reverse is r, "the header click")
            assert tables.sort_column == "lag"
            lagging = ["shop.customers", "shop.products", "shop.payments"]
            assert tables.keys[:3] == (lagging[::-1] if reverse else lagging)
            assert all(tables.get_row(k)[6].plain == "-" for k in tables.keys[3:])
        await pilot.click(tables, offset=(x + 2, 0))
        await until(pilot, lambda: tables.sort_column is None, "the third click")


async def test_sorting_the_2000_splits_keeps_the_cursor_on_its_split(shop: PipelineMonitor) -> None:
    app = ConsoleApp([shop])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        splits = app.screen.query_one("#splits", KeyedTable)
        splits.focus()
        splits.move_cursor(row=1500, animate=False)
        await pilot.pause()
        mark = splits.cursor_key
        await pilot.press("o", "o", "o")
        assert splits.sort_column == "status"
        statuses = [splits.get_row(key)[2].plain for key in splits.keys]
        assert statuses == sorted(statuses) and len(statuses) == 2000
        assert splits.cursor_key == mark
        await settle(pilot)
        assert splits.cursor_key == mark and splits.sort_column == "status"
        assert tables_of(app).sort_column is None  # the keys went to the focused table only


def test_sort_order_reads_numbers_as_numbers_and_puts_dashes_last() -> None:
    assert natural("binlog.000040:1007") < natural("binlog.000041:4")
    assert natural("1,234,000") > natural("5,000") and natural("shop.B") == natural("shop.b")
    dash, one, two = (Row(k, [Text(v)]) for k, v in (("d", "-"), ("1", "9"), ("2", "10")))
    assert [r.key for r in visible([dash, two, one], "", 0, False)] == ["1", "2", "d"]
    assert [r.key for r in visible([dash, two, one], "", 0, True)] == ["2", "1", "d"]
    assert [r.key for r in visible([dash, two, one], " 1", None, False)] == ["2"]
