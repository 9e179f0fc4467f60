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

What the tasks and records look like is ``protocol.py``'s business; this module only wires
Spark's callbacks to the driver's ``Planner`` and the executors' ``tasks.read_partition``.

Executors read the password from the same environment variable as the driver
(``spark.executorEnv.<VAR>`` on a cluster).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from cdc_console.spark.wire import SPARK_SCHEMA_DDL

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.types import StructType

    from cdc_console.spark.planner import Planner

#: The stream's offset as Spark stores it in its checkpoint: the last planned batch's number.
SparkOffset = dict[str, int]

log = logging.getLogger(__name__)

SOURCE_NAME = "cdc_console"


class CdcStreamReader(DataSourceStreamReader):
    """Driver side: plans batches. Executor side: ``read`` runs one task of a plan."""

    def __init__(self, config_path: str) -> None:
        self.config_path = config_path
        self._planner: Planner | None = None

    def __getstate__(self) -> dict[str, str | None]:
        return {"config_path": self.config_path, "_planner": None}

    def _get_planner(self) -> Planner:
        if self._planner is None:
            from cdc_console.spark.planner import Planner
            from cdc_console.spark.tasks import narrate

            narrate()
            self._planner = Planner.from_config_path(self.config_path)
        return self._planner

    def initialOffset(self) -> SparkOffset:
        return {"batch": self._get_planner().store.last_applied_batch()}

    def latestOffset(self, start: SparkOffset, limit: ReadLimit | None = None) -> SparkOffset:
        plan = self._get_planner().wait_for_plan()
        if plan is None:
            return {"batch": int(start["batch"])}
        return {"batch": plan.batch_no}

    def partitions(self, start: SparkOffset, end: SparkOffset) -> list[InputPartition]:
        return list(self._get_planner().partitions(int(start["batch"]), int(end["batch"])))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from cdc_console.spark.partitions import PlanPartition
        from cdc_console.spark.tasks import read_partition

        assert isinstance(partition, PlanPartition)
        yield from read_partition(partition)

    def commit(self, end: SparkOffset) -> None:
        """Nothing to do: ``foreachBatch`` recorded the batch in SQLite before Spark committed."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
        _leave_quietly_if_hung_up()


def _leave_quietly_if_hung_up() -> None:
    """End Spark's streaming-source runner at once when the JVM hung up on it.

    A stopped query ends its runner by closing the socket: the runner's next read fails with
    ``EOFError``, ``stop`` runs in its ``finally``, and the runner then reports the EOF to the
    JVM over the closed socket. When the JVM has not killed the process yet (a loaded machine),
    that last flush raises and the runner prints two tracebacks into the job's log on a clean
    stop. Nothing is left to say to a JVM that is gone, so the runner leaves here instead.
    """
    in_flight = sys.exc_info()[1]
    if isinstance(in_flight, EOFError):
        log.debug("the JVM closed the planner's socket: the streaming source runner ends")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


class CdcDataSource(DataSource):
    """``spark.readStream.format("cdc_console").option("config", path).load()``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA_DDL

    def streamReader(self, schema: StructType) -> CdcStreamReader:
        return CdcStreamReader(self.options["config"])
