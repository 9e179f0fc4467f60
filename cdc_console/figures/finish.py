"""Finish times: the chunk reads and verifications under way, estimated at their pace (``core.estimate``),
and forecasts of a re-dump or an added table set against the binlog's expiry."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cdc_console.config import PipelineConfig
from cdc_console.core.batch_budget import BatchBudget
from cdc_console.core.estimate import (
    MARGIN,
    ChunkTiming,
    FinishEstimate,
    budget_floor,
    estimate_finish,
    fits_expiry,
    paced_forecast,
)
from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.core.schema import TableId
from cdc_console.core.values import JSONObject
from cdc_console.state.store import (
    SplitState,
    StateStore,
    TableState,
    VerifyProgress,
)
from cdc_console.units import span

#: the states whose table reads chunks
READING = (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP)


@dataclass(frozen=True)
class ReadEstimates:
    """The finish time of each table reading chunks (None: too few chunks done to tell, or
    not split yet) and of all of them together: they share the readers, so the total is every
    chunk left at the pace of every chunk done."""

    tables: dict[TableId, FinishEstimate | None]
    total: FinishEstimate | None

    def later(self, seconds: float) -> ReadEstimates:
        return ReadEstimates(
            {t: e.later(seconds) if e is not None else None for t, e in self.tables.items()},
            self.total.later(seconds) if self.total is not None else None,
        )


def chunk_timings(splits: Sequence[SplitState], generation: int) -> list[ChunkTiming]:
    """The finished chunks of one read (``generation``) with their times."""
    return [
        ChunkTiming(s.started_at, s.finished_at, s.rows or 0)
        for s in splits
        if s.status == SplitStatus.FINISHED
        and s.generation == generation
        and s.started_at is not None
        and s.finished_at is not None
    ]


def read_estimates(store: StateStore, tables: Sequence[TableState], now: float) -> ReadEstimates:
    estimates: dict[TableId, FinishEstimate | None] = {}
    every_done: list[ChunkTiming] = []
    every_left = 0
    unsplit = False
    for table in tables:
        if table.state not in READING:
            continue
        splits = store.splits(table.table_id)
        if not splits:
            estimates[table.table_id] = None
            unsplit = True
            continue
        done = chunk_timings(splits, table.generation)
        left = sum(1 for s in splits if s.status != SplitStatus.FINISHED)
        estimates[table.table_id] = estimate_finish(done, left, now)
        every_done += done
        every_left += left
    # a table not split yet: its chunks are not counted, so there is no total to tell
    total = estimate_finish(every_done, every_left, now) if estimates and not unsplit else None
    return ReadEstimates(estimates, total)


@dataclass(frozen=True)
class VerifyEstimate:
    """A verification under way: chunks compared of those it is to compare, and the time left
    at the pace of the groups compared so far (None before two chunks are)."""

    chunks_done: int
    chunks_total: int
    started_at: float
    finish: FinishEstimate | None

    def describe(self) -> str:
        """``verifying: 12 of 40 chunks, about 3 min left (2 min to 4 min)``."""
        told = f"verifying: {self.chunks_done} of {self.chunks_total} chunks"
        if self.finish is None:
            return f"{told}, no estimate yet"
        return (
            f"{told}, about {span(self.finish.seconds)} left "
            f"({span(self.finish.low)} to {span(self.finish.high)})"
        )

    def to_dict(self) -> JSONObject:
        return {
            "chunks_done": self.chunks_done,
            "chunks_total": self.chunks_total,
            "started_at": self.started_at,
            "finish": dict(self.finish.to_dict()) if self.finish is not None else None,
        }


def verify_estimate(progress: VerifyProgress, now: float) -> VerifyEstimate:
    """The finish time of a verification, estimated as a read's is (``core.estimate``): the
    chunks left at the pace of the chunks compared, each group's chunks counted at its end."""
    done = [
        ChunkTiming(started, finished, 0)
        for count, started, finished in progress.groups
        for _ in range(count)
    ]
    left = max(0, progress.chunks_total - progress.chunks_done)
    return VerifyEstimate(
        progress.chunks_done,
        progress.chunks_total,
        progress.started_at,
        estimate_finish(done, left, now),
    )


#: budgeted batches a read's pace is measured from
PACED_BATCHES = 20


@dataclass(frozen=True)
class ReadPacing:
    """How the job paces a read's chunks: at most ``budget``'s chunks a batch while another
    table streams, and a batch every trigger at the most."""

    budget: BatchBudget
    trigger_seconds: float

    @classmethod
    def of(cls, config: PipelineConfig) -> ReadPacing:
        return cls(config.snapshot.batch_budget, config.spark.trigger_seconds)


