"""What the screens display: immutable views, built in a worker thread, rendered on the UI thread.

Every judgement (is this lag bad, is the job stalled, how close is the purge) is made once while
the view is built, so a screen only maps values to cells and a test can assert on the view.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.lifecycle import CommandKind, Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.figures import LagStages, VerifyEstimate
from cdc_console.source.control import refusal
from cdc_console.state.rows import TableState
from cdc_console.state.store import Command, RunRow

Severity = Literal["information", "warning", "error"]


class Level(enum.Enum):
    """How worrying a number is; screens map it to a colour."""

    OK = "ok"
    WARN = "warn"
    ALERT = "alert"
    IDLE = "idle"


class JobStatus(enum.Enum):
    RUNNING = "running"
    STARTING = "starting"
    STALLED = "stalled"
    RECONNECTING = "reconnecting"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"
    NEVER_RAN = "never ran"
    REMOTE = "remote"


@dataclass(frozen=True)
class JobView:
    status: JobStatus
    level: Level
    detail: str
    pid: int | None = None
    host: str | None = None
    master: str | None = None
    uptime: float | None = None
    restarts: int = 0
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    processes: int = 0
    spark_ui: str | None = None
    heartbeat_age: float | None = None
    heartbeat_level: Level = Level.IDLE
    last_error: str | None = None
    runs: tuple[RunRow, ...] = ()

    @property
    def alive(self) -> bool:
        return self.status in (
            JobStatus.RUNNING,
            JobStatus.STARTING,
            JobStatus.STALLED,
            JobStatus.RECONNECTING,
            JobStatus.STOPPING,
        )


@dataclass(frozen=True)
class Lag:
    """A lag in seconds; ``at_least`` when the position predates every observation of the head."""

    seconds: float
    level: Level
    at_least: bool = False


@dataclass(frozen=True)
class TableView:
    table: str
    state: str
    splits_done: int
    splits_total: int | None
    rows_snapshotted: int
    events_applied: int
    events_per_second: float | None
    lag: Lag | None
    position: BinlogOffset | None
    chunk_size: int
    note: str = ""
    #: the mirror's live data files and its folder's bytes on disk, as the job last measured
    lake_files: int | None = None
    lake_bytes: int | None = None

    def allows(self, kind: CommandKind) -> bool:
        """Whether the job takes ``kind`` for this table in its state: the commands' own rule
        (``source.control.refusal``), so the console never offers what the job refuses nor
        hides what it takes."""
        state = TableState(
            TableId.parse(self.table),
            Lifecycle(self.state),
            None,
            0,
            self.splits_total,
            self.splits_done,
            self.rows_snapshotted,
            self.events_applied,
            None,
            None,
            None,
            0.0,
        )
        return refusal(kind, self.table, {}, [state], pipeline_paused=False) is None

    @property
    def can_pause(self) -> bool:
        return self.allows(CommandKind.PAUSE)

    @property
    def can_resume(self) -> bool:
        return self.allows(CommandKind.RESUME)

    @property
    def can_redump(self) -> bool:
        return self.allows(CommandKind.REDUMP)


@dataclass(frozen=True)
class SplitView:
    split_id: str
    split_no: int
    key_range: str
    status: str
    rows: int | None
    low_watermark: BinlogOffset | None
    high_watermark: BinlogOffset | None
    duration_ms: int | None
    #: the chunk's last verification (``status.split_verification``), "" when never verified
    verified: str = ""


@dataclass(frozen=True)
class PurgeRisk:
    """The oldest binlog the server keeps vs the oldest this pipeline needs, and the time left.

    ``time_left`` is the earliest the server's expiry may remove the needed file (None when it
    never expires or the file is still being written); ``bound`` says how it was derived.
    """

    level: Level
    summary: str
    oldest_on_server: str | None
    oldest_needed: BinlogOffset | None
    needed_by: str | None
    expire_seconds: float | None
    expire_setting: str | None
    time_left: float | None
    bound: str
    margin: str = ""


@dataclass(frozen=True)
class BinlogView:
    committed: BinlogOffset | None
    head: BinlogOffset | None
    server: str | None
    server_error: str | None
    probe_age: float | None
    probe_level: Level
    bytes_behind: int | None
    files_behind: int | None
    event_lag: Lag | None
    lag_history: tuple[float, ...]
    binlog_files: int
    binlog_bytes: int
    oldest_file: str | None
    newest_file: str | None
    needs: tuple[tuple[str, BinlogOffset, Lag | None], ...]
    purge: PurgeRisk
    #: where the last minute went, stage by stage (``figures.lag_stages``)
    stages: LagStages | None = None


@dataclass(frozen=True)
class EventView:
    id: int
    ts: float
    level: str
    kind: str
    table: str | None
    message: str


@dataclass(frozen=True)
class Notice:
    """Something to tell the operator once: a command's acknowledgement, a job that came up."""

    severity: Severity
    title: str
    message: str


@dataclass(frozen=True)
class PipelineView:
    """One pipeline as of one poll."""

    name: str
    config_path: str
    state_path: str
    log_path: str
    refreshed_at: float
    job: JobView
    binlog: BinlogView
    log_tail: tuple[str, ...]
    #: the rest is what the state database says; a pipeline that never ran has none of it
    has_state: bool = False
    pipeline_paused: bool = False
    #: the server's binlog settings the job last found unsafe (``name=value``)
    unsafe_settings: tuple[str, ...] = ()
    #: why the running job's chunk reads yield to a busy source (``[source] max_load``)
    throttled: str | None = None
    #: how long a re-dump of the selected table would take (``figures.redump_forecast``)
    redump_forecast: FinishEstimate | None = None
    #: a verification under way and its finish-time estimate (``figures.verify_estimate``)
    verifying: VerifyEstimate | None = None
    tables: tuple[TableView, ...] = ()
    selected_table: str | None = None
    splits: tuple[SplitView, ...] = ()
    events: tuple[EventView, ...] = ()
    commands: tuple[Command, ...] = ()
    notices: tuple[Notice, ...] = field(default=())

    def table(self, name: str | None) -> TableView | None:
        return next((t for t in self.tables if t.table == name), None)
