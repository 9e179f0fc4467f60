"""Binlog retention: which binlog the pipeline still needs, and what to say when it is gone.

Shared by the job (refuse to start on a purged position), ``status`` and the console (purge risk:
the oldest binlog the server keeps vs the oldest one this pipeline will read).
"""

from __future__ import annotations

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.errors import BinlogPurgedError, SourceError
from cdc_console.state.store import StateStore


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


def missing_binlog(
    needs: list[tuple[str, BinlogOffset]], logs: list[tuple[str, int]], config: PipelineConfig
) -> SourceError | None:
    """The error to stop with when a needed binlog file is not on the server, else None.

    ``logs`` is ``SHOW BINARY LOGS``. A file older than the oldest one left was purged; a file
    that is not older but still absent means the server's binlog was reset (``RESET MASTER``) or
    the config now points at another server.
    """
    if not needs or not logs:
        return None
    present = {name for name, _ in logs}
    table, position = min(needs, key=lambda need: need[1])
    if position.file in present:
        return None
    oldest, newest = logs[0][0], logs[-1][0]
    start_over = (
        f"start this pipeline over with a fresh snapshot: stop it, delete {config.state_path}, "
        f"{config.spark.checkpoint} and the mirrors under {config.sink.path}, then run it again"
    )
    if binlog_file_index(position.file) < binlog_file_index(oldest):
        return BinlogPurgedError(
            f"the source server no longer has binlog {position.file}: {table} must resume from "
            f"{position}, but the oldest binlog left is {oldest}, so the changes made in between "
            "were purged (PURGE BINARY LOGS or binlog expiry) before the pipeline read them",
            f"{start_over}; to avoid it, keep binlogs longer than the pipeline may be stopped "
            "(SET GLOBAL binlog_expire_logs_seconds = 604800, and in my.cnf)",
        )
    return SourceError(
        f"the source server has no binlog {position.file}, which {table} must resume from "
        f"({position}); its binlogs are {oldest} to {newest}: the binlog was reset (RESET "
        "MASTER) or source.host/port now points at another server",
        f"point source.host/port back at the server this pipeline read from, or {start_over}",
    )
