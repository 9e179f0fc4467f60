"""The console's figures that read much of the state (every chunk of a table, every split),
computed again only every few seconds: a poll a second would otherwise scan the state a second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from cdc_console.config import PipelineConfig
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.figures import (
    ReadEstimates,
    ReadPacing,
    binlog_needs,
    read_estimates,
    redump_forecast,
)
from cdc_console.state.store import StateStore, TableState
from cdc_console.status import mirror_shape, shape_note

T = TypeVar("T")
NEEDS_TTL_SECONDS = 5.0


class Recent(Generic[T]):
    """One figure that reads much of the state, computed again only every
    ``NEEDS_TTL_SECONDS`` or when what it is for (``key``) changes."""

    def __init__(self) -> None:
        self._held: tuple[float, str, T] | None = None

    def get(self, now: float, key: str, compute: Callable[[], T]) -> tuple[T, float]:
        """The figure, and how many seconds old it is."""
        held = self._held
        if held is None or held[1] != key or now - held[0] >= NEEDS_TTL_SECONDS:
            held = self._held = (now, key, compute())
        return held[2], now - held[0]


class SlowFigures:
    """One pipeline's slow figures, each held for ``NEEDS_TTL_SECONDS``."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self._needs: Recent[list[tuple[str, BinlogOffset]]] = Recent()
        self._estimates: Recent[ReadEstimates] = Recent()
        self._forecast: Recent[FinishEstimate | None] = Recent()
        self._shapes: Recent[dict[TableId, str]] = Recent()

    def forecast(self, store: StateStore, table: str, now: float) -> FinishEstimate | None:
        """``redump_forecast`` of the selected table: it reads all the table's chunks."""
        forecast, _ = self._forecast.get(
            now,
            table,
            lambda: redump_forecast(store, TableId.parse(table), ReadPacing.of(self.config)),
        )
        return forecast

    def estimates(self, store: StateStore, tables: list[TableState], now: float) -> ReadEstimates:
        """``read_estimates`` (it reads every reading table's chunks); the time spent since is
        taken off, so the countdown still moves."""
        found, age = self._estimates.get(now, "", lambda: read_estimates(store, tables, now))
        return found.later(age) if age else found

    def needs(self, store: StateStore, now: float) -> list[tuple[str, BinlogOffset]]:
        """``binlog_needs``: it reads every snapshotting table's splits, and the oldest needed
        position moves slowly."""
        needs, _ = self._needs.get(now, "", lambda: list(binlog_needs(store)))
        return list(needs)

    def shapes(self, store: StateStore, now: float) -> dict[TableId, str]:
        """Each table's mirror shape note (it opens every mirror's log)."""
        shapes, _ = self._shapes.get(
            now,
            "",
            lambda: {
                t: shape_note(mirror_shape(self.config, t, d)) for t, d in store.schemas().items()
            },
        )
        return shapes
