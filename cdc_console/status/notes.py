"""The status's phrases: each state, outage, verification, purge risk and finish time said in
one line, the same words in ``status``, the console and the alerts' descriptions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cdc_console.config import PipelineConfig
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.lifecycle import Lifecycle, Verdict
from cdc_console.core.outage import Outage
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import JSONObject
from cdc_console.figures import (
    PurgeHeadroom,
    PurgeState,
)
from cdc_console.state.store import (
    HeldChanges,
    TableState,
    VerificationRow,
)
from cdc_console.units import span


def table_note(table: TableState) -> str:
    """What a table's state means for an operator, beside the state itself (pause position and
    what it resumes to, re-dump progress, who removed or added it): the one wording that
    ``status``, ``status --json`` and the console's Tables screen show. Short enough for the
    console's note column at 150 columns."""
    if table.state == Lifecycle.PAUSED:
        where = f"at {table.paused_at} " if table.paused_at else ""
        return f"{where}→ {table.resume_state or '?'}"
    if table.state == Lifecycle.REDUMP:
        if table.redump_chunk is not None:
            return f"chunk {table.redump_chunk}, generation {table.generation}"
        return f"re-dump, generation {table.generation}"  # its chunks: the chunks column
    if table.schema_pending:
        return "held at a schema change: applied or parked before the next batch"
    if table.state == Lifecycle.NEEDS_REDUMP:
        return f"parked: cdc-console redump --table {table.table_id} (events say why)"
    if table.state == Lifecycle.REMOVED:
        return f"by {table.removed_by}, mirror kept" if table.removed_by else "mirror kept"
    return "added by add-table" if table.origin == "command" else ""


def held_note(held: Sequence[HeldChanges], now: float) -> str:
    """A table's changes the binlog did not carry as full rows (each held it, then it was read
    again or parked), for its note in ``status`` and on the console's Tables screen."""
    if not held:
        return ""
    causes = ", ".join(f"{h.count} {h.cause}" for h in held)
    return f"not logged as rows: {causes}, last {span(now - max(h.last_at for h in held))} ago"


def skip_reason(table: TableState) -> str:
    """Why a table cannot be verified now ("" when it can)."""
    state = table.state
    if state == Lifecycle.PAUSED and table.resume_state == Lifecycle.STREAMING:
        state = Lifecycle.STREAMING
    if table.schema_pending:
        return "its schema change is being settled; verify once it streams again"
    if state in (Lifecycle.STREAMING, Lifecycle.SNAPSHOT_DONE):
        return ""
    reasons = {
        Lifecycle.SNAPSHOTTING: "still snapshotting; verify once it streams",
        Lifecycle.CATCHING_UP: "catching up after its snapshot; verify once it streams",
        Lifecycle.REDUMP: "being re-dumped; verify once it streams again",
        Lifecycle.NEEDS_REDUMP: "parked (NEEDS_REDUMP): re-dump it first",
        Lifecycle.REMOVED: "removed from capture",
        Lifecycle.PAUSED: "paused during its snapshot; resume it first",
    }
    return reasons.get(state, f"{state}")


def verification_note(rows: list[VerificationRow], now: float) -> str:
    """A table's last verification in the one wording ``status`` and the console show:
    ``verified 2 h 05 min ago: equal`` or ``chunks 3, 7 differ (verified 4 min ago)``, what
    matters first; the age is its least recently verified chunk's. "" when never verified."""
    if not rows:
        return ""
    ago = span(now - min(r.verified_at for r in rows))
    differ = [r.split_no for r in rows if r.verdict == Verdict.DIFFERS]
    if len(differ) == 1:
        return f"chunk {differ[0]} differs (verified {ago} ago)"
    if len(differ) > 4:
        return f"{len(differ)} chunks differ (verified {ago} ago)"
    if differ:
        return f"chunks {', '.join(str(n) for n in differ)} differ (verified {ago} ago)"
    if any(r.verdict == Verdict.ERROR for r in rows):
        return f"verify failed {ago} ago (events say why)"
    return f"verified {ago} ago: equal"


def split_verification(row: VerificationRow | None, now: float) -> str:
    """One chunk's last verdict for the console's splits table: ``equal 12 min``."""
    if row is None:
        return ""
    if row.verdict == Verdict.DIFFERS:
        count = row.missing + row.extra + row.differing
        return f"{count} differ {span(now - row.verified_at)}"
    return f"{row.verdict} {span(now - row.verified_at)}"


