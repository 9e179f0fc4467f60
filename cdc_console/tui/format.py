"""Values as Rich ``Text`` for cells and panels: colour by level, never parsed as markup.

DataTable cells given a ``str`` are parsed as console markup, so a key range like ``[10, 20)``
would vanish; everything shown goes through here as ``Text``.
"""

from __future__ import annotations

import time

from rich.text import Text

from cdc_console.core.lifecycle import CommandStatus, Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.tui.data.units import count, size, span
from cdc_console.tui.model import JobStatus, Lag, Level

LEVEL_STYLES = {
    Level.OK: "green",
    Level.WARN: "yellow",
    Level.ALERT: "bold red",
    Level.IDLE: "dim",
}

STATE_STYLES: dict[str, str] = {
    Lifecycle.STREAMING: "green",
    Lifecycle.CATCHING_UP: "cyan",
    Lifecycle.SNAPSHOTTING: "bright_blue",
    Lifecycle.REDUMP: "magenta",
    Lifecycle.PAUSED: "yellow",
    Lifecycle.SNAPSHOT_DONE: "green",
    Lifecycle.REMOVED: "dim",
    Lifecycle.NEEDS_REDUMP: "bold red",
    SplitStatus.FINISHED: "green",
    SplitStatus.ASSIGNED: "cyan",
    SplitStatus.PENDING: "dim",
    CommandStatus.APPLIED: "green",
    CommandStatus.FAILED: "bold red",
    CommandStatus.PENDING: "yellow",
}

JOB_STYLES = {
    JobStatus.RUNNING: "bold green",
    JobStatus.STARTING: "yellow",
    JobStatus.STALLED: "bold red",
    JobStatus.RECONNECTING: "bold yellow",
    JobStatus.STOPPING: "yellow",
    JobStatus.STOPPED: "dim",
    JobStatus.FAILED: "bold red",
    JobStatus.NEVER_RAN: "dim",
    JobStatus.REMOTE: "cyan",
}

EVENT_STYLES = {"error": "bold red", "warning": "yellow", "info": ""}

DASH = Text("-", style="dim")


def plain(value: object, style: str = "") -> Text:
    return Text(str(value), style=style, no_wrap=True, end="")


def leveled(value: str, lvl: Level) -> Text:
    return plain(value, LEVEL_STYLES[lvl])


def number(value: int | None) -> Text:
    return DASH if value is None else plain(count(value))


def state(value: str) -> Text:
    return plain(value, STATE_STYLES.get(value, ""))


def job_status(value: JobStatus) -> Text:
    return plain(value.value, JOB_STYLES[value])


def lag(value: Lag | None) -> Text:
    if value is None:
        return DASH
    prefix = "≥ " if value.at_least else ""
    return leveled(prefix + span(value.seconds), value.level)


def age(seconds: float | None, lvl: Level, suffix: str = " ago") -> Text:
    if seconds is None:
        return DASH
    return leveled(span(seconds) + suffix, lvl)


def duration(seconds: float | None) -> Text:
    return DASH if seconds is None else plain(span(seconds))


def rate(value: float | None) -> Text:
    if value is None:
        return DASH
    return plain(f"{value:,.1f}/s" if value < 100 else f"{value:,.0f}/s")


def offset(value: BinlogOffset | None) -> Text:
    return DASH if value is None else plain(str(value))


def nbytes(value: int | None) -> Text:
    return DASH if value is None else plain(size(value))


def files(count_: int | None, on_disk: int | None) -> Text:
    """A Delta table's live files and its folder's bytes on disk: ``41 · 9.0 MiB``."""
    if count_ is None or on_disk is None:
        return DASH
    return plain(f"{count_:,} · {size(on_disk)}")


def duration_ms(value: int | None) -> Text:
    return (
        DASH
        if value is None
        else plain(f"{value / 1000:.2f} s" if value < 60_000 else span(value / 1000))
    )


def clock(ts: float | None) -> Text:
    return DASH if ts is None else plain(time.strftime("%H:%M:%S", time.localtime(ts)))


def stamp(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def progress(done: int, total: int | None, width: int = 10) -> Text:
    """A chunk progress bar with its count: ``██████░░░░  412/2000``."""
    if total is None:
        return DASH if not done else plain(f"{done}/?", "dim")
    share = done / total if total else 1.0
    filled = min(width, round(share * width))
    text = Text(no_wrap=True, end="")
    text.append("█" * filled, style="green" if done >= total else "bright_blue")
    text.append("░" * (width - filled), style="dim")
    text.append(f" {done}/{total}")
    return text


def verified(text: str) -> Text:
    """A chunk's last verdict: green when equal, red when it differs, dim otherwise."""
    if not text:
        return DASH
    if text.startswith("equal"):
        return plain(text, "green")
    if "differ" in text:
        return plain(text, "bold red")
    return plain(text, "yellow")
