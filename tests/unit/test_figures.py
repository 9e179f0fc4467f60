"""``figures``: the purge headroom every surface shows (status, metrics, console), from its
inputs alone. No server."""

from __future__ import annotations

import math

import pytest

from cdc_console.core.head_history import HeadHistory
from cdc_console.core.offset import BinlogOffset
from cdc_console.figures import PurgeState, purge_headroom

NOW = 1_800_000_000.0
DAY = 86400.0


def at(file_no: int, pos: int) -> BinlogOffset:
    return BinlogOffset(f"binlog.{file_no:06d}", pos)


def logs(oldest: int, newest: int) -> list[tuple[str, int]]:
    return [(f"binlog.{i:06d}", 1000) for i in range(oldest, newest + 1)]


def seen(*points: tuple[float, BinlogOffset]) -> HeadHistory:
    history = HeadHistory()
    for ts, head in points:
        history.add(ts, head)
    return history


def test_headroom_counts_from_when_the_oldest_needed_file_closed() -> None:
    history = seen((NOW - 7200, at(5, 100)), (NOW - 3600, at(6, 50)))
    needs = [("shop.orders", at(6, 10)), ("shop.payments", at(5, 300)), ("the stream", at(7, 1))]
    room = purge_headroom(needs, at(7, 10), logs(4, 7), DAY, history, NOW)
    assert room.state is PurgeState.CLOSED
    assert (room.needed_by, room.needed, room.spare_files) == ("shop.payments", at(5, 300), 1)
    assert room.seconds_left == pytest.approx(DAY - 3600) and room.bound == "about"
    assert room.seconds == pytest.approx(DAY - 3600)


def test_headroom_is_zero_when_due_purged_or_missing() -> None:
    late = seen((NOW - DAY - 60, at(6, 50)))
    due = purge_headroom([("t", at(5, 300))], at(7, 10), logs(5, 7), DAY, late, NOW)
    assert due.state is PurgeState.CLOSED and due.seconds_left is not None
    assert due.seconds_left < 0 and due.seconds == 0.0 and due.bound == "at most"
    purged = purge_headroom([("t", at(3, 4))], at(7, 10), logs(5, 7), DAY, late, NOW)
    assert purged.state is PurgeState.PURGED and purged.seconds == 0.0
    assert purged.oldest_on_server == "binlog.000005"
    reset = purge_headroom([("t", at(9, 4))], at(7, 10), logs(5, 7), DAY, late, NOW)
    assert reset.state is PurgeState.MISSING and reset.seconds == 0.0


def test_headroom_when_nothing_can_expire_yet_or_it_is_unknowable() -> None:
    history = seen((NOW - 10, at(7, 5)))
    never = purge_headroom([("t", at(6, 4))], at(7, 10), logs(5, 7), None, history, NOW)
    assert never.state is PurgeState.NEVER and never.seconds == math.inf
    nothing = purge_headroom([], at(7, 10), logs(5, 7), DAY, history, NOW)
    assert nothing.state is PurgeState.NOTHING_NEEDED and nothing.seconds == math.inf
    still_open = purge_headroom([("t", at(7, 4))], at(7, 10), logs(5, 7), DAY, history, NOW)
    assert still_open.state is PurgeState.OPEN and still_open.seconds == DAY
    closed_unseen = purge_headroom(
        [("t", at(6, 4))], at(7, 10), logs(5, 7), DAY, HeadHistory(), NOW
    )
    assert closed_unseen.state is PurgeState.UNKNOWN and closed_unseen.seconds is None
    unasked = purge_headroom([("t", at(6, 4))], None, [], DAY, history, NOW)
    assert unasked.state is PurgeState.UNLISTED and unasked.seconds is None
