"""The state database's rows as typed values: what every reader of the state gets back.

Offsets are ``BinlogOffset`` values, states and statuses ``core.lifecycle`` enums; nothing here
touches SQLite (the repositories beside it read and write the rows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cdc_console.core.lifecycle import BatchStatus, Lifecycle, SplitStatus, Verdict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan
from cdc_console.core.schema import TableId
from cdc_console.core.schema_change import SchemaChange
from cdc_console.core.splits import SnapshotSplit
from cdc_console.core.values import JSONObject

#: A value for one column of a state row: what sqlite3 stores, or an offset or a held change
#: of shape (stored as their canonical JSON).
FieldValue = int | float | str | bytes | BinlogOffset | SchemaChange | None


def offset_json(offset: BinlogOffset | None) -> str | None:
    """An offset's stored form: its canonical dict as JSON."""
    return json.dumps(offset.to_dict()) if offset is not None else None


def offset_of(text: str | None) -> BinlogOffset | None:
    return BinlogOffset.from_dict(json.loads(text)) if text else None


@dataclass(frozen=True)
class TableState:
    table_id: TableId
    state: Lifecycle
    chunk_key: str | None
    generation: int
    splits_total: int | None
    splits_done: int
    rows_snapshotted: int
    events_applied: int
    stream_from: BinlogOffset | None
    paused_at: BinlogOffset | None
    last_event_ts: int | None
    updated_at: float
    resume_state: Lifecycle | None = None
    origin: str = "config"
    removed_by: str | None = None
    redump_chunk: int | None = None
    #: a shape change met in the binlog and not applied yet: "<position>: <DDL>"
    #: a change of shape met in the binlog, held until the planner settles it
    schema_pending: SchemaChange | None = None


@dataclass(frozen=True)
class Command:
    """One operator command in the queue: issued by the CLI or the console, applied by the job.

    ``target`` is a table id (``db.t``) or None for the whole pipeline; ``args`` holds extras
    such as the chunk number of a one-chunk re-dump. ``status`` is pending, applied or failed,
    with ``reason`` saying what happened (the outcome of an applied one, why a failed one was
    refused).
    """

    id: int
    kind: str
    target: str | None
    args: JSONObject
    issued_by: str | None
    issued_at: float
    status: str
    reason: str | None
    applied_at: float | None

    @property
    def what(self) -> str:
        """``redump shop.orders chunk 3``, ``pause (pipeline)``: how every screen names it."""
        what = f"{self.kind} {self.target}" if self.target else f"{self.kind} (pipeline)"
        if self.args.get("chunk") is not None:
            what += f" chunk {self.args['chunk']}"
        return what

    def describe(self) -> str:
        return f"command {self.id}: {self.what}"


@dataclass(frozen=True)
class SplitState:
    split: SnapshotSplit
    status: SplitStatus
    generation: int
    batch_no: int | None
    low_watermark: BinlogOffset | None
    high_watermark: BinlogOffset | None
    rows: int | None
    backfill_events: int | None
    started_at: float | None
    finished_at: float | None
    duration_ms: int | None


@dataclass(frozen=True)
class BatchRow:
    """One micro-batch: its persisted plan, where it stands, and its staging file once staged."""

    batch_no: int
    status: BatchStatus
    plan: BatchPlan
    staged_path: str | None
    #: staged to be applied while the next batch is read: the planner may plan past it
    plan_past: bool = False


@dataclass(frozen=True)
class AppliedBatch:
    """When one batch was planned (and how long planning took), staged and applied (None: not
    yet), and how long it waited for lake maintenance."""

    batch_no: int
    created_at: float
    plan_seconds: float
    staged_at: float | None
    held_seconds: float
    applied_at: float | None
    #: how long the sink's commit took for each table it wrote (``"db.t"``: seconds)
    table_seconds: dict[str, float] = field(default_factory=dict)
    #: how long its longest task spent in our readers (None: not measured, all of the time from
    #: planned to staged counts as reading)
    read_seconds: float | None = None


@dataclass(frozen=True)
class RunRow:
    """One start of the job (``job_runs``): its process, heartbeat and how it ended."""

    run_id: int
    pid: int | None
    host: str | None
    master: str | None
    spark_ui: str | None
    started_at: float
    heartbeat_at: float | None
    ended_at: float | None
    status: str
    exit_code: int | None
    error: str | None
    #: where this run serves ``/metrics``, ``/healthz`` and ``/readyz`` (None: it does not)
    metrics_url: str | None = None


@dataclass(frozen=True)
class LagSample:
    """The committed position against the server's head at one moment, as the job saw it."""

    ts: float
    committed: BinlogOffset | None
    head: BinlogOffset | None
    bytes_behind: int | None
    files_behind: int | None
    event_lag_ms: int | None


@dataclass(frozen=True)
class EventRow:
    """One line of the pipeline's own history: a phase change, a command, an error."""

    id: int
    ts: float
    level: str
    kind: str
    table_id: str | None
    message: str


@dataclass(frozen=True)
class VerifyProgress:
    """A verification under way (``cdc-console verify`` or the job's schedule): the process
    running it, when it began, how many chunks it is to compare, and when each group of
    chunks compared so far began and ended (``(chunks, started_at, finished_at)``)."""

    pid: int
    started_at: float
    chunks_total: int
    groups: tuple[tuple[int, float, float], ...] = ()

    @property
    def chunks_done(self) -> int:
        return sum(count for count, _, _ in self.groups)


@dataclass(frozen=True)
class VerificationRow:
    """A chunk's last verification: when, at which binlog position both sides were compared,
    what it found, and (``detail``) the first differing keys and columns."""

    table_id: TableId
    split_no: int
    verified_at: float
    position: BinlogOffset | None
    verdict: Verdict
    rows: int
    missing: int
    extra: int
    differing: int
    detail: JSONObject

    @property
    def split_id(self) -> str:
        return f"{self.table_id}:{self.split_no}"


@dataclass(frozen=True)
class HeldChanges:
    """How often a table was held at a change the binlog did not carry as full rows (a DML
    logged as a statement, a partial image, an undecodable event), per cause, and the last."""

    table_id: TableId
    cause: str
    count: int
    last_at: float
    last_position: BinlogOffset | None
    last_what: str


@dataclass(frozen=True)
class Throttled:
    """Chunk reads held because the source is busy (``[source] max_load``): why, since when."""

    reason: str
    since: float


@dataclass(frozen=True)
class SourceSetting:
    """One binlog setting of the server as the job last probed it, and whether it is one the
    pipeline reads every change under (``expected`` says which)."""

    name: str
    value: str
    expected: str
    ok: bool
    checked_at: float
    changed_at: float
