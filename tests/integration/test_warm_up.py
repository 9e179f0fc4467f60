"""The worker warm-up starts the very Python daemon a data source's tasks use.

Spark keys its worker daemons by interpreter, modules and environment; a warm-up through another
path (an RDD job) starts a daemon no data source task ever uses, which is why it must go through
a Python data source read. The proof: after the warm-up, a Python data source's task runs in a
worker forked from the daemon the warm-up started, and no further daemon appears.

The session also starts without Spark's scan for pip-installed Python data sources
(``session.NO_DATA_SOURCE_SCAN``): registering and reading data sources works, and no scan
helper ever appears.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cdc_console.config import config_from_dict
from cdc_console.spark.session import NO_DATA_SOURCE_SCAN, spark_session
from cdc_console.spark.warm_up import warm_python_workers

pytestmark = pytest.mark.spark


def _parent_pid_source() -> type[DataSource]:
    """A data source with one row per task: the pid its worker was forked from. Defined in a
    function so that it is pickled by value (executors cannot import this test module)."""

    class ParentPidReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            yield (os.getppid(),)

    class ParentPidSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "test_parent_pid"

        def schema(self) -> str:
            return "parent long"

        def reader(self, schema: StructType) -> DataSourceReader:
            return ParentPidReader()

    return ParentPidSource


def _helpers(module: str) -> list[psutil.Process]:
    """Spark's Python helper processes under this test process that run ``module``."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if module in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def _our_daemons() -> set[int]:
    """Our worker daemons under this test process (the workers they fork share their command
    line, so a daemon is one whose parent is not one of them)."""
    processes: dict[int, int] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            if "-m cdc_console.spark.daemon" in " ".join(child.cmdline()):
                processes[child.pid] = child.ppid()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return {pid for pid, parent in processes.items() if parent not in processes}


@pytest.fixture
def spark(tmp_path: Path) -> Iterator[SparkSession]:
    config = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "spark": {"master": "local[2]"}}, base=tmp_path
    )
    session = spark_session(config)
    try:
        yield session
    finally:
        session.stop()


def test_warm_up_starts_the_daemon_that_data_source_tasks_use(spark: SparkSession) -> None:
    assert not _our_daemons()
    warm_python_workers(spark).join(timeout=180)
    warmed = _our_daemons()
    assert len(warmed) == 1, "the warm-up did not start the worker daemon"

    spark.dataSource.register(_parent_pid_source())
    parents = {row.parent for row in spark.read.format("test_parent_pid").load().collect()}

    assert _our_daemons() == warmed, "the data source's tasks needed a daemon of their own"
    assert parents == warmed


def test_data_sources_work_without_sparks_scan_for_installed_ones(spark: SparkSession) -> None:
    warm_python_workers(spark).join(timeout=180)
    spark.dataSource.register(_parent_pid_source())
    assert len(spark.read.format("test_parent_pid").load().collect()) == 2

    # the read went through Spark's other helpers: the test looks where the scan would be
    assert _helpers("pyspark.sql.worker.create_data_source")
    assert not _helpers("pyspark.sql.worker.lookup_data_sources")
    assert os.environ.get("PYSPARK_DRIVER_PYTHON") != NO_DATA_SOURCE_SCAN
