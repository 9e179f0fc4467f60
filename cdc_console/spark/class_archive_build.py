"""Building the driver JVM's class archive (``python -m cdc_console.spark.class_archive_build``).

A process of its own runs a small workload of the job's kind (SQL, Arrow, a Python data source
read and a streaming query with ``foreachBatch``) in a JVM started with
``-XX:ArchiveClassesAtExit``, waits for that JVM to exit (the dump happens at exit), then
publishes the archive: renamed into place, synced, and only then a manifest naming its size.
``class_archive.usable_archive`` trusts nothing else. Why and how it is used:
``cdc_console.spark.class_archive``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_console.spark.class_archive import (
    DRIVER_JAVA_OPTIONS,
    QUIET_CDS,
    archive_path,
    current_key,
    failure_path,
    lock_path,
    manifest_path,
    take_lock,
    usable_archive,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.datasource import ReadLimit

BUILD_TIMEOUT_SECONDS = 600.0
_SOURCE_NAME = "cdc_console_class_archive"


def build(archive: Path, timeout: float = BUILD_TIMEOUT_SECONDS, home: str | None = None) -> None:
    """Run the workload in a JVM that dumps its classes at exit, then publish the archive.

    The caller holds the build lock; it is released here, whatever happens. A failure leaves a
    marker that keeps jobs from starting another build for a day (``--if-missing`` ignores it).
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    try:
        if usable_archive(archive):
            return  # published meanwhile by the build that held the lock before
        with tempfile.TemporaryDirectory(prefix="cdc-class-archive-") as work:
            _dump_classes(partial, Path(work), timeout)
        if not partial.exists() or partial.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no archive to {partial}")
        size = partial.stat().st_size
        _sync(partial)
        os.replace(partial, archive)
        manifest = manifest_path(archive)
        staged = manifest.with_name(manifest.name + ".partial")
        staged.write_text(json.dumps({"size": size, "built_at": time.time(), "home": home}))
        _sync(staged)
        os.replace(staged, manifest)
        failure_path(archive).unlink(missing_ok=True)
        _remove_superseded(archive, home)
    except BaseException:
        failure_path(archive).touch()
        raise
    finally:
        partial.unlink(missing_ok=True)
        lock_path(archive).unlink(missing_ok=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_superseded(archive: Path, home: str | None) -> None:
    """Archives of an earlier Spark or JDK in the same installation (170 MB each) go; another
    installation's stay, and a JVM that maps one keeps its pages."""
    if home is None:
        return
    for other in archive.parent.glob("spark-*.jsa"):
        if other.name == archive.name:
            continue
        try:
            same_home = json.loads(manifest_path(other).read_text()).get("home") == home
        except (OSError, ValueError, AttributeError):
            continue
        if same_home:
            other.unlink(missing_ok=True)
            manifest_path(other).unlink(missing_ok=True)


def _dump_classes(partial: Path, work: Path, timeout: float) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("cdc-console class archive")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config(
            "spark.driver.extraJavaOptions",
            f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET_CDS}",
        )
        .getOrCreate()
    )
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        spark.stop()
        raise RuntimeError("the Spark gateway did not start a JVM of its own")
    # A JVM killed mid-dump leaves a partial file, which is never published.
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            _workload(spark, work)
        finally:
            spark.stop()
        # The JVM exits (and dumps) when its stdin closes: wait for it, or the file is partial.
        gateway.shutdown()
        if proc.stdin is not None:
            proc.stdin.close()
        code = proc.wait(timeout=timeout)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    if code != 0:
        raise RuntimeError(f"the archiving JVM exited with {code}")


def _workload(spark: object, work: Path) -> None:
    """What a job's driver JVM does at start: SQL, Arrow, a Python data source read and stream."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    spark.range(10_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
    spark.range(100).toArrow()
    source = _data_source()
    spark.dataSource.register(source)
    spark.read.format(_SOURCE_NAME).load().collect()

    def each(df: DataFrame, _batch: int) -> None:
        df.toArrow()

    query = (
        spark.readStream.format(_SOURCE_NAME)
        .load()
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0.1 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def _data_source() -> type:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.types import StructType

    class OneRowReader(DataSourceReader):
        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            yield (1,)

    class OneRowStream(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(
            self, start: dict[str, int], limit: ReadLimit | None = None
        ) -> dict[str, int]:
            return {"n": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0)] if start["n"] < end["n"] else []

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            yield (1,)

    class OneRowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return _SOURCE_NAME

        def schema(self) -> str:
            return "n long"

        def reader(self, schema: StructType) -> DataSourceReader:
            return OneRowReader()

        def streamReader(self, schema: StructType) -> DataSourceStreamReader:
            return OneRowStream()

    return OneRowSource


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc_console.spark.class_archive_build",
        description="Build the driver JVM's class archive (see the module's docstring).",
    )
    parser.add_argument("archive", nargs="?", help="where to build it (default: this machine's)")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when one is usable")
    parser.add_argument("--locked", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    key = current_key()
    if args.archive:
        archive = Path(args.archive)
    elif key is None:
        print("no java found: nothing to archive")
        return 0
    else:
        archive = archive_path(key)
    if args.if_missing and usable_archive(archive):
        print(f"class archive {archive} is up to date")
        return 0
    if not args.locked:
        if not take_lock(archive):
            print(f"class archive {archive} is being built by another process")
            return 0
    else:
        os.nice(10)
    clock = time.monotonic()
    build(archive, home=key.home if key is not None else None)
    print(f"class archive {archive} built in {time.monotonic() - clock:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
