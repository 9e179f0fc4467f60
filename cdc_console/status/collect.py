"""The pipeline's status as one structure, for ``cdc-console status`` and the console.

It reads the state database and probes the server's head itself, so the numbers are right even
when the job is stuck or dead: lag is measured against the server, not reported by the job.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from cdc_console.config import PipelineConfig
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.values import JSONObject, JSONValue
from cdc_console.errors import redact
from cdc_console.figures import (
    READING,
    STAGES_WINDOW_SECONDS,
    PurgeHeadroom,
    ReadEstimates,
    head_history,
    lag_stages,
    last_event_ms,
    pipeline_needs,
    position_lag,
    purge_headroom,
    read_estimates,
    table_position,
    verify_estimate,
)
from cdc_console.figures import event_lag as figures_event_lag
from cdc_console.mysql.lag import binlog_distance
from cdc_console.state.store import (
    LAG_SAMPLES_KEPT,
    HeldChanges,
    StateStore,
    TableState,
    VerificationRow,
)
from cdc_console.status.notes import (
    finish_note,
    held_note,
    mirror_shape,
    outage_note,
    outlasts,
    purge_report,
    table_note,
    verification_note,
)


def held_changes_by_table(store: StateStore) -> dict[str, list[HeldChanges]]:
    found: dict[str, list[HeldChanges]] = {}
    for row in store.held_changes():
        found.setdefault(str(row.table_id), []).append(row)
    return found


@dataclass
class TableStatus:
    table: str
    state: str
    chunks_done: int
    chunks_total: int | None
    rows_snapshotted: int
    events_applied: int
    stream_from: str | None
    paused_at: str | None
    resume_state: str | None = None
    generation: int = 0
    redump_chunk: int | None = None
    origin: str = "config"
    note: str = ""
    #: the table's last verification (``verification_note``), "" when never verified
    verified: str = ""
    #: how long ago the server wrote the position the table has applied up to
    #: (``figures.position_lag``); None while it reads its chunks or when unknowable
    lag_seconds: float | None = None
    #: while it reads chunks: the time left (``core.estimate.FinishEstimate.to_dict``)
    finish: JSONObject | None = None
    #: how its mirror differs from the source table (``mirror_shape``): columns left out,
    #: masked columns, the mirror's place when named; None when it is a plain copy
    shape: JSONObject | None = None


@dataclass
class PipelineStatus:
    name: str
    tables: list[TableStatus]
    committed: JSONObject | None
    head: JSONObject | None
    bytes_behind: int | None
    files_behind: int | None
    event_lag_ms: int | None
    job: JSONObject | None
    last_error: str | None
    head_error: str | None = None
    recent_events: list[JSONObject] = field(default_factory=list)
    pipeline_paused: bool = False
    recent_commands: list[JSONObject] = field(default_factory=list)
    #: the source outage the running job is waiting out, with its ``summary`` wording
    outage: JSONObject | None = None
    #: ``figures.purge_headroom`` (``purge_report``); None when the server was not asked
    purge: JSONObject | None = None
    #: the same headroom as a value, for the metrics (``to_dict`` leaves it out)
    purge_headroom: PurgeHeadroom | None = field(default=None, repr=False)
    #: the server's watched binlog settings as the job last probed them
    source_settings: list[JSONObject] = field(default_factory=list)
    #: per table and cause: changes the binlog did not carry as full rows, and the last one
    held_changes: list[JSONObject] = field(default_factory=list)
    #: chunk reads yielding to a busy source (``[source] max_load``): ``reason``, ``since_at``
    throttled: JSONObject | None = None
    #: the time left to every chunk read under way (``figures.read_estimates``), with
    #: ``outlasts_headroom`` when its slow end passes the purge headroom
    finish: JSONObject | None = None
    #: where the last minute went, stage by stage (``figures.lag_stages``), and the stage that
    #: took most of it
    stages: JSONObject | None = None
    #: a verification under way, with its finish-time estimate (``figures.verify_estimate``)
    verifying: JSONObject | None = None

    def to_dict(self) -> JSONObject:
        found = asdict(self)
        del found["purge_headroom"]
        return {"ran": True, "generated_at": iso_time(time.time()), **iso_times(found)}


def iso_time(epoch: float) -> str:
    """ISO 8601 in UTC with milliseconds: what a script or a log pipeline parses without help."""
    return (
        datetime.fromtimestamp(epoch, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _is_time_key(key: str) -> bool:
    return key == "ts" or key.endswith("_at")


def iso_times(document: JSONObject) -> JSONObject:
    """``document`` with every epoch-seconds time (keys ``ts`` and ``*_at``) as ISO 8601.

    The state keeps epoch floats (cheap to compare and subtract); ``status --json`` is read by
    people and scripts, for whom a bare 1764075723.4 is a puzzle.
    """

    def walk(value: JSONValue, key: str = "") -> JSONValue:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if _is_time_key(key) and isinstance(value, int | float) and not isinstance(value, bool):
            return iso_time(float(value))
        return value

    found = walk(document)
    assert isinstance(found, dict)
    return found


@dataclass(frozen=True)
class HeadProbe:
    """The server's answer: its head, binlog files and sizes, and expiry; or why it failed."""

    head: BinlogOffset | None = None
    logs: list[tuple[str, int]] = field(default_factory=list)
    error: str | None = None
    expire_seconds: float | None = None
    expire_setting: str | None = None


