"""The figures on-call engineers are paged on, defined once.

``status``, ``status --json``, the job's Prometheus metrics and the console all show lag; if each
computed it its own way, the three would disagree at 3 a.m. Each figure is defined here, over
what the state database holds (the job's lag samples: the committed position and the server's
head, once a heartbeat) and what a probe of the server returns:

- a position's **lag**: how long ago the server wrote it, i.e. how long ago the head passed it
  (zero at the head; "at least" when it predates every observation);
- a table's lag: the lag of the position it has applied up to (its stream position, or its pause
  position while paused); a table still reading its chunks has none yet;
- the pipeline's **event-time lag**: the latest sample's (zero when caught up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc_console.core.head_history import HeadHistory
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.state.store import LagSample, TableState


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
