"""Binlog retention: what to say when a binlog the pipeline still needs is gone.

The job refuses to start on a purged position with this message; which positions are needed is
``figures.binlog_needs``, shared with ``status``, the metrics and the console's purge headroom.
"""

from __future__ import annotations

from cdc_console.config import PipelineConfig
from cdc_console.core.offset import BinlogOffset, binlog_file_index
from cdc_console.errors import BinlogPurgedError, SourceError


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
