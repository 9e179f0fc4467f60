"""The pipeline's status as one structure, for ``cdc-console status`` and the console.

It reads the state database and probes the server's head itself, so the numbers are right even
when the job is stuck or dead: lag is measured against the server, not reported by the job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from cdc_console.config import PipelineConfig
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.lifecycle import Lifecycle, Verdict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.outage import Outage
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.values import JSONObject, JSONValue
from cdc_console.errors import redact
from cdc_console.figures import (
    READING,
    STAGES_WINDOW_SECONDS,
    LagStage,
    PurgeHeadroom,
    PurgeState,
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


def held_changes_by_table(store: StateStore) -> dict[str, list[HeldChanges]]:
    found: dict[str, list[HeldChanges]] = {}
    for row in store.held_changes():
        found.setdefault(str(row.table_id), []).append(row)
    return found


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
    verified: dict[str, list[VerificationRow]] = {}
    for row in store.verifications():
        verified.setdefault(str(row.table_id), []).append(row)
    held_by_table = held_changes_by_table(store)
    history = head_history(store.lag_samples(LAG_SAMPLES_KEPT))
    if head is not None:
        history.add(now, head)

    def lag_of(table: TableState) -> float | None:
        lag = position_lag(table_position(table), head, history, now)
        return round(lag.seconds, 3) if lag is not None else None

    all_tables = store.tables()
    estimates = read_estimates(store, all_tables, now)
    schemas = store.schemas()

    def finish_of(table: TableState) -> JSONObject | None:
        found = estimates.tables.get(table.table_id)
        return dict(found.to_dict()) if found is not None else None

    tables = [
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
        held_changes=[
            {
                "table": str(h.table_id),
                "cause": h.cause,
                "count": h.count,
                "last_at": h.last_at,
                "last_position": str(h.last_position) if h.last_position else None,
                "last_what": h.last_what,
            }
            for h in store.held_changes()
        ],
        throttled=(
            {"reason": throttled.reason, "since_at": throttled.since} if throttled else None
        ),
        finish=_total_finish(estimates.total, room),
        stages=_stages(store, now),
        verifying=_verifying(store, now),
    )


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


def format_status(status: PipelineStatus, now: float | None = None) -> str:
    now = now or time.time()
    lines = [f"pipeline {status.name}"]
    job = status.job
    if job:
        lines.append(
            f"  job: run {job['run_id']} {job['status']} (pid {job['pid']}, "
            f"master {job['master']}, UI {job.get('spark_ui') or '-'}"
            + (f", metrics {job['metrics_url']}/metrics" if job.get("metrics_url") else "")
            + ")"
        )
    else:
        lines.append("  job: never ran")
    if status.outage:
        lines.append(f"  source: {status.outage['summary']}")
    if status.pipeline_paused:
        lines.append("  PIPELINE PAUSED: no new batches ('cdc-console resume' continues)")
    if status.throttled:
        lines.append(
            f"  chunk reads yield to a busy source: {status.throttled['reason']} "
            f"([source] max_load, for {_ago(status.throttled['since_at'], now)}); "
            "the binlog stream goes on"
        )
    if status.verifying:
        lines.append(f"  {status.verifying['summary']}")
    header = (
        f"  {'table':<32} {'state':<14} {'chunks':>11} {'rows read':>11} {'events':>9} {'lag':>10}"
    )
    lines += ["", header]
    for t in status.tables:
        chunks = f"{t.chunks_done}/{t.chunks_total if t.chunks_total is not None else '?'}"
        note = "; ".join(n for n in (t.note, t.verified, shape_note(t.shape)) if n)
        lag = span(t.lag_seconds) if t.lag_seconds is not None else "-"
        lines.append(
            f"  {t.table:<32} {t.state:<14} {chunks:>11} {t.rows_snapshotted:>11} "
            f"{t.events_applied:>9} {lag:>10}" + (f"  {note}" if note else "")
        )
    lines.append("")
    committed = _fmt_offset(status.committed)
    head = (
        _fmt_offset(status.head)
        if status.head
        else f"unknown ({status.head_error})"
        if status.head_error
        else "not asked (--no-probe)"
    )
    lines.append(f"  binlog: committed {committed}, server head {head}")
    if status.bytes_behind is not None:
        lines.append(f"  behind: {status.bytes_behind} bytes, {status.files_behind} files")
    lag = "-" if status.event_lag_ms is None else f"{status.event_lag_ms / 1000:.1f} s"
    lines.append(f"  event-time lag: {lag}")
    if status.stages and status.stages.get("covered_seconds"):
        lines.append(
            f"  where the time went: {status.stages['summary']} ({_stage_list(status.stages)})"
        )
    if status.purge:
        lines.append(f"  purge headroom: {status.purge['summary']}")
    if status.finish and status.finish["chunks_left"]:
        lines.append(
            f"  chunk reads: about {_span_of(status.finish['seconds'])} left in total "
            f"({_span_of(status.finish['low_seconds'])} to "
            f"{_span_of(status.finish['high_seconds'])}, "
            f"{status.finish['chunks_left']} chunks)"
            + (
                "; MAY OUTLAST THE PURGE HEADROOM: raise binlog_expire_logs_seconds, or pause "
                "other reads"
                if status.finish["outlasts_headroom"]
                else ""
            )
        )
    for setting in status.source_settings:
        if not setting["ok"]:
            lines.append(
                f"  source setting: {setting['name']} is {setting['value']!r}, not "
                f"{setting['expected']!r} (since {_ago(setting['changed_at'], now)} ago)"
            )
    if status.held_changes:
        lines.append("  changes not logged as rows (each held its table: read again or parked):")
        for held in status.held_changes:
            lines.append(
                f"    {held['table']}: {held['count']} {held['cause']}, last at "
                f"{held['last_position']} {_ago(held['last_at'], now)} ago"
            )
    lines.append(f"  last error: {status.last_error or 'none'}")
    if status.recent_commands:
        lines += ["", "  recent commands:"]
        for c in status.recent_commands:
            outcome = f": {c['reason']}" if c["reason"] else ""
            lines.append(f"    #{c['id']} {c['what']} - {c['status']}{outcome}")
    return "\n".join(lines)


def _stage_list(stages: JSONObject) -> str:
    """``commit 38 s, read 1.2 s, ...``: the stages that took any time, longest first."""
    taken = [
        (stage.key, seconds)
        for stage in LagStage
        if isinstance(seconds := stages.get(f"{stage.key}_seconds"), int | float) and seconds
    ]
    return ", ".join(
        f"{key} {span(seconds)}" for key, seconds in sorted(taken, key=lambda x: -x[1])
    )


def _span_of(seconds: JSONValue) -> str:
    return span(seconds) if isinstance(seconds, int | float) else "?"


def _ago(epoch: JSONValue, now: float) -> str:
    return span(now - epoch) if isinstance(epoch, int | float) else "?"


def _fmt_offset(data: JSONObject | None) -> str:
    if not data:
        return "none yet"
    offset = BinlogOffset.from_dict(data)
    return f"{offset} (gtid {offset.gtid})" if offset.gtid else str(offset)
