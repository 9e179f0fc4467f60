"""Recording a batch's outcome in the state database, in one transaction with the batch itself.

This is the "finished-split report" of Flink CDC: each finished split's high watermark is stored
the moment its rows are durably in the sink, and table lifecycle moves on from there. Doing it in
the same transaction that marks the batch applied is what makes a crash at any point resumable
without re-reading finished chunks or re-emitting streamed changes.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence

from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.reports import SplitResult, WindowResult
from cdc_console.core.splits import BinlogSplit, TableStreamFilter
from cdc_console.source.parking import park
from cdc_console.source.schema_follow import (
    hold_for_evolution,
    hold_reshaped,
    park_on_schema_change,
)
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)


def commit_batch(
    store: StateStore,
    plan: BatchPlan,
    split_results: Sequence[SplitResult],
    window: WindowResult | None,
    *,
    snapshot_only: bool = False,
    sink_stats: Mapping[str, int] | None = None,
    evolve: bool = False,
    refused: Mapping[str, str] | None = None,
) -> list[str]:
    """Apply ``plan``'s results to the state; return the phase changes, for logs and events.

    ``refused`` names the tables whose share of the batch the sink refused, with why, and a
    split that ``failed`` names its table's reason: each such table is parked (its stream
    position not moved past what its mirror holds), and the rest of the batch commits.
    """
    changes: list[str] = []
    failing: dict[str, str] = dict(refused or {})
    window_starts: dict[str, BinlogOffset] = {}
    results = {r.split_id: r for r in split_results}
    with store.transaction() as conn:
        touched = _finish_splits(store, conn, plan, results, failing, changes)
        _end_snapshots(store, conn, touched, snapshot_only, changes)
        if plan.binlog is not None:
            _advance_streams(
                store,
                conn,
                plan.binlog,
                window or WindowResult(),
                failing,
                window_starts,
                evolve,
                changes,
            )
            store.set_offset("committed", plan.binlog.end, conn)
        for table_id, why in sorted(failing.items()):
            changes.append(_park_failing(store, conn, table_id, why, window_starts.get(table_id)))
        store.mark_applied(plan.batch_no, conn)
    for message in changes:
        log.info("%s", message)
    return changes


def _finish_splits(
    store: StateStore,
    conn: sqlite3.Connection,
    plan: BatchPlan,
    results: Mapping[str, SplitResult],
    failing: dict[str, str],
    changes: list[str],
) -> set[str]:
    """Record each chunk read of the batch as finished (a failed read names its table in
    ``failing``); return the tables whose chunks moved."""
    touched: set[str] = set()
    for planned in plan.snapshot:
        split = planned.split
        result = results.get(split.split_id)
        if result is None:
            raise RuntimeError(f"batch {plan.batch_no} has no result for split {split.split_id}")
        if result.failed:
            failing.setdefault(
                str(split.table_id),
                f"chunk {split.split_id} could not be read: {result.failed}",
            )
            continue
        store.finish_split(split, result, conn)
        touched.add(str(split.table_id))
        if result.reshaped:
            changes.append(hold_reshaped(store, conn, str(split.table_id), result))
    return touched


def _end_snapshots(
    store: StateStore,
    conn: sqlite3.Connection,
    touched: set[str],
    snapshot_only: bool,
    changes: list[str],
) -> None:
    """A table whose last chunk finished starts catching up from its lowest high watermark."""
    for table_id in sorted(touched):
        if store.count_splits(table_id, (SplitStatus.PENDING, SplitStatus.ASSIGNED), conn):
            continue
        table = store.table(table_id, conn)
        if table is None or not table.state.reads_chunks:
            continue
        low = min(store.high_watermarks(table_id, conn))
        if table.state == Lifecycle.REDUMP and table.stream_from is not None:
            # The stream position before the re-dump: chunks not re-read were current up to
            # it, so the catch-up starts there at the earliest (never re-emits).
            low = max(low, table.stream_from)
        state = Lifecycle.SNAPSHOT_DONE if snapshot_only else Lifecycle.CATCHING_UP
        store.move_table(table_id, conn, state, stream_from=low, redump_chunk=None)
        what = "re-dump" if table.state == Lifecycle.REDUMP else "snapshot"
        message = f"{table_id}: {what} finished, {state} from {low}"
        store.log_event("phase", message, table_id=table_id, conn=conn)
        changes.append(message)


def _advance_streams(
    store: StateStore,
    conn: sqlite3.Connection,
    binlog: BinlogSplit,
    window: WindowResult,
    failing: Mapping[str, str],
    window_starts: dict[str, BinlogOffset],
    evolve: bool,
    changes: list[str],
) -> None:
    """Each streamed table's position moves to the window's end (a failing table's stays where
    its window started), a change of shape holds or parks it, a caught-up table streams."""
    end = binlog.end
    for stream_filter in binlog.tables:
        table_id = str(stream_filter.table_id)
        found = store.table(table_id, conn)
        if found is None:
            continue
        if table_id in failing:
            if stream_filter.resume_from is not None:
                window_starts[table_id] = stream_filter.resume_from
            continue
        state = found.state
        changed = window.schema_changes.get(table_id)
        if changed is not None:
            store.add_events(
                table_id,
                conn,
                window.emitted.get(table_id, 0),
                window.last_event_ts.get(table_id),
            )
            if evolve:
                changes.append(hold_for_evolution(store, conn, table_id, changed))
            else:
                changes.append(park_on_schema_change(store, conn, table_id, changed))
            continue
        new_state = state
        if state == Lifecycle.CATCHING_UP and _past_every_chunk(stream_filter, end):
            new_state = Lifecycle.STREAMING
        store.move_table(table_id, conn, new_state, stream_from=end)
        store.add_events(
            table_id,
            conn,
            window.emitted.get(table_id, 0),
            window.last_event_ts.get(table_id),
        )
        if new_state != state:
            message = f"{table_id}: caught up at {end}, now {new_state}"
            store.log_event("phase", message, table_id=table_id, conn=conn)
            changes.append(message)


def _park_failing(
    store: StateStore,
    conn: sqlite3.Connection,
    table_id: str,
    why: str,
    stream_from: BinlogOffset | None,
) -> str:
    """Park one table whose share of a batch could not be read or written: the others commit.
    Its binlog position stays where its mirror is (the start of this batch's window for it)."""
    table = store.table(table_id, conn)
    if table is None or table.state == Lifecycle.NEEDS_REDUMP:
        return f"{table_id}: {why} (parked already)"
    return park(
        store,
        table_id,
        f"{table_id} parked (NEEDS_REDUMP): {why}. Nothing of it past its mirror was applied; "
        f"the other tables go on. Fix the cause (a value its mirror type cannot hold, a type "
        f"or shape changed outside the binlog), then cdc-console redump --table {table_id}",
        conn=conn,
        stream_from=stream_from,
    )


def _past_every_chunk(stream_filter: TableStreamFilter, end: BinlogOffset) -> bool:
    """Whether a window ending at ``end`` has passed every finished chunk's high watermark: only
    then may the table stream unfiltered. A bounded window (``[pipeline] max_window_bytes``)
    can end before the last chunk's; the next window filters on from there."""
    last = stream_filter.max_high_watermark
    return last is None or end >= last
