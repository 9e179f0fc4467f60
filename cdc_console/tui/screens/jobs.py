"""Every pipeline's job at a glance, and the highlighted one in detail: process tree, runs, error.

One row per ``--config``; moving the cursor makes that pipeline the current one for the other
screens and for the job controls.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from cdc_console.state.store import RunRow
from cdc_console.tui import format as fmt
from cdc_console.tui.model import JobView, PipelineView
from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.widgets.keyed_table import Column, KeyedTable

JOB_COLUMNS = (
    Column("pipeline", "pipeline", 16),
    Column("status", "job", 9),
    Column("pid", "pid", 8),
    Column("uptime", "uptime", 12),
    Column("restarts", "restarts", 8),
    Column("cpu", "CPU", 7),
    Column("rss", "RSS", 10),
    Column("heartbeat", "heartbeat", 10),
    Column("ui", "Spark UI", 24),
    Column("detail", "detail"),
)

RUN_COLUMNS = (
    Column("run", "run", 5),
    Column("pid", "pid", 8),
    Column("host", "host", 14),
    Column("started", "started", 19),
    Column("ended", "ended", 19),
    Column("status", "status", 8),
    Column("exit", "exit", 5),
    Column("error", "error"),
)


def job_row(name: str, view: PipelineView | None) -> tuple[str, list[Text]]:
    if view is None:
        return name, [fmt.plain(name, "bold"), fmt.plain("polling", "dim")] + [fmt.DASH] * 8
    job = view.job
    return name, [
        fmt.plain(name, "bold"),
        fmt.job_status(job.status),
        fmt.DASH if job.pid is None else fmt.plain(job.pid),
        fmt.duration(job.uptime),
        fmt.plain(job.restarts),
        fmt.DASH if job.cpu_percent is None else fmt.plain(f"{job.cpu_percent:.0f}%"),
        fmt.nbytes(job.rss_bytes),
        fmt.age(job.heartbeat_age, job.heartbeat_level),
        fmt.plain(job.spark_ui) if job.spark_ui else fmt.DASH,
        fmt.plain(job.detail, fmt.LEVEL_STYLES[job.level]),
    ]


def run_row(run: RunRow) -> tuple[str, list[Text]]:
    return str(run.run_id), [
        fmt.plain(run.run_id),
        fmt.DASH if run.pid is None else fmt.plain(run.pid),
        fmt.plain(run.host or "-"),
        fmt.plain(fmt.stamp(run.started_at)),
        fmt.plain(fmt.stamp(run.ended_at)),
        fmt.state("failed" if run.status == "failed" else run.status),
        fmt.DASH if run.exit_code is None else fmt.plain(run.exit_code),
        fmt.plain((run.error or "").splitlines()[0] if run.error else "", "red"),
    ]


def details(view: PipelineView) -> Group:
    job: JobView = view.job
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("config", view.config_path)
    grid.add_row("state", view.state_path)
    grid.add_row("job log", view.log_path)
    grid.add_row("status", Text.assemble(fmt.job_status(job.status), "  ", job.detail))
    if job.master:
        grid.add_row("master", f"{job.master} on {job.host or '?'}")
    if job.processes:
        grid.add_row("processes", f"{job.processes} in the job's tree (driver, JVM, workers)")
    error = Text(job.last_error or "none", style="red" if job.last_error else "dim")
    grid.add_row("last error", error)
    return Group(Text(f" Job of {view.name}", style="bold"), grid)


class JobsScreen(ConsoleScreen):
    SCREEN_NAME = "jobs"
    TAB_KEY = "1"
    TAB_LABEL = "Jobs"
    _shown_current: str | None = None

    def compose_body(self) -> ComposeResult:
        yield KeyedTable(JOB_COLUMNS, id="jobs")
        yield Static(id="job-detail")
        yield Static(Text(" Runs (newest first)", style="bold"), id="runs-title", classes="title")
        yield KeyedTable(RUN_COLUMNS, id="runs")

    def show(self, view: PipelineView) -> None:
        host = self.host
        jobs = self.query_one("#jobs", KeyedTable)
        with self.app.batch_update():
            jobs.sync([job_row(name, host.view_of(name)) for name in host.pipeline_names])
            # Follow a pipeline chosen elsewhere, but never pull back a cursor the user just
            # moved: its highlight, still queued, is what makes that row current.
            if host.current != self._shown_current:
                jobs.select_key(host.current)
                self._shown_current = host.current
            self.query_one("#job-detail", Static).update(details(view))
            self.query_one("#runs", KeyedTable).sync([run_row(r) for r in view.job.runs])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if event.data_table.id == "jobs" and key is not None and key != self.host.current:
            self.host.select_pipeline(key)
