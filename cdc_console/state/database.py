"""The state database itself: one SQLite file in WAL mode, its transactions and migrations.

The job writes, the CLI and the console read and queue commands, each from its own process, so
the database runs in WAL mode with a generous busy timeout. The parts of the state (tables,
splits, batches and offsets, commands, the journal) are repositories over this one connection,
combined into ``StateStore``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

import sqlite_utils

from cdc_console.errors import CdcError
from cdc_console.state.migrations import MIGRATIONS


class StateVersionError(CdcError):
    """The state database's schema is not the one this release reads and writes."""


def statements(script: str) -> Iterator[str]:
    """The SQL statements of ``script``, each complete by SQLite's own reckoning."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        raise ValueError(f"a migration ends in an incomplete statement: {buffer.strip()[:80]!r}")


class StateDatabase:
    """One state database; safe to share between threads of one process."""

    def __init__(self, path: str | Path, *, migrate: bool = True, read_only: bool = False) -> None:
        """``migrate``: bring the schema up to this release's (only the job does: a newer CLI
        must not change the database under an older running job); otherwise a schema other
        than this release's is refused with what to do. ``read_only``: a connection that cannot
        write at all (``status``)."""
        self.path = Path(path)
        if read_only:
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                timeout=30.0,
                check_same_thread=False,
                isolation_level=None,
            )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.RLock()
        if migrate and not read_only:
            self._migrate()
        else:
            self._check_version()

    @classmethod
    def open_existing(cls, path: str | Path, *, read_only: bool = False) -> Self:
        """Open a pipeline's state without migrating it; raise ``FileNotFoundError`` rather
        than create an empty one, ``StateVersionError`` when its schema is not this release's."""
        if not Path(path).exists():
            raise FileNotFoundError(str(path))
        return cls(path, migrate=False, read_only=read_only)

    def _check_version(self) -> None:
        ours = len(MIGRATIONS)
        try:
            found = self.schema_version
        except sqlite3.OperationalError:
            found = 0  # no meta table: not a state database this release wrote
        if found == ours:
            return
        self.close()
        if found > ours:
            raise StateVersionError(
                f"the state at {self.path} has schema version {found}, newer than this "
                f"cdc-console's {ours}: a newer release runs (or ran) this pipeline",
                "use the release the job runs (cdc-console --version there) to read or control it",
            )
        raise StateVersionError(
            f"the state at {self.path} has schema version {found}, older than this "
            f"cdc-console's {ours}: the job that wrote it is an older release",
            "restart the job with this release ('cdc-console run' migrates the state), or use "
            "the older release to read it; the running job keeps working either way",
        )

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
        """Apply the missing migrations in one transaction. Scripts are cut into statements by
        SQLite's own ``complete_statement`` (a trigger body or a literal may hold a ``;``)."""
        with self.transaction() as conn:
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            version = 0
            if has_meta:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(row[0]) if row else 0
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in statements(script):
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
