"""Creating the Spark session: any master, workers on this interpreter, quiet console."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cdc_console.config import PipelineConfig
from cdc_console.spark.class_archive import DRIVER_JAVA_OPTIONS
from cdc_console.spark.signals import jvm_ignores_sigterm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: ``PYSPARK_DRIVER_PYTHON`` as the driver JVM sees it: a command that does not exist. In
#: Spark 4.3 the JVM reads that variable for one thing only: at the session's first data source
#: registration it scans the installed packages for Python data sources (modules named
#: ``pyspark_*``), with that interpreter, if the command exists. The job uses none, and the
#: scan costs a helper daemon and worker that Spark keeps: 1.2 s on the start-up path and
#: 100 MB at the snapshot's memory peak (measured). The Python side never reads the variable,
#: and our interpreter reaches Spark's workers as ``PYSPARK_PYTHON``.
NO_DATA_SOURCE_SCAN = "cdc-console-skips-the-python-data-source-scan"


def spark_session(config: PipelineConfig, java_options: str = DRIVER_JAVA_OPTIONS) -> SparkSession:
    """A session for ``config``; ``java_options`` are the driver JVM's (``class_archive``'s
    ``driver_java_options`` adds the class archive; empty leaves them to ``[spark.conf]``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(config.spark.master)
        .appName(f"cdc-console {config.name}")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.stopTimeout", "60s")
        .config("spark.python.worker.reuse", "true")
        .config("spark.python.daemon.module", "cdc_console.spark.daemon")
        # A binlog window's task returns 12-16 MB of packed changes: above the 1 MiB default,
        # Spark parks each result in the block manager and fetches it back, 0.15-0.3 s per task
        # after its reader is done (measured); sent directly, 0.03-0.15 s. The RPC limit is 128m.
        .config("spark.task.maxDirectResultSize", "64m")
        # The job runs a micro-batch every second or so, for weeks: Spark's UI would keep the
        # last 1,000 jobs, stages and SQL executions and 100,000 tasks alive in the driver heap.
        .config("spark.ui.retainedJobs", "100")
        .config("spark.ui.retainedStages", "100")
        .config("spark.ui.retainedTasks", "2000")
        .config("spark.sql.ui.retainedExecutions", "100")
    )
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    if config.spark.ui_port is not None:
        builder = builder.config("spark.ui.port", str(config.spark.ui_port))
    for key, value in config.spark.conf.items():
        builder = builder.config(key, value)
    with _jvm_environment("PYSPARK_DRIVER_PYTHON", NO_DATA_SOURCE_SCAN), jvm_ignores_sigterm():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def _jvm_environment(name: str, value: str) -> Iterator[None]:
    """``name=value`` in the environment of a JVM started inside the block (pyspark passes its
    own environment on), and back to what it was afterwards, for this process's children."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