def redump_forecast(
    store: StateStore, table_id: TableId, pacing: ReadPacing
) -> FinishEstimate | None:
    """How long a re-dump of the whole table would take (None when nothing was timed): while
    another table streams, at the pace of the budgeted re-dump batches measured last; else as
    long as the table's last read of all its chunks took."""
    splits = store.splits(table_id)
    finished = [s for s in splits if s.status == SplitStatus.FINISHED]
    if not finished:
        return None
    last_read = chunk_timings(splits, max(s.generation for s in finished))
    if _budgeted(store, pacing, reading=table_id):
        return _budgeted_forecast(store, pacing, len(splits), last_read, replacing=True)
    return estimate_finish(last_read, len(splits))


def added_table_forecast(store: StateStore, rows: int, pacing: ReadPacing) -> FinishEstimate | None:
    """How long reading a table of about ``rows`` rows would take (None when the pipeline has
    timed no read yet), in chunks the size of the latest read's: while another table streams
    at the pace of the budgeted batches measured last, else at that read's pace."""
    latest: tuple[float, list[ChunkTiming]] | None = None
    for table in store.tables():
        splits = store.splits(table.table_id)
        finished = [s for s in splits if s.status == SplitStatus.FINISHED]
        if not finished:
            continue
        timed = chunk_timings(splits, max(s.generation for s in finished))
        if len(timed) >= 2:
            last = max(c.finished_at for c in timed)
            if latest is None or last > latest[0]:
                latest = (last, timed)
    if latest is None:
        return None
    timed = latest[1]
    per_chunk = max(1.0, sum(c.rows for c in timed) / len(timed))
    chunks = max(1, math.ceil(rows / per_chunk))
    if _budgeted(store, pacing, reading=None):
        return _budgeted_forecast(store, pacing, chunks, timed, replacing=False)
    return estimate_finish(timed, chunks)


def _budgeted(store: StateStore, pacing: ReadPacing, reading: TableId | None) -> bool:
    """Whether a read of ``reading`` (None: a table not captured yet) runs under the chunk
    budget: another table streams beside it."""
    return pacing.budget.seconds > 0 and any(
        t.state == Lifecycle.STREAMING and t.table_id != reading for t in store.tables()
    )


def _budgeted_forecast(
    store: StateStore,
    pacing: ReadPacing,
    chunks: int,
    last_read: Sequence[ChunkTiming],
    *,
    replacing: bool,
) -> FinishEstimate | None:
    """At the pace of the newest budgeted batches whose chunks were of the same kind (a
    re-dump's replace a mirror's rows, which costs more than filling a new one); a re-dump
    measured only against filling batches, or nothing measured, is a floor."""
    # the batches a budget like today's paced
    budgeted = [
        b
        for b in store.chunk_batch_timings(4 * PACED_BATCHES)
        if b.budget_seconds == pacing.budget.seconds
    ]
    alike = [b for b in budgeted if b.replacing == replacing][:PACED_BATCHES]
    measured = alike or ([] if replacing else budgeted[:PACED_BATCHES])
    if measured:
        return paced_forecast(chunks, measured, pacing.trigger_seconds)
    fillers = [b for b in budgeted if not b.replacing][:PACED_BATCHES]
    if fillers:
        found = paced_forecast(chunks, fillers, pacing.trigger_seconds)
        return replace(found, at_least=True) if found is not None else None
    plain = [t.seconds for t in store.batch_timings(PACED_BATCHES) if t.chunks == 0]
    share = 0.0
    if len(last_read) >= 2:
        span = max(c.finished_at for c in last_read) - min(c.started_at for c in last_read)
        share = max(0.0, span) / len(last_read)
    return budget_floor(
        chunks,
        pacing.budget.floor,
        statistics.median(plain) if plain else 0.0,
        share,
        pacing.trigger_seconds,
    )


@dataclass(frozen=True)
class ReadVerdict:
    """A read about to start set against the server's binlog expiry (``core.estimate``)."""

    estimate: FinishEstimate | None
    #: how long the server keeps a closed binlog file (None: forever), and the setting's text
    expire_seconds: float | None
    expire_setting: str

    @property
    def fits(self) -> bool:
        return self.estimate is None or fits_expiry(self.estimate, self.expire_seconds)

    def describe(self) -> str:
        if self.estimate is None:
            return "no finish-time estimate yet (no read of this pipeline was timed)"
        if self.estimate.at_least:
            took = (
                f"at least {span(self.estimate.seconds)} (no read of its kind under the chunk budget "
                "of a streaming pipeline was timed yet: only a floor is known)"
            )
        else:
            took = (
                f"about {span(self.estimate.seconds)} "
                f"({span(self.estimate.low)} to {span(self.estimate.high)})"
            )
        if self.expire_seconds is None or self.expire_seconds <= 0:
            return f"the read takes {took}; the server never expires its binlog"
        kept = f"the server keeps a binlog {span(self.expire_seconds)} ({self.expire_setting})"
        if self.fits:
            return f"the read takes {took}; {kept}: it fits"
        return (
            f"the read may take {took}, and {kept}: with a {MARGIN:g}x margin it does not fit, "
            "and a read that outlasts the binlog it needs is parked and starts over"
        )
