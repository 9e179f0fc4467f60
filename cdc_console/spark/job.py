"""The pipeline job: preflight, register tables, recover, then run the streaming query.

``run`` blocks until SIGINT/SIGTERM (graceful: the current batch finishes or is abandoned cleanly
and the next start resumes it), until every table is streaming and the committed position reached
the server's head (``until_caught_up``), or until the snapshot is done (``snapshot-only``).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

from cdc_console import errors
from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import (
    CommandKind,
    CommandStatus,
    Lifecycle,
)
from cdc_console.core.options import SinkKind, StartupMode
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.errors import CdcError, UsageError, redact
from cdc_console.metrics.server import serve_metrics
from cdc_console.mysql import native
from cdc_console.mysql.checks import preflight
from cdc_console.mysql.connection import close_quietly
from cdc_console.mysql.retry import RetryAbandoned, call_with_retry
from cdc_console.sinks.mirror_places import check_mirror_places
from cdc_console.sinks.schema_history import record_followed
from cdc_console.source.failover import connect_following
from cdc_console.source.registration import TableRegistration
from cdc_console.spark.lag_monitor import LagMonitor
from cdc_console.spark.query_restarts import QueryRestarts, poll
from cdc_console.spark.shutdown import drain, quiet_cancellations, stop_query
from cdc_console.spark.start_checks import (
    check_binlog_available,
    check_lake_matches_state,
    narrow_pending_plan,
    read_head,
    snapshot_only_done,
    wait_for_source,
)
from cdc_console.spark.verify_schedule import VerifySchedule
from cdc_console.state.readonly import captured_tables
from cdc_console.state.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from cdc_console.metrics.server import MetricsServer
    from cdc_console.spark.applier import BatchApplier

log = logging.getLogger(__name__)

T = TypeVar("T")

#: how long a stop waits for the batch in flight before abandoning it (a second signal: at once)
STOP_GRACE_SECONDS = 60.0


class PipelineJob:
    def __init__(self, config: PipelineConfig) -> None:
        if config.path is None:
            raise UsageError("the pipeline needs a config file", "pass --config")
        self.config = config
        self.stop_requested = threading.Event()
        self.store: StateStore | None = None
        self.run_id = 0

    def request_stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """First signal: stop after the batch in flight. Second: exit now (like a crash, from
        which the next start recovers; nothing committed is lost)."""
        if self.stop_requested.is_set() and signum:
            log.warning(
                "second signal (%s): exiting now; the next start resumes from the last "
                "committed batch",
                signum,
            )
            logging.shutdown()
            os._exit(128 + signum)
        if signum:
            log.info("stop requested (signal %s): finishing the current batch", signum)
        self.stop_requested.set()

    def register_tables(
        self, store: StateStore, schemas: list[TableSchema], gone: Sequence[TableId] = ()
    ) -> None:
        """Record the configured tables (``source.registration``); the server's head is read
        only when a table starts from it, with the source's outage waited out."""
        followed = (
            functools.partial(record_followed, self.config.sink.path)
            if self.config.sink.kind == SinkKind.DELTA
            else None
        )
        TableRegistration(
            store,
            self.config,
            lambda: self._with_source("start-up", functools.partial(read_head, self.config.source)),
            followed,
        ).register(schemas, gone)

    def _follow_source(self, store: StateStore) -> None:
        """Before anything reads a stored position: if the source is now another server (a
        failover while the job was down), re-map the state to it by GTID."""

        def follow() -> None:
            conn, _ = connect_following(store, self.config.source, self.config.source.server_ids[0])
            close_quietly(conn)

        self._with_source("start-up", follow)

    def _with_source(self, what: str, work: Callable[[], T]) -> T:
        """``work()`` with a source outage waited out (start-up steps after the preflight)."""
        return call_with_retry(
            work,
            what=what,
            outage_seconds=self.config.source.outage_seconds,
            observer=self.store,
            abandon=self.stop_requested.is_set,
        )

    def run(self, until_caught_up: bool = False) -> int:
        if not wait_for_source(self.config, self.stop_requested.is_set):
            return 0
        _, schemas, gone = preflight(self.config, captured_tables(self.config.state_path))
        store = StateStore(self.config.state_path)
        self.store = store
        self.register_tables(store, schemas, gone)
        store.set_draining(False)  # a stop that never finished (the job was killed meanwhile)
        store.close_outages("a new run started")
        store.record_throttled(None)  # the last run's load check said so, not this one's
        started = time.time()
        self.run_id = store.start_run(os.getpid(), socket.gethostname(), self.config.spark.master)
        retire_stale_stops(store, started)
        store.log_event(
            "job",
            f"job started (run {self.run_id}, pid {os.getpid()}, "
            f"master {self.config.spark.master})",
        )
        try:
            from cdc_console.spark.applier import BatchApplier

            sink = self.config.sink
            check_mirror_places(
                store, sink.path, sink.mirrors, [t.table_id for t in store.tables()]
            )
            applier = BatchApplier(self.config, store)
            recovered = applier.recover()
            if recovered:
                store.log_event("job", f"recovered {recovered} staged batch(es) after a crash")
            # After the recovery: a staged batch's commit writes positions of the server it
            # was read from, so a failover is followed only once none is left.
            self._follow_source(store)
            narrow_pending_plan(store)
            check_lake_matches_state(store, applier.sink, self.config.sink.path)
            check_binlog_available(
                store, self.config, functools.partial(self._with_source, "start-up")
            )
            if snapshot_only_done(self.config, store):
                code = 0
            else:
                code = self._stream(store, applier, until_caught_up)
        except RetryAbandoned:
            code = 0
            log.info("%s", stopped_at(store))
        except CdcError as exc:
            self._finish(store, "failed", exc.exit_code, str(exc))
            raise
        except Exception as exc:
            error = error_from_failure(exc)
            self._finish(store, "failed", error.exit_code, str(error))
            raise error from None
        self._finish(store, "stopped", code, None)
        return code

    def _finish(self, store: StateStore, status: str, code: int, error: str | None) -> None:
        store.close_outages(f"job {status}")
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

    def _stream(self, store: StateStore, applier: BatchApplier, until_caught_up: bool) -> int:
        from cdc_console.spark.class_archive import driver_java_options
        from cdc_console.spark.datasource import SOURCE_NAME, CdcDataSource
        from cdc_console.spark.session import spark_session
        from cdc_console.spark.warm_up import warm_python_workers

        spark = spark_session(self.config, driver_java_options(self.config))
        install_signal_handlers(self)  # the SparkContext put its own SIGINT handler in place
        ui = spark.sparkContext.uiWebUrl
        store.update_run(self.run_id, spark_ui=ui)
        log.info("spark %s on %s, UI %s", spark.version, self.config.spark.master, ui)
        decoders = native.decoders_in_use()
        if decoders != "compiled":
            why = (
                f"switched off ({native.PURE_PYTHON_ENV}=1)"
                if decoders == "switched off"
                else "not built (install gcc and python3-dev, then reinstall cdc-console)"
            )
            log.warning(
                "the compiled row decoders are %s; snapshot and binlog readers decode in pure "
                "Python: the same rows at two to three times their CPU",
                why,
            )
        spark.dataSource.register(CdcDataSource)
        # woken by the binlog, the planner itself waits up to a trigger when there is nothing
        trigger = (
            "0 seconds"
            if self.config.spark.wake_on_data
            else f"{self.config.spark.trigger_seconds} seconds"
        )
        warm_up: threading.Thread | None = None

        def start_query() -> StreamingQuery:
            nonlocal warm_up
            source = spark.readStream.format(SOURCE_NAME).option("config", str(self.config.path))
            frame = source.load()
            if warm_up is None:
                # After the stream's load, not beside it: Spark creates a Python data source in
                # a helper worker it keeps idle for a minute; created together, the two loads
                # would fork two of them (55 MB at the job's peak), one after the other they
                # share one, and the warm-up's load stays off the critical path.
                warm_up = warm_python_workers(spark)
            return (
                frame.writeStream.foreachBatch(applier)
                .option("checkpointLocation", str(self.config.spark.checkpoint))
                .trigger(processingTime=trigger)
                .queryName(f"cdc-{self.config.name}")
                .start()
            )

        endpoint = serve_metrics(self.config, store, self.run_id)
        if endpoint is not None:
            applier.on_applied = endpoint.metrics.observe_batch
        try:
            return self._loop(store, applier, spark, start_query, until_caught_up, endpoint)
        finally:
            if endpoint is not None:
                endpoint.close()

    def _loop(
        self,
        store: StateStore,
        applier: BatchApplier,
        spark: SparkSession,
        start_query: Callable[[], StreamingQuery],
        until_caught_up: bool,
        endpoint: MetricsServer | None,
    ) -> int:
        query = start_query()
        monitor = LagMonitor(self.config, store)
        from cdc_console.spark.lake_upkeep import LakeUpkeep

        upkeep = LakeUpkeep(self.config, store, applier.lock)
        verification = VerifySchedule(self.config, store)
        restarts = QueryRestarts()
        try:
            while not self.stop_requested.is_set():
                if endpoint is not None:
                    endpoint.metrics.beat()
                active, failure = poll(query)
                if failure is not None:
                    pause = restarts.allow(failure)
                    if pause is None:
                        raise failure
                    query = self._restart_after(store, applier, failure, pause, start_query)
                    continue
                applier.check()
                if not active:
                    break
                store.update_run(self.run_id, heartbeat_at=time.time())
                self._take_stop_command(store)
                caught_up = monitor.sample()
                moved_to = monitor.source_moved()
                if moved_to is not None:
                    applier.wait_applied()  # the re-mapping waits for no batch to be staged
                    query = restart_for_failover(store, query, moved_to, start_query)
                    continue
                if finished(self.config, store, caught_up, until_caught_up):
                    break
                upkeep.tick()
                verification.tick()
                self.stop_requested.wait(0.5)
        except BaseException:
            stop_query(query, spark)
            applier.wait_applied(STOP_GRACE_SECONDS, quiet=True)
            raise

        def tick() -> None:
            store.update_run(self.run_id, heartbeat_at=time.time())
            applier.check()

        try:
            drain(store, query, STOP_GRACE_SECONDS, tick=tick)
        except BaseException:
            stop_query(query, spark)
            applier.wait_applied(STOP_GRACE_SECONDS, quiet=True)
            raise
        stop_query(query, spark)
        applier.wait_applied(STOP_GRACE_SECONDS)
        store.set_draining(False)
        log.info("%s", stopped_at(store))
        return 0

    def _restart_after(
        self,
        store: StateStore,
        applier: BatchApplier,
        failure: BaseException,
        pause: float,
        start_query: Callable[[], StreamingQuery],
    ) -> StreamingQuery:
        """Start the query again after a fault that passes (``query_restarts``)."""
        first = str(failure).strip().splitlines()[0][:300] if str(failure).strip() else ""
        message = f"the streaming query failed ({first}); started again in {pause:.0f} s"
        log.warning("%s", message)
        store.log_event("job", message, level="warning")
        applier.wait_applied()
        self.stop_requested.wait(pause)
        return start_query()

    def _take_stop_command(self, store: StateStore) -> None:
        """Acknowledge a queued ``stop`` and stop like SIGTERM: the current batch finishes."""
        for command in store.pending_commands([CommandKind.STOP]):
            store.finish_command(
                command.id,
                CommandStatus.APPLIED,
                f"stopping run {self.run_id} (pid {os.getpid()}): the current batch finishes, "
                "then the job exits; 'cdc-console run' resumes it",
            )
            store.log_event("command", f"{command.describe()} applied: job stopping")
            log.info("%s: stopping", command.describe())
            self.stop_requested.set()


