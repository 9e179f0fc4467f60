"""The figures on-call engineers are paged on, defined once.

``status``, ``status --json``, the job's Prometheus metrics and the console all show lag; if each
computed it its own way, the three would disagree at 3 a.m. Each figure is defined here, over
what the state database holds (the job's lag samples: the committed position and the server's
head, once a heartbeat) and what a probe of the server returns:

- a position's **lag**: how long ago the server wrote it, i.e. how long ago the head passed it
  (zero at the head; "at least" when it predates every observation);
- a table's lag: the lag of the position it has applied up to (its stream position, or its pause
  position while paused); a table still reading its chunks has none yet;
- the pipeline's **event-time lag**: the latest sample's (zero when caught up);
- the **purge headroom**: how long before the server may expire the oldest binlog file the
  pipeline still needs (``purge_headroom``);
- the **finish time** of the chunk reads under way (``read_estimates``): per table and in total,
  with its range (``core.estimate``), to set against the purge headroom;
- **where the lag is** (``lag_stages``): how the last minute was spent, stage by stage.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

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
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.core.schema import TableId
from cdc_console.core.values import JSONObject
from cdc_console.state.store import (
    AppliedBatch,
    LagSample,
    SplitState,
    StateStore,
    TableState,
    VerifyProgress,
)
from cdc_console.units import span


@dataclass(frozen=True)
class PositionLag:
    seconds: float
    #: the position predates every observation: the lag is at least ``seconds``
    at_least: bool = False


def head_history(samples: Sequence[LagSample], history: HeadHistory | None = None) -> HeadHistory:
    """The heads the job's lag samples saw, added to ``history`` (a fresh one by default)."""
    history = history if history is not None else HeadHistory()
    for sample in samples:
        if sample.head is not None:
            history.add(sample.ts, sample.head)
    return history


def position_lag(
    position: BinlogOffset | None,
    head: BinlogOffset | None,
    history: HeadHistory,
    now: float,
) -> PositionLag | None:
    """How long ago the server wrote ``position``: zero at the head, None when unknowable."""
    if position is None or head is None:
        return None
    if position >= head:
        return PositionLag(0.0)
    age = history.age(position, now)
    if age is None:
        return None
    return PositionLag(age.seconds, age.at_least)


def table_position(table: TableState) -> BinlogOffset | None:
    """The position a table has applied up to, or None while its chunks are still read."""
    if table.state in (Lifecycle.STREAMING, Lifecycle.CATCHING_UP):
        return table.stream_from
    if table.state == Lifecycle.PAUSED:
        return table.paused_at or table.stream_from
    return None


def last_event_ms(tables: Sequence[TableState]) -> int | None:
    """When the newest change applied to any table was written (epoch milliseconds)."""
    stamps = [t.last_event_ts for t in tables if t.last_event_ts]
    return max(stamps) if stamps else None


def event_lag(
    committed: BinlogOffset | None,
    head: BinlogOffset | None,
    last_event: int | None,
    history: HeadHistory,
    now: float,
) -> PositionLag | None:
    """The pipeline's event-time lag: now minus the write time of the last change applied, zero
    at the head; without any change applied yet, the lag of the committed position."""
    if committed is None or head is None:
        return None
    if committed >= head:
        return PositionLag(0.0)
    if last_event is not None:
        return PositionLag(max(0.0, now - last_event / 1000.0))
    return position_lag(committed, head, history, now)


class PurgeState(StrEnum):
    """Where the oldest needed binlog file stands against the server's expiry."""

    NOTHING_NEEDED = "nothing needed"  # no table reads the binlog yet
    UNLISTED = "unlisted"  # the server's binlogs are not known (not asked, or no answer)
    PURGED = "purged"  # older than the oldest file left: the changes in it are gone
    MISSING = "missing"  # not older, yet absent: the binlog was reset or it is another server
    NEVER = "never"  # the server never expires binlogs
    OPEN = "open"  # still being written: its expiry clock starts when it is closed
    CLOSED = "closed"  # closed at a known time: ``seconds`` left
    UNKNOWN = "unknown"  # closed, but before anything this pipeline observed


