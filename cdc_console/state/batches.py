"""Micro-batches (plan, staging, applied) and the committed binlog offset."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence

from cdc_console.core.lifecycle import (
    BatchStatus,
    SplitStatus,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan, BatchTiming, ChunkBatchTiming
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.untyped import SqliteRow
from cdc_console.core.values import JSONObject
from cdc_console.state.rows import (
    AppliedBatch,
    BatchRow,
    offset_json,
    offset_of,
)
from cdc_console.state.splits import SplitsRepo


class BatchesRepo(SplitsRepo):
    """The ``batches`` and ``offsets`` parts; planning a batch assigns its splits, hence the
    base class."""

    _BATCH_COLUMNS = "SELECT batch_no, status, plan, staged_path, plan_past FROM batches"

    @staticmethod
    def _batch(r: SqliteRow) -> BatchRow:
        plan = BatchPlan.from_dict(json.loads(r[2]))
        return BatchRow(int(r[0]), BatchStatus(r[1]), plan, r[3], bool(r[4]))

    def last_batch(self) -> BatchRow | None:
        row = self.db.execute(f"{self._BATCH_COLUMNS} ORDER BY batch_no DESC LIMIT 1").fetchone()
        return self._batch(row) if row else None

    def batch(self, batch_no: int) -> BatchRow | None:
        row = self.db.execute(f"{self._BATCH_COLUMNS} WHERE batch_no=?", (batch_no,)).fetchone()
        return self._batch(row) if row else None

    def last_applied_batch(self) -> int:
        row = self.db.execute(
            "SELECT MAX(batch_no) FROM batches WHERE status=?", (BatchStatus.APPLIED,)
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def last_applied_at(self) -> float | None:
        """When the last batch was applied (committed to the lake and the state)."""
        row = self.db.execute(
            "SELECT MAX(applied_at) FROM batches WHERE status=?", (BatchStatus.APPLIED,)
        ).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def batch_timings(self, limit: int) -> list[BatchTiming]:
        """The last ``limit`` applied batches, newest first."""
        rows = self.db.execute(
            "SELECT plan, applied_at - created_at FROM batches WHERE status=? "
            "ORDER BY batch_no DESC LIMIT ?",
            (BatchStatus.APPLIED, limit),
        ).fetchall()
        return [BatchTiming(len(json.loads(r[0]).get("snapshot", ())), float(r[1])) for r in rows]

    def chunk_batch_timings(self, limit: int, within: int = 5000) -> list[ChunkBatchTiming]:
        """The newest ``limit`` applied batches that carried chunks, among the last ``within``
        batches, newest first."""
        rows = self.db.execute(
            "SELECT plan, COALESCE(plan_seconds, 0) + applied_at - created_at FROM ("
            "  SELECT * FROM batches ORDER BY batch_no DESC LIMIT ?"
            ") WHERE status=? AND json_array_length(plan, '$.snapshot') > 0 "
            "ORDER BY batch_no DESC LIMIT ?",
            (within, BatchStatus.APPLIED, limit),
        ).fetchall()
        found: list[ChunkBatchTiming] = []
        for plan_text, seconds in rows:
            plan = BatchPlan.from_dict(json.loads(plan_text))
            found.append(
                ChunkBatchTiming(
                    len(plan.snapshot),
                    any(p.replace for p in plan.snapshot),
                    plan.budget_seconds,
                    float(seconds),
                )
            )
        return found

    def create_batch(
        self,
        batch_no: int,
        plan: JSONObject,
        splits: Sequence[SnapshotSplit],
        plan_seconds: float | None = None,
    ) -> None:
        """``plan_seconds``: how long planning it took (the server's answers included)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO batches (batch_no, plan, status, created_at, plan_seconds) "
                "VALUES (?, ?, ?, ?, ?)",
                (batch_no, json.dumps(plan), BatchStatus.PLANNED, time.time(), plan_seconds),
            )
            self.assign_splits(splits, batch_no, conn)

    def staged_batches(self) -> list[BatchRow]:
        return [
            self._batch(r)
            for r in self.db.execute(
                f"{self._BATCH_COLUMNS} WHERE status=? ORDER BY batch_no", (BatchStatus.STAGED,)
            ).fetchall()
        ]

    def mark_staged(
        self,
        batch_no: int,
        path: str,
        records: int,
        *,
        plan_past: bool = False,
        read_seconds: float | None = None,
    ) -> None:
        """The batch's content is fixed in ``path``; with ``plan_past`` the planner may plan
        the next batch before this one is applied (``HybridSplitAssigner.next_plan``);
        ``read_seconds``: its longest task's time in our readers (``Reports.read_seconds``)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET status=?, staged_path=?, records=?, staged_at=?, plan_past=?, "
                "read_seconds=? WHERE batch_no=?",
                (
                    BatchStatus.STAGED,
                    path,
                    records,
                    time.time(),
                    int(plan_past),
                    read_seconds,
                    batch_no,
                ),
            )

    def mark_applied(self, batch_no: int, conn: sqlite3.Connection) -> None:
        """Inside the commit transaction that records the batch's splits and offsets."""
        conn.execute(
            "UPDATE batches SET status=?, applied_at=? WHERE batch_no=?",
            (BatchStatus.APPLIED, time.time(), batch_no),
        )

    def note_held(self, batch_no: int, seconds: float) -> None:
        """The batch waited ``seconds`` for lake maintenance before it could be applied."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET held_seconds = ? WHERE batch_no = ?", (seconds, batch_no)
            )

    def note_table_seconds(self, batch_no: int, seconds: Mapping[str, float]) -> None:
        """How long the sink's commit of the batch took, table by table."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET table_seconds = ? WHERE batch_no = ?",
                (json.dumps({t: round(s, 3) for t, s in seconds.items()}), batch_no),
            )

    def applied_batches(self, since: float) -> list[AppliedBatch]:
        """The batches applied after ``since``, the one applied just before them and the one in
        flight (``applied_at`` None), oldest first: when each was planned, staged and applied,
        for the lag split by stage (``figures.lag_stages``)."""
        rows = self.db.execute(
            "SELECT batch_no, created_at, plan_seconds, staged_at, held_seconds, applied_at, "
            "table_seconds, read_seconds FROM batches WHERE batch_no >= COALESCE((SELECT MAX(batch_no) FROM batches "
            "WHERE status = ? AND applied_at <= ?), 0) ORDER BY batch_no",
            (BatchStatus.APPLIED, since),
        ).fetchall()
        return [
            AppliedBatch(
                int(r[0]),
                float(r[1]),
                float(r[2] or 0.0),
                float(r[3]) if r[3] is not None else None,
                float(r[4] or 0.0),
                float(r[5]) if r[5] is not None else None,
                {str(t): float(s) for t, s in json.loads(r[6]).items()} if r[6] else {},
                float(r[7]) if r[7] is not None else None,
            )
            for r in rows
        ]

    def narrow_batch(self, plan: BatchPlan, released: Sequence[str]) -> None:
        """Replace a batch that is still only planned with ``plan`` (a narrower one, same
        number), and make the splits it no longer reads pending again."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET plan=? WHERE batch_no=? AND status=?",
                (json.dumps(plan.to_dict()), plan.batch_no, BatchStatus.PLANNED),
            )
            conn.executemany(
                "UPDATE splits SET status=?, batch_no=NULL WHERE split_id=?",
                [(SplitStatus.PENDING, split_id) for split_id in released],
            )

    def committed_offset(self) -> BinlogOffset | None:
        row = self.db.execute("SELECT offset FROM offsets WHERE name='committed'").fetchone()
        return offset_of(row[0]) if row else None

    def set_offset(self, name: str, offset: BinlogOffset, conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO offsets (name, offset, updated_at) VALUES (?, ?, ?)",
            (name, offset_json(offset), time.time()),
        )