def retire_stale_stops(store: StateStore, started: float) -> None:
    """Refuse the ``stop`` commands issued before this run started: they were meant for a job
    that is gone, and applying them now would stop the job the operator just started."""
    for command in store.pending_commands([CommandKind.STOP]):
        if command.issued_at < started:
            store.finish_command(
                command.id,
                CommandStatus.FAILED,
                "no job was running when it was issued (this run started after it)",
            )


# The message runs over following lines (a multi-line DDL statement) up to the fix line, a blank
# line or a Java frame.
_OUR_ERROR = re.compile(
    r"cdc_console\.errors\.(?P<kind>\w+): (?P<message>[^\n]+(?:\n(?!  fix: |\t)[^\n]+)*)"
    r"(?:\n  fix: (?P<hint>[^\n]+))?"
)


def error_from_failure(exc: BaseException) -> CdcError:
    """Our own error, message and fix, out of a Spark/Py4J failure when a task raised one.

    Spark reports a failed task as a Java exception whose text embeds the worker's Python
    traceback; its last line names our error class and message, the next one our fix. Printing
    that instead of the trace is what lets the CLI answer "error: ... fix: ..." and nothing else.
    """
    text = redact(str(exc))
    found = list(_OUR_ERROR.finditer(text))
    if found:
        match = found[-1]
        kind = getattr(errors, match["kind"], None)
        cls = kind if isinstance(kind, type) and issubclass(kind, CdcError) else CdcError
        return cls(match["message"].strip(), (match["hint"] or "").strip())
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0][:500] if lines else type(exc).__name__
    # a JVM-side failure (out of memory, an executor lost) is the operator's to fix; a Python
    # exception of our own that no layer turned into an error is a bug
    from_jvm = any(mark in text for mark in ("java.", "org.apache.spark", "py4j"))
    return (CdcError if from_jvm else errors.InternalError)(
        f"the pipeline failed: {first}",
        "see the job's log above for the full Spark trace; the next start resumes from the "
        "last committed batch",
    )


