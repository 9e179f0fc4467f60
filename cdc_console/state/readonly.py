"""Figures read from a state database without opening it as a ``StateStore``.

The benchmarks look at a finished job's state, and the start-up checks at what a pipeline
captures before it opens its state: opening it as a ``StateStore`` would migrate it (or create
it) and take write locks on a file the job owns, so these reads use SQLite's read-only mode. They are the
only reads of the state schema outside ``store.py``, and they live here, in ``state/``, with it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cdc_console.core.schema import TableId


@contextmanager
def _readonly(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


@dataclass
class BatchTimes:
    """One micro-batch's timestamps from the state database (``batches`` table)."""

    batch_no: int
    records: int
    created_at: float
    staged_at: float | None
    applied_at: float | None


def batch_times(state_path: Path, since: float = 0.0) -> list[BatchTimes]:
    """Batches planned at or after ``since`` (epoch seconds), in order."""
    with _readonly(state_path) as conn:
        rows = conn.execute(
            "SELECT batch_no, COALESCE(records, 0), created_at, staged_at, applied_at "
            "FROM batches WHERE created_at >= ? ORDER BY batch_no",
            (since,),
        ).fetchall()
    return [BatchTimes(*row) for row in rows]


@dataclass(frozen=True)
class SplitTotals:
    """Rows of every split, and of the splits that recorded a read time, with that time."""

    rows: int
    timed_splits: int
    timed_rows: int
    timed_ms: int


def split_totals(state_path: Path) -> SplitTotals:
    with _readonly(state_path) as conn:
        rows = conn.execute("SELECT COALESCE(SUM(rows), 0) FROM splits").fetchone()[0]
        timed = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(rows), 0), COALESCE(SUM(duration_ms), 0) FROM splits "
            "WHERE duration_ms"
        ).fetchone()
    return SplitTotals(int(rows), int(timed[0]), int(timed[1]), int(timed[2]))


def events_applied(state_path: Path) -> int:
    """Binlog row changes applied over all tables; 0 for a state that does not exist yet."""
    if not state_path.exists():
        return 0
    with _readonly(state_path) as conn:
        return int(
            conn.execute("SELECT COALESCE(SUM(events_applied), 0) FROM tables").fetchone()[0]
        )


def captured_tables(state_path: Path) -> set[TableId]:
    """The tables a pipeline's state holds as captured, REMOVED ones aside (none before the
    pipeline's first run)."""
    if not state_path.exists():
        return set()
    with _readonly(state_path) as conn:
        rows = conn.execute("SELECT table_id FROM tables WHERE state != 'REMOVED'").fetchall()
    return {TableId.parse(str(r[0])) for r in rows}
