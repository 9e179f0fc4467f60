"""How busy the source is, by the figures ``[source] max_load`` names.

The snapshot, a re-dump and ``verify`` read whole tables; on a source already at its limit that
read is what tips it over. gh-ost and pt-table-checksum answer this with a load check between
chunks (``--max-load Threads_running=25``), and so does cdc-console: a limit names a global
status variable (``SHOW GLOBAL STATUS``: ``Threads_running``, ``Threads_connected``, ...) or
``replica_lag``, the seconds a source that is itself a replica trails its primary
(``Seconds_Behind_Master``; ``Seconds_Behind_Source`` on MySQL 8.0.22+).

A figure the server does not report is left out rather than guessed: ``check`` names such a
limit before the job starts, and a replica whose replication is stopped reports no lag (NULL),
which reads as "no figure", not as "no lag". Reading the lag takes a privilege the pipeline
needs for nothing else (``SLAVE MONITOR`` on MariaDB 10.5+, ``REPLICATION CLIENT`` on MySQL);
without it the lag is no figure either, and ``check`` names the grant.
"""

from __future__ import annotations

from collections.abc import Iterable

import pymysql

from cdc_console.core.untyped import Connection

#: the limit that reads a replica's lag instead of a status variable
REPLICA_LAG = "replica_lag"
#: "you need (at least one of) the ... privilege(s)", "access denied"
ACCESS_DENIED = frozenset({1227, 1045, 1142})
_LAG_COLUMNS = ("Seconds_Behind_Source", "Seconds_Behind_Master")


def read_load(conn: Connection, names: Iterable[str]) -> dict[str, float]:
    """The server's current value of each of ``names`` that it reports as a number, keyed by the
    name as given (status variable names match case-insensitively, as the server's do)."""
    wanted = list(dict.fromkeys(names))
    found: dict[str, float] = {}
    status = [n for n in wanted if n.lower() != REPLICA_LAG]
    if status:
        marks = ", ".join(["%s"] * len(status))
        with conn.cursor() as cur:
            cur.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({marks})", status)
            rows = cur.fetchall()
        by_lower = {str(name).lower(): value for name, value in rows}
        for name in status:
            number = _number(by_lower.get(name.lower()))
            if number is not None:
                found[name] = number
    lag_names = [n for n in wanted if n.lower() == REPLICA_LAG]
    if lag_names:
        try:
            lag = replica_lag(conn)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] not in ACCESS_DENIED:
                raise
            lag = None
        if lag is not None:
            found.update(dict.fromkeys(lag_names, lag))
    return found


def replica_lag(conn: Connection) -> float | None:
    """Seconds the server trails its primary, or None when it replicates from none (or its
    replication is stopped, when the server itself does not know)."""
    for statement in ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS"):
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                row = cur.fetchone()
                columns = [d[0] for d in cur.description or ()]
        except pymysql.err.ProgrammingError:
            continue  # a flavour without this spelling: try the other
        if row is None:
            return None
        values = dict(zip(columns, row, strict=False))
        for column in _LAG_COLUMNS:
            if column in values:
                return _number(values[column])
        return None
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    try:
        return float(str(value)) if value is not None else None
    except ValueError:
        return None
