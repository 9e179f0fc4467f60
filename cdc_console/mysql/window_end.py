"""Where binlog windows end and their parts start: at transaction starts found server-side.

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

A large window is read by several tasks in parts (``transaction_starts``), each from a
transaction start of its own, so a part needs nothing of the bytes before it: its row events'
TABLE_MAPs are in its own transactions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pymysql

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.untyped import DriverRow
from cdc_console.mysql.position import binary_logs, gtid_of

#: events that start an event group (a transaction, or one DDL)
_GROUP_STARTS = frozenset({"Gtid", "Anonymous_Gtid", "Gtid_log_event"})
_MARIADB_GTID = re.compile(r"GTID (\d+)-(\d+)-(\d+)")
_MARIADB_ENTRY = re.compile(r"\d+-\d+-\d+")
_MYSQL_GTID = re.compile(r"GTID_NEXT\s*=\s*'([0-9A-Fa-f-]{36}):(\d+)'")
#: event headers read per ``SHOW BINLOG EVENTS`` round trip
PAGE_EVENTS = 4000
#: event headers read per round trip while looking for the transaction start after a probe
STEP_EVENTS = 256
#: probes of ``LIMIT skip, 1`` to reach one cut's byte position
PROBES = 4


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
    logs = binary_logs(conn)
    files = [name for name, _size in logs]
    if start.file not in files:
        return head  # purged or reset: the window's reader reports it with the fix
    target = start.pos + max_bytes
    size = dict(logs)[start.file]
    if _server_knows_gtids(start) and target < (head.pos if head.file == start.file else size):
        limit = head.pos if head.file == start.file else size
        found = _first_group_start_from(conn, start.file, start.pos, target, limit)
        if found is not None:
            cut = gtid_of(conn, BinlogOffset(start.file, found))
            if cut.gtid is not None or start.gtid is None:
                return cut
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


def _server_knows_gtids(start: BinlogOffset) -> bool:
    """Whether the GTID state at a cut can be asked of the server (``BINLOG_GTID_POS``) instead
    of being added up from the start's: a MariaDB state (``domain-server-seq`` per domain), or
    none at all. A MySQL GTID set is added up from every GTID passed (a full listing)."""
    if start.gtid is None:
        return True
    entries = _entries(start.gtid)
    return bool(entries) and all(_MARIADB_ENTRY.fullmatch(e) for e in entries)


def _first_group_start_from(
    conn: pymysql.connections.Connection, file: str, base: int, target: int, limit: int
) -> int | None:
    """The first transaction start at or after byte ``target`` of ``file`` and before
    ``limit``, or None; ``base`` is an event boundary before ``target``.

    Listing every header from ``base`` (``bounded_window_end``'s full walk) costs 0.6 s of
    Python per 16 MiB window, on the planner's path before every bounded batch. Instead the
    events up to about ``target`` are skipped server-side (``LIMIT skip, 1`` probes aimed a
    little short, each re-estimating the bytes per event), and only the headers from the last
    probe that did not pass ``target`` are read.
    """
    sample = _events(conn, file, base, count=STEP_EVENTS)
    if not sample:
        return None
    per_event = max(1.0, (int(sample[-1][4]) - base) / len(sample))
    known_skip, known_pos = 0, base  # the known_skip-th event after base starts at known_pos
    for _probe in range(PROBES + 2):
        if target - known_pos <= per_event * STEP_EVENTS:
            break
        skip = known_skip + max(1, int((target - known_pos) / per_event * 0.97))
        rows = _events(conn, file, base, skip=skip, count=1)
        probed = int(rows[0][1]) if rows else None
        if probed is None or probed >= limit:
            per_event *= 2  # past the window: the events there are larger than estimated
            continue
        per_event = max(1.0, (probed - base) / skip)
        if probed <= target:
            known_skip, known_pos = skip, probed
    return _group_start_after(
        conn, file, base, known_skip, limit, at_least=target, count=PAGE_EVENTS
    )


def transaction_starts(
    conn: pymysql.connections.Connection,
    start: BinlogOffset,
    end: BinlogOffset,
    targets: Sequence[int],
) -> list[BinlogOffset]:
    """Transaction starts inside ``(start, end)`` near the byte positions ``targets`` of
    ``start``'s file: for each, the first one at or after an event found at about that position;
    ascending, without repeats (fewer than asked when transactions are larger than the gaps).

    ``start`` must be an event boundary and ``end`` in the same file. ``SHOW BINLOG EVENTS ...
    FROM`` takes event boundaries only, so a position is reached by skipping events
    (``LIMIT skip, n``), the server reading the headers: the number to skip is estimated from
    the bytes per event seen so far. Only a few pages of headers cross the wire, which matters
    because parsing them is the costly part (1.4 s of Python for a 39 MB window listed whole,
    0.14 s of server CPU).
    """
    file, base = start.file, start.pos
    sample = _events(conn, file, base, count=STEP_EVENTS)
    if not sample:
        return []
    per_event = max(1.0, (int(sample[-1][4]) - base) / len(sample))
    cuts: list[BinlogOffset] = []
    for target in sorted(targets):
        if target <= base or target >= end.pos:
            continue
        skip, per_event = _skip_to(conn, file, base, target, end.pos, per_event)
        cut = _group_start_after(conn, file, base, skip, end.pos)
        if cut is None:
            break  # no transaction starts between the estimate and the window's end
        cuts.append(BinlogOffset(file, cut))
        base = cut
    return cuts


def _skip_to(
    conn: pymysql.connections.Connection,
    file: str,
    base: int,
    target: int,
    end: int,
    per_event: float,
) -> tuple[int, float]:
    """How many events after ``base`` lead to about ``target`` (within an eighth of the way),
    and the bytes per event that estimate rests on: a few probes, each re-estimating from the
    bytes per event between ``base`` and where the last one landed (events differ in size:
    one row or a thousand)."""
    skip = int((target - base) / per_event)
    for _probe in range(PROBES):
        if skip == 0:
            break
        rows = _events(conn, file, base, skip=skip, count=1)
        probed = int(rows[0][1]) if rows else None
        if probed is None or probed >= end:
            skip //= 2  # past the window: the events there are larger than estimated
            continue
        per_event = max(1.0, (probed - base) / skip)
        if abs(probed - target) * 8 <= target - base:
            break
        skip = int((target - base) / per_event)
    return skip, per_event


def _group_start_after(
    conn: pymysql.connections.Connection,
    file: str,
    base: int,
    skip: int,
    end: int,
    *,
    at_least: int = 0,
    count: int = STEP_EVENTS,
) -> int | None:
    """The first transaction start after ``base`` (and at or after ``at_least``) among the
    events from the ``skip``-th after ``base`` on and before ``end``; None if none. Reads
    ``count`` headers per round trip."""
    page_from = base
    while True:
        rows = _events(conn, file, page_from, skip=skip, count=count)
        skip = 0
        for row in rows:
            pos = int(row[1])
            if pos >= end:
                return None
            if str(row[2]) in _GROUP_STARTS and pos > base and pos >= at_least:
                return pos
        if len(rows) < count:
            return None
        page_from = int(rows[-1][4])


def _events(
    conn: pymysql.connections.Connection,
    file: str,
    pos: int,
    *,
    skip: int = 0,
    count: int = PAGE_EVENTS,
) -> list[DriverRow]:
    with conn.cursor() as cur:
        cur.execute(
            f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {int(skip)}, {int(count)}", (file,)
        )
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
