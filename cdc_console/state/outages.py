"""Source outages as the job lives through them: the ``outages`` part of the state.

The reconnect loops report every wait (``waiting``) and the end (``recovered``); a job that was
killed mid-outage leaves an open row, which the next start closes (``close_outages``). The start
and the end of each outage also go to the events journal, so the Events screen tells the story
after the fact.
"""

from __future__ import annotations

import time

from cdc_console.core.outage import Outage
from cdc_console.state.database import StateDatabase
from cdc_console.units import span

OUTAGES_KEPT = 500

_COLUMNS = "component, since, attempts, next_try_at, last_error, ended_at"


class OutagesRepo(StateDatabase):
    """The ``outages`` part; also an ``OutageObserver`` for ``mysql.retry.call_with_retry``."""

    def waiting(self, outage: Outage) -> None:
        with self.transaction() as conn:
            found = conn.execute(
                "SELECT id FROM outages WHERE ended_at IS NULL AND component=?",
                (outage.component,),
            ).fetchone()
            if found is not None:
                conn.execute(
                    "UPDATE outages SET attempts=?, next_try_at=?, last_error=? WHERE id=?",
                    (outage.attempts, outage.next_try_at, outage.last_error, found[0]),
                )
                return
            conn.execute(
                f"INSERT INTO outages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL)",
                (
                    outage.component,
                    outage.since,
                    outage.attempts,
                    outage.next_try_at,
                    outage.last_error,
                ),
            )
            conn.execute(
                "DELETE FROM outages WHERE id <= (SELECT MAX(id) FROM outages) - ?",
                (OUTAGES_KEPT,),
            )
            conn.execute(
                "INSERT INTO events (ts, level, kind, table_id, message) VALUES (?, ?, ?, ?, ?)",
                (
                    time.time(),
                    "warning",
                    "source",
                    None,
                    f"source unreachable ({outage.component}): {outage.last_error}; "
                    "reconnecting with backoff",
                ),
            )

    def recovered(self, outage: Outage) -> None:
        ended = outage.ended_at if outage.ended_at is not None else time.time()
        with self.transaction() as conn:
            found = conn.execute(
                "SELECT id, since, attempts FROM outages WHERE ended_at IS NULL AND component=?",
                (outage.component,),
            ).fetchone()
            if found is None:
                return
            attempts = max(int(found[2]), outage.attempts)
            conn.execute(
                "UPDATE outages SET ended_at=?, attempts=? WHERE id=?", (ended, attempts, found[0])
            )
            conn.execute(
                "INSERT INTO events (ts, level, kind, table_id, message) VALUES (?, ?, ?, ?, ?)",
                (
                    ended,
                    "info",
                    "source",
                    None,
                    f"source reachable again ({outage.component}) after "
                    f"{span(ended - found[1])}, {attempts} attempt(s)",
                ),
            )

    def close_outages(self, reason: str) -> None:
        """End every open outage (the job that was waiting is gone)."""
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT id, component FROM outages WHERE ended_at IS NULL"
            ).fetchall()
            now = time.time()
            for outage_id, component in rows:
                conn.execute("UPDATE outages SET ended_at=? WHERE id=?", (now, outage_id))
                conn.execute(
                    "INSERT INTO events (ts, level, kind, table_id, message) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (now, "info", "source", None, f"outage of {component} closed: {reason}"),
                )

    def reconnect_attempts(self) -> int:
        """Every failed attempt to reach the source the job has recorded (a counter; the
        oldest outages' are forgotten past ``OUTAGES_KEPT``)."""
        row = self.db.execute("SELECT COALESCE(SUM(attempts), 0) FROM outages").fetchone()
        return int(row[0])

    def open_outage(self) -> Outage | None:
        """The outage under way, if any: the longest one when several components wait."""
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM outages WHERE ended_at IS NULL "
            "ORDER BY since ASC, attempts DESC LIMIT 1"
        ).fetchone()
        return Outage(*row) if row is not None else None

    def outages(self, limit: int = 20) -> list[Outage]:
        """The latest outages, newest first."""
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM outages ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [Outage(*r) for r in rows]
