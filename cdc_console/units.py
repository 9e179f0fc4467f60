"""Sizes as people read them; shared by the CLI, the lake tools and the console (a leaf module)."""

from __future__ import annotations


def size(count: float) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``23.4 MiB``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
