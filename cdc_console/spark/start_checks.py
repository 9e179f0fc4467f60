"""What a job checks and mends before Spark starts, each a refusal with its fix or a repair.

The lake holds no batch the state database never planned; the binlog the pipeline resumes from
is still on the server (a table left behind by a purge is parked, the others start); a planned
batch that never ran is narrowed to the tables still captured; a snapshot-only job with nothing
left to read does not start Spark at all.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_console.config import PipelineConfig, SourceConfig
from cdc_console.core.lifecycle import BatchStatus, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import StartupMode
from cdc_console.core.schema import TableId
from cdc_console.errors import ConfigError
from cdc_console.figures import binlog_needs
from cdc_console.mysql.connection import close_quietly, connect
from cdc_console.mysql.position import binary_logs, current_position
from cdc_console.mysql.retry import RetryAbandoned, call_with_retry
from cdc_console.retention import missing_binlog
from cdc_console.source.parking import PARKABLE, is_purged, park_table
from cdc_console.source.registration import rebuilding
from cdc_console.state.store import StateStore

if TYPE_CHECKING:
    from cdc_console.sinks.base import TableBatchSink

log = logging.getLogger(__name__)

#: a server's binlog files and their sizes
Logs = list[tuple[str, int]]


def check_lake_matches_state(store: StateStore, sink: TableBatchSink, lake_path: Path) -> None:
    """Refuse a lake that holds batches the state database never made.

    Delta commits carry the batch number, and a batch a mirror already holds is skipped as
    a retry. A state database deleted (or pointed at another lake) restarts numbering at 1,
    so every batch up to the lake's last one would be skipped without a word: the mirror
    would silently stop changing. After recovery, the state knows every batch it staged.
    """
    last = store.last_batch()
    known = last.batch_no if last is not None else 0
    for table in store.tables():
        in_lake = sink.applied_batch(table.table_id)
        if in_lake is not None and in_lake > known:
            raise ConfigError(
                f"the lake's mirror of {table.table_id} already holds batch {in_lake}, but "
                f"the state database {store.path} only planned batches up to {known}: the "
                "state was reset, or belongs to another lake",
                f"move the lake folder {lake_path} away to snapshot afresh, or "
                "restore the state database that wrote it",
            )


def check_binlog_available(
    store: StateStore, config: PipelineConfig, with_source: Callable[[Callable[[], Logs]], Logs]
) -> None:
    """Fail before Spark starts when the binlog the pipeline resumes from is gone.

    Otherwise the first binlog task would fail inside Spark, after a ten-second start, with
    the reason buried in a Java trace; and nothing could be applied anyway. When only some
    streaming (or paused) tables need purged files, those are parked in NEEDS_REDUMP, as
    the planner does mid-stream, and the job starts for the others.
    """
    needs = binlog_needs(store)
    if not needs:
        return
    logs = with_source(functools.partial(binary_logs_of, config.source))
    files = [name for name, _size in logs]
    parkable = {str(t.table_id) for t in store.tables() if t.state in PARKABLE}
    purged = {table for table, position in needs if is_purged(position, files)}
    if purged and purged <= parkable and len(purged) < len(needs):
        # Some tables were left behind by a purge; the others need not wait for them.
        for table, position in needs:
            if table in purged:
                park_table(store, TableId.parse(table), position, files)
        narrow_pending_plan(store)
        needs = [need for need in needs if need[0] not in purged]
    problem = missing_binlog(needs, logs, config)
    if problem is not None:
        raise problem


def narrow_pending_plan(store: StateStore) -> None:
    """Drop REMOVED and parked tables, and tables about to be re-dumped, from a planned batch
    that never ran.

    Plans are persisted so that a replay reads the same thing, but a batch that is still only
    planned applied nothing, so it may be narrowed under its number (Spark's checkpoint replays
    it by number). Without this, the batch that stopped on a DDL would be replayed after the
    user removed the table, and stop on the same DDL again.
    """
    last = store.last_batch()
    if last is None or last.status != BatchStatus.PLANNED:
        return
    plan = last.plan
    tables = store.tables()
    parked = {t.table_id for t in tables if t.state == Lifecycle.NEEDS_REDUMP}
    removed = parked | {
        t.table_id for t in tables if t.state == Lifecycle.REMOVED or rebuilding(store, t.table_id)
    }
    binlog = plan.binlog
    if binlog is not None:
        kept = tuple(f for f in binlog.tables if f.table_id not in removed)
        start = binlog.start
        if any(f.table_id in parked for f in binlog.tables):
            # A parked table's start lies in a purged file: the window must not begin there.
            # The others' filters skip everything before their own resume position anyway.
            starts = [f.resume_from for f in kept if f.resume_from is not None]
            start = max(start, min(starts).at_event_boundary()) if starts else binlog.end
        binlog = replace(binlog, start=start, tables=kept)
    narrowed = replace(
        plan,
        snapshot=tuple(p for p in plan.snapshot if p.split.table_id not in removed),
        binlog=binlog,
    )
    if narrowed == plan:
        return
    released = [p.split.split_id for p in plan.snapshot if p.split.table_id in removed]
    store.narrow_batch(narrowed, released)
    log.info("batch %d re-planned without removed tables: %s", plan.batch_no, narrowed.describe())


def snapshot_only_done(config: PipelineConfig, store: StateStore) -> bool:
    """snapshot-only with every table already snapshotted: nothing to do, no Spark needed."""
    if config.snapshot.startup_mode != StartupMode.SNAPSHOT_ONLY:
        return False
    active = [t for t in store.tables() if t.state != Lifecycle.REMOVED]
    if active and all(t.state == Lifecycle.SNAPSHOT_DONE for t in active):
        log.info("snapshot-only: every table was already snapshotted, nothing to do")
        return True
    return False


def read_head(source: SourceConfig) -> BinlogOffset:
    """The server's head, on a connection of its own."""
    conn = connect(source)
    try:
        return current_position(conn)
    finally:
        close_quietly(conn)


def binary_logs_of(source: SourceConfig) -> Logs:
    """The server's binlog files and their sizes, on a connection of its own."""
    conn = connect(source)
    try:
        return binary_logs(conn)
    finally:
        close_quietly(conn)


def wait_for_source(config: PipelineConfig, abandon: Callable[[], bool]) -> bool:
    """On a restart, wait out a source that is down (restarting, failing over) before the
    preflight; False when a stop was requested meanwhile.

    A first start (no state yet) does not wait: a refused connection there is far more
    often a wrong host or port than an outage, and the preflight names the fix at once.
    """
    if not config.state_path.exists():
        return True
    store = StateStore(config.state_path)
    try:
        store.close_outages("a new run started")
        call_with_retry(
            lambda: close_quietly(connect(config.source)),
            what="start-up",
            outage_seconds=config.source.outage_seconds,
            observer=store,
            abandon=abandon,
        )
    except RetryAbandoned:
        log.info("stop requested while waiting for the source; nothing was started")
        return False
    finally:
        store.close()
    return True
