"""``StateStore``: splits, watermarks, offsets, lifecycle, runs, lag and commands in SQLite.

The job writes, the CLI and the console read and queue commands, each from its own process, so
the database runs in WAL mode with a generous busy timeout. Everything the job must not lose
(finished splits with their high watermarks, the committed offset, a batch's plan) is written in
one transaction with the batch it belongs to, so a crash at any point leaves a consistent state
to resume from at chunk granularity.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from cdc_console.core.chunk import ChunkRange
from cdc_console.core.keycodec import decode_key, encode_key
from cdc_console.core.lifecycle import (
    BatchStatus,
    CommandKind,
    CommandStatus,
    Lifecycle,
    SplitStatus,
    check_move,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.schema import TableId
from cdc_console.core.splits import FinishedSnapshotSplitInfo, SnapshotSplit
from cdc_console.state.migrations import MIGRATIONS

PIPELINE_PAUSED_META = "pipeline_paused"

LAG_SAMPLES_KEPT = 3600
EVENTS_KEPT = 5000


def _offset_json(offset: BinlogOffset | None) -> str | None:
    return json.dumps(offset.to_dict()) if offset is not None else None


def _offset(text: str | None) -> BinlogOffset | None:
    return BinlogOffset.from_dict(json.loads(text)) if text else None


@dataclass(frozen=True)
class TableState:
    table_id: TableId
    state: Lifecycle
    chunk_key: str | None
    generation: int
    splits_total: int | None
    splits_done: int
    rows_snapshotted: int
    events_applied: int
    stream_from: BinlogOffset | None
    paused_at: BinlogOffset | None
    last_event_ts: int | None
    updated_at: float
    resume_state: Lifecycle | None = None
    origin: str = "config"
    removed_by: str | None = None
    redump_chunk: int | None = None


@dataclass(frozen=True)
class Command:
    """One operator command in the queue: issued by the CLI or the console, applied by the job.

    ``target`` is a table id (``db.t``) or None for the whole pipeline; ``args`` holds extras
    such as the chunk number of a one-chunk re-dump. ``status`` is pending, applied or failed,
    with ``reason`` saying what happened (the outcome of an applied one, why a failed one was
    refused).
    """

    id: int
    kind: str
    target: str | None
    args: dict[str, Any]
    issued_by: str | None
    issued_at: float
    status: str
    reason: str | None
    applied_at: float | None

    @property
    def what(self) -> str:
        """``redump shop.orders chunk 3``, ``pause (pipeline)``: how every screen names it."""
        what = f"{self.kind} {self.target}" if self.target else f"{self.kind} (pipeline)"
        if self.args.get("chunk") is not None:
            what += f" chunk {self.args['chunk']}"
        return what

    def describe(self) -> str:
        return f"command {self.id}: {self.what}"


@dataclass(frozen=True)
class SplitState:
    split: SnapshotSplit
    status: SplitStatus
    generation: int
    batch_no: int | None
    low_watermark: BinlogOffset | None
    high_watermark: BinlogOffset | None
    rows: int | None
    backfill_events: int | None
    started_at: float | None
    finished_at: float | None
    duration_ms: int | None


@dataclass(frozen=True)
class BatchRow:
    """One micro-batch: its persisted plan, where it stands, and its staging file once staged."""

    batch_no: int
    status: BatchStatus
    plan: BatchPlan
    staged_path: str | None


@dataclass(frozen=True)
class SplitResult:
    """What a finished snapshot split reports through the batch that carried its rows."""

    split_id: str
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    rows: int
    backfill_events: int
    started_at: float
    duration_ms: int


class StateStore:
    """One state database; safe to share between threads of one process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.RLock()
        self._migrate()

    @classmethod
    def open_existing(cls, path: str | Path) -> StateStore:
        """Open for reading; raise ``FileNotFoundError`` rather than create an empty state."""
        if not Path(path).exists():
            raise FileNotFoundError(str(path))
        return cls(path)

    def close(self) -> None:
        self.db.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self.db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self.transaction() as conn:
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            version = 0
            if has_meta:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(row[0]) if row else 0
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(number),),
                )

    @property
    def schema_version(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- tables ---------------------------------------------------------------------------------

    def ensure_table(
        self,
        table_id: TableId,
        chunk_key: str,
        state: Lifecycle,
        stream_from: BinlogOffset | None = None,
        *,
        origin: str = "config",
        schema: dict[str, Any] | None = None,
        conn: Any = None,
    ) -> bool:
        """Register a captured table once (in ``state``, a first move); True when it was new."""
        check_move(table_id, None, state)
        now = time.time()
        sql = (
            "INSERT OR IGNORE INTO tables (table_id, state, chunk_key, stream_from, origin, "
            "schema, added_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        args = (
            str(table_id),
            state,
            chunk_key,
            _offset_json(stream_from),
            origin,
            json.dumps(schema) if schema is not None else None,
            now,
            now,
        )
        if conn is not None:
            return bool(conn.execute(sql, args).rowcount > 0)
        with self.transaction() as c:
            return bool(c.execute(sql, args).rowcount > 0)

    def set_schema(self, table_id: TableId, schema: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE tables SET schema=? WHERE table_id=?", (json.dumps(schema), str(table_id))
            )

    def schemas(self) -> dict[TableId, dict[str, Any]]:
        return {
            TableId.parse(r[0]): json.loads(r[1])
            for r in self.db.execute(
                "SELECT table_id, schema FROM tables WHERE schema IS NOT NULL"
            ).fetchall()
        }

    _TABLE_COLUMNS = (
        "SELECT table_id, state, chunk_key, generation, splits_total, splits_done, "
        "rows_snapshotted, events_applied, stream_from, paused_at, last_event_ts, updated_at, "
        "resume_state, origin, removed_by, redump_chunk FROM tables"
    )

    @staticmethod
    def _table(r: Sequence[Any]) -> TableState:
        return TableState(
            TableId.parse(r[0]),
            Lifecycle(r[1]),
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            _offset(r[8]),
            _offset(r[9]),
            r[10],
            r[11],
            Lifecycle(r[12]) if r[12] else None,
            r[13],
            r[14],
            r[15],
        )

    def tables(self) -> list[TableState]:
        rows = self.db.execute(f"{self._TABLE_COLUMNS} ORDER BY table_id").fetchall()
        return [self._table(r) for r in rows]

    def table(self, table_id: TableId | str, conn: Any = None) -> TableState | None:
        """One table, read inside the caller's transaction when ``conn`` is given."""
        source = conn if conn is not None else self.db
        row = source.execute(f"{self._TABLE_COLUMNS} WHERE table_id=?", (str(table_id),)).fetchone()
        return self._table(row) if row else None

    _TABLE_FIELDS = frozenset(
        {
            "generation",
            "splits_total",
            "splits_done",
            "rows_snapshotted",
            "stream_from",
            "paused_at",
            "resume_state",
            "origin",
            "removed_by",
            "redump_chunk",
        }
    )

    def update_table(self, table_id: TableId, conn: Any, **fields: Any) -> None:
        """Set columns of one table inside the caller's transaction; not its lifecycle state,
        which only ``move_table`` changes.

        Offsets are given as ``BinlogOffset`` (or None) and stored in their canonical JSON form.
        """
        unknown = set(fields) - self._TABLE_FIELDS
        if unknown:
            raise ValueError(
                f"not table fields (a state change is move_table's): {sorted(unknown)}"
            )
        values = [_offset_json(v) if isinstance(v, BinlogOffset) else v for v in fields.values()]
        cols = "".join(f"{k}=?, " for k in fields)
        conn.execute(
            f"UPDATE tables SET {cols}updated_at=? WHERE table_id=?",
            (*values, time.time(), str(table_id)),
        )

    def add_events(
        self, table_id: TableId | str, conn: Any, count: int, last_event_ts: int | None
    ) -> None:
        """Count a window's applied events for one table and keep its newest event time."""
        conn.execute(
            "UPDATE tables SET events_applied = events_applied + ?, "
            "last_event_ts = COALESCE(?, last_event_ts) WHERE table_id=?",
            (count, last_event_ts, str(table_id)),
        )

    def move_table(
        self, table_id: TableId | str, conn: Any, target: Lifecycle, **fields: Any
    ) -> Lifecycle:
        """Move one table to ``target`` (and set ``fields``) inside the caller's transaction.

        Every lifecycle change goes through here, checked against ``core.lifecycle``'s table of
        moves: a move it does not list raises ``IllegalTransition`` before anything is written.
        Returns the state the table was in.
        """
        row = conn.execute("SELECT state FROM tables WHERE table_id=?", (str(table_id),)).fetchone()
        if row is None:
            raise LookupError(f"{table_id} is not in the state database")
        current = Lifecycle(row[0])
        check_move(table_id, current, target)
        key = table_id if isinstance(table_id, TableId) else TableId.parse(table_id)
        self.update_table(key, conn, **fields)
        if current != target:
            conn.execute("UPDATE tables SET state=? WHERE table_id=?", (target, str(table_id)))
        return current

    def drop_splits(self, table_id: TableId, conn: Any) -> int:
        """Forget a table's chunks (a full re-dump splits it afresh); return how many."""
        cur = conn.execute("DELETE FROM splits WHERE table_id=?", (str(table_id),))
        return int(cur.rowcount)

    def reopen_split(self, table_id: TableId, split_no: int, generation: int, conn: Any) -> bool:
        """Make one finished chunk pending again (a one-chunk re-dump); False if it is unknown."""
        cur = conn.execute(
            "UPDATE splits SET status=?, generation=?, batch_no=NULL, low_watermark=NULL, "
            "high_watermark=NULL, rows=NULL, backfill_events=NULL, started_at=NULL, "
            "finished_at=NULL, duration_ms=NULL WHERE table_id=? AND split_no=?",
            (SplitStatus.PENDING, generation, str(table_id), split_no),
        )
        return bool(cur.rowcount > 0)

    # -- splits ---------------------------------------------------------------------------------

    def finish_split(self, split: SnapshotSplit, result: SplitResult, conn: Any) -> None:
        """Record a finished split's watermarks and rows, and count it for its table."""
        now = time.time()
        conn.execute(
            "UPDATE splits SET status=?, low_watermark=?, high_watermark=?, rows=?, "
            "backfill_events=?, started_at=?, finished_at=?, duration_ms=? WHERE split_id=?",
            (
                SplitStatus.FINISHED,
                _offset_json(result.low_watermark),
                _offset_json(result.high_watermark),
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
        self, table_id: TableId | str, statuses: Sequence[SplitStatus], conn: Any = None
    ) -> int:
        source = conn if conn is not None else self.db
        marks = ",".join("?" * len(statuses))
        row = source.execute(
            f"SELECT COUNT(*) FROM splits WHERE table_id=? AND status IN ({marks})",
            (str(table_id), *statuses),
        ).fetchone()
        return int(row[0])

    def high_watermarks(self, table_id: TableId | str, conn: Any = None) -> list[BinlogOffset]:
        """The high watermarks of a table's finished splits."""
        source = conn if conn is not None else self.db
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

    def split_rows(self, table_id: TableId | str) -> list[tuple[Any, ...]]:
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
            conn.executemany(
                "INSERT OR REPLACE INTO splits (split_id, table_id, split_no, generation, "
                "chunk_key, range_start, range_end, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.split_id,
                        str(table_id),
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
            conn.execute(
                "UPDATE tables SET splits_total=?, splits_done=0, updated_at=? WHERE table_id=?",
                (len(splits), time.time(), str(table_id)),
            )

    def has_splits(self, table_id: TableId) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM splits WHERE table_id=? LIMIT 1", (str(table_id),)
        ).fetchone()
        return row is not None

    def _split_from_row(self, r: Sequence[Any]) -> SnapshotSplit:
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
        args: list[Any] = [SplitStatus.PENDING]
        if tables is not None:
            if not tables:
                return []
            sql += f" AND table_id IN ({','.join('?' * len(tables))})"
            args.extend(str(t) for t in tables)
        sql += " ORDER BY table_id, split_no LIMIT ?"
        args.append(limit)
        return [self._split_from_row(r) for r in self.db.execute(sql, args).fetchall()]

    def assign_splits(self, splits: Sequence[SnapshotSplit], batch_no: int, conn: Any) -> None:
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
                _offset(r[8]),
                _offset(r[9]),
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

    _BATCH_COLUMNS = "SELECT batch_no, status, plan, staged_path FROM batches"

    @staticmethod
    def _batch(r: Sequence[Any]) -> BatchRow:
        return BatchRow(int(r[0]), BatchStatus(r[1]), BatchPlan.from_dict(json.loads(r[2])), r[3])

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

    def create_batch(
        self, batch_no: int, plan: dict[str, Any], splits: Sequence[SnapshotSplit]
    ) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO batches (batch_no, plan, status, created_at) VALUES (?, ?, ?, ?)",
                (batch_no, json.dumps(plan), BatchStatus.PLANNED, time.time()),
            )
            self.assign_splits(splits, batch_no, conn)

    def staged_batches(self) -> list[BatchRow]:
        return [
            self._batch(r)
            for r in self.db.execute(
                f"{self._BATCH_COLUMNS} WHERE status=? ORDER BY batch_no", (BatchStatus.STAGED,)
            ).fetchall()
        ]

    def mark_staged(self, batch_no: int, path: str, records: int) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE batches SET status=?, staged_path=?, records=?, staged_at=? "
                "WHERE batch_no=?",
                (BatchStatus.STAGED, path, records, time.time(), batch_no),
            )

    def mark_applied(self, batch_no: int, conn: Any) -> None:
        """Inside the commit transaction that records the batch's splits and offsets."""
        conn.execute(
            "UPDATE batches SET status=?, applied_at=? WHERE batch_no=?",
            (BatchStatus.APPLIED, time.time(), batch_no),
        )

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

    # -- offsets --------------------------------------------------------------------------------

    def committed_offset(self) -> BinlogOffset | None:
        row = self.db.execute("SELECT offset FROM offsets WHERE name='committed'").fetchone()
        return _offset(row[0]) if row else None

    def set_offset(self, name: str, offset: BinlogOffset, conn: Any) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO offsets (name, offset, updated_at) VALUES (?, ?, ?)",
            (name, _offset_json(offset), time.time()),
        )

    # -- runs, lag, events ----------------------------------------------------------------------

    def start_run(self, pid: int, host: str, master: str) -> int:
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO job_runs (pid, host, master, started_at, heartbeat_at, status) "
                "VALUES (?, ?, ?, ?, ?, 'running')",
                (pid, host, master, time.time(), time.time()),
            )
            return int(cur.lastrowid or 0)

    def update_run(self, run_id: int, **fields: Any) -> None:
        if not fields:
            return
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.transaction() as conn:
            conn.execute(f"UPDATE job_runs SET {cols} WHERE run_id=?", (*fields.values(), run_id))

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM job_runs ORDER BY run_id DESC LIMIT ?", (limit,)))

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
                    _offset_json(committed),
                    _offset_json(head),
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

    def lag_samples(self, limit: int = 120) -> list[dict[str, Any]]:
        rows = list(self.db.query("SELECT * FROM lag_samples ORDER BY ts DESC LIMIT ?", (limit,)))
        rows.reverse()
        return rows

    def log_event(
        self,
        kind: str,
        message: str,
        *,
        level: str = "info",
        table_id: TableId | str | None = None,
        conn: Any = None,
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

    def events(self, limit: int = 100) -> list[dict[str, Any]]:
        rows = list(self.db.query("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,)))
        rows.reverse()
        return rows

    # -- commands -------------------------------------------------------------------------------

    def queue_command(
        self,
        kind: str,
        target: str | None = None,
        args: dict[str, Any] | None = None,
        issued_by: str | None = None,
    ) -> int:
        """Queue a command for the job; return its id. Validation happens when it is applied."""
        if kind not in set(CommandKind):
            expected = ", ".join(CommandKind)
            raise ValueError(f"unknown command kind {kind!r}; expected one of {expected}")
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO commands (kind, target, args, issued_by, issued_at, status) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    target,
                    json.dumps(args or {}),
                    issued_by,
                    time.time(),
                    CommandStatus.PENDING,
                ),
            )
            return int(cur.lastrowid or 0)

    _COMMAND_COLUMNS = (
        "id, kind, target, args, issued_by, issued_at, status, reason, applied_at FROM commands"
    )

    @staticmethod
    def _command(r: Sequence[Any]) -> Command:
        return Command(
            int(r[0]), r[1], r[2], json.loads(r[3] or "{}"), r[4], r[5], r[6], r[7], r[8]
        )

    def command(self, command_id: int) -> Command | None:
        row = self.db.execute(
            f"SELECT {self._COMMAND_COLUMNS} WHERE id=?", (command_id,)
        ).fetchone()
        return self._command(row) if row else None

    def pending_commands(self, kinds: Sequence[str] | None = None) -> list[Command]:
        """Pending commands oldest first, optionally only some kinds."""
        rows = self.db.execute(
            f"SELECT {self._COMMAND_COLUMNS} WHERE status=? ORDER BY id", (CommandStatus.PENDING,)
        ).fetchall()
        found = [self._command(r) for r in rows]
        return [c for c in found if kinds is None or c.kind in kinds]

    def commands(self, limit: int = 50) -> list[Command]:
        """The most recent commands, oldest first."""
        rows = self.db.execute(
            f"SELECT {self._COMMAND_COLUMNS} ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [self._command(r) for r in reversed(rows)]

    def finish_command(self, command_id: int, status: str, reason: str, conn: Any = None) -> None:
        """Acknowledge a command: ``applied`` (``reason`` = outcome) or ``failed`` (why)."""
        sql = "UPDATE commands SET status=?, reason=?, applied_at=? WHERE id=? AND status=?"
        args = (status, reason, time.time(), command_id, CommandStatus.PENDING)
        if conn is not None:
            conn.execute(sql, args)
            return
        with self.transaction() as c:
            c.execute(sql, args)

    def set_pipeline_paused(self, paused: bool, conn: Any) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            (PIPELINE_PAUSED_META, "1" if paused else "0"),
        )

    def pipeline_paused(self) -> bool:
        return self.get_meta(PIPELINE_PAUSED_META) == "1"
