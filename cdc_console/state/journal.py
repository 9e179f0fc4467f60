"""The job's journal: its runs, lag samples and events, each kept to a bounded length."""

from __future__ import annotations

import sqlite3
import time

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import EventRow, FieldValue, LagSample, RunRow, offset_json, offset_of

LAG_SAMPLES_KEPT = 3600
EVENTS_KEPT = 5000


class JournalRepo(StateDatabase):
    """The ``job_runs``, ``lag_samples`` and ``events`` parts."""

    def start_run(self, pid: int, host: str, master: str) -> int:
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO job_runs (pid, host, master, started_at, heartbeat_at, status) "
                "VALUES (?, ?, ?, ?, ?, 'running')",
                (pid, host, master, time.time(), time.time()),
            )
            return int(cur.lastrowid or 0)

    def update_run(self, run_id: int, **fields: FieldValue) -> None:
        if not fields:
            return
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.transaction() as conn:
            conn.execute(f"UPDATE job_runs SET {cols} WHERE run_id=?", (*fields.values(), run_id))

    def runs(self, limit: int = 20) -> list[RunRow]:
        """The latest runs, newest first."""
        rows = self.db.execute(
            "SELECT run_id, pid, host, master, spark_ui, started_at, heartbeat_at, ended_at, "
            "status, exit_code, error, metrics_url FROM job_runs ORDER BY run_id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [RunRow(*r) for r in rows]

    def add_lag_sample(
        self,
        committed: BinlogOffset | None,
        head: BinlogOffset | None,
        bytes_behind: int | None,
        files_behind: int | None,
        event_lag_ms: int | None,
    ) -> None:
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO lag_samples (ts, committed, head, bytes_behind, files_behind, "
                "event_lag_ms) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    now,
                    offset_json(committed),
                    offset_json(head),
                    bytes_behind,
                    files_behind,
                    event_lag_ms,
                ),
            )
            conn.execute(
                "DELETE FROM lag_samples WHERE ts < (SELECT ts FROM lag_samples ORDER BY ts DESC "
                "LIMIT 1 OFFSET ?)",
                (LAG_SAMPLES_KEPT,),
            )

    def lag_samples(self, limit: int = 120) -> list[LagSample]:
        """The latest samples, oldest first."""
        rows = self.db.execute(
            "SELECT ts, committed, head, bytes_behind, files_behind, event_lag_ms "
            "FROM lag_samples ORDER BY ts DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [LagSample(r[0], offset_of(r[1]), offset_of(r[2]), *r[3:]) for r in reversed(rows)]

    def log_event(
        self,
        kind: str,
        message: str,
        *,
        level: str = "info",
        table_id: TableId | str | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> None:
        args = (time.time(), level, kind, str(table_id) if table_id else None, message)
        sql = "INSERT INTO events (ts, level, kind, table_id, message) VALUES (?, ?, ?, ?, ?)"
        if conn is not None:
            conn.execute(sql, args)
            return
        with self.transaction() as c:
            c.execute(sql, args)
            c.execute(
                "DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", (EVENTS_KEPT,)
            )

    def events(self, limit: int = 100) -> list[EventRow]:
        """The latest events, oldest first."""
        rows = self.db.execute(
            "SELECT id, ts, level, kind, table_id, message FROM events ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [EventRow(*r) for r in reversed(rows)]
