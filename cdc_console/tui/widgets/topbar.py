"""The line at the top of every screen: where you are, how the job is, and where to go next.

Like k9s's header it answers "is anything on fire" without switching screens: the current
pipeline, its job state, the event-time lag and the server's reachability, each coloured by the
thresholds, and the numbered screens with the active one lit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from rich.text import Text
from textual.widgets import Static

from cdc_console.tui import format as fmt
from cdc_console.tui.model import JobStatus, Level, PipelineView
from cdc_console.units import span


class Tab(NamedTuple):
    """A numbered screen as the top bar names it (``screens.registry`` makes them)."""

    key: str
    name: str
    label: str


class _Pipelines(Protocol):
    @property
    def pipeline_names(self) -> list[str]: ...

    @property
    def current(self) -> str: ...

    @property
    def screen_tabs(self) -> Sequence[Tab]: ...


class TopBar(Static):
    def __init__(self, active: str) -> None:
        super().__init__(id="topbar")
        self.active = active

    def show(self, host: _Pipelines, view: PipelineView | None) -> None:
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append(" cdc-console ", style="bold reverse")
        names = host.pipeline_names
        line.append(f" {host.current} ", style="bold")
        if len(names) > 1:
            line.append(f"({names.index(host.current) + 1}/{len(names)}) ", style="dim")
        if view is not None:
            line.append("│ job ", style="dim")
            line.append_text(fmt.job_status(view.job.status))
            if view.job.pid:
                line.append(f" pid {view.job.pid}", style="dim")
            if view.job.status is JobStatus.RECONNECTING:
                # the outage itself: how long, which attempt, the error
                line.append(f" {view.job.detail}", style=fmt.LEVEL_STYLES[Level.WARN])
            line.append(" │ lag ", style="dim")
            line.append_text(fmt.lag(view.binlog.event_lag))
            line.append(" │ server ", style="dim")
            if view.binlog.server_error:
                line.append("unreachable", style=fmt.LEVEL_STYLES[Level.ALERT])
            elif view.binlog.head is not None:
                line.append("ok", style=fmt.LEVEL_STYLES[view.binlog.probe_level])
            else:
                line.append("probing", style="dim")
            if view.pipeline_paused:
                line.append(" │ ", style="dim")
                line.append("PIPELINE PAUSED", style="bold black on yellow")
            if view.throttled:
                # the source is busy: chunk reads wait, the binlog stream does not
                line.append(" │ reads yield ", style="dim")
                line.append(view.throttled, style=fmt.LEVEL_STYLES[Level.WARN])
            if view.verifying is not None:
                found = view.verifying
                line.append(" │ verifying ", style="dim")
                line.append(f"{found.chunks_done}/{found.chunks_total}")
                if found.finish is not None:
                    line.append(f", {span(found.finish.seconds)} left", style="dim")
            if view.unsafe_settings:
                # a setting under which new writers' changes are not logged as full rows
                line.append(" │ source ", style="dim")
                line.append(", ".join(view.unsafe_settings), style=fmt.LEVEL_STYLES[Level.WARN])
        line.append("  ")
        line.append_text(tabs(self.active, host.screen_tabs))
        self.update(line)


def tabs(active: str, screens: Sequence[Tab]) -> Text:
    text = Text(no_wrap=True, end="")
    for key, name, label in screens:
        style = "bold reverse" if name == active else ""
        text.append(f" {key} ", style="bold cyan")
        text.append(f"{label} ", style=style)
    return text


class ErrorBar(Static):
    """Why the last polls failed (they keep retrying); hidden while everything works."""

    def __init__(self) -> None:
        super().__init__(id="errorbar")

    def show(self, errors: Sequence[str]) -> None:
        self.display = bool(errors)
        if errors:
            self.update(Text("\n".join(f" ⚠ {e}" for e in errors), style="bold red", end=""))
