"""The console's own look at the source server: binlog head, binlog files, expiry setting.

The console asks the server itself rather than trusting the job's last lag sample, so the head
and the purge risk are right while the job is stuck or dead. A probe never raises: an unreachable
server is a status to display ("why") and the next probe retries.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cdc_console.config import SourceConfig
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import Connection
from cdc_console.errors import CdcError, redact
from cdc_console.mysql.expiry import binlog_expiry

EXPIRY_REFRESH_SECONDS = 30.0


@dataclass(frozen=True)
class ServerStatus:
    """One probe's answer; ``error`` set means the server could not be asked."""

    probed_at: float
    head: BinlogOffset | None = None
    logs: tuple[tuple[str, int], ...] = ()
    expire_seconds: float | None = None
    expire_setting: str | None = None
    version: str | None = None
    error: str | None = None

    @property
    def reachable(self) -> bool:
        return self.error is None


class ServerProbe(Protocol):
    """Anything that can tell the server's binlog state; tests inject canned ones."""

    def probe(self) -> ServerStatus: ...

    def close(self) -> None: ...


@dataclass
class MySQLServerProbe:
    """Probes over one kept connection, reopened after any failure.

    The connect timeout is short on purpose: a console waiting ten seconds to learn that the
    server is down has told nobody anything for ten seconds.
    """

    source: SourceConfig
    timeout: float = 3.0
    clock: Callable[[], float] = time.time
    _conn: Connection | None = None
    _expiry: tuple[float | None, str] | None = None
    _expiry_at: float = 0.0
    _version: str | None = None
    _errors: int = field(default=0)

    def probe(self) -> ServerStatus:
        from cdc_console.mysql.position import binary_logs, current_position

        now = self.clock()
        try:
            conn = self._connection()
            head = current_position(conn, with_gtid=True)
            logs = tuple(binary_logs(conn))
            if self._expiry is None or now - self._expiry_at > EXPIRY_REFRESH_SECONDS:
                self._expiry = binlog_expiry(conn)
                self._expiry_at = now
        except Exception as exc:
            self.close()
            return ServerStatus(probed_at=now, error=_reason(exc))
        seconds, setting = self._expiry
        return ServerStatus(
            probed_at=now,
            head=head,
            logs=logs,
            expire_seconds=seconds,
            expire_setting=setting,
            version=self._version,
        )

    def _connection(self) -> Connection:
        if self._conn is not None and self._conn.open:
            return self._conn
        from cdc_console.mysql.connection import connect

        self._conn = connect(
            self.source,
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            write_timeout=self.timeout,
        )
        with self._conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
        self._version = str(row[0]) if row else None
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, CdcError):
        text = f"{exc.message} (fix: {exc.hint})" if exc.hint else exc.message
    else:
        text = str(exc)
    text = redact(text).strip() or type(exc).__name__
    return " ".join(text.split())