@dataclass(frozen=True)
class PurgeHeadroom:
    """The oldest binlog position the pipeline still needs, who needs it, and the time left
    before the server's expiry may remove its file."""

    state: PurgeState
    needed_by: str | None = None
    needed: BinlogOffset | None = None
    oldest_on_server: str | None = None
    expire_seconds: float | None = None
    #: older files the server expires first
    spare_files: int = 0
    #: ``closed_at + expire - now``; zero or less means due at the server's next rotation
    seconds_left: float | None = None
    #: how good ``seconds_left`` is (``HeadHistory.closed_at``: about, at most, after)
    bound: str = ""

    @property
    def seconds(self) -> float | None:
        """The headroom as one number, for alerts: 0 when purged or due, infinite when nothing
        can expire, the expiry itself while the file is open (at least that much), None when
        unknowable."""
        if self.state in (PurgeState.PURGED, PurgeState.MISSING):
            return 0.0
        if self.state in (PurgeState.NEVER, PurgeState.NOTHING_NEEDED):
            return math.inf
        if self.state == PurgeState.OPEN:
            return self.expire_seconds
        if self.state == PurgeState.CLOSED and self.seconds_left is not None:
            return max(0.0, self.seconds_left)
        return None


def purge_headroom(
    needs: Sequence[tuple[str, BinlogOffset]],
    head: BinlogOffset | None,
    logs: Sequence[tuple[str, int]],
    expire_seconds: float | None,
    history: HeadHistory,
    now: float,
) -> PurgeHeadroom:
    """The oldest of ``needs`` (``retention.pipeline_needs``) against the server's binlog files
    (``SHOW BINARY LOGS``) and expiry.

    A closed binlog file becomes purgeable ``expire_seconds`` after it was closed; when it was
    closed is when the head was first observed in a later file (``history``: the job's lag
    samples and the caller's own probes). The server purges at rotation, so "due" means at the
    next one.
    """
    oldest = logs[0][0] if logs else None
    if not needs:
        return PurgeHeadroom(PurgeState.NOTHING_NEEDED, oldest_on_server=oldest)
    needed_by, needed = min(needs, key=lambda need: need[1])
    found = PurgeHeadroom(
        PurgeState.UNLISTED,
        needed_by=needed_by,
        needed=needed,
        oldest_on_server=oldest,
        expire_seconds=expire_seconds,
    )
    if oldest is None or head is None:
        return found
    if binlog_file_index(needed.file) < binlog_file_index(oldest):
        return replace(found, state=PurgeState.PURGED)
    if needed.file not in {name for name, _ in logs}:
        return replace(found, state=PurgeState.MISSING)
    found = replace(found, spare_files=binlog_file_index(needed.file) - binlog_file_index(oldest))
    if expire_seconds is None:
        return replace(found, state=PurgeState.NEVER)
    if needed.file == head.file:
        return replace(found, state=PurgeState.OPEN)
    closed_at, bound = history.closed_at(needed.file)
    if closed_at is None:
        return replace(found, state=PurgeState.UNKNOWN)
    return replace(
        found, state=PurgeState.CLOSED, seconds_left=closed_at + expire_seconds - now, bound=bound
    )


def binlog_needs(store: StateStore) -> list[tuple[str, BinlogOffset]]:
    """Where each table will read the binlog from: (table, position), for the purge check.

    A snapshotting (or re-dumping) table with finished chunks counts too: it will catch up from
    its smallest high watermark, so that binlog must survive until the snapshot ends; a paused
    table needs its pause position.
    """
    needs: list[tuple[str, BinlogOffset]] = []
    for table in store.tables():
        if (
            table.state in (Lifecycle.STREAMING, Lifecycle.CATCHING_UP)
            and table.stream_from is not None
        ):
            needs.append((str(table.table_id), table.stream_from))
        elif table.state == Lifecycle.PAUSED:
            position = table.paused_at or table.stream_from
            if position is not None:
                needs.append((str(table.table_id), position))
        elif table.state in (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP):
            marks = [f.high_watermark for f in store.finished_splits(table.table_id)]
            if table.stream_from is not None:
                marks.append(table.stream_from)
            if marks:
                needs.append((str(table.table_id), min(marks)))
    return needs


def pipeline_needs(
    store: StateStore, committed: BinlogOffset | None
) -> list[tuple[str, BinlogOffset]]:
    """``binlog_needs`` and the stream's own committed position: every binlog position the
    pipeline will read from, for the purge headroom."""
    needs = binlog_needs(store)
    if committed is not None:
        needs.append(("the stream", committed))
    return needs


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


class LagStage(StrEnum):
    """The stages a change waits in, in the order it meets them; the value is how an operator
    reads it."""

    TRIGGER = "waiting for the next batch"
    SERVER = "planning (the server's answers)"
    READ = "reading and decoding"
    SPARK = "Spark's batch"
    MAINTENANCE = "lake maintenance"
    COMMIT = "the sink's commit"

    @property
    def key(self) -> str:
        return self.name.lower()


