"""What the console does to one pipeline: queue a command as the CLI does, launch or stop its
job, launch a verification, queue a repair.

Each refuses up front what the job would refuse, with the same reason (``refusal``,
``skip_reason``). It keeps what the monitor's polls need to tell: the job it launched until the
job's run shows up, a stop under way, and the commands awaiting the job's answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import CommandKind, CommandStatus, Verdict
from cdc_console.core.values import JSONValue
from cdc_console.errors import CdcError
from cdc_console.source.control import refusal
from cdc_console.state.store import StateStore
from cdc_console.status import skip_reason
from cdc_console.tui.data.jobs import JobControl
from cdc_console.tui.model import Notice


@dataclass
class PipelineActions:
    config: PipelineConfig
    config_path: Path
    jobs: JobControl
    store: Callable[[], StateStore | None]
    #: the monitor's lock on the state connection: an act never runs beside a poll's query
    io: threading.RLock
    log_path: Callable[[], Path]
    clock: Callable[[], float]
    issued_by: str
    stop_grace: float
    #: the job this console launched (pid, when), until its run row shows up
    launch: tuple[int, float] | None = None
    #: when a stop was asked of the job, until its process is gone
    stopping_since: float | None = None
    #: the commands queued here that the job has not answered yet: id -> what
    awaiting: dict[int, str] = field(default_factory=dict)
    #: what the operator is to be told at the next poll
    owed: list[Notice] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.name

    def notices(self, store: StateStore | None) -> tuple[Notice, ...]:
        """What to tell the operator now: the answers the job gave to the commands queued here
        (read from ``store``), and what was owed before."""
        for command_id, what in list(self.awaiting.items()):
            command = store.command(command_id) if store is not None else None
            if command is None or command.status == CommandStatus.PENDING:
                continue
            del self.awaiting[command_id]
            if command.status == CommandStatus.APPLIED:
                self.owed.append(
                    Notice("information", f"{self.name}: {what} applied", command.reason or "")
                )
            else:
                self.owed.append(
                    Notice("error", f"{self.name}: {what} refused", command.reason or "")
                )
        told, self.owed = tuple(self.owed), []
        return told

    def queue(
        self, kind: str, target: str | None = None, args: Mapping[str, JSONValue] | None = None
    ) -> int:
        """Queue a command as the CLI does; raise ``CdcError`` with the reason it cannot apply."""
        with self.io:
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
        self.awaiting[command_id] = command.what if command else kind
        return command_id

    def verify_table(self, table: str) -> int:
        """Launch ``cdc-console verify --table table`` detached; return its pid."""
        with self.io:
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
        with self.io:
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
        with self.io:
            store = self.store()
            running = store is not None and self.jobs.sample(store, self.config_path) is not None
        if running:
            raise CdcError(f"{self.name}: a job is already running", "stop it first (x)")
        if self.launch is not None and self.jobs.is_alive(self.launch[0]):
            raise CdcError(f"{self.name}: the job started at pid {self.launch[0]} is starting")
        pid = self.jobs.launch(self.config_path, self.log_path())
        self.launch = (pid, self.clock())
        return pid

    def stop_job(self, sleep: Callable[[float], None] = time.sleep) -> str:
        """Queue ``stop``; if the job has not exited after the grace period, signal it.

        The queued command lets the job finish its batch and acknowledge; the signal is the
        fallback for a job too stuck to read its queue. Blocks for up to the grace period plus
        the launcher's own timeout, so it runs in a worker of its own.
        """
        with self.io:
            store = self.store()
            sample = self.jobs.sample(store, self.config_path) if store is not None else None
        if sample is None and self.launch is not None and self.jobs.is_alive(self.launch[0]):
            pid = self.launch[0]
            self.jobs.stop(pid, 30.0)
            return f"job pid {pid} stopped before it started a run: signalled"
        if store is None or sample is None:
            raise CdcError(f"{self.name}: no job is running", "start one with s")
        self.queue(CommandKind.STOP)
        self.stopping_since = self.clock()
        deadline = time.monotonic() + self.stop_grace
        while time.monotonic() < deadline:
            if not self.jobs.is_alive(sample.pid):
                return f"job pid {sample.pid} stopped"
            sleep(0.25)
        self.jobs.stop(sample.pid, 30.0)
        return (
            f"job pid {sample.pid} ignored the stop command for {self.stop_grace:.0f} s: signalled"
        )
