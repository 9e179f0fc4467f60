"""A source outage as the job lives through it: since when, how many tries, when the next one.

The reconnect loops (``cdc_console.mysql.retry``) produce these, the state database keeps the
open one (``state/outages.py``), and ``status`` and the console word it with
``cdc_console.status.outage_note``, so they say the same thing: an on-call engineer should read
"reconnecting (attempt 4, next in 8 s): Connection refused", not "stalled" or "failed".
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_console.core.values import JSONObject


@dataclass(frozen=True)
class Outage:
    """One component's wait for the source (``component``: planner, lag probe, reader, ...)."""

    component: str
    since: float
    attempts: int
    next_try_at: float
    last_error: str
    ended_at: float | None = None

    @property
    def open(self) -> bool:
        return self.ended_at is None

    def duration(self, now: float) -> float:
        return max(0.0, (self.ended_at if self.ended_at is not None else now) - self.since)

    def to_dict(self, now: float) -> JSONObject:
        return {
            "component": self.component,
            "since": self.since,
            "attempts": self.attempts,
            "next_try_at": self.next_try_at,
            "next_try_in_seconds": round(max(0.0, self.next_try_at - now), 1),
            "duration_seconds": round(self.duration(now), 1),
            "last_error": self.last_error,
            "ended_at": self.ended_at,
        }
