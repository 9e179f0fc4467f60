"""Restarting the streaming query after a fault of Spark's own that passes.

On a loaded machine Spark can fail to start a Python worker in time: the JVM waits a fixed ten
seconds for a freshly forked worker to connect back (``PythonWorkerFactory``), and the query
ends with "Python worker failed to connect back". Nothing of the batch in flight was applied
(each batch commits to the state only after its sink commits), so the query is started again
from its checkpoint, after a pause that doubles each time, a few times in a row at most; the
job's log and Events screen say so. Any other failure ends the job as before.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

log = logging.getLogger(__name__)

#: texts of a failure to start a Python worker in time (Spark 3.5-4.x)
TRANSIENT_MARKS = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)


class PolledQuery(Protocol):
    """What the job's loop reads of a ``StreamingQuery``."""

    @property
    def isActive(self) -> bool: ...

    def exception(self) -> BaseException | None: ...


def poll(query: PolledQuery) -> tuple[bool, BaseException | None]:
    """Whether the query still runs, then how it failed, read in that order.

    Spark records a query's cause of death before it marks the query terminated, so a query
    seen ended already shows its failure. Read the other way round, a query that failed between
    the two reads looked like one that ended cleanly: the job drained and exited 0 on a fault it
    would have ridden through (a loaded CI run did)."""
    active = bool(query.isActive)
    return active, query.exception()


def is_transient(failure: BaseException) -> bool:
    text = str(failure)
    return any(mark in text for mark in TRANSIENT_MARKS)


class QueryRestarts:
    """How many restarts in a row are left, and the pause before the next."""

    def __init__(self, limit: int = 4, first_pause: float = 2.0) -> None:
        self.limit = limit
        self.first_pause = first_pause
        self.in_a_row = 0
        self.last_at = 0.0

    def allow(self, failure: BaseException, now: float | None = None) -> float | None:
        """The pause before restarting after ``failure``, or None to let it end the job. A
        query that ran ten minutes since its last restart starts the count afresh."""
        if not is_transient(failure):
            return None
        now = time.monotonic() if now is None else now
        if now - self.last_at > 600:
            self.in_a_row = 0
        if self.in_a_row >= self.limit:
            return None
        pause: float = self.first_pause * 2.0**self.in_a_row
        self.in_a_row += 1
        self.last_at = now
        return pause
