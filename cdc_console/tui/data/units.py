"""Numbers as an operator reads them: durations, sizes, counts; shared by views and screens."""

from __future__ import annotations

from pathlib import Path

from cdc_console.units import size

__all__ = ["count", "shown_path", "size", "span"]


def span(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3 h 05 min``, ``4 d 2 h``: two units at most."""
    seconds = max(0.0, seconds)
    if seconds < 0.05:
        return "0 s"
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def shown_path(path: Path) -> str:
    """A path as short as it can be said: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
