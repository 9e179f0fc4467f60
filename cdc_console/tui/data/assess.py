"""Judgements made on each poll: how bad a lag is, what state a job is in, how close a purge is.

Pure functions of what was read, so each rule is tested on its own, and the thresholds come from
the pipeline's ``[console]`` section.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

from cdc_console import figures
from cdc_console.config import ConsoleConfig
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.outage import Outage
from cdc_console.figures import PurgeHeadroom, PurgeState
from cdc_console.state.store import RunRow
from cdc_console.status import outage_note
from cdc_console.tui.data.jobs import ProcessSample
from cdc_console.tui.data.server import ServerStatus
from cdc_console.tui.data.units import span
from cdc_console.tui.model import JobStatus, JobView, Lag, Level, PurgeRisk

#: A job's run row is written after preflight; a run that started this long before a launch is
#: an older one, not the launched job's.
LAUNCH_SLACK_SECONDS = 2.0


class _RunFields(TypedDict):
    """The ``JobView`` fields every job state takes from the latest run row."""

    host: str | None
    master: str | None
    restarts: int
    spark_ui: str | None
    heartbeat_age: float | None
    heartbeat_level: Level
    last_error: str | None
    runs: tuple[RunRow, ...]


class _ProcessFields(TypedDict):
    """The ``JobView`` fields a live process sample gives."""

    pid: int
    uptime: float | None
    cpu_percent: float
    rss_bytes: int
    processes: int


def level(value: float | None, warn: float, alert: float) -> Level:
    if value is None:
        return Level.IDLE
    if value >= alert:
        return Level.ALERT
    if value >= warn:
        return Level.WARN
    return Level.OK


def lag_level(seconds: float | None, config: ConsoleConfig) -> Level:
    return level(seconds, config.lag_warn_seconds, config.lag_alert_seconds)


def stale_level(seconds: float | None, config: ConsoleConfig) -> Level:
    return level(seconds, config.stale_warn_seconds, config.stale_alert_seconds)


def position_lag(
    position: BinlogOffset | None,
    head: BinlogOffset | None,
    history: HeadHistory,
    now: float,
    config: ConsoleConfig,
) -> Lag | None:
    """``figures.position_lag``, coloured by the console's thresholds."""
    lag = figures.position_lag(position, head, history, now)
    if lag is None:
        return None
    return Lag(lag.seconds, lag_level(lag.seconds, config), lag.at_least)


def event_lag(
    committed: BinlogOffset | None,
    head: BinlogOffset | None,
    last_event_ms: int | None,
    history: HeadHistory,
    now: float,
    config: ConsoleConfig,
) -> Lag | None:
    """``figures.event_lag``, coloured by the console's thresholds."""
    lag = figures.event_lag(committed, head, last_event_ms, history, now)
    if lag is None:
        return None
    return Lag(lag.seconds, lag_level(lag.seconds, config), lag.at_least)


@dataclass(frozen=True)
class Launch:
    """A job this console started and whose run row may not exist yet."""

    pid: int
    at: float
    alive: bool
    exit_code: int | None


def job_view(
    runs: Sequence[RunRow],
    total_runs: int,
    sample: ProcessSample | None,
    *,
    launch: Launch | None,
    stopping: bool,
    stalled: bool,
    outage: Outage | None = None,
    last_error: str | None,
    log_last_line: str | None,
    local_host: str,
    now: float,
    config: ConsoleConfig,
) -> JobView:
    """The job's state from its run rows, its live process (if any) and the console's own acts."""
    history = tuple(runs)
    run = history[0] if history else None
    heartbeat = run.heartbeat_at if run is not None and run.status == "running" else None
    heartbeat_age = max(0.0, now - float(heartbeat)) if heartbeat is not None else None
    common: _RunFields = {
        "host": run.host if run else None,
        "master": run.master if run else None,
        "restarts": max(0, total_runs - 1),
        "spark_ui": run.spark_ui if run else None,
        "heartbeat_age": heartbeat_age,
        "heartbeat_level": stale_level(heartbeat_age, config),
        "last_error": last_error,
        "runs": history,
    }
    if launch is not None and (run is None or run.started_at < launch.at - LAUNCH_SLACK_SECONDS):
        return _launch_view(launch, common, log_last_line, last_error, now)
    if sample is not None:
        return _live_view(
            sample,
            run,
            common,
            stopping=stopping,
            stalled=stalled,
            outage=outage,
            heartbeat_age=heartbeat_age,
            now=now,
            config=config,
        )
    return _recorded_view(run, common, last_error, heartbeat_age, local_host, now, config)


