"""Creating the Spark session: any master, workers on this interpreter, quiet console."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from cdc_console.config import PipelineConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(config: PipelineConfig) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
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
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -Xss8m")
        # The job runs a micro-batch every second or so, for weeks: Spark's UI would keep the
        # last 1,000 jobs, stages and SQL executions and 100,000 tasks alive in the driver heap.
        .config("spark.ui.retainedJobs", "100")
        .config("spark.ui.retainedStages", "100")
        .config("spark.ui.retainedTasks", "2000")
        .config("spark.sql.ui.retainedExecutions", "100")
    )
    if config.spark.ui_port is not None:
        builder = builder.config("spark.ui.port", str(config.spark.ui_port))
    for key, value in config.spark.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
