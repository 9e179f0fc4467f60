"""``LoadThrottle``: chunk reads that yield to a busy source (``[source] max_load``).

Snapshot, re-dump and verification reads are the pipeline's heavy reads; the binlog stream is
not, and holding it back would only grow the lag it exists to keep small. So the load is checked
before each batch's chunks are chosen (and by ``verify`` between its chunks): while any figure is
above its limit, a batch carries no chunks, the streaming tables' window goes on, and the reason
("Threads_running 61 > 50") is kept in the state for ``status``, the metrics and the console. The
reads go on by themselves once every figure is back at or under its limit, as gh-ost's
``--max-load`` does.

A load probe that fails does not hold the reads: the reads meet the same fault themselves and
wait it out as an outage, visibly; a throttle that stopped the snapshot on a probe error would
stop it silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import pymysql

from cdc_console.errors import redact
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)

#: the server's figures by name (``mysql.source_load.read_load``)
ReadLoad = Callable[[Sequence[str]], Mapping[str, float]]

#: a check answers from its last probe for this long: the planner asks once a trigger or more
PROBE_EVERY_SECONDS = 1.0


def over_limits(limits: Mapping[str, float], values: Mapping[str, float]) -> str | None:
    """Why reads should yield (each figure above its limit, ``"Threads_running 61 > 50"``), or
    None when every figure the server reported is within its limit."""
    over = [
        f"{name} {_shown(values[name])} > {_shown(limit)}"
        for name, limit in limits.items()
        if name in values and values[name] > limit
    ]
    return ", ".join(over) or None


def _shown(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


class LoadThrottle:
    """Whether chunk reads yield now; records each change of verdict in the state's journal."""

    def __init__(
        self,
        limits: Mapping[str, float],
        read: ReadLoad,
        store: StateStore | None = None,
        *,
        what: str = "chunk reads",
        keep: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = dict(limits)
        self.read = read
        self.store = store
        self.what = what
        self.keep = keep
        self.clock = clock
        self._checked_at: float | None = None
        self._reason: str | None = None
        #: whether the state already says what ``_reason`` says
        self._recorded = False

    def reason(self) -> str | None:
        """Why the reads yield now, or None when they may go on (always, without limits)."""
        if not self.limits:
            return None
        now = self.clock()
        if self._checked_at is not None and now - self._checked_at < PROBE_EVERY_SECONDS:
            return self._reason
        self._checked_at = now
        try:
            values = self.read(list(self.limits))
        except (pymysql.err.MySQLError, OSError) as exc:  # a probe, not the read: see above
            # (a SourceError, such as the planner's "the source moved", is the plan's to raise)
            log.warning("probing the source's load failed: %s", redact(str(exc)))
            values = {}
        reason = over_limits(self.limits, values)
        self._record(reason)
        self._reason = reason
        return reason

    def clear(self) -> None:
        """Nothing is left to read: a spell of yielding, if any, is over."""
        if self._reason is not None or not self._recorded:
            self._record(None)
        self._reason = None
        self._checked_at = None

    def _record(self, reason: str | None) -> None:
        """Journal a spell's start and end; with ``keep``, the state holds the reason too (one
        reader of the source per state keeps it: the job's planner)."""
        first = not self._recorded
        self._recorded = True
        news = (reason is None) != (self._reason is None) or (first and reason is not None)
        if self.store is not None and self.keep:
            news = self.store.record_throttled(reason)
        if not news:
            return
        if reason is not None:
            message = (
                f"{self.what} yield to a busy source: {reason} ([source] max_load); the binlog "
                "stream goes on, and so do the reads once the load is back under its limit"
            )
        else:
            message = f"{self.what} go on: the source's load is back under [source] max_load"
        if self.store is not None:
            self.store.log_event("throttle", message, level="warning" if reason else "info")
        log.log(logging.WARNING if reason else logging.INFO, "%s", message)
