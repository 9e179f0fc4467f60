"""Every control in the command palette (Ctrl+P), with its key, and per-table commands by name.

The footer shows what the current screen's keys do; the palette reaches everything from
anywhere, including controls on a table other than the highlighted one ("pause shop.orders").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cdc_console.core.lifecycle import CommandKind
from cdc_console.tui.screens.base import Host


@dataclass(frozen=True)
class PaletteCommand:
    title: str
    help: str
    callback: Callable[[], None]
    discover: bool = True


def console_commands(host: Host) -> list[PaletteCommand]:
    """The palette's commands for the current pipeline and highlighted table."""
    found = [
        PaletteCommand(f"Show {label}", f"screen {key}", partial(host.show_screen, name))
        for key, name, label in host.screen_tabs
    ]
    view = host.view_of(host.current)
    paused = view.pipeline_paused if view else False
    found += [
        PaletteCommand(
            "Resume pipeline" if paused else "Pause pipeline",
            "key R: batches start again" if paused else "key P: no new batches, state kept",
            partial(host.control, CommandKind.RESUME if paused else CommandKind.PAUSE),
        ),
        PaletteCommand("Start job", "key s: launch it detached", host.start_job),
        PaletteCommand("Stop job", "key x: after its current batch", host.confirm_stop),
    ]
    for name in host.pipeline_names:
        if name != host.current:
            found.append(
                PaletteCommand(
                    f"Switch to pipeline {name}",
                    "its tables, binlog and events",
                    partial(host.select_pipeline, name),
                )
            )
    for table in view.tables if view else ():
        highlighted = table.table == host.selected_table
        key = " (key {})" if highlighted else ""
        controls: tuple[tuple[bool, str, str, str, Callable[[], None]], ...] = (
            (
                table.can_pause,
                "Pause",
                "stop emitting its changes",
                "p",
                partial(host.control, CommandKind.PAUSE, table.table),
            ),
            (
                table.can_resume,
                "Resume",
                "catch up from its pause position",
                "r",
                partial(host.control, CommandKind.RESUME, table.table),
            ),
            (
                table.can_redump,
                "Re-dump",
                "re-snapshot it while the others stream",
                "d",
                partial(host.confirm_redump, table.table),
            ),
        )
        for allowed, verb, what, letter, action in controls:
            if allowed:
                title = f"{verb} {table.table}"
                found.append(PaletteCommand(title, what + key.format(letter), action, highlighted))
        found.append(
            PaletteCommand(
                f"Show splits of {table.table}",
                f"{table.state}, {table.splits_done}/{table.splits_total or '?'} chunks",
                partial(_show_splits, host, table.table),
                False,
            )
        )
    return found


def _show_splits(host: Host, table: str) -> None:
    host.select_table(table)
    host.show_screen("tables")


class ConsoleCommands(Provider):
    """The console's controls as palette hits; typed text fuzzy-matches the titles."""

    def _commands(self) -> list[PaletteCommand]:
        return console_commands(cast(Host, self.app))

    async def discover(self) -> Hits:
        for command in self._commands():
            if command.discover:
                yield DiscoveryHit(command.title, command.callback, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(command.title), command.callback, help=command.help
                )
