"""The driver-side half of the data source: plans batches and turns them into partitions.

Runs in Spark's long-lived Python process for the streaming source, next to (not inside) the
driver's own Python process, so it opens its own state store and source connection.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pymysql

from cdc_console.config import PipelineConfig, SourceConfig, load_config
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import BatchStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.options import SchemaChanges, SinkKind, SnapshotWrites, StartupMode
from cdc_console.core.plan import BatchPlan
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.schema_change import ChangeCause, SchemaChange
from cdc_console.core.splits import SnapshotSplit
from cdc_console.errors import SourceError
from cdc_console.mysql.checks import check_table
from cdc_console.mysql.connection import close_quietly
from cdc_console.mysql.position import (
    ACCESS_DENIED_CODES,
    binary_logs,
    current_position,
    gtid_of,
)
from cdc_console.mysql.retry import RetryAbandoned, call_with_retry
from cdc_console.mysql.schema import null_default_columns
from cdc_console.mysql.source_load import read_load
from cdc_console.mysql.window_end import bounded_window_end, transaction_starts
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.control import CommandProcessor
from cdc_console.source.evolution import Reread, evolution, follow_rows_change
from cdc_console.source.failover import connect_following
from cdc_console.source.splitter import ChunkSplitter
from cdc_console.source.throttle import LoadThrottle
from cdc_console.spark.partitions import NoopTask, PlanPartition
from cdc_console.spark.plan_tasks import appendable_tables, plan_tasks
from cdc_console.state.store import StateStore, TableState

log = logging.getLogger(__name__)

#: how soon a planner with ``[spark] wake_on_data`` looks at the binlog's head again after it
#: planned a batch; each look that finds nothing new doubles the wait, up to the longest
WAKE_POLL_SECONDS = 0.05
WAKE_POLL_LONGEST_SECONDS = 0.4


class Planner:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.store = StateStore(config.state_path)
        self._conn: pymysql.connections.Connection | None = None
        #: the wait between two looks at the head with ``[spark] wake_on_data`` (backs off)
        self._wake_poll = WAKE_POLL_SECONDS
        #: the server planned against: what the executors read (never another of the list)
        self._source = config.source.pinned(*config.source.endpoints()[0])
        self.assigner = HybridSplitAssigner(
            self.store,
            self._split_table,
            self._read_head,
            config.source.server_ids,
            config.snapshot.splits_per_batch,
            CommandProcessor(
                self.store,
                self._describe_table,
                snapshot_only=config.snapshot.startup_mode == StartupMode.SNAPSHOT_ONLY,
            ),
            readers=config.snapshot.parallelism,
            binlog_files=self._binlog_files,
            settle_schema=self._settle_schema,
            schema_followed=self._record_schema_change
            if config.sink.kind == SinkKind.DELTA
            else None,
            budget=config.snapshot.batch_budget,
            window_end=self._window_end,
            split_tail=self._split_tail,
            throttle=LoadThrottle(
                dict(config.source.max_load),
                lambda names: read_load(self._connection(), names),
                self.store,
            ),
        )
        self._listing_denied = False

    @classmethod
    def from_config_path(cls, path: str) -> Planner:
        return cls(load_config(path))

    def _connection(self) -> pymysql.connections.Connection:
        """The planner's connection; a new one checks it reached the server the state was
        recorded on, and follows a failover by GTID when not (``source.failover``)."""
        if self._conn is None or not self._conn.open:
            known = self.store.source_identity()
            self._conn, self._source = connect_following(
                self.store, self._preferred(), self.config.source.server_ids[0]
            )
            if known is not None and self.store.source_identity() != known:
                # Whatever the plan being made had read of the state is in the old server's
                # coordinates: make it again from the re-mapped state.
                raise SourceError(
                    "the source moved to another server; planning again from the re-mapped state",
                    transient=True,
                )
        return self._conn

    def _preferred(self) -> SourceConfig:
        """The source with the server last planned against tried first: once a failover has
        happened, a returning old primary must not win just by being first in the list."""
        source = self.config.source
        current = (self._source.host, self._source.port)
        endpoints = source.endpoints()
        if len(endpoints) < 2 or current not in endpoints:
            return source
        index = endpoints.index(current)
        return replace(source, hosts=endpoints[index:] + endpoints[:index])

    def _read_head(self) -> BinlogOffset:
        try:
            return current_position(self._connection(), with_gtid=True)
        except pymysql.err.OperationalError:
            self._conn = None
            return current_position(self._connection(), with_gtid=True)

    def _window_end(self, start: BinlogOffset, head: BinlogOffset) -> BinlogOffset:
        """The window's end under ``[pipeline] max_window_bytes``; the head, with one warning,
        where the user may not list binlog events (the window is then unbounded, as before)."""
        if self._listing_denied:
            return head
        try:
            return bounded_window_end(self._connection(), start, head, self.config.max_window_bytes)
        except pymysql.err.OperationalError as exc:
            self._listing_failed(exc)
            return head

    def _part_starts(
        self, start: BinlogOffset, end: BinlogOffset, targets: list[int]
    ) -> list[BinlogOffset]:
        """``window_parts``' cuts; none (one reader), with one warning, where the user may not
        list binlog events."""
        if self._listing_denied:
            return []
        try:
            return transaction_starts(self._connection(), start, end, targets)
        except pymysql.err.OperationalError as exc:
            self._listing_failed(exc)
            return []

    def _listing_failed(self, exc: pymysql.err.OperationalError) -> None:
        """Re-raise ``exc`` unless the user may not run SHOW BINLOG EVENTS; warn of that once."""
        if not exc.args or exc.args[0] not in ACCESS_DENIED_CODES:
            raise exc
        if not self._listing_denied:
            log.warning(
                "binlog windows are neither bounded nor read in parts: the source user may not "
                "run SHOW BINLOG EVENTS (%s); a long catch-up is then one batch held whole in "
                "memory and read by one task. Fix: GRANT REPLICATION SLAVE ON *.* (MariaDB: "
                "BINLOG MONITOR) to the user",
                exc.args[1] if len(exc.args) > 1 else exc,
            )
        self._listing_denied = True

    def _binlog_files(self) -> list[str]:
        return [name for name, _size in binary_logs(self._connection())]

    def _settle_schema(
        self, table: TableState, change: SchemaChange
    ) -> tuple[TableSchema, BinlogOffset] | Reread | str:
        """The table's shape now and where its rows in that shape begin (with its GTID state,
        for failover) when the change applies in place; a ``Reread``; or why it is parked."""
        if self.config.schema_changes != SchemaChanges.EVOLVE:
            return f'schema_changes is "{self.config.schema_changes}"'
        stored = self.store.schemas().get(table.table_id)
        if stored is None:
            return "no schema of it is stored"
        try:
            new = self._describe_table(table.table_id)
        except SourceError as exc:
            if exc.transient:
                raise
            return exc.message
        conn = self._connection()
        if change.cause is not ChangeCause.DDL:
            return follow_rows_change(stored, new, change)
        result = evolution(stored, new, change.what, null_default_columns(conn, table.table_id))
        if isinstance(result, str | Reread):
            return result
        return result, gtid_of(conn, change.after)

    def _record_schema_change(
        self,
        table_id: TableId,
        change: SchemaChange | None,
        outcome: str,
        detail: str,
        schema: TableSchema | None,
    ) -> None:
        # Here, not at the top: the schema history writes Delta, and the planner lives in Spark's
        # streaming runner, which should not load deltalake for a DDL that may never come.
        from cdc_console.sinks.schema_history import record_followed

        record_followed(self.config.sink.path, table_id, change, outcome, detail, schema)

    def _describe_table(self, table_id: TableId) -> TableSchema:
        try:
            return check_table(self._connection(), self.config, table_id)
        except pymysql.err.OperationalError:
            self._conn = None
            return check_table(self._connection(), self.config, table_id)

    def _splitter(self) -> ChunkSplitter:
        snap = self.config.snapshot
        return ChunkSplitter(
            self._connection(),
            snap.chunk_size,
            snap.distribution_factor_upper,
            snap.distribution_factor_lower,
        )

    def _split_table(self, schema: TableSchema) -> list[SnapshotSplit]:
        return self._splitter().split(schema)

    def _split_tail(self, schema: TableSchema, tail: ChunkRange) -> list[ChunkRange]:
        return self._splitter().split_tail(schema, tail)

    def next_plan(self) -> BatchPlan | None:
        """The next plan; a source outage is waited out here, inside ``latestOffset``.

        Spark ends the query on any exception from ``latestOffset``, so the wait must happen
        in it. A plan is persisted only once complete, so an attempt cut short by the outage
        left nothing behind; a stop requested meanwhile ends the wait with no new batch.
        """
        try:
            return call_with_retry(
                self.assigner.next_plan,
                what="planner",
                outage_seconds=self.config.source.outage_seconds,
                observer=self.store,
                abandon=self.store.draining,
                on_failure=self._drop_connection,
            )
        except RetryAbandoned:
            log.info("planner: stopping while the source is unreachable; no new batch")
            return None

    def wait_for_plan(self) -> BatchPlan | None:
        """``next_plan``; with ``[spark] wake_on_data``, while there is nothing to plan, wait for
        the binlog to move for up to a trigger.

        Spark then triggers back to back, so a change is planned within a look of its commit
        rather than at the next trigger (half a trigger later, on average). The looks back off:
        ``WAKE_POLL_SECONDS`` after a look that found the head or the applied batch moved,
        doubling with each look that finds nothing, up to ``WAKE_POLL_LONGEST_SECONDS``. A busy stream is looked at every 50 ms
        (the next change is near), an idle one about three times a second (each look is a
        query that reads no table, and an SQLite read). A queued command waits for the
        trigger's end, as before.
        """
        plan = self.next_plan()
        spark = self.config.spark
        if plan is not None:
            self._wake_poll = WAKE_POLL_SECONDS
        if plan is not None or not spark.wake_on_data:
            return plan
        deadline = time.monotonic() + spark.trigger_seconds
        try:
            # the head, and the last batch applied: a batch still being applied may be what
            # held this plan back (``source.plan_past``)
            seen = (self._quick_head(), self.store.last_applied_batch())
            while time.monotonic() < deadline and not self.store.draining():
                time.sleep(min(self._wake_poll, max(0.0, deadline - time.monotonic())))
                now = (self._quick_head(), self.store.last_applied_batch())
                if now == seen:
                    self._wake_poll = min(WAKE_POLL_LONGEST_SECONDS, self._wake_poll * 2)
                    continue
                # something moved: a change to plan now, or one held until the batch in
                # flight is applied, which is near; either way look again soon
                self._wake_poll = WAKE_POLL_SECONDS
                plan = self.next_plan()
                if plan is not None:
                    return plan
                seen = now
        except pymysql.err.Error as exc:
            # the next trigger's plan meets the fault and waits it out, visibly
            log.debug("planner: head watch stopped: %s", exc)
            self._conn = None
        return None

    def _quick_head(self) -> BinlogOffset:
        """The binlog's head without its GTID set: what a poll for movement needs."""
        return current_position(self._connection())

    def _drop_connection(self, _error: BaseException) -> None:
        close_quietly(self._conn)
        self._conn = None

    @property
    def _lake_target(self) -> LakeTarget | None:
        """Where reader tasks write typed chunks' files (``[lake] snapshot_writes``), if they do."""
        sink, lake = self.config.sink, self.config.lake
        if sink.kind != SinkKind.DELTA or lake.snapshot_writes != SnapshotWrites.EXECUTORS:
            return None
        return LakeTarget(sink.path, sink.changelog, lake, sink.mirrors)

    def partitions(self, start: int, end: int) -> list[PlanPartition]:
        parts: list[PlanPartition] = []
        schemas = self.store.schemas()
        appendable = appendable_tables(self.config, self.store.tables(), schemas)
        lake = self._lake_target
        # Connected (and failed over, if the source moved) before the tasks are pinned to it.
        call_with_retry(
            self._connection,
            what="planner",
            outage_seconds=self.config.source.outage_seconds,
            observer=self.store,
            on_failure=self._drop_connection,
        )
        source = self._source
        for batch_no in range(start + 1, end + 1):
            found = self.store.batch(batch_no)
            if found is None or found.status != BatchStatus.PLANNED:
                parts.append(PlanPartition(batch_no, NoopTask(), source))
                continue
            for task in plan_tasks(
                found.plan, schemas, appendable, self.config, self._part_starts, lake
            ):
                parts.append(PlanPartition(batch_no, task, source))
        return parts

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.store.close()
