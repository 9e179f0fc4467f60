"""Sizes and durations as people read them; shared by the CLI, the lake tools and the console (a leaf module)."""

from __future__ import annotations


def size(count: float) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``23.4 MiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


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