def _launch_view(
    launch: Launch,
    common: _RunFields,
    log_last_line: str | None,
    last_error: str | None,
    now: float,
) -> JobView:
    """A job the console launched that has not recorded its run yet: starting, or gone."""
    if launch.alive:
        return JobView(
            JobStatus.STARTING,
            Level.WARN,
            f"started pid {launch.pid}; preflight runs before its first run record",
            pid=launch.pid,
            uptime=now - launch.at,
            **common,
        )
    code = f" with status {launch.exit_code}" if launch.exit_code is not None else ""
    why = f": {log_last_line}" if log_last_line else " (see the job log)"
    common["last_error"] = log_last_line or last_error
    return JobView(
        JobStatus.FAILED,
        Level.ALERT,
        f"pid {launch.pid} exited{code} before it started a run{why}",
        pid=launch.pid,
        **common,
    )


def _live_view(
    sample: ProcessSample,
    run: RunRow | None,
    common: _RunFields,
    *,
    stopping: bool,
    stalled: bool,
    outage: Outage | None,
    heartbeat_age: float | None,
    now: float,
    config: ConsoleConfig,
) -> JobView:
    """A job whose process is alive here: stopping, reconnecting, stalled or running."""
    measured: _ProcessFields = {
        "pid": sample.pid,
        "uptime": now - run.started_at if run else None,
        "cpu_percent": sample.cpu_percent,
        "rss_bytes": sample.rss_bytes,
        "processes": sample.processes,
    }
    if stopping:
        return JobView(JobStatus.STOPPING, Level.WARN, "stop requested", **measured, **common)
    if outage is not None:
        # Waiting out a source fault is the job working as designed: not stalled, not failed.
        note = outage_note(outage, now)
        return JobView(JobStatus.RECONNECTING, Level.WARN, note, **measured, **common)
    stale = heartbeat_age is not None and heartbeat_age >= config.stale_alert_seconds
    if stalled or stale:
        detail = (
            f"alive, but no heartbeat for {heartbeat_age:.0f} s"
            if stale and heartbeat_age is not None
            else f"alive, but no progress for {config.stale_alert_seconds:.0f} s while the lag grew"
        )
        return JobView(JobStatus.STALLED, Level.ALERT, detail, **measured, **common)
    where = f"run {run.run_id} since {span(now - run.started_at)}" if run else "no run yet"
    return JobView(JobStatus.RUNNING, Level.OK, where, **measured, **common)


def _recorded_view(
    run: RunRow | None,
    common: _RunFields,
    last_error: str | None,
    heartbeat_age: float | None,
    local_host: str,
    now: float,
    config: ConsoleConfig,
) -> JobView:
    """A job with no live process here: what its last run record says."""
    if run is None:
        return JobView(JobStatus.NEVER_RAN, Level.IDLE, "never ran", **common)
    if run.status == "running":
        if run.host and run.host != local_host:
            return JobView(
                JobStatus.REMOTE,
                stale_level(heartbeat_age, config),
                f"runs on {run.host}: only its heartbeat is visible from here",
                pid=run.pid,
                uptime=now - run.started_at,
                **common,
            )
        common["last_error"] = last_error
        return JobView(
            JobStatus.FAILED,
            Level.ALERT,
            f"pid {run.pid} is gone without recording an exit (killed, or the machine restarted)",
            pid=run.pid,
            **common,
        )
    if run.status == "failed":
        common["last_error"] = run.error or last_error
        return JobView(
            JobStatus.FAILED,
            Level.ALERT,
            f"run {run.run_id} failed (exit {run.exit_code})",
            pid=run.pid,
            **common,
        )
    return JobView(
        JobStatus.STOPPED,
        Level.IDLE,
        f"run {run.run_id} stopped (exit {run.exit_code})",
        pid=run.pid,
        **common,
    )


