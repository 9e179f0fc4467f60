"""Following the source to another server: every stored position re-mapped by its GTID.

The state remembers which server its positions refer to (``PositionsRepo.source_identity``).
When the planner or a starting job finds itself connected to another one (``source.host`` now
names the promoted replica, or the next server of ``source.hosts`` answered), each stored
position, and the plan of a batch that is planned but not applied, is replaced by the position of
the same GTID state on the new server (``mysql.gtid.position_of_gtid``), in one transaction.
What was applied stays applied, what was not is read from the new server: the exactly-once
invariant carries over because a GTID state names the same transactions on every server.

It refuses, with the fix, when that cannot be exact: ``source.position = "file"``, a stored
position without a GTID (recorded before GTIDs were on, or by an older version), or a server
that lacks transactions the mirror holds (raised by the translation itself).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import pymysql

from cdc_console.config import SourceConfig
from cdc_console.core.lifecycle import BatchStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SourcePosition
from cdc_console.core.plan import BatchPlan
from cdc_console.core.splits import BinlogSplit, TableStreamFilter
from cdc_console.errors import SourceError
from cdc_console.mysql.connection import close_quietly, connect_first
from cdc_console.mysql.gtid import gtid_enabled, position_of_gtid, server_identity
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)

#: the position of a GTID state on the server now connected
Translate = Callable[[str], BinlogOffset]


class _Remap:
    """Translates positions, once per distinct GTID state, keeping skip counters."""

    def __init__(self, translate: Translate) -> None:
        self.translate = translate
        self.cache: dict[str, BinlogOffset] = {}

    def __call__(self, position: BinlogOffset) -> BinlogOffset:
        if not position.gtid:
            raise SourceError(
                f"position {position} has no GTID, so it cannot be found on another server",
                "point source.host back at the server this pipeline read from, or re-snapshot "
                "the tables on the new one",
            )
        found = self.cache.get(position.gtid)
        if found is None:
            found = self.cache[position.gtid] = self.translate(position.gtid)
        # A position inside a transaction keeps its place in it: the same transaction starts
        # at the translated position on the new server.
        return replace(
            found,
            events_to_skip=position.events_to_skip,
            rows_to_skip=position.rows_to_skip,
            gtid=position.gtid,
        )


def follow_failover(
    store: StateStore, identity: str, translate: Translate, *, mode: str = "auto"
) -> str | None:
    """Re-map the state to the server ``identity`` when it is not the one it was recorded on;
    the event text when it did, None when nothing changed (or the state is new)."""
    known = store.source_identity()
    if known == identity:
        return None
    if known is None:
        store.set_source_identity(identity)
        return None
    if mode == "file":
        raise SourceError(
            f"the source server changed: this pipeline's positions are on {known}, but the "
            f'server now connected is {identity}, and source.position is "file"',
            f'point source.host back at {known}, or set source.position = "auto" to follow a '
            "failover by GTID",
        )
    staged = store.staged_batches()
    if staged:
        # Its commit will write positions of the old server: re-map only after it.
        raise SourceError(
            f"the source moved ({known} -> {identity}) while batch {staged[0].batch_no} is "
            "staged and not yet applied; the positions are re-mapped once it is",
            transient=True,
        )
    positions = store.stored_positions()
    lacking = [p for p in positions if not p.gtid]
    if lacking:
        raise SourceError(
            f"the source server changed ({known} -> {identity}), but {len(lacking)} stored "
            f"position(s) carry no GTID (e.g. {lacking[0]}), so they cannot be found on the "
            "new server",
            f"point source.host back at {known}; to move to the new server, re-snapshot the "
            "tables there ('cdc-console redump --table ...')",
        )
    remap = _Remap(translate)
    pending = _translated_pending_plan(store, remap)
    count = store.rewrite_positions(remap, identity)
    if pending is not None:
        store.narrow_batch(pending, [])
    message = (
        f"source failover followed: {known} -> {identity}; {count} stored position(s) re-mapped "
        f"by GTID ({len(remap.cache)} distinct GTID state(s))"
        + (f", batch {pending.batch_no}'s plan too" if pending is not None else "")
    )
    store.log_event("source", message, level="warning")
    log.warning("%s", message)
    return message


def _translated_pending_plan(store: StateStore, remap: _Remap) -> BatchPlan | None:
    """The planned-but-unapplied batch with its positions on the new server (same number, same
    splits), or None when there is none. Computed before anything is written."""
    last = store.last_batch()
    if last is None or last.status != BatchStatus.PLANNED:
        return None
    plan = last.plan
    window = plan.binlog
    if window is not None:
        window = BinlogSplit(
            remap(window.start),
            remap(window.end),
            tuple(
                TableStreamFilter(
                    f.table_id,
                    remap(f.resume_from) if f.resume_from is not None else None,
                    tuple(
                        replace(s, high_watermark=remap(s.high_watermark))
                        for s in f.finished_splits
                    ),
                    f.pending_ranges,
                )
                for f in window.tables
            ),
        )
    head = remap(plan.head) if plan.head is not None else None
    return replace(plan, binlog=window, head=head)


def connect_following(
    store: StateStore, source: SourceConfig, server_id: int
) -> tuple[pymysql.connections.Connection, SourceConfig]:
    """A connection to the first server of ``source`` that answers, with the state re-mapped to
    it first if it is not the server the state was recorded on; and ``source`` pinned to it.

    ``server_id`` is the replica id the GTID look-ups stream with: use one no reader holds at
    the time (the planner plans between batches, when none runs).
    """
    conn, pinned = connect_first(source)
    try:
        identity = server_identity(conn)
        if source.position == SourcePosition.GTID and not gtid_enabled(conn):
            raise SourceError(
                f'source.position is "gtid" but the server at {pinned.host}:{pinned.port} '
                "does not log GTIDs",
                "SET GLOBAL gtid_mode=ON (MySQL: through OFF_PERMISSIVE and ON_PERMISSIVE, with "
                'enforce_gtid_consistency=ON), or set source.position = "auto"',
            )
        follow_failover(
            store,
            identity,
            lambda gtid: position_of_gtid(pinned, conn, gtid, server_id),
            mode=source.position,
        )
    except BaseException:
        close_quietly(conn)
        raise
    return conn, pinned
