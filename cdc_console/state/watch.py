"""What the job has seen that a start-up check cannot: the ``held_changes`` and
``source_settings`` parts of the state, and whether chunk reads yield to a busy source.

A writer session may log its changes as statements or without full row images, and a DBA may
change the server's binlog settings, long after ``check`` passed. The binlog reader holds a
table at each such change (it is read again online, or parked); this part counts them per table
and cause, with the last one's position and text, and keeps the server's binlog settings as
the job last probed them, so ``status``, the metrics and the console can say so. The same goes
for the load check (``source.throttle``): while the source is busier than ``[source] max_load``
allows, the reason is kept here.
"""

from __future__ import annotations

import json
import sqlite3
import time

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import (
    HeldChanges,
    SourceSetting,
    Throttled,
    offset_json,
    offset_of,
)

THROTTLED_META = "reads_throttled"


class WatchRepo(StateDatabase):
    """The ``held_changes`` and ``source_settings`` parts, and the read throttle's reason."""

    def record_throttled(self, reason: str | None) -> bool:
        """Chunk reads yield to the source now for ``reason`` (None: they go on); True when that
        is news (throttled from not, or back). The first moment of a spell is kept, so the
        console can say since when while the figure in ``reason`` moves."""
        was = self.throttled()
        if reason is None:
            if was is None:
                return False
            with self.transaction() as conn:
                conn.execute("DELETE FROM meta WHERE key = ?", (THROTTLED_META,))
            return True
        since = was.since if was is not None else time.time()
        self.set_meta(THROTTLED_META, json.dumps({"reason": reason, "since": since}))
        return was is None

    def throttled(self) -> Throttled | None:
        text = self.get_meta(THROTTLED_META)
        if text is None:
            return None
        data = json.loads(text)
        return Throttled(str(data["reason"]), float(data["since"]))

    def count_held_change(
        self,
        table_id: TableId | str,
        cause: str,
        position: BinlogOffset,
        what: str,
        conn: sqlite3.Connection,
    ) -> None:
        """One more change of ``table_id`` the binlog did not carry as full rows, in ``conn``'s
        transaction (the one that holds or parks the table)."""
        conn.execute(
            "INSERT INTO held_changes (table_id, cause, count, last_at, last_position, last_what) "
            "VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (table_id, cause) DO UPDATE SET "
            "count = count + 1, last_at = excluded.last_at, "
            "last_position = excluded.last_position, last_what = excluded.last_what",
            (str(table_id), cause, time.time(), offset_json(position), what[:500]),
        )

    def held_changes(self) -> list[HeldChanges]:
        rows = self.db.execute(
            "SELECT table_id, cause, count, last_at, last_position, last_what FROM held_changes "
            "ORDER BY table_id, cause"
        ).fetchall()
        return [
            HeldChanges(
                TableId.parse(r[0]), str(r[1]), int(r[2]), float(r[3]), offset_of(r[4]), str(r[5])
            )
            for r in rows
        ]

    def record_source_setting(self, name: str, value: str, expected: str, ok: bool) -> bool:
        """The server's value of one binlog setting as probed now; True when it changed since
        the last probe (or is seen for the first time)."""
        now = time.time()
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT value FROM source_settings WHERE name = ?", (name,)
            ).fetchone()
            changed = row is None or str(row[0]) != value
            conn.execute(
                "INSERT INTO source_settings (name, value, expected, ok, checked_at, changed_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "value = excluded.value, expected = excluded.expected, ok = excluded.ok, "
                "checked_at = excluded.checked_at, "
                "changed_at = CASE WHEN source_settings.value = excluded.value "
                "THEN source_settings.changed_at ELSE excluded.changed_at END",
                (name, value, expected, int(ok), now, now),
            )
        return changed

    def source_settings(self) -> list[SourceSetting]:
        rows = self.db.execute(
            "SELECT name, value, expected, ok, checked_at, changed_at FROM source_settings "
            "ORDER BY name"
        ).fetchall()
        return [
            SourceSetting(str(r[0]), str(r[1]), str(r[2]), bool(r[3]), float(r[4]), float(r[5]))
            for r in rows
        ]