def purge_risk(
    needs: Sequence[tuple[str, BinlogOffset]],
    server: ServerStatus | None,
    history: HeadHistory,
    now: float,
    config: ConsoleConfig,
) -> PurgeRisk:
    """``figures.purge_headroom`` (the same figure ``status`` and the job's metrics show), judged
    against ``purge_warn_hours`` / ``purge_alert_hours`` and worded for the Binlog screen."""
    expire = server.expire_seconds if server else None
    setting = server.expire_setting if server else None
    if server is None or not server.reachable:
        return PurgeRisk(
            Level.IDLE,
            "unknown: the server cannot be asked",
            oldest_on_server=server.logs[0][0] if server and server.logs else None,
            oldest_needed=None,
            needed_by=None,
            expire_seconds=expire,
            expire_setting=setting,
            time_left=None,
            bound="",
        )
    room = figures.purge_headroom(needs, server.head, server.logs, expire, history, now)
    base = PurgeRisk(
        Level.OK,
        "",
        oldest_on_server=room.oldest_on_server,
        oldest_needed=room.needed,
        needed_by=room.needed_by,
        expire_seconds=expire,
        expire_setting=setting,
        time_left=None,
        bound="",
    )
    if room.state == PurgeState.NOTHING_NEEDED or room.needed is None:
        return replace(base, summary="no binlog needed yet")
    return _lost(base, room, room.needed) or _expiry(base, room, room.needed, config)


def _lost(base: PurgeRisk, room: PurgeHeadroom, needed: BinlogOffset) -> PurgeRisk | None:
    """The needed binlog is gone or cannot be seen; None while it is there."""
    if room.state == PurgeState.UNLISTED:
        return replace(base, level=Level.IDLE, summary="unknown: the server lists no binlogs")
    if room.state == PurgeState.PURGED:
        return replace(
            base,
            level=Level.ALERT,
            summary=f"PURGED: {needed.file} (needed by {room.needed_by}) is gone; "
            f"the oldest left is {room.oldest_on_server}",
        )
    if room.state == PurgeState.MISSING:
        return replace(
            base,
            level=Level.ALERT,
            summary=f"{needed.file} (needed by {room.needed_by}) is not on the server: binlog "
            "reset?",
        )
    return None


def _expiry(
    base: PurgeRisk, room: PurgeHeadroom, needed: BinlogOffset, config: ConsoleConfig
) -> PurgeRisk:
    """When the needed binlog may expire, judged against the console's thresholds."""
    spare = room.spare_files
    base = replace(
        base, margin=f"{spare} older file(s) go first" if spare else "it is the oldest file left"
    )
    if room.state == PurgeState.NEVER:
        return replace(base, summary="binlogs never expire", bound="never")
    if room.state == PurgeState.OPEN:
        return replace(
            base,
            summary=f"{needed.file} is still being written; its expiry starts when it is closed",
            bound="open",
        )
    left = room.seconds_left
    if left is None:
        return replace(base, level=Level.IDLE, summary=f"unknown when {needed.file} closed")
    hours = left / 3600.0
    risk = (
        Level.ALERT
        if hours <= config.purge_alert_hours
        else Level.WARN
        if hours <= config.purge_warn_hours
        else Level.OK
    )
    summary = (
        f"due: {needed.file} may be purged at the next rotation"
        if left <= 0
        else f"{needed.file} may be purged in {span(left)}"
    )
    return replace(base, level=risk, summary=summary, time_left=left, bound=room.bound)
