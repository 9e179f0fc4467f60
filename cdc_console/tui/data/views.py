"""Rows of the state database as the console's views: events, tables, the binlog panel.

The mapping from stored rows to what an operator reads, kept apart from the polling that fetches
them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_console.config import ConsoleConfig, PipelineConfig
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.figures import (
    READING,
    STAGES_WINDOW_SECONDS,
    ReadEstimates,
    lag_stages,
    table_position,
)
from cdc_console.state.lake import LakeTableState
from cdc_console.state.store import (
    EventRow,
    HeldChanges,
    StateStore,
    TableState,
    VerificationRow,
)
from cdc_console.status import (
    finish_note,
    held_note,
    table_note,
    verification_note,
)
from cdc_console.tui.data import assess
from cdc_console.tui.data.history import RateTracker
from cdc_console.tui.data.server import ServerStatus
from cdc_console.tui.model import (
    BinlogView,
    EventView,
    Level,
    TableView,
)

#: lag samples the Binlog screen's sparkline shows
LAG_HISTORY_SHOWN = 120


def event_view(row: EventRow) -> EventView:
    return EventView(
        id=row.id,
        ts=row.ts,
        level=row.level,
        kind=row.kind,
        table=row.table_id,
        message=row.message,
    )


def default_table(tables: Sequence[TableView]) -> str | None:
    """The table whose splits are worth watching first: one being read, else any captured."""
    for wanted in (
        (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP),
        (Lifecycle.CATCHING_UP, Lifecycle.STREAMING, Lifecycle.PAUSED),
    ):
        for table in tables:
            if table.state in wanted:
                return table.table
    return tables[0].table if tables else None


def table_view(
    table: TableState,
    head: BinlogOffset | None,
    now: float,
    mirrors: dict[str, LakeTableState],
    verified: list[VerificationRow],
    held: list[HeldChanges],
    estimates: ReadEstimates,
    shape: str,
    history: HeadHistory,
    rates: RateTracker,
    config: PipelineConfig,
) -> TableView:
    """A table's row on the Tables screen: its progress, lag, rate, notes and mirror files."""
    name = str(table.table_id)
    mirror = mirrors.get(name)
    position = table_position(table)
    lag = (
        assess.position_lag(position, head, history, now, config.console)
        if position is not None
        else None
    )
    return TableView(
        table=name,
        state=table.state,
        splits_done=table.splits_done,
        splits_total=table.splits_total,
        rows_snapshotted=table.rows_snapshotted,
        events_applied=table.events_applied,
        events_per_second=rates.add(name, now, table.events_applied),
        lag=lag,
        position=position,
        chunk_size=config.snapshot.chunk_size,
        note=" · ".join(
            n
            for n in (
                table_note(table),
                held_note(held, now),
                verification_note(verified, now),
                finish_note(estimates.tables.get(table.table_id)) if table.state in READING else "",
                shape,
            )
            if n
        ),
        lake_files=mirror.files if mirror else None,
        lake_bytes=mirror.disk_bytes if mirror else None,
    )


def binlog_view(
    store: StateStore | None,
    server: ServerStatus | None,
    committed: BinlogOffset | None,
    behind: tuple[int | None, int | None],
    tables: list[TableState],
    needs: list[tuple[str, BinlogOffset]],
    now: float,
    history: HeadHistory,
    console: ConsoleConfig,
) -> BinlogView:
    """The Binlog screen: where the stream is against the server's head and files, what the
    pipeline still needs of them, and where the lag of the last minute went."""
    head = server.head if server else None
    stamps = [t.last_event_ts for t in tables if t.last_event_ts]
    probe_age = now - server.probed_at if server and server.reachable else None
    samples = store.lag_samples(LAG_HISTORY_SHOWN) if store is not None else []
    return BinlogView(
        committed=committed,
        head=head,
        server=server.version if server else None,
        server_error=server.error if server else None,
        probe_age=probe_age,
        probe_level=Level.ALERT
        if server is not None and not server.reachable
        else assess.stale_level(probe_age, console),
        bytes_behind=behind[0],
        files_behind=behind[1],
        event_lag=assess.event_lag(
            committed, head, max(stamps) if stamps else None, history, now, console
        ),
        lag_history=tuple(s.event_lag_ms / 1000.0 for s in samples if s.event_lag_ms is not None),
        binlog_files=len(server.logs) if server else 0,
        binlog_bytes=sum(size for _, size in server.logs) if server else 0,
        oldest_file=server.logs[0][0] if server and server.logs else None,
        newest_file=server.logs[-1][0] if server and server.logs else None,
        needs=tuple(
            (who, where, assess.position_lag(where, head, history, now, console))
            for who, where in sorted(needs, key=lambda need: need[1])
        ),
        purge=assess.purge_risk(needs, server, history, now, console),
        stages=lag_stages(store.applied_batches(now - STAGES_WINDOW_SECONDS), now)
        if store is not None
        else None,
    )
