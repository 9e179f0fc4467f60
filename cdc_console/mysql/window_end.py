"""Where a bounded binlog window ends: the first transaction to start past a byte budget.

A window runs from the tables' resume position to the server's head. After a long stop (an
outage, a paused job, a first start behind a busy server) that is hours of binlog in one batch,
and one batch is held whole in memory twice: in the driver JVM, which collects the batch for
``foreachBatch``, and in the driver Python, which folds it (a 39 MB window of 290k changes
peaked at 0.9 GB in each). ``[pipeline] max_window_bytes`` bounds it: the window ends at the
first transaction that starts at least that many bytes after its start, and the next batch goes
on from there.

The cut is found server-side with ``SHOW BINLOG EVENTS`` (pages of event headers, no row
decoding), and must be a transaction start (a ``Gtid`` or ``Anonymous_Gtid`` event: MariaDB
and MySQL 5.7+ write one before every event group) so that no transaction is split between two
batches. Positions carry their GTID state for failover; the cut's is the window start's plus the
GTIDs passed on the way (MariaDB: the last per domain; MySQL: a set), or, where the start has
none, what the server says at that position (``BINLOG_GTID_POS``, MariaDB only).
"""

from __future__ import annotations

import re

import pymysql

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import DriverRow
from cdc_console.mysql.position import binary_logs, gtid_of

#: events that start an event group (a transaction, or one DDL)
_GROUP_STARTS = frozenset({"Gtid", "Anonymous_Gtid", "Gtid_log_event"})
_MARIADB_GTID = re.compile(r"GTID (\d+)-(\d+)-(\d+)")
_MYSQL_GTID = re.compile(r"GTID_NEXT\s*=\s*'([0-9A-Fa-f-]{36}):(\d+)'")
#: event headers read per ``SHOW BINLOG EVENTS`` round trip
PAGE_EVENTS = 4000


def bounded_window_end(
    conn: pymysql.connections.Connection,
    start: BinlogOffset,
    head: BinlogOffset,
    max_bytes: int,
) -> BinlogOffset:
    """``head``, or the start of the first transaction at least ``max_bytes`` after ``start``
    when that comes before ``head``; ``start`` must be an event boundary."""
    if head <= start or (head.file == start.file and head.pos - start.pos < max_bytes):
        return head
    files = [name for name, _size in binary_logs(conn)]
    if start.file not in files:
        return head  # purged or reset: the window's reader reports it with the fix
    gtid = start.gtid
    passed = 0  # bytes of the files left behind
    file, pos, file_start = start.file, start.pos, start.pos
    while True:
        rows = _events(conn, file, pos)
        for row in rows:
            event_pos, kind, info = int(row[1]), str(row[2]), str(row[5] or "")
            if file == head.file and event_pos >= head.pos:
                return head
            if kind not in _GROUP_STARTS:
                continue
            if passed + event_pos - file_start >= max_bytes:
                cut = BinlogOffset(file, event_pos, gtid=gtid)
                return cut if gtid is not None else gtid_of(conn, cut)
            if gtid is not None:
                gtid = add_gtid(gtid, info)
        if rows:
            pos = int(rows[-1][4])
        if len(rows) == PAGE_EVENTS:
            continue
        if file == head.file or files.index(file) + 1 >= len(files):
            return head
        passed += pos - file_start
        file = files[files.index(file) + 1]
        pos = file_start = 4


def _events(conn: pymysql.connections.Connection, file: str, pos: int) -> list[DriverRow]:
    with conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {PAGE_EVENTS}", (file,))
        return list(cur.fetchall())


def add_gtid(state: str, info: str) -> str:
    """The GTID state ``state`` after the event group whose GTID event says ``info``.

    MariaDB's state holds the last GTID per replication domain (``0-1-26,7-1-3``); MySQL's is
    a GTID set (``uuid:1-5:7``). An anonymous group (GTIDs off) leaves the state alone.
    """
    found = _MARIADB_GTID.search(info)
    if found is not None:
        domain = found.group(1)
        entries = [e for e in _entries(state) if e.split("-", 1)[0] != domain]
        return ",".join([*entries, found.group(0).removeprefix("GTID ")])
    found = _MYSQL_GTID.search(info)
    if found is not None:
        return _add_to_set(state, found.group(1).lower(), int(found.group(2)))
    return state


def _entries(state: str) -> list[str]:
    return [e.strip() for e in state.replace("\n", "").split(",") if e.strip()]


def _add_to_set(state: str, uuid: str, number: int) -> str:
    sets: dict[str, list[tuple[int, int]]] = {}
    for entry in _entries(state):
        name, *ranges = entry.split(":")
        intervals = sets.setdefault(name.lower(), [])
        for text in ranges:
            first, _, last = text.partition("-")
            intervals.append((int(first), int(last or first)))
    merged: list[tuple[int, int]] = []
    for low, high in sorted([*sets.get(uuid, []), (number, number)]):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    sets[uuid] = merged
    return ",".join(
        name + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in spans)
        for name, spans in sorted(sets.items())
    )
