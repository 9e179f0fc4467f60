"""A class-data-sharing archive of the driver JVM: Spark's start-up without most of its class loading.

Starting the driver JVM and its SparkContext loads thousands of classes from Spark's jars, and the
first query loads as many again. Java 17 can dump the classes a run loaded into an archive
(``-XX:ArchiveClassesAtExit``) and map it at the next start (``-XX:SharedArchiveFile``). Measured
on the 2-core reference box: the session starts in 2.0 s instead of 4.1 s, and the first query
runs in 1.0 s instead of 2.3 s.

The archive belongs to one JDK build and one Spark installation (its jars, its path: the JVM
checks the class path it was dumped with), so its name carries a digest of both
(:class:`ArchiveKey`). A JVM maps the file and must never see a partial one (a truncated
archive crashes it with SIGBUS, measured), so:

- it is built by a process of its own (``python -m cdc_console.spark.class_archive_build``) that
  runs a small workload of the job's kind with its own JVM, waits for that JVM to exit (the dump
  happens at exit), then renames the file into place and only then writes a manifest with its
  size;
- :func:`usable_archive` takes an archive only when its manifest's size matches the file;
- a job that finds none starts the build in the background (niced, one at a time, see
  :func:`start_build`; not again for a day after one failed) and runs without; ``.ci/setup``
  and the benches build it up front;
- a driver started by ``spark-submit`` already has its JVM: nothing is mapped or built then.

A mismatch the JVM detects itself (another JDK build, another class path) makes it run without
sharing; its CDS log lines are switched off, so that case is silent, not an error.
``[spark] class_archive = false`` turns all of it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cdc_console.config import PipelineConfig

log = logging.getLogger(__name__)

#: The driver JVM's own options (``spark.session``), also those the archive is built with.
#: The serial collector and a 32 MB initial heap: G1 sized the heap by itself to ~390 MB
#: whatever ``-Xms`` said, plus ~50 MB of its own tables, for a driver whose live data is a
#: few batches of small records; a JVM left to its defaults also starts with 1/64 of the
#: machine's memory as its heap. Measured on the 3M snapshot: JVM 447 -> 360 MB, windows
#: and latency unchanged (docs/benchmarks.md).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -Xss8m -XX:+UseSerialGC -Xms32m"
CACHE_ENV = "CDC_CONSOLE_CACHE_DIR"
#: set by spark-submit for the Python driver it starts (pyspark then joins that JVM)
GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"
#: the module that builds an archive (``python -m``)
BUILDER = "cdc_console.spark.class_archive_build"
#: after a failed build, jobs start without an archive for this long before trying again
RETRY_FAILED_SECONDS = 86400.0
#: a build whose lock is older than this is taken for dead
STALE_BUILD_SECONDS = 900.0
#: the JVM's class-sharing log: warnings about classes it cannot archive or an archive it cannot
#: map, none of which needs anyone's attention
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class ArchiveKey:
    """What an archive is valid for: the pyspark release, the JDK build and Spark's jars."""

    pyspark: str
    java: str
    jars: str
    #: the Spark installation (a virtualenv's pyspark): the JVM checks the class path it was
    #: dumped with, so two installations need two archives
    home: str = ""

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
    home = Path(_find_spark_home()).resolve()
    jars = home / "jars"
    listing = sorted(os.listdir(jars)) if jars.is_dir() else []
    return ArchiveKey(
        pyspark=pyspark.__version__,
        java=java_stamp,
        jars=hashlib.sha256("\n".join(listing).encode()).hexdigest()[:16],
        home=str(home),
    )


def archive_path(key: ArchiveKey, root: Path | None = None) -> Path:
    return (root or cache_root()) / "jvm" / f"spark-{key.pyspark}-{key.digest()}.jsa"


def manifest_path(archive: Path) -> Path:
    return archive.with_suffix(".json")


def lock_path(archive: Path) -> Path:
    return archive.with_suffix(".building")


def failure_path(archive: Path) -> Path:
    return archive.with_suffix(".failed")


def _failed_recently(archive: Path) -> bool:
    try:
        return time.time() - failure_path(archive).stat().st_mtime < RETRY_FAILED_SECONDS
    except OSError:
        return False


def usable_archive(archive: Path) -> bool:
    """True when ``archive`` was published whole: its manifest exists and names its size."""
    try:
        manifest = json.loads(manifest_path(archive).read_text())
        return isinstance(manifest, dict) and manifest.get("size") == archive.stat().st_size
    except (OSError, ValueError):
        return False


def sharing_options(archive: Path) -> str:
    """JVM options that map ``archive``; without the CDS log a JVM that cannot use it is silent."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET_CDS}"


def driver_java_options(config: PipelineConfig) -> str:
    """The driver JVM's options for this job: ours, plus the archive's when one is usable.

    Starts a background build when none is (the job itself runs without). Empty when the user's
    ``[spark.conf]`` sets ``spark.driver.extraJavaOptions``: theirs wins, whole.
    """
    if "spark.driver.extraJavaOptions" in config.spark.conf:
        return ""
    if not config.spark.class_archive or GATEWAY_ENV in os.environ:
        # Under spark-submit the driver JVM is already running: nothing to map into it.
        return DRIVER_JAVA_OPTIONS
    try:
        key = current_key()
        if key is None:
            return DRIVER_JAVA_OPTIONS
        archive = archive_path(key)
        if usable_archive(archive):
            log.info("driver JVM: class archive %s", archive)
            return f"{DRIVER_JAVA_OPTIONS} {sharing_options(archive)}"
        if _failed_recently(archive):
            return DRIVER_JAVA_OPTIONS
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


def take_lock(archive: Path) -> bool:
    """Create the build lock; False when a live build holds it (a stale one is taken over)."""
    lock = lock_path(archive)
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
    if not take_lock(archive):
        return None
    try:
        with open(archive.with_suffix(".log"), "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", BUILDER, "--locked", str(archive)],
                env={k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY_")},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError:
        lock_path(archive).unlink(missing_ok=True)
        raise
    return proc.pid
