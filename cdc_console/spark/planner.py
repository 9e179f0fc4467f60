"""The driver-side half of the data source: plans batches and turns them into partitions.

Runs in Spark's long-lived Python process for the streaming source, next to (not inside) the
driver's own Python process, so it opens its own state store and source connection.
"""

from __future__ import annotations

import logging

import pymysql

from cdc_console.config import PipelineConfig, load_config
from cdc_console.mysql.checks import check_table
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.schema import TableId, TableSchema
from cdc_console.source.assigner import HybridSplitAssigner
from cdc_console.source.control import CommandProcessor
from cdc_console.source.offset import BinlogOffset
from cdc_console.source.plan import BatchPlan
from cdc_console.source.splits import SnapshotSplit
from cdc_console.source.splitter import ChunkSplitter
from cdc_console.spark.datasource import PlanPartition
from cdc_console.state.store import StateStore

log = logging.getLogger(__name__)


def splits_per_batch(config: PipelineConfig) -> int:
    """Chunks per micro-batch: two waves of ``parallelism`` readers amortise batch overhead."""
    return config.snapshot.parallelism * 2


class Planner:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.store = StateStore(config.state_path)
        self._conn: pymysql.connections.Connection | None = None
        self.assigner = HybridSplitAssigner(
            self.store,
            self._split_table,
            self._read_head,
            config.source.server_ids,
            splits_per_batch(config),
            CommandProcessor(
                self.store,
                self._describe_table,
                snapshot_only=config.snapshot.startup_mode == "snapshot-only",
            ),
        )

    @classmethod
    def from_config_path(cls, path: str) -> Planner:
        return cls(load_config(path))

    def _connection(self) -> pymysql.connections.Connection:
        if self._conn is None or not self._conn.open:
            self._conn = connect(self.config.source)
        return self._conn

    def _read_head(self) -> BinlogOffset:
        try:
            return current_position(self._connection(), with_gtid=True)
        except pymysql.err.OperationalError:
            self._conn = None
            return current_position(self._connection(), with_gtid=True)

    def _describe_table(self, table_id: TableId) -> TableSchema:
        try:
            return check_table(self._connection(), self.config, table_id)
        except pymysql.err.OperationalError:
            self._conn = None
            return check_table(self._connection(), self.config, table_id)

    def _split_table(self, schema: TableSchema) -> list[SnapshotSplit]:
        snap = self.config.snapshot
        splitter = ChunkSplitter(
            self._connection(),
            snap.chunk_size,
            snap.distribution_factor_upper,
            snap.distribution_factor_lower,
        )
        return splitter.split(schema)

    def next_plan(self) -> BatchPlan | None:
        return self.assigner.next_plan()

    def partitions(self, start: int, end: int) -> list[PlanPartition]:
        parts: list[PlanPartition] = []
        schemas = self.store.schemas()
        source = self.config.source
        for batch_no in range(start + 1, end + 1):
            found = self.store.batch(batch_no)
            if found is None or found[0] != "planned":
                parts.append(PlanPartition(batch_no, "noop", {}, source))
                continue
            plan = BatchPlan.from_dict(found[1])
            for planned in plan.snapshot:
                payload = {**planned.to_dict(), "schema": schemas[planned.split.table_id]}
                parts.append(PlanPartition(batch_no, "snapshot", payload, source))
            if plan.binlog is not None:
                payload = {
                    "binlog": plan.binlog.to_dict(),
                    "server_id": plan.binlog_server_id,
                    "schemas": [schemas[f.table_id] for f in plan.binlog.tables],
                }
                parts.append(PlanPartition(batch_no, "binlog", payload, source))
        return parts

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.store.close()
