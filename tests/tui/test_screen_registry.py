"""One registry of screens: the app's modes, its number keys, the top bar's tabs and the
palette's commands are made from ``screens.registry.SCREENS`` and cannot disagree."""

from __future__ import annotations

from textual.binding import Binding

from cdc_console.tui.app import ConsoleApp
from cdc_console.tui.screens import registry
from cdc_console.tui.widgets.topbar import tabs


def test_every_registered_screen_has_a_mode_a_key_and_a_tab() -> None:
    names = [s.SCREEN_NAME for s in registry.SCREENS]
    keys = [s.TAB_KEY for s in registry.SCREENS]
    assert all(names) and all(keys) and all(s.TAB_LABEL for s in registry.SCREENS)
    assert len(set(names)) == len(names) and len(set(keys)) == len(keys)
    assert {s.SCREEN_NAME: s for s in registry.SCREENS} == ConsoleApp.MODES
    bound = {b.key: b.action for b in ConsoleApp.BINDINGS if isinstance(b, Binding)}
    for screen in registry.SCREENS:
        assert bound[screen.TAB_KEY] == f"show_screen('{screen.SCREEN_NAME}')"
    shown = tabs("tables", registry.TABS).plain
    assert shown == "".join(f" {s.TAB_KEY} {s.TAB_LABEL} " for s in registry.SCREENS)
