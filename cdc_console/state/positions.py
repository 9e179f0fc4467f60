"""Every binlog position the state holds, and rewriting them all at once (a failover).

Positions live in four places: each table's stream and pause positions, the committed offset,
and each finished chunk's watermarks. After the source moved to another server (a promoted
replica), each is re-mapped to the new server's binlog by its GTID (``source/failover.py``), in
one transaction with the new server's identity, so a crash mid-way leaves the old, consistent
state rather than a mix of two servers' coordinates.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.state.database import StateDatabase
from cdc_console.state.rows import offset_json, offset_of

SOURCE_IDENTITY_META = "source_identity"

#: (table, key column, position columns) of every stored position a resume may read from
_HOLDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("tables", "table_id", ("stream_from", "paused_at")),
    ("offsets", "name", ("offset",)),
    ("splits", "split_id", ("low_watermark", "high_watermark")),
)


_NOT_PARKED = {
    "tables": f" AND state <> '{Lifecycle.NEEDS_REDUMP}'",
    "offsets": "",
    "splits": "",
}


class PositionsRepo(StateDatabase):
    """Positions across the parts of the state, and the server they belong to."""

    def source_identity(self) -> str | None:
        """The server the stored positions refer to (``mysql.gtid.server_identity``)."""
        return self.get_meta(SOURCE_IDENTITY_META)

    def set_source_identity(self, identity: str) -> None:
        self.set_meta(SOURCE_IDENTITY_META, identity)

    def stored_positions(self) -> list[BinlogOffset]:
        """Every stored position a resume may read from; a parked table's are not among them
        (nothing reads it before its re-dump, which sets new ones)."""
        found: list[BinlogOffset] = []
        for table, _key, columns in _HOLDERS:
            for column in columns:
                rows = self.db.execute(
                    f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL{_NOT_PARKED[table]}"
                ).fetchall()
                found += [o for (text,) in rows if (o := offset_of(text)) is not None]
        return found

    def rewrite_positions(
        self, translate: Callable[[BinlogOffset], BinlogOffset], identity: str
    ) -> int:
        """Replace every stored position by ``translate(position)`` and record ``identity`` as
        the server they now refer to, in one transaction; the number of positions rewritten."""
        count = 0
        with self.transaction() as conn:
            # A parked table's positions are only a lower bound for a partial re-dump; after a
            # move to another server its re-dump reads everything again, so they are dropped.
            conn.execute(
                "UPDATE tables SET stream_from=NULL, paused_at=NULL WHERE state=?",
                (Lifecycle.NEEDS_REDUMP,),
            )
            for table, key, columns in _HOLDERS:
                for column in columns:
                    rows = conn.execute(
                        f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL"
                    ).fetchall()
                    for row_key, text in rows:
                        old = offset_of(text)
                        if old is None:
                            continue
                        new = offset_json(translate(old))
                        conn.execute(f"UPDATE {table} SET {column}=? WHERE {key}=?", (new, row_key))
                        count += 1
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (SOURCE_IDENTITY_META, identity),
            )
        return count
