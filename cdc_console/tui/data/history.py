"""What the console remembers between polls: rates, and when the job last made progress.

When the server's head passed each position (``core.head_history.HeadHistory``) is remembered
too: SQLite holds the job's view of the past (lag samples every heartbeat), the console adds its
own observations of the head, so a position's age, and with it lag and purge deadlines, stays
measurable while the job is dead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

RATE_WINDOW_SECONDS = 10.0


class RateTracker:
    """Per-key rate of a growing counter over a sliding window (events/s per table)."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS) -> None:
        self.window = window
        self._samples: dict[Hashable, deque[tuple[float, int]]] = {}

    def add(self, key: Hashable, ts: float, value: int) -> float | None:
        samples = self._samples.setdefault(key, deque())
        if samples and value < samples[-1][1]:
            samples.clear()
        if not samples or ts > samples[-1][0]:
            samples.append((ts, value))
        while len(samples) > 2 and ts - samples[1][0] >= self.window:
            samples.popleft()
        first_ts, first = samples[0]
        elapsed = ts - first_ts
        if elapsed < 1.0:
            return None
        return (value - first) / elapsed


class ProgressTracker:
    """When the job last moved (offset, chunks, rows, events), and how far behind it was then."""

    def __init__(self) -> None:
        self._signature: Hashable = None
        self._run: int | None = None
        self.changed_at: float | None = None
        self.behind_then: int | None = None

    def observe(
        self, run_id: int | None, signature: Hashable, ts: float, behind: int | None
    ) -> None:
        if run_id != self._run or signature != self._signature or self.changed_at is None:
            self._run = run_id
            self._signature = signature
            self.changed_at = ts
            self.behind_then = behind

    def stalled(self, now: float, window: float, behind: int | None) -> bool:
        """No progress for ``window`` seconds while the distance to the head grew."""
        if self.changed_at is None or now - self.changed_at < window:
            return False
        if behind is None:
            return False
        return behind > (self.behind_then or 0)