def probe_head(config: PipelineConfig) -> HeadProbe:
    from cdc_console.mysql.connection import connect
    from cdc_console.mysql.expiry import binlog_expiry
    from cdc_console.mysql.position import binary_logs, current_position

    try:
        conn = connect(config.source)
        try:
            head = current_position(conn, with_gtid=True)
            logs = binary_logs(conn)
            expire, setting = binlog_expiry(conn)
            return HeadProbe(head, logs, None, expire, setting)
        finally:
            conn.close()
    except Exception as exc:
        return HeadProbe(error=redact(str(exc)).splitlines()[0])


def collect_status(
    config: PipelineConfig,
    store: StateStore,
    *,
    probe: bool = True,
    probed: HeadProbe | None = None,
) -> PipelineStatus:
    """Everything ``status`` shows; ``probed`` stands in for the server's answer (tests)."""
    if probed is None:
        probed = probe_head(config) if probe else HeadProbe()
    head, logs, head_error = probed.head, probed.logs, probed.error
    committed = store.committed_offset()
    bytes_behind = files_behind = None
    if committed is not None and head is not None:
        bytes_behind, files_behind = binlog_distance(committed, head, logs)
    now = time.time()
    history = head_history(store.lag_samples(LAG_SAMPLES_KEPT))
    if head is not None:
        history.add(now, head)
    all_tables = store.tables()
    estimates = read_estimates(store, all_tables, now)
    tables = _table_statuses(config, store, all_tables, estimates, head, history, now)
    runs = store.runs(1)
    job = runs[0] if runs else None
    event = figures_event_lag(committed, head, last_event_ms(all_tables), history, now)
    event_lag = round(event.seconds * 1000) if event is not None else None
    if event_lag is None and head is None:
        # the server was not asked (or did not answer): the job's own last measurement
        samples = store.lag_samples(1)
        event_lag = samples[-1].event_lag_ms if samples else None
    room = purge_headroom(
        pipeline_needs(store, committed), head, logs, probed.expire_seconds, history, now
    )
    running = job is not None and job.status == "running"
    outage = store.open_outage() if running else None
    throttled = store.throttled() if running else None
    errors = [e for e in store.events(200) if e.level == "error" and e.kind != "verify"]
    last_error = errors[-1].message if errors else (job.error if job else None)
    return PipelineStatus(
        name=config.name,
        tables=tables,
        committed=committed.to_dict() if committed else None,
        head=head.to_dict() if head else None,
        bytes_behind=bytes_behind,
        files_behind=files_behind,
        event_lag_ms=event_lag,
        job=asdict(job) if job else None,
        last_error=last_error,
        head_error=head_error,
        recent_events=[asdict(e) for e in store.events(10)],
        pipeline_paused=store.pipeline_paused(),
        recent_commands=[{**asdict(c), "what": c.what} for c in store.commands(10)],
        outage={**outage.to_dict(now), "summary": outage_note(outage, now)} if outage else None,
        purge=purge_report(room, probed.expire_setting),
        purge_headroom=room,
        source_settings=[asdict(x) for x in store.source_settings()],
        held_changes=_held_changes(store),
        throttled=(
            {"reason": throttled.reason, "since_at": throttled.since} if throttled else None
        ),
        finish=_total_finish(estimates.total, room),
        stages=_stages(store, now),
        verifying=_verifying(store, now),
    )


