"""``cdc-console status`` as text: the pipeline's structure (``status.collect``) laid out for a
terminal, the figures in their units and every note in the words ``status.notes`` gives it.
"""

from __future__ import annotations

import time

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.values import JSONObject, JSONValue
from cdc_console.figures import (
    LagStage,
)
from cdc_console.status.collect import PipelineStatus
from cdc_console.status.notes import (
    shape_note,
)
from cdc_console.units import span


def format_status(status: PipelineStatus, now: float | None = None) -> str:
    now = now or time.time()
    lines = [f"pipeline {status.name}", *_job_lines(status, now), ""]
    lines += _table_lines(status)
    lines.append("")
    lines += _binlog_lines(status)
    lines += _source_lines(status, now)
    lines.append(f"  last error: {status.last_error or 'none'}")
    if status.recent_commands:
        lines += ["", "  recent commands:"]
        for c in status.recent_commands:
            outcome = f": {c['reason']}" if c["reason"] else ""
            lines.append(f"    #{c['id']} {c['what']} - {c['status']}{outcome}")
    return "\n".join(lines)


def _job_lines(status: PipelineStatus, now: float) -> list[str]:
    """The job, and what holds the whole pipeline: an outage, a pause, a busy source."""
    job = status.job
    if job:
        lines = [
            f"  job: run {job['run_id']} {job['status']} (pid {job['pid']}, "
            f"master {job['master']}, UI {job.get('spark_ui') or '-'}"
            + (f", metrics {job['metrics_url']}/metrics" if job.get("metrics_url") else "")
            + ")"
        ]
    else:
        lines = ["  job: never ran"]
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
    return lines


def _table_lines(status: PipelineStatus) -> list[str]:
    header = (
        f"  {'table':<32} {'state':<14} {'chunks':>11} {'rows read':>11} {'events':>9} {'lag':>10}"
    )
    lines = [header]
    for t in status.tables:
        chunks = f"{t.chunks_done}/{t.chunks_total if t.chunks_total is not None else '?'}"
        note = "; ".join(n for n in (t.note, t.verified, shape_note(t.shape)) if n)
        lag = span(t.lag_seconds) if t.lag_seconds is not None else "-"
        lines.append(
            f"  {t.table:<32} {t.state:<14} {chunks:>11} {t.rows_snapshotted:>11} "
            f"{t.events_applied:>9} {lag:>10}" + (f"  {note}" if note else "")
        )
    return lines


def _binlog_lines(status: PipelineStatus) -> list[str]:
    """Where the pipeline is against the server: positions, lag, its stages, what is left."""
    committed = _fmt_offset(status.committed)
    head = (
        _fmt_offset(status.head)
        if status.head
        else f"unknown ({status.head_error})"
        if status.head_error
        else "not asked (--no-probe)"
    )
    lines = [f"  binlog: committed {committed}, server head {head}"]
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
    return lines


def _source_lines(status: PipelineStatus, now: float) -> list[str]:
    """The server's settings we cannot read under, and the changes it did not log as rows."""
    lines = []
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
    return lines


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
