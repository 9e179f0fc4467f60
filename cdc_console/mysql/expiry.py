"""How long the server keeps a closed binlog file: the setting behind every purge deadline.

Read by the console's server probe, ``status`` and the job's metrics, so all three count the
same headroom (``figures.purge_headroom``) from the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from cdc_console.core.untyped import Connection

EXPIRY_VARIABLES = (
    "binlog_expire_logs_seconds",
    "expire_logs_days",
    "binlog_expire_logs_auto_purge",
)


def expiry(variables: Mapping[str, str]) -> tuple[float | None, str]:
    """How long the server keeps a binlog file after it is closed, and the setting that says so.

    MySQL 8 has ``binlog_expire_logs_seconds`` (``expire_logs_days`` until 8.4 as a fallback
    when seconds is 0, and ``binlog_expire_logs_auto_purge`` to switch expiry off); MariaDB has
    ``expire_logs_days`` (fractional) and, from 10.6, ``binlog_expire_logs_seconds`` as its
    alias. Whichever the server has decides; 0 everywhere means binlogs never expire.
    """
    if str(variables.get("binlog_expire_logs_auto_purge", "ON")).upper() == "OFF":
        return None, "binlog_expire_logs_auto_purge=OFF (never expires)"
    seconds = _number(variables.get("binlog_expire_logs_seconds"))
    if seconds:
        return seconds, f"binlog_expire_logs_seconds={_plain(seconds)}"
    days = _number(variables.get("expire_logs_days"))
    if days:
        return days * 86400.0, f"expire_logs_days={_plain(days)}"
    present = [name for name in EXPIRY_VARIABLES[:2] if name in variables]
    if not present:
        return None, "no expiry variable on this server"
    return None, f"{present[0]}=0 (never expires)"


def binlog_expiry(conn: Connection) -> tuple[float | None, str]:
    """``expiry`` of the server behind ``conn`` (a pymysql connection)."""
    names = ", ".join(f"'{name}'" for name in EXPIRY_VARIABLES)
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        return expiry({str(r[0]): str(r[1]) for r in cur.fetchall()})


def _plain(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None
