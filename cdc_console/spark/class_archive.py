"""A class-data-sharing archive of the driver JVM: Spark's start-up without most of its class loading.

Starting the driver JVM and its SparkContext loads thousands of classes from Spark's jars, and the
first query loads as many again. Java 17 can dump the classes a run loaded into an archive
(``-XX:ArchiveClassesAtExit``) and map it at the next start (``-XX:SharedArchiveFile``). Measured
on the 2-core reference box: the session starts in 2.0 s instead of 4.1 s, and the first query
runs in 1.0 s instead of 2.3 s.

The archive belongs to one JDK build and one set of Spark jars, so its name carries a digest of
both (:class:`ArchiveKey`). A JVM maps the file and must never see a partial one (a truncated
archive crashes it with SIGBUS, measured), so:

- it is built by a process of its own (``python -m cdc_console.spark.class_archive``) that runs a
  small workload of the job's kind with its own JVM, waits for that JVM to exit (the dump happens
  at exit), then renames the file into place and only then writes a manifest with its size;
- :func:`usable_archive` takes an archive only when its manifest's size matches the file;
- a job that finds none starts the build in the background (niced, one at a time, see
  :func:`start_build`) and runs without; ``.ci/setup`` builds it up front.

A mismatch the JVM detects itself (another JDK build, another class path) makes it run without
sharing; its CDS log lines are switched off, so that case is silent, not an error.
``[spark] class_archive = false`` turns all of it off.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_console.config import PipelineConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.datasource import ReadLimit

log = logging.getLogger(__name__)

#: The driver JVM's own options (``spark.session``), also those the archive is built with.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -Xss8m"
CACHE_ENV = "CDC_CONSOLE_CACHE_DIR"
#: a build whose lock is older than this is taken for dead
STALE_BUILD_SECONDS = 900.0
BUILD_TIMEOUT_SECONDS = 600.0
_SOURCE_NAME = "cdc_console_class_archive"
#: the JVM's class-sharing log: warnings about classes it cannot archive or an archive it cannot
#: map, none of which needs anyone's attention
_QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class ArchiveKey:
    """What an archive is valid for: the pyspark release, the JDK build and Spark's jars."""

    pyspark: str
    java: str
    jars: str

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_root() -> Path:
    """``$CDC_CONSOLE_CACHE_DIR``, else ``$XDG_CACHE_HOME/cdc-console``, else ``~/.cache/...``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cdc-console"


def _java_binary() -> Path | None:
    """The ``java`` spark-submit starts: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        return None
    return Path(found).resolve()


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def current_key() -> ArchiveKey | None:
    """The key of this machine's driver JVM, or None when there is no java to key on."""
    java = _java_binary()
    if java is None:
        return None
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    java_home = java.parent.parent
    libjvm = next(iter(sorted(java_home.glob("lib/server/libjvm.so"))), None)
    java_stamp = _stamp(java) + (f";{_stamp(libjvm)}" if libjvm is not None else "")
    jars = Path(_find_spark_home()) / "jars"
    listing = sorted(os.listdir(jars)) if jars.is_dir() else []
    return ArchiveKey(
        pyspark=pyspark.__version__,
        java=java_stamp,
        jars=hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16],
    )


def archive_path(key: ArchiveKey, root: Path | None = None) -> Path:
    return (root or cache_root()) / "jvm" / f"spark-{key.pyspark}-{key.digest()}.jsa"


def _manifest(archive: Path) -> Path:
    return archive.with_suffix(".json")


def _lock(archive: Path) -> Path:
    return archive.with_suffix(".building")


def usable_archive(archive: Path) -> bool:
    """True when ``archive`` was published whole: its manifest exists and names its size."""
    try:
        manifest = json.loads(_manifest(archive).read_text())
        return isinstance(manifest, dict) and manifest.get("size") == archive.stat().st_size
    except (OSError, ValueError):
        return False