def _table_statuses(
    config: PipelineConfig,
    store: StateStore,
    all_tables: list[TableState],
    estimates: ReadEstimates,
    head: BinlogOffset | None,
    history: HeadHistory,
    now: float,
) -> list[TableStatus]:
    """Each captured table's row: its progress, lag, notes, verification and mirror shape."""
    verified: dict[str, list[VerificationRow]] = {}
    for row in store.verifications():
        verified.setdefault(str(row.table_id), []).append(row)
    held_by_table = held_changes_by_table(store)
    schemas = store.schemas()

    def lag_of(table: TableState) -> float | None:
        lag = position_lag(table_position(table), head, history, now)
        return round(lag.seconds, 3) if lag is not None else None

    def finish_of(table: TableState) -> JSONObject | None:
        found = estimates.tables.get(table.table_id)
        return dict(found.to_dict()) if found is not None else None

    return [
        TableStatus(
            table=str(t.table_id),
            state=t.state,
            chunks_done=t.splits_done,
            chunks_total=t.splits_total,
            rows_snapshotted=t.rows_snapshotted,
            events_applied=t.events_applied,
            stream_from=str(t.stream_from) if t.stream_from else None,
            paused_at=str(t.paused_at) if t.paused_at else None,
            resume_state=t.resume_state,
            generation=t.generation,
            redump_chunk=t.redump_chunk,
            origin=t.origin,
            note="; ".join(
                n
                for n in (
                    table_note(t),
                    held_note(held_by_table.get(str(t.table_id), []), now),
                    finish_note(estimates.tables.get(t.table_id)) if t.state in READING else "",
                )
                if n
            ),
            verified=verification_note(verified.get(str(t.table_id), []), now),
            lag_seconds=lag_of(t),
            finish=finish_of(t),
            shape=mirror_shape(config, t.table_id, schemas.get(t.table_id)),
        )
        for t in all_tables
    ]


def _held_changes(store: StateStore) -> list[JSONObject]:
    """The changes each table's binlog did not carry as full rows, by cause."""
    return [
        {
            "table": str(h.table_id),
            "cause": h.cause,
            "count": h.count,
            "last_at": h.last_at,
            "last_position": str(h.last_position) if h.last_position else None,
            "last_what": h.last_what,
        }
        for h in store.held_changes()
    ]


def _verifying(store: StateStore, now: float) -> JSONObject | None:
    progress = store.verify_progress()
    if progress is None:
        return None
    found = verify_estimate(progress, now)
    return {**found.to_dict(), "summary": found.describe()}


def _stages(store: StateStore, now: float) -> JSONObject:
    found = lag_stages(store.applied_batches(now - STAGES_WINDOW_SECONDS), now)
    document: JSONObject = dict(found.to_dict())
    document["summary"] = found.describe()
    return document


def _total_finish(total: FinishEstimate | None, room: PurgeHeadroom) -> JSONObject | None:
    if total is None:
        return None
    found: JSONObject = dict(total.to_dict())
    found["outlasts_headroom"] = outlasts(total, room)
    return found
