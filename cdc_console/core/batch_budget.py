"""``BatchBudget``: how many chunks a batch may carry while other tables stream.

A batch is one unit: the binlog window of the streaming tables is applied when the batch's last
chunk is. A re-dump of a 200k-row table planned as one batch held every streaming table back for
the whole re-dump (their lag rose from under a second to 25 s on a 2-core machine). So while any
table streams, the chunks of a batch are capped by time: enough for about ``seconds`` of chunk
work on top of what a batch costs anyway, estimated from the batches just applied. Without a
streaming table nobody waits, and the batch carries ``ceiling`` chunks (a first snapshot's
throughput is not traded away).

The estimate is a straight line through recent batches: a batch without chunks costs the fixed
part (planning, Spark's scheduling, the commit); a batch with n chunks costs that plus n times a
chunk's share. Chunks read in parallel share a batch's time, so their share is already what one
more chunk adds to a batch.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_console.core.plan import BatchTiming


@dataclass(frozen=True)
class BatchBudget:
    #: chunk work a batch may add while other tables stream (0: no cap)
    seconds: float
    #: never fewer chunks than this (the job: 1, even when a chunk alone outlasts the budget)
    floor: int
    #: never more than this (``splits_per_batch``)
    ceiling: int

    def chunks(self, recent: Sequence[BatchTiming], streaming: bool) -> int:
        """Chunks for the next batch, given the batches applied last (newest first)."""
        if not streaming or self.seconds <= 0:
            return self.ceiling
        per_chunk = self.chunk_seconds(recent)
        if per_chunk is None:
            return min(self.floor, self.ceiling)
        fits = int(self.seconds / max(per_chunk, 1e-3))
        return max(min(self.floor, self.ceiling), min(self.ceiling, fits))

    @staticmethod
    def chunk_seconds(recent: Sequence[BatchTiming]) -> float | None:
        """What one more chunk adds to a batch, or None before any batch carried chunks."""
        with_chunks = [t for t in recent if t.chunks > 0]
        if not with_chunks:
            return None
        plain = [t.seconds for t in recent if t.chunks == 0]
        # without a chunk-free batch to tell the fixed part, charge it all to the chunks:
        # smaller batches, never a longer wait for the streaming tables
        fixed = statistics.median(plain) if plain else 0.0
        return statistics.median(max(0.0, t.seconds - fixed) / t.chunks for t in with_chunks)
