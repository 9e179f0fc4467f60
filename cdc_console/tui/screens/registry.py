"""The console's screens, registered once: the app's modes and number keys, the top bar's tabs
and the palette's "Show" commands are all made from ``SCREENS``. A new screen is its own module
(a ``ConsoleScreen`` with its ``SCREEN_NAME``, ``TAB_KEY`` and ``TAB_LABEL``) and a line here."""

from __future__ import annotations

from textual.binding import Binding

from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.screens.binlog import BinlogScreen
from cdc_console.tui.screens.events import EventsScreen
from cdc_console.tui.screens.jobs import JobsScreen
from cdc_console.tui.screens.tables import TablesScreen
from cdc_console.tui.widgets.topbar import Tab

SCREENS: tuple[type[ConsoleScreen], ...] = (JobsScreen, TablesScreen, BinlogScreen, EventsScreen)

#: mode name -> screen, as Textual's ``App.MODES`` wants it
MODES: dict[str, type[ConsoleScreen]] = {s.SCREEN_NAME: s for s in SCREENS}

TABS: tuple[Tab, ...] = tuple(Tab(s.TAB_KEY, s.SCREEN_NAME, s.TAB_LABEL) for s in SCREENS)

BINDINGS: list[Binding] = [
    Binding(t.key, f"show_screen('{t.name}')", t.label, show=False) for t in TABS
]
