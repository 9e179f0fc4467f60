"""Recording a batch's outcome in the state database, in one transaction with the batch itself.

This is the "finished-split report" of Flink CDC: each finished split's high watermark is stored
the moment its rows are durably in the sink, and table lifecycle moves on from there. Doing it in
the same transaction that marks the batch applied is what makes a crash at any point resumable
without re-reading finished chunks or re-emitting streamed changes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.state.store import SplitResult, StateStore

log = logging.getLogger(__name__)


@dataclass
class WindowResult:
    """What the binlog partition of a batch reports: per-table emitted counts and event times."""

    emitted: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    last_event_ts: dict[str, int] = field(default_factory=dict)


def commit_batch(
    store: StateStore,
    plan: BatchPlan,
    split_results: Sequence[SplitResult],
    window: WindowResult | None,
    *,
    snapshot_only: bool = False,
    sink_stats: Mapping[str, int] | None = None,
) -> list[str]:
    """Apply ``plan``'s results to the state; return the phase changes, for logs and events."""
    changes: list[str] = []
    now = time.time()
    results = {r.split_id: r for r in split_results}
    with store.transaction() as conn:
        touched: set[str] = set()
        for planned in plan.snapshot:
            split = planned.split
            result = results.get(split.split_id)
            if result is None:
                raise RuntimeError(
                    f"batch {plan.batch_no} has no result for split {split.split_id}"
                )
            conn.execute(
                "UPDATE splits SET status=?, low_watermark=?, high_watermark=?, rows=?, "
                "backfill_events=?, started_at=?, finished_at=?, duration_ms=? WHERE split_id=?",
                (
                    SplitStatus.FINISHED,
                    json.dumps(result.low_watermark.to_dict()),
                    json.dumps(result.high_watermark.to_dict()),
                    result.rows,
                    result.backfill_events,
                    result.started_at,
                    now,
                    result.duration_ms,
                    split.split_id,
                ),
            )
            conn.execute(
                "UPDATE tables SET splits_done = splits_done + 1, "
                "rows_snapshotted = rows_snapshotted + ?, updated_at=? WHERE table_id=?",
                (result.rows, now, str(split.table_id)),
            )
            touched.add(str(split.table_id))
        for table_id in sorted(touched):
            left = conn.execute(
                "SELECT COUNT(*) FROM splits WHERE table_id=? AND status IN (?, ?)",
                (table_id, SplitStatus.PENDING, SplitStatus.ASSIGNED),
            ).fetchone()[0]
            if left:
                continue
            hws = [
                json.loads(r[0])
                for r in conn.execute(
                    "SELECT high_watermark FROM splits WHERE table_id=? AND status=?",
                    (table_id, SplitStatus.FINISHED),
                ).fetchall()
            ]
            row = conn.execute(
                "SELECT state, stream_from FROM tables WHERE table_id=?", (table_id,)
            ).fetchone()
            if row is None or row[0] not in (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP):
                continue
            low = min(BinlogOffset.from_dict(h) for h in hws)
            if row[0] == Lifecycle.REDUMP and row[1]:
                # The stream position before the re-dump: chunks not re-read were current up to
                # it, so the catch-up starts there at the earliest (never re-emits).
                low = max(low, BinlogOffset.from_dict(json.loads(row[1])))
            state = Lifecycle.SNAPSHOT_DONE if snapshot_only else Lifecycle.CATCHING_UP
            store.move_table(table_id, conn, state, stream_from=low, redump_chunk=None)
            what = "re-dump" if row[0] == Lifecycle.REDUMP else "snapshot"
            message = f"{table_id}: {what} finished, {state} from {low}"
            store.log_event("phase", message, table_id=table_id, conn=conn)
            changes.append(message)
        if plan.binlog is not None:
            end = plan.binlog.end
            window = window or WindowResult()
            for stream_filter in plan.binlog.tables:
                table_id = str(stream_filter.table_id)
                row = conn.execute(
                    "SELECT state FROM tables WHERE table_id=?", (table_id,)
                ).fetchone()
                if row is None:
                    continue
                state = row[0]
                new_state = Lifecycle.STREAMING if state == Lifecycle.CATCHING_UP else state
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
            store.set_offset("committed", end, conn)
        conn.execute(
            "UPDATE batches SET status='applied', applied_at=? WHERE batch_no=?",
            (now, plan.batch_no),
        )
    for message in changes:
        log.info("%s", message)
    return changes
