"""Each chunk's last verification: the ``verifications`` part of the state.

``cdc-console verify`` (and the job's scheduled verification) records one row per chunk it
compared, replacing the chunk's previous one; the console and ``status`` read them to say
"verified 2 h ago: equal" and to show which chunks differ. Verifications are journalled too, so
the Events screen tells what was found and repaired.
"""

from __future__ import annotations

import json

from cdc_console.core.lifecycle import Verdict
from cdc_console.core.schema import TableId
from cdc_console.core.untyped import SqliteRow
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import VerificationRow, offset_json, offset_of

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
