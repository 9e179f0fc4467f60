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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from cdc_console.config import PipelineConfig
from cdc_console.core.head_history import HeadHistory
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.outage import Outage
from cdc_console.errors import CdcError
from cdc_console.figures import (
    VerifyEstimate,
    verify_estimate,
)
from cdc_console.mysql.lag import binlog_distance
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
    split_verification,
)
from cdc_console.tui.data import assess
from cdc_console.tui.data.actions import PipelineActions
from cdc_console.tui.data.history import ProgressTracker, RateTracker
from cdc_console.tui.data.jobs import JobControl, ProcessSample
from cdc_console.tui.data.logtail import last_meaningful, tail
from cdc_console.tui.data.server import ServerProbe, ServerStatus
from cdc_console.tui.data.slow_figures import SlowFigures
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


def console_user() -> str:
    try:
        return f"console:{getpass.getuser()}"
    except Exception:
        return "console"


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
        self.slow = SlowFigures(self.config)
        self.splits = SplitReader()
        self.actions = PipelineActions(
            self.config,
            self.config_path,
            self.jobs,
            self.store,
            self._io,
            lambda: self.log_path,
            self.clock,
            self.issued_by,
            self.stop_grace,
        )

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
        needs = self.slow.needs(store, now)
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
            redump_forecast=self.slow.forecast(store, selected, now) if selected else None,
            tables=table_views,
            selected_table=selected,
            splits=splits,
            events=tuple(events),
            commands=tuple(store.commands(COMMANDS_SHOWN)),
            notices=self.actions.notices(store),
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
        estimates = self.slow.estimates(store, tables, now)
        shapes = self.slow.shapes(store, now)
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
        if sample is None and self.actions.stopping_since is not None:
            self.actions.stopping_since = None
        stalled = not paused and self.progress.stalled(now, console.stale_alert_seconds, behind)
        return assess.job_view(
            runs[:RUNS_SHOWN],
            len(runs),
            sample,
            launch=launch,
            stopping=self.actions.stopping_since is not None,
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
        if self.actions.launch is None:
            return None
        pid, at = self.actions.launch
        if runs and runs[0].started_at >= at - assess.LAUNCH_SLACK_SECONDS:
            self.actions.launch = None
            self.actions.owed.append(
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
        return replace(self._view(now, log_tail, job, binlog), notices=self.actions.notices(None))

    def close(self) -> None:
        """Release the server connection and the state database, after any poll in flight."""
        with self._probing:
            self.probe_source.close()
        with self._io:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None


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
