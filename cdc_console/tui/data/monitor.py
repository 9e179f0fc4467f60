"""One pipeline as the console watches and steers it; every method runs in a worker thread.

``poll`` reads the state database, the job's process tree and the log, and combines them with the
latest server probe into a ``PipelineView``; ``probe`` asks the server; ``queue``, ``start_job``
and ``stop_job`` act. Commands go through the state database's queue exactly as the CLI's do,
refused up front with the same reasons (``refusal``), and their acknowledgements come back as
notices on a later poll.
"""

from __future__ import annotations

import getpass
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from cdc_console.config import PipelineConfig
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.lifecycle import CommandKind, CommandStatus, Verdict
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.outage import Outage
from cdc_console.core.schema import TableId
from cdc_console.core.values import JSONValue
from cdc_console.errors import CdcError
from cdc_console.figures import (
    ReadEstimates,
    ReadPacing,
    VerifyEstimate,
    binlog_needs,
    read_estimates,
    redump_forecast,
    verify_estimate,
)
from cdc_console.mysql.lag import binlog_distance
from cdc_console.source.control import refusal
from cdc_console.state.lake import lake_tables
from cdc_console.state.store import (
    LAG_SAMPLES_KEPT,
    RunRow,
    StateStore,
    TableState,
    VerificationRow,
)
from cdc_console.status import (
    held_changes_by_table,
    mirror_shape,
    shape_note,
    skip_reason,
    split_verification,
)
from cdc_console.tui.data import assess
from cdc_console.tui.data.history import ProgressTracker, RateTracker
from cdc_console.tui.data.jobs import JobControl, ProcessSample
from cdc_console.tui.data.logtail import last_meaningful, tail
from cdc_console.tui.data.server import ServerProbe, ServerStatus
from cdc_console.tui.data.splits import SplitReader
from cdc_console.tui.data.units import shown_path
from cdc_console.tui.data.views import binlog_view, default_table, event_view, table_view
from cdc_console.tui.model import (
    BinlogView,
    EventView,
    JobStatus,
    JobView,
    Notice,
    PipelineView,
    SplitView,
    TableView,
)

RUNS_SHOWN = 10
T = TypeVar("T")
EVENTS_SHOWN = 300
COMMANDS_SHOWN = 100
STOP_GRACE_SECONDS = 30.0
NEEDS_TTL_SECONDS = 5.0


def console_user() -> str:
    try:
        return f"console:{getpass.getuser()}"
    except Exception:
        return "console"


class Recent(Generic[T]):
    """One figure that reads much of the state, computed again only every
    ``NEEDS_TTL_SECONDS`` or when what it is for (``key``) changes."""

    def __init__(self) -> None:
        self._held: tuple[float, str, T] | None = None

    def get(self, now: float, key: str, compute: Callable[[], T]) -> tuple[T, float]:
        """The figure, and how many seconds old it is."""
        held = self._held
        if held is None or held[1] != key or now - held[0] >= NEEDS_TTL_SECONDS:
            held = self._held = (now, key, compute())
        return held[2], now - held[0]


