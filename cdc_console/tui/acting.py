"""What the console does when asked: queue commands, launch and stop jobs and verifications.

Every action runs in a thread worker (it touches SQLite, processes or the server) and posts a
typed, past-tense message; the handlers here turn those into notifications and an immediate
state poll, so the operator sees the outcome without waiting for the next refresh.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.app import App
from textual.message import Message

from cdc_console.errors import CdcError, redact
from cdc_console.tui.data.monitor import PipelineMonitor
from cdc_console.tui.messages import (
    ActionFailed,
    CommandQueued,
    JobLaunched,
    JobStopFinished,
    RepairQueued,
    VerificationLaunched,
)
from cdc_console.tui.model import PipelineView

STATE, SERVER = "state", "server"


def describe(exc: BaseException) -> str:
    if isinstance(exc, CdcError):
        return redact(f"{exc.message} (fix: {exc.hint})" if exc.hint else exc.message)
    text = redact(str(exc)).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ConsoleActions(App[None]):
    """The acting half of ``ConsoleApp`` (which supplies the monitors, views and polls)."""

    monitors: dict[str, PipelineMonitor]

    def view_of(self, pipeline: str) -> PipelineView | None:
        raise NotImplementedError

    def _poll_now(self, what: str, monitor: PipelineMonitor) -> None:
        raise NotImplementedError

    def _act(self, monitor: PipelineMonitor, what: str, act: Callable[[], Message]) -> None:
        """Run ``act`` (in the worker calling this) and post what it returns, or the failure."""
        try:
            message = act()
        except Exception as exc:
            message = ActionFailed(monitor.name, what, describe(exc))
        self.post_message(message)

    @work(thread=True, group="act")
    def _queue(self, monitor: PipelineMonitor, kind: str, table: str | None) -> None:
        what = f"{kind} {table or 'pipeline'}"
        self._act(
            monitor,
            what,
            lambda: CommandQueued(monitor.name, monitor.actions.queue(kind, table), what),
        )

    @work(thread=True, group="act")
    def _verify(self, monitor: PipelineMonitor, table: str) -> None:
        self._act(
            monitor,
            f"verify {table}",
            lambda: VerificationLaunched(monitor.name, table, monitor.actions.verify_table(table)),
        )

    @work(thread=True, group="act")
    def _repair(self, monitor: PipelineMonitor, table: str) -> None:
        self._act(
            monitor,
            f"repair {table}",
            lambda: RepairQueued(monitor.name, table, monitor.actions.repair_table(table)),
        )

    @work(thread=True, group="act")
    def _start_job(self, monitor: PipelineMonitor) -> None:
        self._act(
            monitor, "start job", lambda: JobLaunched(monitor.name, monitor.actions.start_job())
        )

    @work(thread=True, group="stop")
    def _stop_job(self, monitor: PipelineMonitor) -> None:
        self._act(
            monitor, "stop job", lambda: JobStopFinished(monitor.name, monitor.actions.stop_job())
        )

    def on_command_queued(self, message: CommandQueued) -> None:
        view = self.view_of(message.pipeline)
        waiting = (
            "waiting for the job"
            if view and view.job.alive
            else "no job is running: it applies when the job next starts"
        )
        self.notify(
            f"command #{message.command_id}; {waiting}",
            title=f"{message.pipeline}: {message.description} queued",
        )
        self._poll_now(STATE, self.monitors[message.pipeline])

    def on_action_failed(self, message: ActionFailed) -> None:
        self.notify(
            message.error, title=f"{message.pipeline}: {message.action} refused", severity="error"
        )

    def on_job_launched(self, message: JobLaunched) -> None:
        monitor = self.monitors[message.pipeline]
        self.notify(
            f"pid {message.pid}, log {monitor.log_path}", title=f"{message.pipeline}: job starting"
        )
        self._poll_now(STATE, monitor)

    def on_verification_launched(self, message: VerificationLaunched) -> None:
        monitor = self.monitors[message.pipeline]
        self.notify(
            f"pid {message.pid}, log {monitor.actions.verify_log}; verdicts appear in the table's note, "
            "the splits' verified column and on Events",
            title=f"{message.pipeline}: verifying {message.table}",
        )

    def on_repair_queued(self, message: RepairQueued) -> None:
        chunks = ", ".join(str(c) for c in message.chunks)
        self.notify(
            f"chunk(s) {chunks} queued for re-dump; verify again (v) once the table streams",
            title=f"{message.pipeline}: repairing {message.table}",
        )
        self._poll_now(STATE, self.monitors[message.pipeline])

    def on_job_stop_finished(self, message: JobStopFinished) -> None:
        self.notify(message.outcome, title=f"{message.pipeline}: job stopped")
        self._poll_now(STATE, self.monitors[message.pipeline])
