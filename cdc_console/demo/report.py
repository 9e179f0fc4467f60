"""What the demo says of its run: where the job is, why it stopped, and the closing verdict.

Every line is read from the job's state database and its log, never from the job's memory, so
the demo tells a dead or stuck job apart from a slow one.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_console import launcher
from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.demo import shop
from cdc_console.demo.workload import WorkloadCounts
from cdc_console.errors import redact
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger("cdc_console.demo")

PROGRESS_EVERY_SECONDS = 10.0

if TYPE_CHECKING:
    from cdc_console.demo.verify import VerifyReport


@dataclass
class DemoResult:
    server_label: str = ""
    seeded: shop.SeedReport | None = None
    reused_rows: int | None = None
    counts: WorkloadCounts | None = None
    catch_up_seconds: float | None = None
    chunks: tuple[int, int] = (0, 0)
    report: VerifyReport | None = None  # once compared
    failure: str | None = None


def _captured(config: PipelineConfig) -> tuple[list[TableState], BinlogOffset | None]:
    """The captured (not removed) tables and the committed position, from the state database."""
    store = StateStore(config.state_path)
    try:
        tables = [t for t in store.tables() if t.state != Lifecycle.REMOVED]
        return tables, store.committed_offset()
    finally:
        store.close()


def _progress(config: PipelineConfig) -> str:
    """One line on where the job is, from its state database."""
    if not config.state_path.exists():
        return "job starting (no state yet)"
    tables, committed = _captured(config)
    if not tables:
        return "job starting (preflight)"
    streaming = sum(t.state == Lifecycle.STREAMING for t in tables)
    done = sum(t.splits_done for t in tables)
    total = sum(t.splits_total or 0 for t in tables)
    events = sum(t.events_applied for t in tables)
    return (
        f"job: {streaming}/{len(tables)} tables streaming, chunks {done}/{total}, "
        f"{events:,} binlog changes applied, committed {committed or 'nothing yet'}"
    )


def _last_error_line(path: Path) -> str | None:
    """The job's own ``error: ...`` line (and its ``fix:``) from the end of its log, if any."""
    try:
        lines = path.read_text(errors="replace").splitlines()[-300:]
    except OSError:
        return None
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("error: "):
            found = lines[index][len("error: ") :].strip()
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{found} ({following})" if following.startswith("fix:") else found
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def job_failure(job_pid: int | None, config: PipelineConfig, job_log: Path) -> str | None:
    """Why the launched job is no longer running, or None while it runs."""
    if job_pid is None or launcher.is_alive(job_pid):
        return None
    code = launcher.exit_code(job_pid)
    error = None
    if config.state_path.exists():
        store = StateStore(config.state_path)
        try:
            runs = store.runs(1)
        finally:
            store.close()
        # Only this job's own run: an earlier run of a reused state may have failed too.
        if runs and runs[0].pid == job_pid:
            error = runs[0].error
    if not error:
        error = _last_error_line(job_log)
    if error:
        why = f"the job exited (code {code}): {redact(error)}"
    elif code is not None and code < 0:
        why = f"the job was killed by signal {-code} ({_signal_name(-code)})"
    else:
        why = f"the job exited (code {code}) without an error message"
    return f"{why}; see {job_log}"


def summary(
    r: DemoResult, config: PipelineConfig, config_path: Path, job_log: Path, started: float
) -> str:
    """The closing verdict and where everything of the run is."""
    report = r.report
    if r.failure:
        verdict = f"FAIL: {r.failure}"
    elif report is not None and report.equal:
        verdict = "PASS: every mirror equals its source, row for row"
    else:
        differing = sum(not t.equal for t in report.tables) if report else 0
        verdict = f"FAIL: {differing} mirror(s) differ from their source"
    lines = [f"cdc-console demo: {verdict}", f"  source    {r.server_label}"]
    if r.seeded is not None:
        lines.append(
            f"  seeded    {r.seeded.total:,} rows in {len(r.seeded.rows)} tables "
            f"in {r.seeded.seconds:.1f} s"
        )
    elif r.reused_rows is not None:
        lines.append(f"  seeded    reused from an earlier run ({r.reused_rows:,} rows)")
    if r.counts is not None:
        lines.append(f"  workload  {r.counts.summary()}")
    if r.catch_up_seconds is not None:
        lines.append(
            f"  job       snapshot {r.chunks[0]}/{r.chunks[1]} chunks; caught up "
            f"{r.catch_up_seconds:.1f} s after the workload stopped"
        )
    if report is not None:
        lines.append(
            f"  mirrors   {len(report.tables)} tables, {report.rows:,} source rows compared"
        )
        lines += [f"            {line}" for line in report.describe().splitlines()]
    lines += [
        f"  files     config {config_path}",
        f"            mirrors {config.sink.path}, state {config.state_path}",
        f"            job log {job_log}",
        f"  time      {time.monotonic() - started:.1f} s",
    ]
    return "\n".join(lines)


def wait_caught_up(
    config: PipelineConfig, job_pid: int | None, job_log: Path, timeout: float
) -> str | None:
    """Wait until every table streams and the committed position reaches the server's head;
    return why not when the job dies or the timeout passes."""
    from cdc_console.mysql.connection import connect
    from cdc_console.mysql.position import current_position

    log.info("waiting for the job to catch up (up to %.0f s)", timeout)
    deadline = time.monotonic() + timeout
    next_progress = time.monotonic() + PROGRESS_EVERY_SECONDS
    conn = connect(config.source)
    try:
        while True:
            failure = job_failure(job_pid, config, job_log)
            if failure:
                return failure
            if config.state_path.exists():
                tables, committed = _captured(config)
                head = current_position(conn)
                if (
                    len(tables) >= len(shop.TABLES)
                    and all(t.state == Lifecycle.STREAMING for t in tables)
                    and committed is not None
                    and committed >= head
                ):
                    return None
            if time.monotonic() >= deadline:
                return f"the job did not catch up within {timeout:.0f} s ({_progress(config)})"
            if time.monotonic() >= next_progress:
                next_progress += PROGRESS_EVERY_SECONDS
                log.info("%s", _progress(config))
            time.sleep(0.5)
    finally:
        conn.close()
