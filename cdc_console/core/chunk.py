"""``ChunkRange``: a half-open key range ``[start, end)`` of one table's chunk key.

``None`` stands for the unbounded ends: the first chunk starts at -inf and the last ends at +inf so
rows inserted after splitting, below the old minimum or above the old maximum, still belong to a
chunk. A NULL key sorts first, as in the server's ``ORDER BY``: it belongs to the first chunk
(only a counted table, or a configured nullable chunk key, has one).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_console.core.keys import NATURAL_ORDER, KeyOrder
from cdc_console.core.values import RawKey


@dataclass(frozen=True)
class ChunkRange:
    start: RawKey = None
    end: RawKey = None

    def contains(self, key: RawKey, order: KeyOrder = NATURAL_ORDER) -> bool:
        """Whether ``key`` falls in ``[start, end)`` under the column's server ordering."""
        if key is None:
            return self.start is None
        if self.start is not None and order.compare(key, self.start) < 0:
            return False
        return self.end is None or order.compare(key, self.end) < 0

    def __str__(self) -> str:
        left = "(-inf" if self.start is None else "[" + str(self.start)
        right = "+inf)" if self.end is None else str(self.end) + ")"
        return f"{left}, {right}"