#: the span ``lag_stages`` looks back over
STAGES_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class LagStages:
    """How the pipeline's time since ``start`` went, stage by stage: each batch's cycle, from
    the batch before it applied to its own commit, cut at its planning, staging and commit
    (``lag_stages``), so the stages add up to the time covered (``covered``)."""

    seconds: dict[LagStage, float]
    covered: float
    #: the commit stage's seconds table by table (``"db.t"``), where the sink timed them
    commit_by_table: dict[str, float] = field(default_factory=dict)

    def top(self) -> tuple[LagStage, float] | None:
        if self.covered <= 0:
            return None
        stage = max(self.seconds, key=lambda s: self.seconds[s])
        return stage, self.seconds[stage]

    def describe(self) -> str:
        """``the sink's commit took 38 s of the last 40 s``."""
        top = self.top()
        if top is None:
            return "no batch in the last minute"
        stage, seconds = top
        found = f"{stage} took {span(seconds)} of the last {span(self.covered)}"
        if stage is LagStage.COMMIT and self.commit_by_table:
            table, spent = max(self.commit_by_table.items(), key=lambda item: item[1])
            found += f" ({table} {span(spent)})"
        return found

    def to_dict(self) -> JSONObject:
        return {
            "covered_seconds": round(self.covered, 3),
            **{f"{s.key}_seconds": round(v, 3) for s, v in self.seconds.items()},
            "commit_by_table": {t: round(v, 3) for t, v in self.commit_by_table.items()},
        }


def lag_stages(
    batches: Sequence[AppliedBatch], now: float, window: float = STAGES_WINDOW_SECONDS
) -> LagStages:
    """Where the time of the last ``window`` seconds went (``batches``:
    ``StateStore.applied_batches(now - window)``).

    A batch's cycle runs from the commit of the batch before it to its own commit: it waited
    for the next trigger, was planned (asking the server where the binlog ends), read and
    decoded by Spark's tasks until staged, held while lake maintenance had the applier's lock,
    and committed. From planned to staged, the longest task's time in our readers
    (``read_seconds``) is reading and decoding; the rest is Spark's: scheduling the tasks,
    taking their Arrow batches into the JVM and handing the batch to ``foreachBatch``, and
    staging it. Where the window cuts that span, both shares are cut in proportion. The batch
    in flight counts up to ``now`` in the stage it is in (reading, while it is not staged).
    Batches planned while the one before was still applied overlap it; each moment counts once.
    """
    seconds = dict.fromkeys(LagStage, 0.0)
    by_table: dict[str, float] = {}
    begin = now - window
    for before, batch in itertools.pairwise(batches):
        if before.applied_at is None:
            continue
        start = max(before.applied_at, begin)
        end = batch.applied_at if batch.applied_at is not None else now
        if end <= start:
            continue

        def clip(moment: float) -> float:
            return min(max(moment, start), end)  # noqa: B023

        planned = clip(batch.created_at)
        plan_began = clip(batch.created_at - batch.plan_seconds)
        staged = clip(batch.staged_at) if batch.staged_at is not None else end
        committing = end - staged
        held = min(batch.held_seconds, committing) if batch.applied_at is not None else 0.0
        seconds[LagStage.TRIGGER] += plan_began - start
        seconds[LagStage.SERVER] += planned - plan_began
        reading = staged - planned
        whole = (batch.staged_at or now) - batch.created_at
        if batch.read_seconds is not None and batch.staged_at is not None and whole > 0:
            spark = reading * max(0.0, 1.0 - batch.read_seconds / whole)
        else:
            spark = 0.0
        seconds[LagStage.READ] += reading - spark
        seconds[LagStage.SPARK] += spark
        seconds[LagStage.MAINTENANCE] += held
        seconds[LagStage.COMMIT] += committing - held
        timed = sum(batch.table_seconds.values())
        if timed > 0:
            # the tables' own times, scaled to the commit this window saw of the batch
            share = (committing - held) / timed
            for table, spent in batch.table_seconds.items():
                by_table[table] = by_table.get(table, 0.0) + spent * min(1.0, share)
    return LagStages(seconds, sum(seconds.values()), by_table)


def change_stages(written_at: float, batch: AppliedBatch) -> LagStages:
    """The stages one change waited in: written at the source at ``written_at`` and applied by
    ``batch`` (the first whose binlog window reaches it). Its stages add up to its end-to-end
    lag; ``lag_stages`` spreads the same cuts over every moment of a window instead."""
    applied = batch.applied_at if batch.applied_at is not None else written_at
    written = AppliedBatch(0, written_at, 0.0, written_at, 0.0, written_at)
    return lag_stages([written, batch], applied, window=max(0.0, applied - written_at))
