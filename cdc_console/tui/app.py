"""``ConsoleApp``: the operations console's screens, keys and polling loop.

Each pipeline has two polls, state (SQLite, process tree, log) and server (MySQL), each in a
thread worker that posts what it found; the handler updates the screen and only then schedules the
next run of that poll, so a slow disk or server delays its own numbers and nothing else. A poll
that raises shows why under the top bar and retries with a growing pause.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType

from cdc_console.core.lifecycle import CommandKind
from cdc_console.errors import UsageError
from cdc_console.tui.acting import SERVER, STATE, ConsoleActions, describe
from cdc_console.tui.data.monitor import PipelineMonitor, open_monitors
from cdc_console.tui.messages import (
    PipelineStatusRefreshed,
    PollFailed,
    ServerProbed,
)
from cdc_console.tui.model import PipelineView
from cdc_console.tui.palette import ConsoleCommands
from cdc_console.tui.polling import PollLoop, one_shot
from cdc_console.tui.screens import registry
from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.screens.confirm import ConfirmScreen, redump_confirmation, stop_body
from cdc_console.tui.screens.help import HelpScreen
from cdc_console.tui.screens.jobs import JobsScreen
from cdc_console.tui.widgets.topbar import Tab


class ConsoleApp(ConsoleActions):
    TITLE = "cdc-console"
    CSS_PATH = "styles/console.tcss"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    MODES: ClassVar[dict[str, type[ConsoleScreen]]] = registry.MODES  # type: ignore[assignment]
    BINDINGS: ClassVar[list[BindingType]] = [
        *registry.BINDINGS,
        Binding("P", "pause_pipeline", "Pause pipeline"),
        Binding("R", "resume_pipeline", "Resume pipeline"),
        Binding("s", "start_job", "Start job"),
        Binding("x", "stop_job", "Stop job"),
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(
        self,
        monitors: Sequence[PipelineMonitor] = (),
        *,
        config_paths: Sequence[str | Path] = (),
        first_screen: str = "tables",
    ) -> None:
        """Watch ``monitors`` (tests inject canned ones), or real pipelines by config file."""
        super().__init__()
        monitors = list(monitors) or open_monitors(config_paths)
        if not monitors:
            raise UsageError("the console needs a pipeline", "pass --config F (repeatable)")
        self.monitors = {m.name: m for m in monitors}
        self.first_screen = first_screen
        self._current = monitors[0].name
        self._views: dict[str, PipelineView] = {}
        self._errors: dict[tuple[str, str], str] = {}
        self._selected: dict[str, str | None] = {}
        self._loops: dict[tuple[str, str], PollLoop] = {}
        self._reachable: dict[str, bool] = {}
        self._binding_state: tuple[object, ...] = ()
        self.refreshes: dict[str, int] = {name: 0 for name in self.monitors}
        self.probes: dict[str, int] = {name: 0 for name in self.monitors}

    # -- Host: what screens and the palette may ask ----------------------------------------------

    @property
    def pipeline_names(self) -> list[str]:
        return list(self.monitors)

    @property
    def current(self) -> str:
        return self._current

    @property
    def selected_table(self) -> str | None:
        return self._selected.get(self._current)

    def view_of(self, pipeline: str) -> PipelineView | None:
        return self._views.get(pipeline)

    def poll_errors(self, pipeline: str) -> list[str]:
        return [
            f"{what} poll of {name} failed: {error} (retrying)"
            for (name, what), error in sorted(self._errors.items())
            if name == pipeline
        ]

    def select_pipeline(self, pipeline: str) -> None:
        if pipeline in self.monitors and pipeline != self._current:
            self._current = pipeline
            self._show(pipeline)
            self.refresh_bindings()

    def select_table(self, table: str) -> None:
        if self._selected.get(self._current) != table:
            self._selected[self._current] = table
            self._poll_now(STATE, self.monitors[self._current])

    def show_screen(self, name: str) -> None:
        if self.current_mode != name:
            self.switch_mode(name)

    @property
    def screen_tabs(self) -> Sequence[Tab]:
        return registry.TABS

    def control(self, kind: str, table: str | None = None) -> None:
        self._queue(self.monitors[self._current], kind, table)

    def confirm_redump(self, table: str) -> None:
        view = self.view_of(self._current)
        found = view.table(table) if view else None
        if view is None or found is None:
            self.notify(f"no table {table} in {self._current}", severity="error")
            return
        body = redump_confirmation(view, found)
        self.push_screen(
            ConfirmScreen(f"Re-dump {table}", body, "Re-dump"),
            partial(self._confirmed, CommandKind.REDUMP, table),
        )

    def _confirmed(self, kind: str, table: str | None, answer: bool | None) -> None:
        if answer:
            self.control(kind, table)

    def start_job(self) -> None:
        self._start_job(self.monitors[self._current])

    def confirm_stop(self) -> None:
        monitor = self.monitors[self._current]
        view = self.view_of(monitor.name)
        if view is None or not view.job.alive:
            self.notify(f"{monitor.name}: no job is running", severity="warning")
            return
        body = stop_body(monitor.name, view.job.pid, monitor.stop_grace)
        self.push_screen(ConfirmScreen("Stop the job", body, "Stop"), self._stop_confirmed)

    def _stop_confirmed(self, answer: bool | None) -> None:
        if answer:
            self._stop_job(self.monitors[self._current])

    # -- keys -----------------------------------------------------------------------------------

    def action_show_screen(self, name: str) -> None:
        self.show_screen(name)

    def action_help(self) -> None:
        """`?`: every key of the app and of the screen in view (built from their bindings)."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_pause_table(self) -> None:
        if self.selected_table:
            self.control(CommandKind.PAUSE, self.selected_table)

    def action_resume_table(self) -> None:
        if self.selected_table:
            self.control(CommandKind.RESUME, self.selected_table)

    def action_redump_table(self) -> None:
        if self.selected_table:
            self.confirm_redump(self.selected_table)

    def action_verify_table(self) -> None:
        if self.selected_table:
            self._verify(self.monitors[self._current], self.selected_table)

    def repair_table(self, table: str) -> None:
        body = (
            f"Re-dump every chunk of {table} that its last verification found differing?\n\n"
            "The job re-reads each at a new high watermark and replaces its key range in the "
            "mirror; the other chunks and tables go on streaming. Verify again (v) afterwards."
        )
        self.push_screen(
            ConfirmScreen(f"Repair {table}", body, "Repair"),
            partial(self._repair_confirmed, table),
        )

    def _repair_confirmed(self, table: str, answer: bool | None) -> None:
        if answer:
            self._repair(self.monitors[self._current], table)

    def action_pause_pipeline(self) -> None:
        self.control(CommandKind.PAUSE)

    def action_resume_pipeline(self) -> None:
        self.control(CommandKind.RESUME)

    def action_start_job(self) -> None:
        self.start_job()

    def action_stop_job(self) -> None:
        self.confirm_stop()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide the half of each pause/resume pair that does not apply; grey out the rest."""
        view = self.view_of(self._current)
        if view is None:
            return True
        table = view.table(self.selected_table)
        rules: dict[str, bool | None] = {
            "pause_table": table is None or table.can_pause,
            "resume_table": table is not None and table.can_resume,
            "redump_table": None if table is not None and not table.can_redump else True,
            "pause_pipeline": not view.pipeline_paused,
            "resume_pipeline": view.pipeline_paused,
            "start_job": None if view.job.alive else True,
            "stop_job": True if view.job.alive else None,
        }
        return rules.get(action, True)

    def _binding_facts(self, view: PipelineView) -> tuple[object, ...]:
        table = view.table(self.selected_table)
        return (
            view.name,
            view.pipeline_paused,
            view.job.alive,
            (table.can_pause, table.can_resume, table.can_redump) if table else None,
        )

    # -- polling --------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.switch_mode(self.first_screen)
        for monitor in self.monitors.values():
            interval = monitor.config.console.refresh_seconds
            for what, run in ((STATE, self._poll_state), (SERVER, self._probe_server)):
                self._loops[(monitor.name, what)] = PollLoop(
                    partial(run, monitor), interval, partial(one_shot, self), self.call_next
                )
        for loop in self._loops.values():
            loop.start()

    def on_unmount(self) -> None:
        for loop in self._loops.values():
            loop.stop()
        for monitor in self.monitors.values():
            monitor.close()

    def _poll_now(self, what: str, monitor: PipelineMonitor) -> None:
        loop = self._loops.get((monitor.name, what))
        if loop is not None:
            loop.now()

    def _finished(self, what: str, pipeline: str, failed: bool) -> None:
        self._loops[(pipeline, what)].finished(failed)

    @work(thread=True, group="poll")
    def _poll_state(self, monitor: PipelineMonitor) -> None:
        try:
            view = monitor.poll(self._selected.get(monitor.name))
        except Exception as exc:
            self.post_message(PollFailed(monitor.name, STATE, describe(exc)))
        else:
            self.post_message(PipelineStatusRefreshed(monitor.name, view))

    @work(thread=True, group="probe")
    def _probe_server(self, monitor: PipelineMonitor) -> None:
        try:
            status = monitor.probe()
        except Exception as exc:
            self.post_message(PollFailed(monitor.name, SERVER, describe(exc)))
        else:
            self.post_message(ServerProbed(monitor.name, status))

    def on_pipeline_status_refreshed(self, message: PipelineStatusRefreshed) -> None:
        name, view = message.pipeline, message.view
        self._views[name] = view
        self._errors.pop((name, STATE), None)
        self.refreshes[name] += 1
        for notice in view.notices:
            self.notify(notice.message, title=notice.title, severity=notice.severity)
        self._show(name)
        if name == self._current:
            facts = self._binding_facts(view)
            if facts != self._binding_state:
                self._binding_state = facts
                self.refresh_bindings()
        self._finished(STATE, name, failed=False)

    def on_server_probed(self, message: ServerProbed) -> None:
        name, status = message.pipeline, message.status
        self._errors.pop((name, SERVER), None)
        self.probes[name] += 1
        was = self._reachable.get(name)
        self._reachable[name] = status.reachable
        if was is not None and was != status.reachable:
            if status.reachable:
                self.notify("the source server answers again", title=name)
            else:
                self.notify(
                    f"{status.error}",
                    title=f"{name}: source server unreachable",
                    severity="warning",
                )
        self._finished(SERVER, name, failed=False)

    def on_poll_failed(self, message: PollFailed) -> None:
        key = (message.pipeline, message.what)
        if self._errors.get(key) != message.error:
            self.notify(message.error, title=f"{message.what} poll failed", severity="error")
        self._errors[key] = message.error
        self._show(message.pipeline)
        self._finished(message.what, message.pipeline, failed=True)

    def _show(self, pipeline: str) -> None:
        if not self.screen_stack:
            return
        screen = self.screen
        if isinstance(screen, ConsoleScreen) and (
            pipeline == self._current or isinstance(screen, JobsScreen)
        ):
            screen.refresh_from_host()
