"""What workers tell the UI thread, named for what already happened.

Workers never touch widgets: they post one of these and the app, on its own thread, updates the
screens and schedules the next poll, so a poll is rescheduled only once it has finished.
"""

from __future__ import annotations

from textual.message import Message

from cdc_console.tui.data.server import ServerStatus
from cdc_console.tui.model import PipelineView


class PipelineStatusRefreshed(Message):
    """A poll of one pipeline's state, process and log finished."""

    def __init__(self, pipeline: str, view: PipelineView) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.view = view


class ServerProbed(Message):
    """A probe of one pipeline's source server finished (reachable or not)."""

    def __init__(self, pipeline: str, status: ServerStatus) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.status = status


class PollFailed(Message):
    """A poll raised; the app shows why and retries after a back-off."""

    def __init__(self, pipeline: str, what: str, error: str) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.what = what
        self.error = error


class CommandQueued(Message):
    """A command is in the queue; its acknowledgement arrives with a later refresh."""

    def __init__(self, pipeline: str, command_id: int, description: str) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.command_id = command_id
        self.description = description


class ActionFailed(Message):
    """A control could not be carried out (refused up front, or the launcher failed)."""

    def __init__(self, pipeline: str, action: str, error: str) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.action = action
        self.error = error


class JobLaunched(Message):
    def __init__(self, pipeline: str, pid: int) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.pid = pid


class JobStopFinished(Message):
    def __init__(self, pipeline: str, outcome: str) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.outcome = outcome


class VerificationLaunched(Message):
    """A verification of one table runs in a process of its own; its verdicts arrive with later
    refreshes (the table's note, the splits' verified column, Events)."""

    def __init__(self, pipeline: str, table: str, pid: int) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.table = table
        self.pid = pid


class RepairQueued(Message):
    """Chunk re-dumps were queued for the chunks a verification found differing."""

    def __init__(self, pipeline: str, table: str, chunks: list[int]) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.table = table
        self.chunks = chunks
