"""``StateStore``: splits, watermarks, offsets, lifecycle, runs, lag and commands in SQLite.

Everything the job must not lose (finished splits with their high watermarks, the committed
offset, a batch's plan) is written in one transaction with the batch it belongs to, so a crash at
any point leaves a consistent state to resume from at chunk granularity.

One facade over small repositories, one per part of the state (``tables.py``, ``splits.py``,
``batches.py``, ``commands.py``, ``journal.py``, ``outages.py``, ``positions.py``,
``verifications.py``, ``watch.py``, over ``database.py``'s connection), each
returning the typed rows of ``rows.py``. No module outside ``state/`` runs SQL over this schema
(``tests/unit/test_layering.py`` keeps the imports in line; reviews keep the SQL).
"""

from __future__ import annotations

from cdc_console.state.batches import BatchesRepo
from cdc_console.state.commands import PIPELINE_PAUSED_META, CommandsRepo
from cdc_console.state.journal import EVENTS_KEPT, LAG_SAMPLES_KEPT, JournalRepo
from cdc_console.state.outages import OutagesRepo
from cdc_console.state.positions import PositionsRepo
from cdc_console.state.rows import (
    AppliedBatch,
    BatchRow,
    Command,
    EventRow,
    HeldChanges,
    LagSample,
    RunRow,
    SourceSetting,
    SplitState,
    TableState,
    Throttled,
    VerificationRow,
    VerifyProgress,
)
from cdc_console.state.tables import TablesRepo
from cdc_console.state.verifications import VerificationsRepo
from cdc_console.state.watch import WatchRepo

__all__ = [
    "EVENTS_KEPT",
    "LAG_SAMPLES_KEPT",
    "PIPELINE_PAUSED_META",
    "AppliedBatch",
    "BatchRow",
    "Command",
    "EventRow",
    "HeldChanges",
    "LagSample",
    "RunRow",
    "SourceSetting",
    "SplitState",
    "StateStore",
    "TableState",
    "Throttled",
    "VerificationRow",
    "VerifyProgress",
]


class StateStore(
    TablesRepo,
    BatchesRepo,
    CommandsRepo,
    JournalRepo,
    OutagesRepo,
    PositionsRepo,
    VerificationsRepo,
    WatchRepo,
):
    """One state database and every part of the state; safe to share between threads."""
