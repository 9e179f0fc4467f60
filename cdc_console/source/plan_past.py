"""Planning the next batch while the driver still applies the last one.

A batch is applied by the driver (Delta MERGE, then the state commit) while every reader waits:
on a stream catching up, a second of apply per 16 MiB window. Once a batch is *staged* its
content is fixed and durable (``spark.applier``), so nothing but the state the planner reads
stops the next window from being read meanwhile. For one kind of batch that state is known in
advance: a binlog window of streaming tables, with no chunk and no change of shape, whose commit
does exactly one thing, move each of its tables' stream position to the window's end
(``source.committer.commit_batch``). The applier marks such a batch ``plan_past`` when it stages
it and applies it in the background; the planner then plans the next window from that end,
as if the commit had happened. The commit still happens, in order, before the next batch's:
the state never claims a change the mirror does not hold.

Anything else a plan could depend on (a chunk's high watermark, a table catching up or held at
a DDL, an operator's command, a pause) makes the planner wait for the commit instead, so the
plan it makes is the one it would have made without the overlap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from cdc_console.core.lifecycle import BatchStatus, CommandKind, Lifecycle
from cdc_console.core.plan import BatchPlan
from cdc_console.state.rows import BatchRow
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)

#: how long the planner waits for a staged batch's commit before it plans nothing this time
WAIT_SECONDS = 10.0
POLL_SECONDS = 0.02


def may_plan_past(store: StateStore, staged: BatchRow) -> bool:
    """Whether the next plan can be made before ``staged`` is applied: it is marked so, it is
    a binlog window only, and the state is still the one it was planned from (every table it
    reads streams from its start, no other table reads the binlog or chunks, no table is held
    at a change of shape, no command is queued, the pipeline is neither paused nor stopping)."""
    plan = staged.plan
    window = plan.binlog
    if not staged.plan_past or plan.snapshot or window is None:
        return False
    if store.draining() or store.pipeline_paused():
        return False
    if any(c.kind != CommandKind.STOP for c in store.pending_commands()):
        return False
    starts = {f.table_id: f.resume_from for f in window.tables}
    for table in store.tables():
        if table.schema_pending or table.state.reads_chunks:
            return False
        if table.table_id in starts:
            if table.state != Lifecycle.STREAMING or table.stream_from != starts[table.table_id]:
                return False
        elif table.state.reads_binlog and table.stream_from is not None:
            return False
    return True


def as_committed(tables: Sequence[TableState], plan: BatchPlan) -> list[TableState]:
    """``tables`` as ``commit_batch`` leaves them after ``plan`` (a ``may_plan_past`` batch):
    its window's tables stream on from its end."""
    window = plan.binlog
    if window is None:
        return list(tables)
    moved = {f.table_id for f in window.tables}
    return [replace(t, stream_from=window.end) if t.table_id in moved else t for t in tables]


def wait_applied(
    store: StateStore,
    staged: BatchRow,
    *,
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchRow:
    """The batch once applied, or as it stands after ``seconds`` (``WAIT_SECONDS``; still
    staged: the caller plans nothing this time and Spark asks again at its next trigger)."""
    deadline = clock() + (WAIT_SECONDS if seconds is None else seconds)
    current = staged
    while current.status == BatchStatus.STAGED and clock() < deadline:
        sleep(POLL_SECONDS)
        found = store.batch(staged.batch_no)
        if found is None:
            break
        current = found
    return current
