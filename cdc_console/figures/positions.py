"""Lag and purge headroom: how far behind a position is, and how long the binlog it needs is kept."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from cdc_console.core.head_history import HeadHistory
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.state.store import (
    LagSample,
    StateStore,
    TableState,
)


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
