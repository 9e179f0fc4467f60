"""The `?` overlay: every key the console answers to right now, grouped by where it applies.

It is built from the live bindings of the app, of the screen underneath and of the widget that
has focus (the same maps Textual dispatches keys from), never from a hand-written list, so it
cannot drift from the real keys. Each key says whether it does something now: a control that does
not apply to the highlighted table, or a key a nearer binding takes over, is dimmed with why.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

NOT_NOW = "not now"
OVERRIDDEN = "overridden by {}"


@dataclass(frozen=True)
class KeyLine:
    """One action and the keys bound to it in one place (``note``: why it is dimmed)."""

    keys: tuple[str, ...]
    description: str
    note: str = ""


@dataclass(frozen=True)
class Place:
    """A node keys are bound on: its heading, what a note calls it, the node."""

    title: str
    name: str
    node: DOMNode


@dataclass(frozen=True)
class KeyGroup:
    title: str
    node: DOMNode
    lines: tuple[KeyLine, ...]


def describe(binding: Binding) -> str:
    """The footer's words for it; the action's own name for bindings the footer never shows."""
    if binding.description:
        return binding.description
    return binding.action.split(".")[-1].split("(")[0].replace("_", " ").capitalize()


def _places(app: App[object], screen: Screen[object]) -> list[Place]:
    """Where keys are bound, nearest first, as Textual looks them up: the focused widget and its
    containers below the screen, then the screen, then the app."""
    places: list[Place] = []
    focused = screen.focused
    if focused is not None:
        for node in focused.ancestors_with_self:
            if node is screen:
                break
            what = "table" if isinstance(node, DataTable) else type(node).__name__
            where = f" (#{node.id})" if node.id else ""
            places.append(Place(f"Focused {what}{where}", f"the focused {what}", node))
    name = str(getattr(screen, "SCREEN_NAME", "") or type(screen).__name__)
    places.append(Place(f"This screen: {name.capitalize()}", "this screen", screen))
    places.append(Place("Everywhere", "the app", app))
    return places


def _owners(places: list[Place]) -> dict[str, Place]:
    """Which place gets each key: priority bindings first, from the app down, then the nearest."""
    owner: dict[str, Place] = {}
    for place in reversed(places):
        for key, binding in place.node._bindings:
            if binding.priority:
                owner.setdefault(key, place)
    for place in places:
        for key, _binding in place.node._bindings:
            owner.setdefault(key, place)
    return owner


def key_groups(app: App[object], screen: Screen[object]) -> list[KeyGroup]:
    """Every binding of ``screen``'s focused widget, of ``screen`` and of ``app``, one line per
    action (keys sharing it joined), in the order they were declared."""
    places = _places(app, screen)
    owner = _owners(places)
    groups: list[KeyGroup] = []
    for place in places:
        lines: dict[tuple[str, str], list[str]] = {}
        notes: dict[tuple[str, str], str] = {}
        for key, binding in place.node._bindings:
            line = (binding.action, describe(binding))
            lines.setdefault(line, []).append(app.get_key_display(binding))
            winner = owner.get(key, place)
            if winner is not place:
                notes.setdefault(line, OVERRIDDEN.format(winner.name))
            elif not app._check_action_state(binding.action, place.node):
                notes.setdefault(line, NOT_NOW)
        if lines:
            found = tuple(
                KeyLine(tuple(dict.fromkeys(keys)), line[1], notes.get(line, ""))
                for line, keys in lines.items()
            )
            groups.append(KeyGroup(place.title, place.node, found))
    return groups


def render_group(group: KeyGroup) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True, min_width=6)
    grid.add_column(no_wrap=True)
    for line in group.lines:
        dim = "dim" if line.note else ""
        what = Text(line.description, style=dim)
        if line.note:
            what.append(f" ({line.note})", style="dim italic")
        grid.add_row(Text(" ".join(line.keys), style=dim), what)
    return Group(Text(group.title, style="bold underline"), grid)


def render_groups(groups: Sequence[KeyGroup]) -> RenderableType:
    """One column per group, the widest scope first: the app's, the screen's, the widget's."""
    layout = Table.grid(padding=(0, 4))
    for _group in groups:
        layout.add_column(vertical="top")
    layout.add_row(*(render_group(group) for group in reversed(groups)))
    return layout


def natural_width(renderable: RenderableType) -> int:
    """Columns ``renderable`` takes when nothing squeezes it (Rich's own measure undercounts
    nested grids)."""
    console = Console(width=1000, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return max((cell_len(line.rstrip()) for line in console.export_text().splitlines()), default=0)


class HelpScreen(ModalScreen[None]):
    """The key list over the screen it describes; `?`, Escape or `q` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "close", "Close"),
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close"),
    ]

    def __init__(self, under: Screen[object]) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        body = render_groups(key_groups(self.app, self.under))
        with Vertical(id="help-dialog") as dialog:
            dialog.border_title = "Keys"
            dialog.border_subtitle = "? / esc / q closes"
            # As wide as the columns need (CSS caps it at the screen): Textual's `width: auto`
            # does not measure a Rich table inside a Static.
            dialog.styles.width = natural_width(body) + 6  # + border and padding
            yield Static(body, id="help-body")

    def action_close(self) -> None:
        self.dismiss(None)