@dataclass
class PipelineMonitor:
    config: PipelineConfig
    probe_source: ServerProbe
    jobs: JobControl
    config_label: str = ""
    clock: Callable[[], float] = time.time
    host: str = field(default_factory=socket.gethostname)
    issued_by: str = field(default_factory=console_user)
    stop_grace: float = STOP_GRACE_SECONDS

    def __post_init__(self) -> None:
        self.name = self.config.name
        self.config_path = self.config.path or Path(self.config_label)
        self.config_label = self.config_label or shown_path(self.config_path)
        self.default_log = self.config.console.job_log or self.config.state_path.parent / "job.log"
        self.log_path = self.default_log
        self.history = HeadHistory()
        self.rates = RateTracker()
        self.progress = ProgressTracker()
        self._store: StateStore | None = None
        self._io = threading.RLock()
        self._probing = threading.Lock()
        self._closed = False
        self._server: ServerStatus | None = None
        self._lag_seen = 0.0
        self._launch: tuple[int, float] | None = None
        self._stopping_since: float | None = None
        self._awaiting: dict[int, str] = {}
        self._notices: list[Notice] = []
        self._needs_cache: Recent[list[tuple[str, BinlogOffset]]] = Recent()
        self._estimates_cache: Recent[ReadEstimates] = Recent()
        self._forecast_cache: Recent[FinishEstimate | None] = Recent()
        self._shapes_cache: Recent[dict[TableId, str]] = Recent()
        self.splits = SplitReader()

    # -- reading --------------------------------------------------------------------------------

    def store(self) -> StateStore | None:
        """The state database, opened once it exists (a pipeline that never ran has none)."""
        with self._io:
            if self._closed:
                raise CdcError(f"{self.name}: the console is closing")
            if self._store is None and self.config.state_path.exists():
                self._store = StateStore.open_existing(self.config.state_path)
            return self._store

    def probe(self) -> ServerStatus:
        with self._probing:
            status = self.probe_source.probe()
        if status.head is not None:
            self.history.add(status.probed_at, status.head)
        self._server = status
        return status

    def poll(self, selected: str | None) -> PipelineView:
        """Everything on screen for this pipeline; holds the state connection meanwhile, so
        ``close`` never pulls it from under a running query."""
        with self._io:
            return self._poll(selected)

    def _poll(self, selected: str | None) -> PipelineView:
        now = self.clock()
        store = self.store()
        sample = self.jobs.sample(store, self.config_path) if store is not None else None
        if sample is not None and sample.log_path and not self.config.console.job_log:
            self.log_path = sample.log_path
        log_tail = tail(self.log_path)
        if store is None:
            return self._stateless_view(now, log_tail)
        self._merge_lag_samples(store)
        tables = store.tables()
        all_runs = store.runs(1000)
        committed = store.committed_offset()
        server = self._server
        head = server.head if server else None
        behind = (
            binlog_distance(committed, head, server.logs)
            if committed is not None and head is not None and server is not None
            else (None, None)
        )
        paused = store.pipeline_paused()
        self.progress.observe(
            all_runs[0].run_id if all_runs else None,
            (
                committed.sort_key if committed else None,
                sum(t.splits_done for t in tables),
                sum(t.rows_snapshotted for t in tables),
                sum(t.events_applied for t in tables),
            ),
            now,
            behind[0],
        )
        events = [event_view(e) for e in store.events(EVENTS_SHOWN)]
        # a verification's findings are the mirror's, not the job's errors
        errors = [e for e in events if e.level == "error" and e.kind != "verify"]
        outage = store.open_outage() if sample is not None else None
        job = self._job(sample, all_runs, paused, behind[0], errors, log_tail, now, outage)
        verified: dict[str, list[VerificationRow]] = {}
        for row in store.verifications():
            verified.setdefault(str(row.table_id), []).append(row)
        table_views = self._table_views(store, tables, verified, head, now)
        names = [t.table for t in table_views]
        if selected not in names:
            selected = default_table(table_views)
        splits = self.splits.read(store, selected) if selected else ()
        if selected in verified:
            splits = _with_verifications(splits, verified[selected], now)
        needs = self._needs(store, now)
        if committed is not None:
            needs.append(("the stream", committed))
        return replace(
            self._view(
                now, log_tail, job, self._binlog_view(store, committed, behind, tables, needs, now)
            ),
            has_state=True,
            pipeline_paused=paused,
            unsafe_settings=tuple(
                f"{x.name}={x.value or chr(39) * 2}" for x in store.source_settings() if not x.ok
            ),
            throttled=_throttled(store, job),
            verifying=_verifying(store, now),
            redump_forecast=self._forecast(store, selected, now) if selected else None,
            tables=table_views,
            selected_table=selected,
            splits=splits,
            events=tuple(events),
            commands=tuple(store.commands(COMMANDS_SHOWN)),
            notices=self._collect_notices(store),
        )

    def _table_views(
        self,
        store: StateStore,
        tables: list[TableState],
        verified: dict[str, list[VerificationRow]],
        head: BinlogOffset | None,
        now: float,
    ) -> tuple[TableView, ...]:
        """The Tables screen's rows, each with its mirror, verification, held changes and
        estimate."""
        mirrors = {t.name: t for t in lake_tables(store) if t.kind == "mirror"}
        held = held_changes_by_table(store)
        estimates = self._estimates(store, tables, now)
        shapes, _ = self._shapes_cache.get(
            now,
            "",
            lambda: {
                t: shape_note(mirror_shape(self.config, t, d)) for t, d in store.schemas().items()
            },
        )
        return tuple(
            table_view(
                t,
                head,
                now,
                mirrors,
                verified.get(str(t.table_id), []),
                held.get(str(t.table_id), []),
                estimates,
                shapes.get(t.table_id, ""),
                self.history,
                self.rates,
                self.config,
            )
            for t in tables
        )

    def _view(
        self, now: float, log_tail: tuple[str, ...], job: JobView, binlog: BinlogView
    ) -> PipelineView:
        """The view every poll has, state database or not."""
        return PipelineView(
            name=self.name,
            config_path=self.config_label,
            state_path=shown_path(self.config.state_path),
            log_path=shown_path(self.log_path),
            refreshed_at=now,
            job=job,
            binlog=binlog,
            log_tail=log_tail,
        )

    def _forecast(self, store: StateStore, table: str, now: float) -> FinishEstimate | None:
        """``redump_forecast`` of the selected table: it reads all the table's chunks."""
        forecast, _ = self._forecast_cache.get(
            now,
            table,
            lambda: redump_forecast(store, TableId.parse(table), ReadPacing.of(self.config)),
        )
        return forecast

    def _estimates(self, store: StateStore, tables: list[TableState], now: float) -> ReadEstimates:
        """``read_estimates`` (it reads every reading table's chunks); the time spent since is
        taken off, so the countdown still moves."""
        found, age = self._estimates_cache.get(now, "", lambda: read_estimates(store, tables, now))
        return found.later(age) if age else found

    def _needs(self, store: StateStore, now: float) -> list[tuple[str, BinlogOffset]]:
        """``binlog_needs``: it reads every snapshotting table's splits, and the oldest needed
        position moves slowly."""
        needs, _ = self._needs_cache.get(now, "", lambda: list(binlog_needs(store)))
        return list(needs)

    def _merge_lag_samples(self, store: StateStore) -> None:
        limit = LAG_SAMPLES_KEPT if not self._lag_seen else 50
        for sample in store.lag_samples(limit):
            if sample.ts <= self._lag_seen:
                continue
            self._lag_seen = sample.ts
            if sample.head is not None:
                self.history.add(sample.ts, sample.head)

    def _job(
        self,
        sample: ProcessSample | None,
        runs: list[RunRow],
        paused: bool,
        behind: int | None,
        errors: list[EventView],
        log_tail: tuple[str, ...],
        now: float,
        outage: Outage | None = None,
    ) -> JobView:
        console = self.config.console
        launch = self._launch_state(runs)
        if sample is None and self._stopping_since is not None:
            self._stopping_since = None
        stalled = not paused and self.progress.stalled(now, console.stale_alert_seconds, behind)
        return assess.job_view(
            runs[:RUNS_SHOWN],
            len(runs),
            sample,
            launch=launch,
            stopping=self._stopping_since is not None,
            stalled=stalled,
            outage=outage,
            last_error=errors[-1].message if errors else None,
            log_last_line=last_meaningful(log_tail),
            local_host=self.host,
            now=now,
            config=console,
        )

    def _launch_state(self, runs: list[RunRow]) -> assess.Launch | None:
        """The job this console launched, until its run row shows up (then announced once)."""
        if self._launch is None:
            return None
        pid, at = self._launch
        if runs and runs[0].started_at >= at - assess.LAUNCH_SLACK_SECONDS:
            self._launch = None
            self._notices.append(
                Notice("information", self.name, f"job up: run {runs[0].run_id}, pid {pid}")
            )
            return None
        alive = self.jobs.is_alive(pid)
        return assess.Launch(pid, at, alive, None if alive else self.jobs.exit_code(pid))

    def _binlog_view(
        self,
        store: StateStore | None,
        committed: BinlogOffset | None,
        behind: tuple[int | None, int | None],
        tables: list[TableState],
        needs: list[tuple[str, BinlogOffset]],
        now: float,
    ) -> BinlogView:
        return binlog_view(
            store,
            self._server,
            committed,
            behind,
            tables,
            needs,
            now,
            self.history,
            self.config.console,
        )

    def _stateless_view(self, now: float, log_tail: tuple[str, ...]) -> PipelineView:
        job = assess.job_view(
            [],
            0,
            None,
            launch=self._launch_state([]),
            stopping=False,
            stalled=False,
            last_error=None,
            log_last_line=last_meaningful(log_tail),
            local_host=self.host,
            now=now,
            config=self.config.console,
        )
        binlog = self._binlog_view(None, None, (None, None), [], [], now)
        return replace(self._view(now, log_tail, job, binlog), notices=tuple(self._drain()))

    def _collect_notices(self, store: StateStore) -> tuple[Notice, ...]:
        for command_id, what in list(self._awaiting.items()):
            command = store.command(command_id)
            if command is None or command.status == CommandStatus.PENDING:
                continue
            del self._awaiting[command_id]
            if command.status == CommandStatus.APPLIED:
                self._notices.append(
                    Notice("information", f"{self.name}: {what} applied", command.reason or "")
                )
            else:
                self._notices.append(
                    Notice("error", f"{self.name}: {what} refused", command.reason or "")
                )
        return tuple(self._drain())

    def _drain(self) -> list[Notice]:
        notices, self._notices = self._notices, []
        return notices

    # -- acting ---------------------------------------------------------------------------------

    def queue(
        self, kind: str, target: str | None = None, args: Mapping[str, JSONValue] | None = None
    ) -> int:
        """Queue a command as the CLI does; raise ``CdcError`` with the reason it cannot apply."""
        with self._io:
            return self._queue(kind, target, args)

    def _queue(self, kind: str, target: str | None, args: Mapping[str, JSONValue] | None) -> int:
        store = self.store()
        if store is None:
            raise CdcError(
                f"{self.name} has no state yet, so there is nothing to {kind}",
                "start the job first (s)",
            )
        extra = dict(args or {})
        reason = refusal(kind, target, extra, store.tables(), store.pipeline_paused())
        if reason is not None:
            raise CdcError(reason)
        command_id = store.queue_command(kind, target, extra, issued_by=self.issued_by)
        command = store.command(command_id)
        self._awaiting[command_id] = command.what if command else kind
        return command_id

    def verify_table(self, table: str) -> int:
        """Launch ``cdc-console verify --table table`` detached; return its pid."""
        with self._io:
            store = self.store()
            found = store.table(table) if store is not None else None
        if found is None:
            raise CdcError(f"{self.name} does not capture {table}", "pick a table of this pipeline")
        reason = skip_reason(found)
        if reason:
            raise CdcError(f"{table} cannot be verified now: {reason}")
        return self.jobs.launch_verify(self.config_path, self.verify_log, table)

    def repair_table(self, table: str) -> list[int]:
        """Queue ``redump --chunk N`` for every chunk of ``table`` whose last verdict differs."""
        with self._io:
            store = self.store()
            rows = store.verifications(table) if store is not None else []
            chunks = [r.split_no for r in rows if r.verdict == Verdict.DIFFERS]
            if not chunks:
                raise CdcError(
                    f"no chunk of {table} differs in its last verification",
                    "verify it again (v on Tables) to see where it stands",
                )
            for chunk in chunks:
                self._queue(CommandKind.REDUMP, table, {"chunk": chunk})
        return chunks

    @property
    def verify_log(self) -> Path:
        return self.config.state_path.parent / "verify.log"

    def start_job(self) -> int:
        """Launch the job detached (it outlives the console); refuse if one is running."""
        with self._io:
            store = self.store()
            running = store is not None and self.jobs.sample(store, self.config_path) is not None
        if running:
            raise CdcError(f"{self.name}: a job is already running", "stop it first (x)")
        if self._launch is not None and self.jobs.is_alive(self._launch[0]):
            raise CdcError(f"{self.name}: the job started at pid {self._launch[0]} is starting")
        pid = self.jobs.launch(self.config_path, self.log_path)
        self._launch = (pid, self.clock())
        return pid

    def stop_job(self, sleep: Callable[[float], None] = time.sleep) -> str:
        """Queue ``stop``; if the job has not exited after the grace period, signal it.

        The queued command lets the job finish its batch and acknowledge; the signal is the
        fallback for a job too stuck to read its queue. Blocks for up to the grace period plus
        the launcher's own timeout, so it runs in a worker of its own.
        """
        with self._io:
            store = self.store()
            sample = self.jobs.sample(store, self.config_path) if store is not None else None
        if sample is None and self._launch is not None and self.jobs.is_alive(self._launch[0]):
            pid = self._launch[0]
            self.jobs.stop(pid, 30.0)
            return f"job pid {pid} stopped before it started a run: signalled"
        if store is None or sample is None:
            raise CdcError(f"{self.name}: no job is running", "start one with s")
        self.queue(CommandKind.STOP)
        self._stopping_since = self.clock()
        deadline = time.monotonic() + self.stop_grace
        while time.monotonic() < deadline:
            if not self.jobs.is_alive(sample.pid):
                return f"job pid {sample.pid} stopped"
            sleep(0.25)
        self.jobs.stop(sample.pid, 30.0)
        return (
            f"job pid {sample.pid} ignored the stop command for {self.stop_grace:.0f} s: signalled"
        )

    def close(self) -> None:
        """Release the server connection and the state database, after any poll in flight."""
        with self._probing:
            self.probe_source.close()
        with self._io:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None

    @property
    def launched(self) -> bool:
        return self._launch is not None


