"""The pipeline job: preflight, register tables, recover, then run the streaming query.

``run`` blocks until SIGINT/SIGTERM (graceful: the current batch finishes or is abandoned cleanly
and the next start resumes it), until every table is streaming and the committed position reached
the server's head (``until_caught_up``), or until the snapshot is done (``snapshot-only``).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
import time
from types import FrameType
from typing import Any

from cdc_console.config import PipelineConfig
from cdc_console.errors import CdcError, SchemaChangedError, redact
from cdc_console.mysql.checks import preflight
from cdc_console.mysql.connection import connect
from cdc_console.mysql.lag import binlog_distance
from cdc_console.mysql.position import binary_logs, current_position
from cdc_console.mysql.schema import TableSchema, schema_to_dict
from cdc_console.source.offset import BinlogOffset
from cdc_console.state.store import (
    SNAPSHOT_DONE,
    SNAPSHOTTING,
    STREAMING,
    StateStore,
)

log = logging.getLogger(__name__)


class PipelineJob:
    def __init__(self, config: PipelineConfig) -> None:
        if config.path is None:
            raise CdcError("the pipeline needs a config file", "pass --config")
        self.config = config
        self.stop_requested = threading.Event()
        self.store: StateStore | None = None
        self.run_id = 0

    def request_stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        if not self.stop_requested.is_set():
            log.info("stop requested (signal %s): finishing the current batch", signum)
        self.stop_requested.set()

    def register_tables(self, store: StateStore, schemas: list[TableSchema]) -> None:
        mode = self.config.snapshot.startup_mode
        head: BinlogOffset | None = None
        known = store.schemas()
        for schema in schemas:
            previous = known.get(schema.table_id)
            current = schema_to_dict(schema)
            if previous is not None and previous["columns"] != current["columns"]:
                raise SchemaChangedError(
                    f"{schema.table_id} changed shape while the pipeline was stopped",
                    f"re-snapshot it: 'cdc-console redump --table {schema.table_id}'",
                )
            if mode == "latest-offset":
                if head is None:
                    conn = connect(self.config.source)
                    head = current_position(conn)
                    conn.close()
                added = store.ensure_table(schema.table_id, schema.chunk_key, STREAMING, head)
            else:
                added = store.ensure_table(schema.table_id, schema.chunk_key, SNAPSHOTTING)
            store.set_schema(schema.table_id, current)
            if added:
                store.log_event(
                    "table", f"capturing {schema.table_id} ({mode})", table_id=schema.table_id
                )

    def run(self, until_caught_up: bool = False) -> int:
        _, schemas = preflight(self.config)
        store = StateStore(self.config.state_path)
        self.store = store
        self.register_tables(store, schemas)
        self.run_id = store.start_run(os.getpid(), socket.gethostname(), self.config.spark.master)
        store.log_event(
            "job",
            f"job started (run {self.run_id}, pid {os.getpid()}, "
            f"master {self.config.spark.master})",
        )
        from cdc_console.spark.applier import BatchApplier

        applier = BatchApplier(self.config, store)
        recovered = applier.recover()
        if recovered:
            store.log_event("job", f"recovered {recovered} staged batch(es) after a crash")
        try:
            code = self._stream(store, applier, until_caught_up)
        except CdcError as exc:
            self._finish(store, "failed", 2, str(exc))
            raise
        except Exception as exc:
            message = extract_error(exc)
            self._finish(store, "failed", 1, message)
            raise CdcError(f"the pipeline failed: {message}") from None
        self._finish(store, "stopped", code, None)
        return code

    def _finish(self, store: StateStore, status: str, code: int, error: str | None) -> None:
        store.update_run(
            self.run_id,
            status=status,
            exit_code=code,
            ended_at=time.time(),
            error=redact(error) if error else None,
        )
        store.log_event(
            "job",
            f"job {status}" + (f": {redact(error)}" if error else ""),
            level="error" if error else "info",
        )

    def _stream(self, store: StateStore, applier: Any, until_caught_up: bool) -> int:
        from cdc_console.spark.datasource import SOURCE_NAME, CdcDataSource
        from cdc_console.spark.session import spark_session

        spark = spark_session(self.config)
        ui = spark.sparkContext.uiWebUrl
        store.update_run(self.run_id, spark_ui=ui)
        log.info("spark %s on %s, UI %s", spark.version, self.config.spark.master, ui)
        spark.dataSource.register(CdcDataSource)
        trigger = f"{self.config.spark.trigger_seconds} seconds"
        query = (
            spark.readStream.format(SOURCE_NAME)
            .option("config", str(self.config.path))
            .load()
            .writeStream.foreachBatch(applier)
            .option("checkpointLocation", str(self.config.spark.checkpoint))
            .trigger(processingTime=trigger)
            .queryName(f"cdc-{self.config.name}")
            .start()
        )
        monitor = LagMonitor(self.config, store)
        try:
            while not self.stop_requested.is_set():
                failure = query.exception()
                if failure is not None:
                    raise failure
                if not query.isActive:
                    break
                store.update_run(self.run_id, heartbeat_at=time.time())
                caught_up = monitor.sample()
                if self._done(store, caught_up, until_caught_up):
                    break
                self.stop_requested.wait(0.5)
        finally:
            log.info("stopping the streaming query")
            query.stop()
            spark.stop()
        return 0

    def _done(self, store: StateStore, caught_up: bool, until_caught_up: bool) -> bool:
        tables = store.tables()
        if self.config.snapshot.startup_mode == "snapshot-only":
            if tables and all(t.state == SNAPSHOT_DONE for t in tables):
                log.info("snapshot-only: every table snapshotted, exiting")
                return True
            return False
        if until_caught_up and tables and all(t.state == STREAMING for t in tables) and caught_up:
            log.info("caught up: every table streaming at the server's head, exiting")
            return True
        return False


class LagMonitor:
    """Samples committed position vs head; the event lag of an idle, caught-up stream is zero."""

    def __init__(self, config: PipelineConfig, store: StateStore) -> None:
        self.config = config
        self.store = store
        self.conn: Any = None
        self.last_sample = 0.0

    def sample(self) -> bool:
        try:
            if self.conn is None or not self.conn.open:
                self.conn = connect(self.config.source)
            head = current_position(self.conn)
            logs = binary_logs(self.conn)
        except Exception as exc:
            log.warning("lag probe failed: %s", redact(str(exc)))
            self.conn = None
            return False
        committed = self.store.committed_offset()
        caught_up = committed is not None and committed >= head
        now = time.time()
        if now - self.last_sample >= self.config.heartbeat_seconds:
            self.last_sample = now
            behind = binlog_distance(committed, head, logs) if committed else (None, None)
            event_lag = 0 if caught_up else self._event_lag(now)
            self.store.add_lag_sample(committed, head, behind[0], behind[1], event_lag)
        return caught_up

    def _event_lag(self, now: float) -> int | None:
        stamps = [t.last_event_ts for t in self.store.tables() if t.last_event_ts]
        return int(now * 1000 - max(stamps)) if stamps else None


def extract_error(exc: BaseException) -> str:
    """The useful line of a Spark/Py4J failure: our own error message when there is one."""
    text = redact(str(exc))
    match = re.findall(r"cdc_console\.errors\.\w+: (.+)", text)
    if match:
        return str(match[-1]).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:500] if lines else type(exc).__name__


def install_signal_handlers(job: PipelineJob) -> None:
    signal.signal(signal.SIGTERM, job.request_stop)
    signal.signal(signal.SIGINT, job.request_stop)
