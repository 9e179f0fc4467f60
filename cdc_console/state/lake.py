"""The lake's tables as the job last measured them (files, bytes, version) and their upkeep.

The job writes a row per Delta table after measuring or maintaining it; the console, ``status``
and ``cdc-console lake status`` read them, so nobody but the job opens Delta logs on a timer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cdc_console.state.store import StateStore

_COLUMNS = (
    "name, kind, path, version, files, live_bytes, disk_bytes, small_files, rows, "
    "measured_at, optimized_at, vacuumed_at, last_result"
)


@dataclass(frozen=True)
class LakeTableState:
    name: str
    kind: str
    path: str
    version: int | None
    files: int | None
    live_bytes: int | None
    disk_bytes: int | None
    small_files: int | None
    rows: int | None
    measured_at: float | None
    optimized_at: float | None
    vacuumed_at: float | None
    last_result: str | None


def record_footprint(
    store: StateStore,
    name: str,
    kind: str,
    path: str,
    *,
    version: int,
    files: int,
    live_bytes: int,
    disk_bytes: int,
    small_files: int,
    rows: int,
) -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO lake_tables (name, kind, path, version, files, live_bytes, disk_bytes, "
            "small_files, rows, measured_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (name, kind) DO UPDATE SET path=excluded.path, "
            "version=excluded.version, files=excluded.files, live_bytes=excluded.live_bytes, "
            "disk_bytes=excluded.disk_bytes, small_files=excluded.small_files, "
            "rows=excluded.rows, measured_at=excluded.measured_at",
            (
                name,
                kind,
                path,
                version,
                files,
                live_bytes,
                disk_bytes,
                small_files,
                rows,
                time.time(),
            ),
        )


def record_maintenance(
    store: StateStore, name: str, kind: str, path: str, action: str, result: str
) -> None:
    """``action`` is ``optimize`` or ``vacuum``; ``result`` the sentence an operator reads."""
    column = {"optimize": "optimized_at", "vacuum": "vacuumed_at"}[action]
    with store.transaction() as conn:
        conn.execute(
            f"INSERT INTO lake_tables (name, kind, path, {column}, last_result) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name, kind) DO UPDATE SET "
            f"{column}=excluded.{column}, last_result=excluded.last_result",
            (name, kind, path, time.time(), result),
        )


def lake_tables(store: StateStore) -> list[LakeTableState]:
    rows = store.db.execute(
        f"SELECT {_COLUMNS} FROM lake_tables ORDER BY kind DESC, name"
    ).fetchall()
    return [LakeTableState(*row) for row in rows]
