"""Snapshot splits: a table's chunks, their assignment to batches and their finished reports
(watermarks, rows, timings)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.keycodec import decode_key, encode_key
from cdc_console.core.lifecycle import (
    SplitStatus,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.reports import SplitResult
from cdc_console.core.schema import TableId
from cdc_console.core.splits import FinishedSnapshotSplitInfo, SnapshotSplit
from cdc_console.core.untyped import SqliteRow
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import (
    SplitState,
    offset_json,
    offset_of,
)


class SplitsRepo(StateDatabase):
    """The ``splits`` part: each table's chunks, their batch and their finished report."""

    def drop_splits(self, table_id: TableId, conn: sqlite3.Connection) -> int:
        """Forget a table's chunks (a full re-dump splits it afresh), and their verdicts, which
        name the old key ranges; return how many chunks."""
        conn.execute("DELETE FROM verifications WHERE table_id=?", (str(table_id),))
        cur = conn.execute("DELETE FROM splits WHERE table_id=?", (str(table_id),))
        return int(cur.rowcount)

    def reopen_split(
        self, table_id: TableId, split_no: int, generation: int, conn: sqlite3.Connection
    ) -> bool:
        """Make one finished chunk pending again (a one-chunk re-dump); False if it is unknown."""
        cur = conn.execute(
            "UPDATE splits SET status=?, generation=?, batch_no=NULL, low_watermark=NULL, "
            "high_watermark=NULL, rows=NULL, backfill_events=NULL, started_at=NULL, "
            "finished_at=NULL, duration_ms=NULL WHERE table_id=? AND split_no=?",
            (SplitStatus.PENDING, generation, str(table_id), split_no),
        )
        return bool(cur.rowcount > 0)

    def finish_split(
        self, split: SnapshotSplit, result: SplitResult, conn: sqlite3.Connection
    ) -> None:
        """Record a finished split's watermarks and rows, and count it for its table."""
        now = time.time()
        conn.execute(
            "UPDATE splits SET status=?, low_watermark=?, high_watermark=?, rows=?, "
            "backfill_events=?, started_at=?, finished_at=?, duration_ms=? WHERE split_id=?",
            (
                SplitStatus.FINISHED,
                offset_json(result.low_watermark),
                offset_json(result.high_watermark),
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

    def count_splits(
        self,
        table_id: TableId | str,
        statuses: Sequence[SplitStatus],
        conn: sqlite3.Connection | None = None,
    ) -> int:
        source = conn if conn is not None else self.db.conn
        marks = ",".join("?" * len(statuses))
        row = source.execute(
            f"SELECT COUNT(*) FROM splits WHERE table_id=? AND status IN ({marks})",
            (str(table_id), *statuses),
        ).fetchone()
        return int(row[0])

    def high_watermarks(
        self, table_id: TableId | str, conn: sqlite3.Connection | None = None
    ) -> list[BinlogOffset]:
        """The high watermarks of a table's finished splits."""
        source = conn if conn is not None else self.db.conn
        rows = source.execute(
            "SELECT high_watermark FROM splits WHERE table_id=? AND status=?",
            (str(table_id), SplitStatus.FINISHED),
        ).fetchall()
        return [BinlogOffset.from_dict(json.loads(r[0])) for r in rows if r[0]]

    #: ``split_rows`` columns, in order
    SPLIT_ROW_COLUMNS = (
        "split_id",
        "split_no",
        "range_start",
        "range_end",
        "status",
        "low_watermark",
        "high_watermark",
        "rows",
        "duration_ms",
    )

    def split_rows(self, table_id: TableId | str) -> list[SqliteRow]:
        """A table's splits as stored (``SPLIT_ROW_COLUMNS``), undecoded: the console compares
        them with the last poll's and decodes only the rows that changed."""
        rows = self.db.execute(
            f"SELECT {', '.join(self.SPLIT_ROW_COLUMNS)} FROM splits WHERE table_id=? "
            "ORDER BY split_no",
            (str(table_id),),
        ).fetchall()
        return [tuple(r) for r in rows]

    def add_splits(
        self, table_id: TableId, splits: Sequence[SnapshotSplit], generation: int | None = None
    ) -> None:
        """Record a table's chunks, under its current generation unless one is given."""
        if generation is None:
            row = self.db.execute(
                "SELECT generation FROM tables WHERE table_id=?", (str(table_id),)
            ).fetchone()
            generation = int(row[0]) if row else 0
        with self.transaction() as conn:
            _insert_pending(conn, splits, generation)
            conn.execute(
                "UPDATE tables SET splits_total=?, splits_done=0, updated_at=? WHERE table_id=?",
                (len(splits), time.time(), str(table_id)),
            )

    def split_tail(self, tail: SnapshotSplit, ranges: Sequence[ChunkRange]) -> list[SnapshotSplit]:
        """Replace a table's pending open last chunk by ``ranges`` (contiguous, the first
        starting where it does): it keeps its number and takes the first range, the others are
        numbered after the table's last chunk, in key order. Returns the new chunks; none when
        the chunk is no longer pending."""
        table = str(tail.table_id)
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT status, generation, range_end FROM splits WHERE split_id=?",
                (tail.split_id,),
            ).fetchone()
            still_open = row is not None and decode_key(json.loads(row[2])) is None
            if row is None or row[0] != SplitStatus.PENDING or not still_open:
                return []
            (last,) = conn.execute(
                "SELECT MAX(split_no) FROM splits WHERE table_id=?", (table,)
            ).fetchone()
            added = [
                SnapshotSplit(tail.table_id, int(last) + 1 + i, tail.chunk_key, r)
                for i, r in enumerate(ranges[1:])
            ]
            conn.execute(
                "UPDATE splits SET range_end=? WHERE split_id=?",
                (json.dumps(encode_key(ranges[0].end)), tail.split_id),
            )
            _insert_pending(conn, added, int(row[1]))
            conn.execute(
                "UPDATE tables SET splits_total=splits_total+?, updated_at=? WHERE table_id=?",
                (len(added), time.time(), table),
            )
        return added

    def has_splits(self, table_id: TableId) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM splits WHERE table_id=? LIMIT 1", (str(table_id),)
        ).fetchone()
        return row is not None

    def _split_from_row(self, r: SqliteRow) -> SnapshotSplit:
        return SnapshotSplit(
            TableId.parse(r[0]),
            int(r[1]),
            str(r[2]),
            ChunkRange(decode_key(json.loads(r[3])), decode_key(json.loads(r[4]))),
        )

    def pending_splits(
        self, limit: int, tables: Sequence[TableId] | None = None
    ) -> list[SnapshotSplit]:
        sql = (
            "SELECT table_id, split_no, chunk_key, range_start, range_end FROM splits "
            "WHERE status=?"
        )
        args: list[str | int] = [SplitStatus.PENDING]
        if tables is not None:
            if not tables:
                return []
            sql += f" AND table_id IN ({','.join('?' * len(tables))})"
            args.extend(str(t) for t in tables)
        sql += " ORDER BY table_id, split_no LIMIT ?"
        args.append(limit)
        return [self._split_from_row(r) for r in self.db.execute(sql, args).fetchall()]

    def assign_splits(
        self, splits: Sequence[SnapshotSplit], batch_no: int, conn: sqlite3.Connection
    ) -> None:
        conn.executemany(
            "UPDATE splits SET status=?, batch_no=? WHERE split_id=?",
            [(SplitStatus.ASSIGNED, batch_no, s.split_id) for s in splits],
        )

    def splits(self, table_id: TableId) -> list[SplitState]:
        rows = self.db.execute(
            "SELECT table_id, split_no, chunk_key, range_start, range_end, status, generation, "
            "batch_no, low_watermark, high_watermark, rows, backfill_events, started_at, "
            "finished_at, duration_ms FROM splits WHERE table_id=? ORDER BY split_no",
            (str(table_id),),
        ).fetchall()
        return [
            SplitState(
                self._split_from_row(r),
                SplitStatus(r[5]),
                r[6],
                r[7],
                offset_of(r[8]),
                offset_of(r[9]),
                r[10],
                r[11],
                r[12],
                r[13],
                r[14],
            )
            for r in rows
        ]

    def finished_splits(self, table_id: TableId) -> list[FinishedSnapshotSplitInfo]:
        return [
            FinishedSnapshotSplitInfo(s.split, s.high_watermark)
            for s in self.splits(table_id)
            if s.status == SplitStatus.FINISHED and s.high_watermark is not None
        ]


def _insert_pending(
    conn: sqlite3.Connection, splits: Sequence[SnapshotSplit], generation: int
) -> None:
    """Record ``splits`` as pending chunks of ``generation`` (replacing same-numbered ones)."""
    conn.executemany(
        "INSERT OR REPLACE INTO splits (split_id, table_id, split_no, generation, "
        "chunk_key, range_start, range_end, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                s.split_id,
                str(s.table_id),
                s.split_no,
                generation,
                s.chunk_key,
                json.dumps(encode_key(s.range.start)),
                json.dumps(encode_key(s.range.end)),
                SplitStatus.PENDING,
            )
            for s in splits
        ],
    )
