"""Lake upkeep inside the job: measure, compact and vacuum the Delta tables between batches.

The driver loop calls ``LakeUpkeep.tick`` twice a second. A tick does at most one unit of work
(one table measured, compacted or vacuumed, or one table of a queued ``optimize``/``vacuum``
command), and only when it can take the applier's lock without waiting: a batch in flight is
never delayed by a tick, and the next batch waits at most for one unit. Compaction and vacuum
commit to the table, so running them here, serialised with the MERGEs, is what keeps them from
racing the pipeline's own commits.

Schedules restart where they stopped: the last optimize and vacuum times live in the state
database (``state/lake.py``), and a table never maintained counts from the job's start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import CommandStatus
from cdc_console.core.options import SinkKind
from cdc_console.errors import redact
from cdc_console.sinks.delta import pipeline_app_id
from cdc_console.sinks.maintenance import (
    OPTIMIZE,
    VACUUM,
    LakeTable,
    MaintenanceResult,
    footprint,
    lake_tables,
    optimize,
    vacuum,
)
from cdc_console.state.lake import lake_tables as recorded_tables
from cdc_console.state.lake import record_footprint, record_maintenance
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)

MEASURE_EVERY = 30.0  # seconds between two measurements of one table
RESCAN_EVERY = 30.0  # seconds between two listings of the lake's folders


@dataclass
class _Request:
    """A queued command being worked through, one table per tick."""

    command_id: int
    action: str
    tables: list[LakeTable]
    results: list[MaintenanceResult]


class LakeUpkeep:
    def __init__(
        self,
        config: PipelineConfig,
        store: StateStore,
        lock: threading.Lock,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.lake = config.lake
        self.store = store
        self.lock = lock
        self.clock = clock
        self.enabled = config.sink.kind == SinkKind.DELTA
        self.started = clock()
        self._tables: list[LakeTable] = []
        self._scanned = 0.0
        self._measured: dict[tuple[str, str], float] = {}
        self._requests: list[_Request] = []

    def tick(self) -> MaintenanceResult | None:
        """One unit of upkeep if no batch holds the lock; what was done, if anything."""
        if not self.enabled:
            for command in self.store.pending_commands([OPTIMIZE, VACUUM]):
                self.store.finish_command(
                    command.id,
                    CommandStatus.FAILED,
                    "the sink is changelog-json: no Delta tables to keep",
                )
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            self._take_commands()
            if self._requests:
                return self._serve(self._requests[0])
            now = self.clock()
            if now - self._scanned >= RESCAN_EVERY:
                self._tables = lake_tables(self.config.sink.path, self.config.sink.mirrors)
                self._scanned = now
            for table in self._tables:
                if now - self._measured.get((table.name, table.kind), 0.0) >= MEASURE_EVERY:
                    self._measure(table)
                    return None
            due = self._due(now)
            if due is not None:
                return self._run(*due)
            return None
        except Exception as exc:  # upkeep must never stop the stream
            log.warning("lake upkeep failed, retried later: %s", redact(str(exc)))
            return None
        finally:
            self.lock.release()

    def _due(self, now: float) -> tuple[LakeTable, str] | None:
        last = {(t.name, t.kind): t for t in recorded_tables(self.store)}
        for action, every in (
            (OPTIMIZE, self.lake.optimize_every),
            (VACUUM, self.lake.vacuum_every),
        ):
            if every <= 0:
                continue
            for table in self._tables:
                state = last.get((table.name, table.kind))
                done = None
                if state is not None:
                    done = state.optimized_at if action == OPTIMIZE else state.vacuumed_at
                if now - max(done or 0.0, self.started) >= every:
                    return table, action
        return None

    def _run(self, table: LakeTable, action: str) -> MaintenanceResult:
        if action == OPTIMIZE:
            result = optimize(table, self.lake)
        else:
            result = vacuum(table, self.lake, app_id=pipeline_app_id(self.config.name))
        summary = result.describe()
        record_maintenance(self.store, table.name, table.kind, str(table.path), action, summary)
        self._measure(table)
        if result.files_removed:
            log.info("lake: %s", summary)
            self.store.log_event("lake", summary, table_id=table.name)
        return result

    def _measure(self, table: LakeTable) -> None:
        self._measured[table.name, table.kind] = self.clock()
        try:
            measure(self.store, table, self.lake.target_file_size)
        except FileNotFoundError:
            return

    def _take_commands(self) -> None:
        taken = {r.command_id for r in self._requests}
        for command in self.store.pending_commands([OPTIMIZE, VACUUM]):
            if command.id in taken:
                continue
            tables = lake_tables(self.config.sink.path, self.config.sink.mirrors)
            if command.target is not None:
                tables = [t for t in tables if t.name == command.target]
            if not tables:
                self.store.finish_command(
                    command.id,
                    CommandStatus.FAILED,
                    f"the lake {self.config.sink.path} has no table "
                    f"{command.target or '(it is empty)'} yet",
                )
                continue
            log.info("%s: %s %d table(s)", command.describe(), command.kind, len(tables))
            self._requests.append(_Request(command.id, command.kind, tables, []))

    def _serve(self, request: _Request) -> MaintenanceResult:
        table = request.tables.pop(0)
        result = self._run(table, request.action)
        request.results.append(result)
        if not request.tables:
            self._requests.remove(request)
            removed = sum(r.files_removed for r in request.results)
            freed = sum(r.bytes_removed for r in request.results)
            verb = "compacted" if request.action == OPTIMIZE else "deleted"
            self.store.finish_command(
                request.command_id,
                CommandStatus.APPLIED,
                f"{verb} {removed} file(s), {freed} bytes, over {len(request.results)} table(s): "
                + "; ".join(r.describe() for r in request.results),
            )
        return result


def measure(store: StateStore, table: LakeTable, target_file_size: int) -> None:
    """Measure one Delta table and record what it holds for the console and ``status``."""
    found = footprint(table, target_file_size)
    record_footprint(
        store,
        table.name,
        table.kind,
        str(table.path),
        version=found.version,
        files=found.files,
        live_bytes=found.live_bytes,
        disk_bytes=found.disk_bytes,
        small_files=found.small_files,
        rows=found.rows,
    )