def open_monitors(config_paths: Sequence[str | Path]) -> list[PipelineMonitor]:
    """Monitors for the given config files, watching real processes and servers.

    Pipeline names label rows, notifications and palette commands, so they must differ; two
    configs of the same name get an error naming the key to set.
    """
    from cdc_console.config import load_config
    from cdc_console.tui.data.jobs import LocalJobControl
    from cdc_console.tui.data.server import MySQLServerProbe

    monitors: list[PipelineMonitor] = []
    for path in config_paths:
        config = load_config(path)
        clash = next((m for m in monitors if m.name == config.name), None)
        if clash is not None:
            raise CdcError(
                f"{path} and {clash.config_label} are both named {config.name!r}",
                'give each config its own name = "..." at the top of the file',
            )
        monitors.append(
            PipelineMonitor(
                config, MySQLServerProbe(config.source), LocalJobControl(), config_label=str(path)
            )
        )
    return monitors


def _verifying(store: StateStore, now: float) -> VerifyEstimate | None:
    progress = store.verify_progress()
    return verify_estimate(progress, now) if progress is not None else None


def _throttled(store: StateStore, job: JobView) -> str | None:
    """The load check's reason, while a job that could have made it runs."""
    if job.status in (JobStatus.STOPPED, JobStatus.FAILED, JobStatus.NEVER_RAN):
        return None
    throttled = store.throttled()
    return throttled.reason if throttled is not None else None


def _with_verifications(
    splits: tuple[SplitView, ...], rows: Sequence[VerificationRow], now: float
) -> tuple[SplitView, ...]:
    """The selected table's chunks, each with its last verification's verdict."""
    by_chunk = {r.split_no: r for r in rows}
    return tuple(
        replace(s, verified=split_verification(by_chunk[s.split_no], now))
        if s.split_no in by_chunk
        else s
        for s in splits
    )
