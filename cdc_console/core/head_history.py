"""When the server's head passed each binlog position: the clock behind every lag figure.

A position's lag is how long ago the server wrote it, i.e. how long ago the head passed it; a
binlog file's purge deadline counts from when it was closed, i.e. when the head was first seen
in a later file. Both come from observations (time, head) of the server: the job's lag samples
(one per heartbeat, in the state database), and the console's own probes. ``figures`` turns them
into the numbers ``status``, the metrics and the console all show.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from cdc_console.core.offset import BinlogOffset, binlog_file_index

HISTORY_LIMIT = 20_000


@dataclass(frozen=True)
class Age:
    """Seconds since the server wrote a position; ``at_least`` when it predates all we saw."""

    seconds: float
    at_least: bool


class HeadHistory:
    """Observations (time, head position), kept in time order, head order assumed monotonic.

    A binlog reset (``RESET MASTER``) breaks monotonicity; the history then starts over.
    """

    def __init__(self) -> None:
        self._times: list[float] = []
        self._heads: list[BinlogOffset] = []
        self._keys: list[tuple[int, int, int, int]] = []

    def __len__(self) -> int:
        return len(self._times)

    def add(self, ts: float, head: BinlogOffset) -> None:
        """Record that the head was at ``head`` at ``ts`` (observations may arrive late)."""
        key = head.sort_key
        if self._keys and ts >= self._times[-1] and key < self._keys[-1]:
            self._times, self._heads, self._keys = [], [], []
        index = bisect.bisect_right(self._times, ts)
        if index > 0 and self._keys[index - 1] >= key:
            return
        if index < len(self._keys) and self._keys[index] < key:
            return
        self._times.insert(index, ts)
        self._heads.insert(index, head)
        self._keys.insert(index, key)
        if index + 1 < len(self._keys) and self._keys[index + 1] == key:
            del self._times[index + 1], self._heads[index + 1], self._keys[index + 1]
        if len(self._times) > HISTORY_LIMIT:
            del self._times[0], self._heads[0], self._keys[0]

    def passed_at(self, position: BinlogOffset) -> tuple[float, bool] | None:
        """When the head was first seen beyond ``position``; True if it may be earlier.

        Beyond, not at: a server idle at ``position`` for an hour wrote nothing after it until the
        head moved on, so the changes after it are only as old as that move. None when the head
        was never seen beyond it (nothing after it is known to exist).
        """
        index = bisect.bisect_right(self._keys, position.sort_key)
        if index >= len(self._keys):
            return None
        return self._times[index], index == 0

    def age(self, position: BinlogOffset, now: float) -> Age | None:
        found = self.passed_at(position)
        if found is None:
            return None
        ts, before_history = found
        return Age(max(0.0, now - ts), before_history)

    def closed_at(self, file: str) -> tuple[float | None, str]:
        """When binlog ``file`` was closed: when the head was first seen in a later file.

        The bound says how good the answer is: ``about`` (within one observation interval),
        ``at most`` (closed before anything we saw), or ``after`` (still open when last seen,
        no later file seen yet).
        """
        index = binlog_file_index(file)
        later = bisect.bisect_left(self._keys, (index + 1, 0, 0, 0))
        if later < len(self._keys):
            return self._times[later], "at most" if later == 0 else "about"
        if later > 0 and self._keys[later - 1][0] == index:
            return self._times[later - 1], "after"
        return None, ""