def sharing_options(archive: Path) -> str:
    """JVM options that map ``archive``; without the CDS log a JVM that cannot use it is silent."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {_QUIET_CDS}"


def driver_java_options(config: PipelineConfig) -> str:
    """The driver JVM's options for this job: ours, plus the archive's when one is usable.

    Starts a background build when none is (the job itself runs without). Empty when the user's
    ``[spark.conf]`` sets ``spark.driver.extraJavaOptions``: theirs wins, whole.
    """
    if "spark.driver.extraJavaOptions" in config.spark.conf:
        return ""
    if not config.spark.class_archive:
        return DRIVER_JAVA_OPTIONS
    try:
        key = current_key()
        if key is None:
            return DRIVER_JAVA_OPTIONS
        archive = archive_path(key)
        if usable_archive(archive):
            log.info("driver JVM: class archive %s", archive)
            return f"{DRIVER_JAVA_OPTIONS} {sharing_options(archive)}"
        pid = start_build(archive)
        if pid is not None:
            log.info(
                "driver JVM: no class archive yet; building %s in the background (pid %d), "
                "for a faster start next time",
                archive,
                pid,
            )
    except Exception as exc:  # an unwritable cache, say: it costs the speed-up, nothing else
        log.info("driver JVM: no class archive (%s)", exc)
    return DRIVER_JAVA_OPTIONS


def _take_lock(archive: Path) -> bool:
    """Create the build lock; False when a live build holds it (a stale one is taken over)."""
    lock = _lock(archive)
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                continue
            if age < STALE_BUILD_SECONDS:
                return False
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return True
    return False


def start_build(archive: Path) -> int | None:
    """Start ``python -m cdc_console.spark.class_archive`` detached; None when one is running."""
    if not _take_lock(archive):
        return None
    try:
        with open(archive.with_suffix(".log"), "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cdc_console.spark.class_archive", "--locked", str(archive)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError:
        _lock(archive).unlink(missing_ok=True)
        raise
    return proc.pid


def build(archive: Path, timeout: float = BUILD_TIMEOUT_SECONDS) -> None:
    """Run the workload in a JVM that dumps its classes at exit, then publish the archive.

    The caller holds the build lock; it is released here, whatever happens.
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    try:
        with tempfile.TemporaryDirectory(prefix="cdc-class-archive-") as work:
            _dump_classes(partial, Path(work), timeout)
        if not partial.exists() or partial.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no archive to {partial}")
        size = partial.stat().st_size
        os.replace(partial, archive)
        manifest = _manifest(archive)
        staged = manifest.with_name(manifest.name + ".partial")
        staged.write_text(json.dumps({"size": size, "built_at": time.time()}))
        os.replace(staged, manifest)
        _remove_superseded(archive)
    finally:
        partial.unlink(missing_ok=True)
        _lock(archive).unlink(missing_ok=True)


def _remove_superseded(archive: Path) -> None:
    """Archives of an earlier Spark or JDK (170 MB each) go; a JVM that maps one keeps its pages."""
    for other in archive.parent.glob("spark-*.jsa"):
        if other.name != archive.name:
            other.unlink(missing_ok=True)
            _manifest(other).unlink(missing_ok=True)


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
            f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={partial} {_QUIET_CDS}",
        )
        .getOrCreate()
    )
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        _workload(spark, work)
    finally:
        spark.stop()
    if gateway is None or proc is None:
        raise RuntimeError("the Spark gateway did not start a JVM of its own")
    # The JVM exits (and dumps) when its stdin closes: wait for it, or the file is partial.
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()
    code = proc.wait(timeout=timeout)
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
        prog="python -m cdc_console.spark.class_archive",
        description="Build the driver JVM's class archive (see the module's docstring).",
    )
    parser.add_argument("archive", nargs="?", help="where to build it (default: this machine's)")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when one is usable")
    parser.add_argument("--locked", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.archive:
        archive = Path(args.archive)
    else:
        key = current_key()
        if key is None:
            print("no java found: nothing to archive")
            return 0
        archive = archive_path(key)
    if args.if_missing and usable_archive(archive):
        print(f"class archive {archive} is up to date")
        return 0
    if not args.locked:
        if not _take_lock(archive):
            print(f"class archive {archive} is being built by another process")
            return 0
    else:
        os.nice(10)
    clock = time.monotonic()
    build(archive)
    print(f"class archive {archive} built in {time.monotonic() - clock:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
