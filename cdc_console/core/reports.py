"""What a batch's tasks report back: a finished chunk's watermarks, a binlog window's counts.

Executors build these and the driver records them (``source.committer``, ``state``). They live
down here, not beside the state store that keeps them, so that the executors' Python workers
import neither SQLite's layer nor the store to say what they did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema_change import SchemaChange

#: the watermarks of a split that ``failed``: it has none (never compared, never stored)
NO_POSITION = BinlogOffset("unread.000000", 0)


@dataclass(frozen=True)
class SplitResult:
    """What a finished snapshot split reports through the batch that carried its rows."""

    split_id: str
    low_watermark: BinlogOffset
    high_watermark: BinlogOffset
    rows: int
    backfill_events: int
    started_at: float
    duration_ms: int
    #: why the chunk was not read: its table's columns changed during its snapshot ("" if read)
    reshaped: str = ""
    #: why the chunk could not be read, for a cause that no retry cures (a value or a type
    #: its reader cannot take, a query the server refuses): its table is parked, the others
    #: go on; its watermarks are then meaningless ("" if read)
    failed: str = ""


@dataclass
class WindowResult:
    """What the binlog partition of a batch reports: per-table emitted counts and event times."""

    emitted: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    last_event_ts: dict[str, int] = field(default_factory=dict)
    #: per ``"database.table"``: where its shape changed and the DDL; parked at that position
    schema_changes: dict[str, SchemaChange] = field(default_factory=dict)
