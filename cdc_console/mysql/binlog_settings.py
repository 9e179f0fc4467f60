"""The server's binlog settings every change must be logged under, watched while the job runs.

``check`` verifies them at start; a DBA may change one later (``SET GLOBAL``), and from then on
new sessions log their changes in a form the reader cannot turn into rows: it notices each such
change and holds its table (``mysql.binlog``), and the job probes these settings about every
half minute so ``status``, the console and an alert say why before the tables do.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_console.core.untyped import Connection


@dataclass(frozen=True)
class WatchedSetting:
    name: str
    #: the value every change is read under ("" for an empty value); None: any value is fine
    expected: str | None
    #: what the other values do to the pipeline
    effect: str


WATCHED = (
    WatchedSetting(
        "binlog_format",
        "ROW",
        "new sessions log DML as statements: each table they write is read again online",
    ),
    WatchedSetting(
        "binlog_row_image",
        "FULL",
        "new sessions log rows without all columns: each table they write is read again online",
    ),
    WatchedSetting(
        "binlog_row_metadata",
        "FULL",
        "row events carry no column names: their tables park",
    ),
    WatchedSetting(
        "binlog_transaction_compression",
        "OFF",
        "MySQL compresses transactions (not decoded): their tables park",
    ),
    WatchedSetting(
        "binlog_row_value_options",
        "",
        "MySQL logs partial JSON updates (not decoded): their tables park",
    ),
    WatchedSetting("log_bin_compress", None, "MariaDB compresses events (decoded)"),
)


def read_binlog_settings(conn: Connection) -> dict[str, str]:
    """The watched settings the server has (a setting one flavour lacks is left out)."""
    names = [s.name for s in WATCHED]
    marks = ", ".join(["%s"] * len(names))
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", names)
        rows = cur.fetchall()
    found: dict[str, str] = {}
    for name, value in rows:
        text = (
            value.decode() if isinstance(value, bytes) else str(value if value is not None else "")
        )
        found[str(name).lower()] = text
    return found


def setting_ok(setting: WatchedSetting, value: str) -> bool:
    return setting.expected is None or value.upper() == setting.expected.upper()
