"""Each chunk's last verification: the ``verifications`` part of the state.

``cdc-console verify`` (and the job's scheduled verification) records one row per chunk it
compared, replacing the chunk's previous one; the console and ``status`` read them to say
"verified 2 h ago: equal" and to show which chunks differ. Verifications are journalled too, so
the Events screen tells what was found and repaired.
"""

from __future__ import annotations

import json
import os
import time

from cdc_console.core.lifecycle import Verdict
from cdc_console.core.schema import TableId
from cdc_console.core.untyped import SqliteRow
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import VerificationRow, VerifyProgress, offset_json, offset_of

#: the meta key of the verification under way
VERIFY_PROGRESS_META = "verify_progress"

_COLUMNS = (
    "table_id, split_no, verified_at, position, verdict, rows, missing, extra, differing, detail"
)


class VerificationsRepo(StateDatabase):
    """The ``verifications`` part."""

    def record_verification(self, row: VerificationRow) -> None:
        with self.transaction() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO verifications ({_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(row.table_id),
                    row.split_no,
                    row.verified_at,
                    offset_json(row.position),
                    row.verdict,
                    row.rows,
                    row.missing,
                    row.extra,
                    row.differing,
                    json.dumps(row.detail),
                ),
            )

    def begin_verify(self, chunks_total: int) -> VerifyProgress:
        """A verification of ``chunks_total`` chunks begins in this process (it replaces any
        earlier one's progress: one verification runs at a time, ``verifier.exclusive``)."""
        progress = VerifyProgress(os.getpid(), time.time(), chunks_total)
        self.save_verify_progress(progress)
        return progress

    def note_verified(
        self, progress: VerifyProgress, chunks: int, started_at: float
    ) -> VerifyProgress:
        """``chunks`` more were compared, from ``started_at`` until now."""
        done = (*progress.groups, (chunks, started_at, time.time()))
        progress = VerifyProgress(progress.pid, progress.started_at, progress.chunks_total, done)
        self.save_verify_progress(progress)
        return progress

    def end_verify(self) -> None:
        with self.transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key = ?", (VERIFY_PROGRESS_META,))

    def verify_progress(self) -> VerifyProgress | None:
        """The verification under way, as its process last recorded it (None: none, or its
        process is gone without ending it: killed, so nothing is under way)."""
        text = self.get_meta(VERIFY_PROGRESS_META)
        if text is None:
            return None
        data = json.loads(text)
        if not _runs(int(data["pid"])):
            return None
        groups = tuple((int(n), float(a), float(b)) for n, a, b in data["groups"])
        return VerifyProgress(
            int(data["pid"]), float(data["started_at"]), int(data["chunks_total"]), groups
        )

    def save_verify_progress(self, progress: VerifyProgress) -> None:
        data = {
            "pid": progress.pid,
            "started_at": progress.started_at,
            "chunks_total": progress.chunks_total,
            "groups": [list(g) for g in progress.groups],
        }
        self.set_meta(VERIFY_PROGRESS_META, json.dumps(data))

    def verifications(self, table_id: TableId | str | None = None) -> list[VerificationRow]:
        """The last verification of each chunk (of ``table_id``, or of every table)."""
        sql = f"SELECT {_COLUMNS} FROM verifications"
        args: tuple[str, ...] = ()
        if table_id is not None:
            sql += " WHERE table_id=?"
            args = (str(table_id),)
        rows = self.db.execute(sql + " ORDER BY table_id, split_no", args).fetchall()
        return [_verification(r) for r in rows]

    def verified_since(self, table_id: TableId | str) -> float | None:
        """When the table's least recently verified chunk was verified (None: never)."""
        row = self.db.execute(
            "SELECT MIN(verified_at) FROM verifications WHERE table_id=?", (str(table_id),)
        ).fetchone()
        return float(row[0]) if row and row[0] is not None else None


def _verification(r: SqliteRow) -> VerificationRow:
    return VerificationRow(
        table_id=TableId.parse(r[0]),
        split_no=int(r[1]),
        verified_at=float(r[2]),
        position=offset_of(r[3]),
        verdict=Verdict(r[4]),
        rows=int(r[5]),
        missing=int(r[6]),
        extra=int(r[7]),
        differing=int(r[8]),
        detail=json.loads(r[9]) if r[9] else {},
    )


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it runs
    return True