def purge_note(room: PurgeHeadroom) -> str:
    """The purge headroom in the one wording ``status`` and ``status --json`` show."""
    needed = room.needed
    if room.state == PurgeState.NOTHING_NEEDED or needed is None:
        return "no binlog needed yet"
    who = f"{needed.file} (needed by {room.needed_by})"
    if room.state == PurgeState.UNLISTED:
        return "unknown: the server's binlogs were not listed"
    if room.state == PurgeState.PURGED:
        return f"PURGED: {who} is gone; the oldest left is {room.oldest_on_server}"
    if room.state == PurgeState.MISSING:
        return f"{who} is not on the server: binlog reset?"
    if room.state == PurgeState.NEVER:
        return f"{who}: binlogs never expire"
    if room.state == PurgeState.OPEN:
        return f"{who} is still being written; its expiry starts when it is closed"
    if room.seconds_left is None:
        return f"{who}: unknown when it was closed"
    if room.seconds_left <= 0:
        return f"due: {who} may be purged at the next rotation"
    return f"{who} may be purged in {span(room.seconds_left)}"


def purge_report(room: PurgeHeadroom, setting: str | None) -> JSONObject | None:
    """The headroom as ``status --json`` shows it (``headroom_seconds`` null when binlogs never
    expire or it is unknowable: JSON has no infinity)."""
    if room.state == PurgeState.UNLISTED:
        return None
    seconds = room.seconds
    return {
        "state": str(room.state),
        "needed": str(room.needed) if room.needed else None,
        "needed_by": room.needed_by,
        "oldest_on_server": room.oldest_on_server,
        "expire_setting": setting,
        "headroom_seconds": round(seconds, 3)
        if seconds is not None and math.isfinite(seconds)
        else None,
        "summary": purge_note(room),
    }


def outage_note(outage: Outage, now: float) -> str:
    """A source outage as the job lives through it, in the one wording ``status``, ``status
    --json`` and the console show: ``reconnecting (attempt 4, next in 8 s) for 35 s: <error>``."""
    if outage.ended_at is not None:
        return (
            f"source reachable again after {span(outage.duration(now))} "
            f"({outage.attempts} attempt{'s' if outage.attempts != 1 else ''})"
        )
    wait = max(0.0, outage.next_try_at - now)
    return (
        f"reconnecting (attempt {outage.attempts}, next in {wait:.0f} s) "
        f"for {span(outage.duration(now))}: {outage.last_error}"
    )


def mirror_shape(
    config: PipelineConfig, table_id: TableId, schema: TableSchema | None
) -> JSONObject | None:
    """What an operator checks of a table's privacy and placement rules: the columns its
    mirror leaves out, those it masks (and how), the columns it adds (the text of invalid
    dates), and where the mirror is when placed by name."""
    shape: JSONObject = {}
    if schema is not None:
        if schema.left_out:
            shape["left_out"] = list(schema.left_out)
        masked = {c.name: c.mask.describe() for c in schema.columns if c.mask is not None}
        if masked:
            shape["masked"] = dict(masked)
        if schema.companions:
            shape["companions"] = [c.name for c in schema.companions]
    named = config.sink.mirrors.get(table_id)
    if named:
        shape["mirror"] = named
        if config.sink.mirrors.routed(table_id):
            shape["routed"] = True
    return shape or None


def shape_note(shape: JSONObject | None) -> str:
    """``leaves out ssn; masks email sha256 (key $CDC_MASK_KEY); mirror analytics/users``."""
    if not shape:
        return ""
    parts = []
    left_out = shape.get("left_out")
    if isinstance(left_out, list):
        parts.append(f"leaves out {', '.join(str(c) for c in left_out)}")
    masked = shape.get("masked")
    if isinstance(masked, dict):
        parts.append("masks " + ", ".join(f"{c} {how}" for c, how in masked.items()))
    companions = shape.get("companions")
    if isinstance(companions, list):
        parts.append(f"invalid dates' text in {', '.join(str(c) for c in companions)}")
    if shape.get("mirror"):
        shared = " (shared by its route; rows name their table)" if shape.get("routed") else ""
        parts.append(f"mirror {shape['mirror']}{shared}")
    return "; ".join(parts)


def outlasts(estimate: FinishEstimate, room: PurgeHeadroom | None) -> bool:
    """Whether the slow end of a read's finish time passes the time before the binlog it
    needs may expire."""
    seconds = room.seconds if room is not None else None
    return seconds is not None and estimate.high > seconds


def finish_note(estimate: FinishEstimate | None) -> str:
    """A reading table's time left, short enough for the console's note column:
    ``12 min left ±2 min`` (half the range; ``status --json`` has both ends)."""
    if estimate is None:
        return "time left: after two chunks"
    if estimate.chunks_left == 0:
        return ""
    return f"{span(estimate.seconds)} left ±{span((estimate.high - estimate.low) / 2)}"
