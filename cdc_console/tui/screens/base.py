"""What every console screen shares: the top bar, the footer, and how it gets its data.

Screens never poll. The app hands each fresh ``PipelineView`` to the active screen (``show``),
and a screen coming back into view asks for the latest one, so switching screens is instant.
Screens see the app only through ``Host``, the few things they may ask of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from cdc_console.tui.model import PipelineView
from cdc_console.tui.widgets.topbar import ErrorBar, Tab, TopBar


class Host(Protocol):
    """The app as screens and the command palette see it."""

    @property
    def pipeline_names(self) -> list[str]: ...

    @property
    def current(self) -> str: ...

    @property
    def selected_table(self) -> str | None: ...

    def view_of(self, pipeline: str) -> PipelineView | None: ...

    def poll_errors(self, pipeline: str) -> list[str]: ...

    def select_pipeline(self, pipeline: str) -> None: ...

    def select_table(self, table: str) -> None: ...

    def control(self, kind: str, table: str | None = None) -> None: ...

    def confirm_redump(self, table: str) -> None: ...

    def repair_table(self, table: str) -> None: ...

    def start_job(self) -> None: ...

    def confirm_stop(self) -> None: ...

    def show_screen(self, name: str) -> None: ...

    @property
    def screen_tabs(self) -> Sequence[Tab]: ...


class ConsoleScreen(Screen[None]):
    """A full screen of the console: top bar, body (``compose_body``), footer."""

    SCREEN_NAME = ""
    #: the key that shows it and its name in the top bar's tabs (``screens.registry``)
    TAB_KEY = ""
    TAB_LABEL = ""

    @property
    def host(self) -> Host:
        return cast(Host, self.app)

    def compose(self) -> ComposeResult:
        yield TopBar(self.SCREEN_NAME)
        yield ErrorBar()
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self) -> None:
        self.refresh_from_host()

    def refresh_from_host(self) -> None:
        bars = self.query(TopBar)
        if not bars:
            # A poll's result can land before the screen has composed its widgets, or after they
            # were removed on the way out; the next refresh shows it.
            return
        host = self.host
        view = host.view_of(host.current)
        bars.first().show(host, view)
        self.query_one(ErrorBar).show(host.poll_errors(host.current))
        if view is not None:
            self.show(view)

    def show(self, view: PipelineView) -> None:
        """Display ``view``; called on every refresh of the current pipeline while visible."""
