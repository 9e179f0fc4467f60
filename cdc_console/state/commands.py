"""The operator's command queue: queued by the CLI and the console, applied by the job."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence

from cdc_console.core.lifecycle import (
    CommandKind,
    CommandStatus,
)
from cdc_console.core.untyped import SqliteRow
from cdc_console.core.values import JSONValue
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import (
    Command,
)

PIPELINE_PAUSED_META = "pipeline_paused"
DRAINING_META = "draining"


class CommandsRepo(StateDatabase):
    """The ``commands`` part, and the pipeline-wide pause flag the commands set."""

    def queue_command(
        self,
        kind: str,
        target: str | None = None,
        args: Mapping[str, JSONValue] | None = None,
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
    def _command(r: SqliteRow) -> Command:
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

    def finish_command(
        self, command_id: int, status: str, reason: str, conn: sqlite3.Connection | None = None
    ) -> None:
        """Acknowledge a command: ``applied`` (``reason`` = outcome) or ``failed`` (why)."""
        sql = "UPDATE commands SET status=?, reason=?, applied_at=? WHERE id=? AND status=?"
        args = (status, reason, time.time(), command_id, CommandStatus.PENDING)
        if conn is not None:
            conn.execute(sql, args)
            return
        with self.transaction() as c:
            c.execute(sql, args)

    def set_pipeline_paused(self, paused: bool, conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            (PIPELINE_PAUSED_META, "1" if paused else "0"),
        )

    def set_draining(self, draining: bool) -> None:
        """A stopping job's flag: plan no new batch (the one in flight still completes)."""
        self.set_meta(DRAINING_META, "1" if draining else "0")

    def draining(self) -> bool:
        return self.get_meta(DRAINING_META) == "1"

    def pipeline_paused(self) -> bool:
        return self.get_meta(PIPELINE_PAUSED_META) == "1"