def stopped_at(store: StateStore) -> str:
    """Where a stopped job left the pipeline, for its last log line."""
    committed = store.committed_offset()
    last = store.last_batch()
    after = f" after batch {last.batch_no}" if last is not None else ""
    if committed is None:
        return f"stopped{after}; no binlog window committed yet (the snapshot comes first)"
    return f"stopped at {committed}{after}"


def install_signal_handlers(job: PipelineJob) -> None:
    signal.signal(signal.SIGTERM, job.request_stop)
    signal.signal(signal.SIGINT, job.request_stop)


def restart_for_failover(
    store: StateStore,
    query: StreamingQuery,
    moved_to: str,
    start_query: Callable[[], StreamingQuery],
) -> StreamingQuery:
    """Abandon the batch in flight (it is pinned to the server that is gone; nothing of it
    was applied) and start the query again: the planner re-maps the state and that batch's
    plan to ``moved_to`` by GTID, and the batch is read there under its own number."""
    message = (
        f"the source answers from another server ({moved_to}): restarting the streaming "
        "query so the batch in flight is re-planned there by GTID"
    )
    log.warning("%s", message)
    store.log_event("source", message, level="warning")
    with quiet_cancellations():
        try:
            query.stop()
        except Exception as exc:
            log.warning("stopping the streaming query: %s", str(exc).splitlines()[0][:200])
    return start_query()


def finished(
    config: PipelineConfig, store: StateStore, caught_up: bool, until_caught_up: bool
) -> bool:
    """Whether the job's work is done: a snapshot-only run snapshotted every table, or a run
    until caught up streams every table at the server's head with no command queued."""
    tables = [t for t in store.tables() if t.state not in (Lifecycle.REMOVED, Lifecycle.PAUSED)]
    if config.snapshot.startup_mode == StartupMode.SNAPSHOT_ONLY:
        if tables and all(t.state == Lifecycle.SNAPSHOT_DONE for t in tables):
            log.info("snapshot-only: every table snapshotted, exiting")
            return True
        return False
    if (
        until_caught_up
        and tables
        and all(t.state == Lifecycle.STREAMING for t in tables)
        and caught_up
        # A queued command (a re-dump, say) changes the tables at the next plan; the
        # position alone can reach the head in between.
        and not any(c.kind != CommandKind.STOP for c in store.pending_commands())
    ):
        log.info("caught up: every table streaming at the server's head, exiting")
        return True
    return False
