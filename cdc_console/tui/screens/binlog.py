"""Where the pipeline is in the binlog against the server's head, and whether what it still needs
will survive the server's expiry.

Head and binlog files come from the console's own probe, so this screen is right while the job
is down; an unreachable server says why, and the positions from SQLite stay on screen.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Sparkline, Static

from cdc_console.figures import LagStage, LagStages
from cdc_console.tui import format as fmt
from cdc_console.tui.data.units import size, span
from cdc_console.tui.model import BinlogView, Lag, Level, PipelineView
from cdc_console.tui.screens.base import ConsoleScreen
from cdc_console.tui.widgets.keyed_table import Column, KeyedTable

NEED_COLUMNS = (
    Column("who", "needed by", 24),
    Column("position", "from position", 28),
    Column("age", "written", 12),
)


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    return grid


def positions(view: BinlogView) -> Table:
    grid = _grid()
    grid.add_row("committed", fmt.offset(view.committed))
    if view.server_error:
        grid.add_row("server head", Text("unknown", style="bold red"))
        grid.add_row("server", Text(f"unreachable: {view.server_error}", style="red"))
    else:
        grid.add_row("server head", fmt.offset(view.head))
        if view.head is not None and view.head.gtid:
            grid.add_row("head GTID", fmt.plain(view.head.gtid, "dim"))
        grid.add_row("server", fmt.plain(view.server or "probing", "" if view.server else "dim"))
    grid.add_row("behind", _behind(view))
    grid.add_row("probed", fmt.age(view.probe_age, view.probe_level))
    return grid


def _behind(view: BinlogView) -> Text:
    if view.bytes_behind is None:
        return fmt.DASH
    lvl = Level.OK if view.bytes_behind == 0 else Level.WARN
    files = f", {view.files_behind} file(s)" if view.files_behind else ""
    return fmt.leveled(f"{size(view.bytes_behind)}{files}", lvl)


def lag_summary(lag: Lag | None, history: tuple[float, ...]) -> Text:
    text = Text(end="")
    text.append("event-time lag  ", style="dim")
    text.append_text(fmt.lag(lag))
    if history:
        text.append(
            f"   last {len(history)} samples: max {span(max(history))}, now {span(history[-1])}",
            style="dim",
        )
    else:
        text.append("   no samples yet (the job records one per heartbeat)", style="dim")
    return text


#: each stage's colour in the stacked bar, in the order a change meets them
STAGE_STYLES = {
    LagStage.TRIGGER: "grey50",
    LagStage.SERVER: "cyan",
    LagStage.READ: "blue",
    LagStage.SPARK: "green",
    LagStage.MAINTENANCE: "magenta",
    LagStage.COMMIT: "yellow",
}
STAGE_BAR_WIDTH = 48


def stage_bar(stages: LagStages | None) -> Text:
    """Where the last minute went: one stacked bar, a stage per colour, then the legend."""
    text = Text(end="")
    text.append("where the time went  ", style="dim")
    if stages is None or stages.covered <= 0:
        text.append("no batch in the last minute", style="dim")
        return text
    cells = _cells(stages)
    for stage, count in cells.items():
        text.append("█" * count, style=STAGE_STYLES[stage])
    text.append(f"  {stages.describe()}\n", style="")
    text.append(" " * len("where the time went  "))
    for stage in LagStage:
        seconds = stages.seconds[stage]
        text.append("■ ", style=STAGE_STYLES[stage])
        text.append(f"{stage.key} {span(seconds)}   ", style="" if seconds else "dim")
    return text


def _cells(stages: LagStages) -> dict[LagStage, int]:
    """The bar's cells per stage (largest remainders), every stage that took time at least one."""
    exact = {s: STAGE_BAR_WIDTH * v / stages.covered for s, v in stages.seconds.items()}
    cells = {s: max(1, int(x)) if stages.seconds[s] > 0 else 0 for s, x in exact.items()}
    spare = STAGE_BAR_WIDTH - sum(cells.values())
    for stage in sorted(exact, key=lambda s: exact[s] - int(exact[s]), reverse=True):
        if spare <= 0:
            break
        if stages.seconds[stage] > 0:
            cells[stage] += 1
            spare -= 1
    return cells


def purge(view: BinlogView) -> Table:
    risk = view.purge
    grid = _grid()
    grid.add_row("risk", fmt.leveled(risk.summary, risk.level))
    grid.add_row("oldest on server", fmt.plain(risk.oldest_on_server or "-"))
    needed = f"{risk.oldest_needed} by {risk.needed_by}" if risk.oldest_needed else "-"
    grid.add_row("oldest needed", fmt.plain(needed))
    if risk.margin:
        grid.add_row("margin", fmt.plain(risk.margin))
    grid.add_row("expiry", fmt.plain(risk.expire_setting or "-"))
    if risk.time_left is not None:
        left = "due now" if risk.time_left <= 0 else span(risk.time_left)
        bound = {"at most": "at most ", "after": "at least "}.get(risk.bound, "")
        grid.add_row("time left", fmt.leveled(bound + left, risk.level))
    files = "-"
    if view.binlog_files:
        files = (
            f"{view.binlog_files} files, {size(view.binlog_bytes)} "
            f"({view.oldest_file} … {view.newest_file})"
        )
    grid.add_row("on server", fmt.plain(files))
    return grid


class BinlogScreen(ConsoleScreen):
    SCREEN_NAME = "binlog"
    TAB_KEY = "3"
    TAB_LABEL = "Binlog"

    def compose_body(self) -> ComposeResult:
        with Grid(id="binlog-grid"):
            with Vertical(classes="panel", id="positions-panel") as positions_panel:
                positions_panel.border_title = "Position"
                yield Static(id="positions")
            with Vertical(classes="panel", id="purge-panel") as purge_panel:
                purge_panel.border_title = "Purge risk"
                yield Static(id="purge")
        with Vertical(classes="panel", id="lag-panel") as lag_panel:
            lag_panel.border_title = "Event-time lag"
            yield Static(id="lag")
            yield Sparkline([], id="lag-sparkline")
            yield Static(id="lag-stages")
        with Vertical(classes="panel", id="needs-panel") as needs_panel:
            needs_panel.border_title = "Positions this pipeline will read from (oldest first)"
            yield KeyedTable(NEED_COLUMNS, id="needs")

    def show(self, view: PipelineView) -> None:
        binlog = view.binlog
        with self.app.batch_update():
            self.query_one("#positions", Static).update(positions(binlog))
            self.query_one("#purge", Static).update(purge(binlog))
            self.query_one("#lag", Static).update(lag_summary(binlog.event_lag, binlog.lag_history))
            self.query_one("#lag-stages", Static).update(stage_bar(binlog.stages))
            sparkline = self.query_one("#lag-sparkline", Sparkline)
            data = list(binlog.lag_history) or [0.0]
            if list(sparkline.data or []) != data:
                sparkline.data = data
            self.query_one("#needs", KeyedTable).sync(
                [
                    (f"{who}@{where}", [fmt.plain(who), fmt.offset(where), fmt.lag(lag)])
                    for who, where, lag in binlog.needs
                ]
            )
