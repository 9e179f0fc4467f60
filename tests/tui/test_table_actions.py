"""The console offers pause, resume and re-dump of a table exactly when the job would take
them: over every lifecycle state, its keys and palette agree with ``source.control.refusal``,
the rule the CLI's commands and the job apply."""

from __future__ import annotations

import pytest

from cdc_console.core.lifecycle import CommandKind, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.source.control import refusal
from cdc_console.state.rows import TableState
from cdc_console.tui.model import TableView

TABLE = "shop.orders"


def view(state: Lifecycle) -> TableView:
    return TableView(
        table=TABLE,
        state=state,
        splits_done=3,
        splits_total=5,
        rows_snapshotted=300,
        events_applied=10,
        events_per_second=None,
        lag=None,
        position=None,
        chunk_size=100,
    )


def job_side(state: Lifecycle) -> TableState:
    """The table as the job's state holds it, with what a table in ``state`` carries."""
    return TableState(
        TableId.parse(TABLE),
        state,
        "id",
        1,
        5,
        3,
        300,
        10,
        BinlogOffset("mariadb-bin.000001", 4),
        BinlogOffset("mariadb-bin.000001", 400) if state == Lifecycle.PAUSED else None,
        None,
        0.0,
        resume_state=Lifecycle.STREAMING if state == Lifecycle.PAUSED else None,
    )


@pytest.mark.parametrize("state", list(Lifecycle))
def test_the_console_offers_what_the_job_takes_in_every_state(state: Lifecycle) -> None:
    table = view(state)
    offered = {
        CommandKind.PAUSE: table.can_pause,
        CommandKind.RESUME: table.can_resume,
        CommandKind.REDUMP: table.can_redump,
    }
    for kind, shown in offered.items():
        reason = refusal(kind, TABLE, {}, [job_side(state)], pipeline_paused=False)
        assert shown == (reason is None), (state, kind, reason)


def test_the_cases_where_the_two_used_to_disagree() -> None:
    # a parked table is healed by a re-dump, not paused
    assert not view(Lifecycle.NEEDS_REDUMP).can_pause
    assert view(Lifecycle.NEEDS_REDUMP).can_redump
    # a table being re-dumped can be re-dumped again (from its first chunk)
    assert view(Lifecycle.REDUMP).can_redump
    assert not view(Lifecycle.REMOVED).can_redump
    assert view(Lifecycle.PAUSED).can_resume and not view(Lifecycle.PAUSED).can_pause
