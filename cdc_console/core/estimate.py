"""When a table's chunk reads will be done, and whether the binlog they need lives that long.

A snapshot, a re-dump or an added table needs the binlog from its first chunk's high watermark
until it has caught up; a server expires a closed binlog file ``binlog_expire_logs_seconds``
after it was closed. A read that outlasts the expiry ends parked (NEEDS_REDUMP) and starts over.
So every read gets a finish time, measured from its own chunks as they finish, and a verdict
against the expiry before it starts.

The estimate is the chunks left at the pace of the chunks done: the whole read's pace (every
pause, throttle and busy batch included, which is what the finish time will include too) and the
pace of its later half (what it does now). The expected time is the whole pace's; the range runs
from the faster to the slower of the two, widened by ``SPREAD`` either side, so an estimate from
few chunks says how little it knows. Before two chunks are done there is no pace to go by.

A read that has not started is forecast. While another table streams, a batch carries only the
chunks that fit ``[snapshot] batch_seconds_while_streaming`` (``core.batch_budget``), and a
batch takes at least a trigger: such a read goes at the pace of the budgeted batches measured
last (``paced_forecast``), not at a first snapshot's, whose batches carried 64 chunks each (a
1M-row re-dump forecast that way was 99% short). Before any budgeted batch was measured, only a
floor can be told (``budget_floor``): one chunk a batch, each batch at least a trigger long.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cdc_console.core.plan import ChunkBatchTiming

#: the least uncertainty claimed either side of an estimate
SPREAD = 0.1
#: a read fits the binlog's expiry when its slow estimate times this is within it
MARGIN = 1.5


@dataclass(frozen=True)
class ChunkTiming:
    """One finished chunk: when its batch started reading it, when it was done, its rows."""

    started_at: float
    finished_at: float
    rows: int


@dataclass(frozen=True)
class FinishEstimate:
    """Seconds left (expected, and a range), and what they were measured from."""

    seconds: float
    low: float
    high: float
    chunks_left: int
    #: chunks a second, over the whole read so far
    pace: float
    #: a floor, not an expectation: what the read would take at the least (``budget_floor``)
    at_least: bool = False

    def later(self, seconds: float) -> FinishEstimate:
        """The same estimate ``seconds`` on: that much less is left."""
        return replace(
            self,
            seconds=max(0.0, self.seconds - seconds),
            low=max(0.0, self.low - seconds),
            high=max(0.0, self.high - seconds),
        )

    def to_dict(self) -> dict[str, float | int]:
        return {
            "seconds": round(self.seconds, 1),
            "low_seconds": round(self.low, 1),
            "high_seconds": round(self.high, 1),
            "chunks_left": self.chunks_left,
            "chunks_per_second": round(self.pace, 3),
            "at_least": self.at_least,
        }


def estimate_finish(
    done: Sequence[ChunkTiming], chunks_left: int, now: float | None = None
) -> FinishEstimate | None:
    """The time left to read ``chunks_left`` more chunks at the pace of ``done``; from ``now``
    (the time since the last chunk finished, up to one chunk's time, is already spent), or from
    the last chunk's end."""
    if chunks_left <= 0:
        return FinishEstimate(0.0, 0.0, 0.0, 0, 0.0)
    timed = sorted(done, key=lambda c: c.finished_at)
    if len(timed) < 2:
        return None
    begun = min(c.started_at for c in timed)
    last = timed[-1].finished_at
    whole = _pace(len(timed), last - begun)
    half = timed[len(timed) // 2 :]
    recent = _pace(len(half), last - timed[len(timed) // 2 - 1].finished_at)
    # the countdown since the last chunk, up to one chunk's time: a read that stalled (a job
    # stopped, a busy source) is as far from done as it was, not done
    spent = min(max(0.0, (now if now is not None else last) - last), 1.0 / whole)
    fast, slow = max(whole, recent), min(whole, recent)

    def left(pace: float, widen: float) -> float:
        return max(0.0, chunks_left / pace * widen - spent)

    return FinishEstimate(
        left(whole, 1.0), left(fast, 1 - SPREAD), left(slow, 1 + SPREAD), chunks_left, whole
    )


def paced_forecast(
    chunks: int, measured: Sequence[ChunkBatchTiming], trigger_seconds: float
) -> FinishEstimate | None:
    """How long ``chunks`` chunks take at the pace of the ``measured`` batches that carried
    chunks (None without any): a batch takes at least one trigger, so each batch counts as its
    planning and applying or a trigger, whichever is longer. The range runs between the
    quartiles of the batches' seconds per chunk, and at least ``SPREAD`` either side."""
    if not measured:
        return None
    cycles = [(b.chunks, max(trigger_seconds, b.seconds)) for b in measured if b.chunks > 0]
    if not cycles:
        return None
    per_chunk = sum(c for _, c in cycles) / sum(n for n, _ in cycles)
    each = sorted(c / n for n, c in cycles)
    expected = chunks * per_chunk
    low = min(expected * (1 - SPREAD), chunks * each[len(each) // 4])
    high = max(expected * (1 + SPREAD), chunks * each[(3 * len(each)) // 4])
    return FinishEstimate(expected, low, high, chunks, 1.0 / per_chunk)


def budget_floor(
    chunks: int,
    floor: int,
    fixed_seconds: float,
    chunk_seconds: float,
    trigger_seconds: float,
) -> FinishEstimate:
    """The least time ``chunks`` chunks take under the chunk budget before any budgeted batch
    was measured: the budget starts at ``floor`` chunks a batch, and each batch costs what a
    batch without chunks costs (``fixed_seconds``) plus its chunks at their share of a bulk
    batch (``chunk_seconds``), or a trigger, whichever is longer. A chunk alone in a batch
    costs more than its share of a bulk one (its own task and commit), hence only a floor."""
    floor = max(1, floor)
    cycle = max(trigger_seconds, fixed_seconds + floor * chunk_seconds)
    seconds = math.ceil(chunks / floor) * cycle
    return FinishEstimate(seconds, seconds, seconds, chunks, chunks / seconds, at_least=True)


def _pace(chunks: int, seconds: float) -> float:
    # chunks of one batch finish together: a span of zero is a very fast read, not a division
    return chunks / max(seconds, 1e-3)


def fits_expiry(estimate: FinishEstimate, expire_seconds: float | None) -> bool:
    """Whether a read of ``estimate`` finishes, with ``MARGIN``, before the binlog it starts
    needing now can expire; a server that never expires its binlog always fits."""
    return (
        expire_seconds is None or expire_seconds <= 0 or (estimate.high * MARGIN <= expire_seconds)
    )
