"""The pipeline as a PySpark streaming data source (``pyspark.sql.datasource``).

Mapping of Flink CDC's roles onto Spark Structured Streaming:

- ``latestOffset`` is the enumerator: it asks ``HybridSplitAssigner`` for the next ``BatchPlan``,
  which is persisted in SQLite before the offset ``{"batch": n}`` is returned, so a replay of
  batch n after a crash reads exactly the same splits and binlog window;
- ``partitions`` turns the plan into tasks: one per chunk-reader server id (reading that id's
  splits one after the other), one for the binlog window;
- ``read`` runs on an executor: a ``SnapshotSplitReader`` or ``BinlogSplitReader``, yielding Arrow
  batches of change records plus one control record that reports the split's watermarks (or the
  window's counts) through the same data path, so progress is recorded exactly when the data is.

A chunk of a table's first snapshot travels as one ``ROWS`` record instead of one record per
row: its ``payload`` is the chunk as a typed Arrow table (IPC stream bytes) in the mirror's
schema, which the Delta sink appends as is (``Planner`` decides which chunks qualify).

Executors read the password from the same environment variable as the driver
(``spark.executorEnv.<VAR>`` on a cluster).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from cdc_console.source.records import FIELD_NAMES

log = logging.getLogger(__name__)

SOURCE_NAME = "cdc_console"
CONTROL_OP = "CTRL"
ROWS_OP = "ROWS"

ARROW_SCHEMA = pa.schema(
    [
        ("database", pa.string()),
        ("table", pa.string()),
        ("op", pa.string()),
        ("key", pa.string()),
        ("row", pa.string()),
        ("file_index", pa.int64()),
        ("pos", pa.int64()),
        ("event_index", pa.int32()),
        ("row_index", pa.int32()),
        ("seq", pa.int64()),
        ("ts_ms", pa.int64()),
        ("split_id", pa.string()),
        ("payload", pa.binary()),
    ]
)
assert tuple(ARROW_SCHEMA.names) == (*FIELD_NAMES, "payload")
SPARK_SCHEMA_DDL = (
    "database STRING, table STRING, op STRING, key STRING, row STRING, file_index BIGINT, "
    "pos BIGINT, event_index INT, row_index INT, seq BIGINT, ts_ms BIGINT, split_id STRING, "
    "payload BINARY"
)
ARROW_CHUNK_ROWS = 8192
ARROW_CHUNK_BYTES = 16 << 20  # payload bytes per Arrow batch handed to Spark


@dataclass
class PlanPartition(InputPartition):
    """One task of a batch: ``kind`` is snapshot, binlog or noop; ``payload`` its plan entry.

    The source config travels inside the partition, so executors need no copy of the config
    file; it holds no password (executors read it from the environment).
    """

    batch_no: int
    kind: str
    payload: dict[str, Any]
    source: Any

    def __init__(self, batch_no: int, kind: str, payload: dict[str, Any], source: Any) -> None:
        super().__init__(value=None)
        self.batch_no = batch_no
        self.kind = kind
        self.payload = payload
        self.source = source


def control_row(batch_no: int, kind: str, details: dict[str, Any]) -> dict[str, Any]:
    """A record that carries a task's report (watermarks, counts) to ``foreachBatch``."""
    return {
        "database": "",
        "table": "",
        "op": CONTROL_OP,
        "key": kind,
        "row": json.dumps({"batch": batch_no, **details}),
        "file_index": 0,
        "pos": 0,
        "event_index": 0,
        "row_index": 0,
        "seq": 0,
        "ts_ms": 0,
        "split_id": "",
        "payload": None,
    }


def rows_record(
    table_id: Any, split_id: str, position: tuple[int, int], ts_ms: int, rows: pa.Table
) -> dict[str, Any]:
    """A chunk's typed rows as one record: ``position`` is its high watermark (file index, pos)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return {
        "database": table_id.database,
        "table": table_id.table,
        "op": ROWS_OP,
        "key": "",
        "row": str(rows.num_rows),
        "file_index": position[0],
        "pos": position[1],
        "event_index": -1,
        "row_index": 0,
        "seq": 0,
        "ts_ms": ts_ms,
        "split_id": split_id,
        "payload": sink.getvalue().to_pybytes(),
    }


def rows_payload(payload: bytes) -> pa.Table:
    """Inverse of ``rows_record``'s payload."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()


def to_batches(rows: Iterator[dict[str, Any]]) -> Iterator[pa.RecordBatch]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        chunk.append(row)
        payload = row.get("payload")
        if payload is not None:
            size += len(payload)
        if len(chunk) >= ARROW_CHUNK_ROWS or size >= ARROW_CHUNK_BYTES:
            yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_SCHEMA)
            chunk = []
            size = 0
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=ARROW_SCHEMA)


class CdcStreamReader(DataSourceStreamReader):
    """Driver side: plans batches. Executor side: ``read`` runs one task of a plan."""

    def __init__(self, config_path: str) -> None:
        self.config_path = config_path
        self._planner: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config_path": self.config_path, "_planner": None}

    def _get_planner(self) -> Any:
        if self._planner is None:
            from cdc_console.spark.planner import Planner
            from cdc_console.spark.tasks import narrate

            narrate()
            self._planner = Planner.from_config_path(self.config_path)
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        return {"batch": self._get_planner().store.last_applied_batch()}

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, Any]:
        plan = self._get_planner().next_plan()
        if plan is None:
            return {"batch": int(start["batch"])}
        return {"batch": plan.batch_no}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        parts: list[InputPartition] = self._get_planner().partitions(
            int(start["batch"]), int(end["batch"])
        )
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from cdc_console.spark.tasks import run_partition

        assert isinstance(partition, PlanPartition)
        yield from to_batches(run_partition(partition))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: ``foreachBatch`` recorded the batch in SQLite before Spark committed."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None


class CdcDataSource(DataSource):
    """``spark.readStream.format("cdc_console").option("config", path).load()``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA_DDL

    def streamReader(self, schema: Any) -> CdcStreamReader:
        return CdcStreamReader(self.options["config"])
