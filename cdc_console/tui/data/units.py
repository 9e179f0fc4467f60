"""Numbers as an operator reads them: durations, sizes, counts; shared by views and screens."""

from __future__ import annotations

from pathlib import Path

from cdc_console.units import size, span

__all__ = ["count", "shown_path", "size", "span"]


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def shown_path(path: Path) -> str:
    """A path as short as it can be said: relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
