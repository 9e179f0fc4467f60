"""A captured table's lifecycle, a split's status and the operator's commands, with the one
table of allowed lifecycle moves.

Flink CDC keeps one ``AssignerStatus`` for the whole job; here every table moves on its own::

    (new) -> SNAPSHOTTING -> CATCHING_UP -> STREAMING          (initial)
    (new) -> STREAMING                                          (latest-offset)
    SNAPSHOTTING -> SNAPSHOT_DONE                               (snapshot-only)
    any running state -> PAUSED -> back where it was (a streaming one catches up first)
    any captured state -> REDUMP -> CATCHING_UP (or SNAPSHOT_DONE)
    any captured state -> REMOVED -> captured again where it stopped
    CATCHING_UP, STREAMING, PAUSED -> NEEDS_REDUMP -> REDUMP   (purged binlog, changed shape)

``TRANSITIONS`` is the whole list with the reason for each move; ``check_move`` is the gate every
state change passes (``StateStore.move_table``), so a move that is not in the table is a bug
that fails loudly instead of a table stuck in a state nothing leaves. The values are the strings
stored in the state database and shown by ``status`` and the console.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Lifecycle(StrEnum):
    """Where a captured table is: reading chunks, catching up, streaming, or set aside."""

    SNAPSHOTTING = "SNAPSHOTTING"
    CATCHING_UP = "CATCHING_UP"
    STREAMING = "STREAMING"
    PAUSED = "PAUSED"
    REDUMP = "REDUMP"
    SNAPSHOT_DONE = "SNAPSHOT_DONE"
    REMOVED = "REMOVED"
    #: parked: its mirror can no longer be kept exact from the binlog (the binlog it needs was
    #: purged, or its shape changed); nothing of it is read until an operator re-dumps it,
    #: while the others go on
    NEEDS_REDUMP = "NEEDS_REDUMP"

    @property
    def reads_chunks(self) -> bool:
        """Chunks of the table are still being read (a first snapshot or a re-dump)."""
        return self in (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP)

    @property
    def reads_binlog(self) -> bool:
        """The table takes part in the binlog windows."""
        return self in (Lifecycle.CATCHING_UP, Lifecycle.STREAMING)


class SplitStatus(StrEnum):
    PENDING = "PENDING"
    ASSIGNED = "ASSIGNED"
    FINISHED = "FINISHED"


class BatchStatus(StrEnum):
    """A micro-batch: planned (its plan stored), staged (its data fixed on disk), applied."""

    PLANNED = "planned"
    STAGED = "staged"
    APPLIED = "applied"


class CommandKind(StrEnum):
    """What an operator can queue (``cdc-console pause|resume|redump|…``, the console's keys)."""

    PAUSE = "pause"
    RESUME = "resume"
    REDUMP = "redump"
    ADD_TABLE = "add-table"
    REMOVE_TABLE = "remove-table"
    STOP = "stop"
    OPTIMIZE = "optimize"
    VACUUM = "vacuum"


class Verdict(StrEnum):
    """What verifying one chunk found (``cdc_console.verify``)."""

    EQUAL = "equal"
    #: rows missing from the mirror, extra in it, or differing from the source
    DIFFERS = "differs"
    #: not verified, with the reason (a paused or snapshotting table, say)
    SKIPPED = "skipped"
    #: the verification could not finish (the source unreachable, the binlog purged)
    ERROR = "error"


class CommandStatus(StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    FAILED = "failed"


#: commands the job's driver applies itself between batches, not the planner
DRIVER_KINDS: Final = (CommandKind.STOP, CommandKind.OPTIMIZE, CommandKind.VACUUM)

_RUNNING: Final = (
    Lifecycle.SNAPSHOTTING,
    Lifecycle.CATCHING_UP,
    Lifecycle.STREAMING,
    Lifecycle.REDUMP,
)
_CAPTURED: Final = (*_RUNNING, Lifecycle.PAUSED, Lifecycle.SNAPSHOT_DONE, Lifecycle.NEEDS_REDUMP)


def _moves() -> dict[tuple[Lifecycle | None, Lifecycle], str]:
    moves: dict[tuple[Lifecycle | None, Lifecycle], str] = {
        (None, Lifecycle.SNAPSHOTTING): "captured: its chunks are read first",
        (None, Lifecycle.STREAMING): "captured with startup_mode latest-offset: no snapshot",
        (Lifecycle.SNAPSHOTTING, Lifecycle.CATCHING_UP): "every chunk finished",
        (Lifecycle.SNAPSHOTTING, Lifecycle.SNAPSHOT_DONE): "every chunk finished (snapshot-only)",
        (Lifecycle.REDUMP, Lifecycle.CATCHING_UP): "every re-dumped chunk finished",
        (Lifecycle.REDUMP, Lifecycle.SNAPSHOT_DONE): "every re-dumped chunk finished "
        "(snapshot-only)",
        (Lifecycle.CATCHING_UP, Lifecycle.STREAMING): "caught up with the main stream",
        (Lifecycle.PAUSED, Lifecycle.CATCHING_UP): "resumed: catches up from where it paused",
        (Lifecycle.PAUSED, Lifecycle.SNAPSHOTTING): "resumed: its snapshot goes on",
        (Lifecycle.PAUSED, Lifecycle.REDUMP): "resumed: its re-dump goes on",
        (Lifecycle.REMOVED, Lifecycle.SNAPSHOTTING): "captured again before its snapshot ended",
        (Lifecycle.REMOVED, Lifecycle.CATCHING_UP): "captured again: catches up from where it "
        "stopped",
        (Lifecycle.REMOVED, Lifecycle.SNAPSHOT_DONE): "captured again (snapshot-only)",
    }
    for state in _RUNNING:
        moves[state, Lifecycle.PAUSED] = "paused by the operator"
    for state in (Lifecycle.CATCHING_UP, Lifecycle.STREAMING, Lifecycle.PAUSED):
        moves[state, Lifecycle.NEEDS_REDUMP] = (
            "the binlog can no longer keep its mirror exact (the binlog it needs was purged, or "
            "its shape changed): only a re-dump does"
        )
    for state in (Lifecycle.SNAPSHOTTING, Lifecycle.REDUMP):
        moves[state, Lifecycle.NEEDS_REDUMP] = (
            "its shape changed during its snapshot in a way the mirror cannot follow online"
        )
    for state in _CAPTURED:
        if state != Lifecycle.REDUMP:  # a re-dump started again stays REDUMP: no move
            moves[state, Lifecycle.REDUMP] = "re-dump: fresh chunks replace the mirror's key ranges"
        moves[state, Lifecycle.REMOVED] = "no longer captured: its mirror stays"
    return moves


#: Every allowed move (``None`` is a table not yet in the state) and why a table makes it.
TRANSITIONS: Final = _moves()


def readmitted_state(streamed: bool, chunks_left: bool, snapshot_only: bool) -> Lifecycle:
    """Where a REMOVED table captured again resumes (``add-table``, or named in the config
    again): its snapshot if it never streamed or has chunks left, else a catch-up from where it
    stopped (the per-chunk filter passes everything after its largest high watermark)."""
    if not streamed or chunks_left:
        return Lifecycle.SNAPSHOTTING
    return Lifecycle.SNAPSHOT_DONE if snapshot_only else Lifecycle.CATCHING_UP


class IllegalTransition(RuntimeError):
    """A state change that the lifecycle does not allow: a bug in the caller, not user input
    (user input is refused earlier, with a message, by ``source.control.refusal``)."""


def check_move(table: object, current: Lifecycle | str | None, target: Lifecycle) -> str:
    """Why ``table`` may move from ``current`` to ``target``; raises ``IllegalTransition``.

    Staying in a state is always allowed (a streaming table's window, a re-registered table).
    """
    source = Lifecycle(current) if current is not None else None
    if source == target:
        return "unchanged"
    reason = TRANSITIONS.get((source, target))
    if reason is None:
        allowed = sorted(str(t) for (s, t) in TRANSITIONS if s == source)
        raise IllegalTransition(
            f"{table}: no lifecycle move from {source or 'new'} to {target} "
            f"(from {source or 'new'} a table may go to {', '.join(allowed) or 'nothing'})"
        )
    return reason
