"""The last lines of the job's log file, read from its end so a large log costs nothing."""

from __future__ import annotations

import os
from pathlib import Path

TAIL_BYTES = 64 * 1024


def tail(path: Path, lines: int = 200) -> tuple[str, ...]:
    """Up to ``lines`` last lines of ``path``; empty when it does not exist yet."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            handle.seek(max(0, end - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return ()
    text = data.decode("utf-8", errors="replace")
    found = text.splitlines()
    if end > TAIL_BYTES and found:
        found = found[1:]
    return tuple(line.rstrip() for line in found[-lines:])


def last_meaningful(lines: tuple[str, ...]) -> str | None:
    """The line that best says why a job ended: its ``error:`` line, else its last line."""
    for line in reversed(lines):
        if line.startswith("error:"):
            return line.removeprefix("error:").strip()
    for line in reversed(lines):
        if line.strip() and not line.lstrip().startswith("fix:"):
            return line.strip()
    return None
