"""Driver -> executor: what a planned batch's Spark tasks are told to do.

A ``PlanPartition`` carries one typed task of a planned batch: a ``SnapshotTask`` (one reader
slot's chunks), a ``BinlogTask`` (the batch's binlog window) or a ``NoopTask`` (a batch that is
no longer planned). What comes back, the records and reports, is ``protocol.py``'s.

Apart from ``protocol.py`` because the planner builds these inside Spark's streaming runner, a
process of its own for the job's whole life: this module needs neither pyarrow's compute and
Parquet modules nor the Delta writer, and the runner should not carry them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from cdc_console.config import SourceConfig
from cdc_console.core.schema import TableId, TableSchema
from cdc_console.core.splits import BinlogSplit, SnapshotSplit
from cdc_console.sinks.lake_target import LakeTarget


@dataclass(frozen=True)
class ChunkTask:
    """One chunk to read: ``typed`` ships it as typed Arrow rows for the sink to append."""

    split: SnapshotSplit
    schema: TableSchema
    typed: bool = False


@dataclass(frozen=True)
class SnapshotTask:
    """One reader slot's chunks, read one after the other on one connection and server id."""

    server_id: int
    chunks: tuple[ChunkTask, ...]
    #: ``[pipeline] schema_changes = "park"``: a DDL inside a chunk's window ends the chunk there
    park_on_schema_change: bool = False
    #: set: the task writes its typed chunks' Delta files itself (``[lake] snapshot_writes``)
    lake: LakeTarget | None = None


@dataclass(frozen=True)
class BinlogTask:
    """The batch's binlog window, filtered per table by its finished splits' high watermarks."""

    split: BinlogSplit
    server_id: int
    schemas: tuple[TableSchema, ...]
    #: ``[pipeline] schema_changes = "park"``: a table whose shape changes is parked, not fatal
    park_on_schema_change: bool = False
    #: the sink applies partial row images as patches (``mysql.partial_images``)
    patches: bool = False

    def schema_map(self) -> dict[TableId, TableSchema]:
        return {s.table_id: s for s in self.schemas}


@dataclass(frozen=True)
class NoopTask:
    """A batch that is no longer planned (already applied): reports itself and reads nothing."""


Task = SnapshotTask | BinlogTask | NoopTask


@dataclass
class PlanPartition(InputPartition):
    """One Spark task of a batch.

    The source config travels inside the partition, so executors need no copy of the config
    file; it holds no password (executors read it from the environment).
    """

    batch_no: int
    task: Task
    source: SourceConfig

    def __init__(self, batch_no: int, task: Task, source: SourceConfig) -> None:
        super().__init__(value=None)
        self.batch_no = batch_no
        self.task = task
        self.source = source
