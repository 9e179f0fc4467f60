"""What both benchmarks share: the sandbox, seeding, child processes, peak memory and the table.

Why child processes everywhere: peak memory is only comparable when each contender is measured
the same way, as the summed RSS of its own process tree sampled by a thread here. The server is a
sibling of the contenders (a child of this process, not of theirs), so it is never counted.
RSS sums count pages shared between a parent and its forked children (Spark's Python workers)
more than once; the figure is an upper bound, the same bound for every contender. The peak of
the summed PSS (each shared page split between its sharers) is printed beside it: what the tree
really holds.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TypedDict

import psutil
import pymysql

from cdc_console.config import SnapshotConfig
from cdc_console.config_writer import write_config
from cdc_console.core.untyped import PassThrough
from cdc_console.mysql import native
from cdc_console.mysql.position import current_position
from cdc_console.mysql.sandbox import MySQLSandbox
from cdc_console.state.readonly import BatchTimes
from cdc_console.state.store import StateStore

BENCH_DB = "bench"
BENCH_TABLE = "orders"
BENCH_USER = "cdc"
PASSWORD_ENV = "CDC_BENCH_SOURCE_PASSWORD"
DEFAULT_JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
#: The line a worker prints last; everything before it is the worker's own log.
RESULT_PREFIX = "BENCH-RESULT "
#: The pipeline's server ids; raw binlog readers use ids outside this range (error 4052 otherwise).
PIPELINE_SERVER_IDS = "5400-5410"
RAW_BINLOG_SERVER_ID = 6001
SEED_STATEMENT_ROWS = 250_000

ORDERS_DDL = (
    f"CREATE TABLE {BENCH_TABLE} (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
    "amount DECIMAL(12,2) NOT NULL, note VARCHAR(60), updated DATETIME(6)) ENGINE=InnoDB"
)


def seed_sql(first: int, last: int) -> str:
    """One ``INSERT … SELECT`` from MariaDB's sequence engine: millions of rows with no client
    round trip per row, so seeding 3M rows takes seconds rather than minutes."""
    return (
        f"INSERT INTO {BENCH_TABLE} SELECT seq, CONCAT('customer ', seq % 997), seq / 100, "
        f"CONCAT('note for order ', seq), '2024-01-01 00:00:00' + INTERVAL seq SECOND "
        f"FROM seq_{first}_to_{last}"
    )


class WorkerResult(TypedDict, total=False):
    """What a worker (``bench/workers.py``) prints after ``BENCH-RESULT``: ``rows`` and
    ``seconds`` always, the rest where the worker has them."""

    rows: int
    seconds: float
    startup: float
    output: str
    events: int


@dataclass(kw_only=True)
class RunOptions:
    """The flags every benchmark takes (``commands/bench.py`` builds the options by name)."""

    master: str = "local[2]"
    workdir: Path | None = None
    keep: bool = False
    timeout: float = 3600.0


@dataclass(kw_only=True)
class SnapshotRunOptions(RunOptions):
    """The flags of the benchmarks that snapshot the bench table with our pipeline first."""

    chunk_size: int = SnapshotConfig.chunk_size
    parallelism: int = 2
    #: ``--executors 1,2``: ours once per executor count (``spark_setups``); empty: ``master``
    executors: tuple[int, ...] = ()


@dataclass(frozen=True)
class SparkSetup:
    """Where one run of ours goes: a master, Spark settings, and the tag its lines carry."""

    master: str
    conf: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""


def run_tag(variant: str, setup: SparkSetup) -> str:
    """The tag of one run of ours' lines: its variant (empty for the first) and its setup's."""
    return ", ".join(t for t in (variant, setup.tag) if t)


def tag_slug(tag: str) -> str:
    """A tag as part of a folder name: ``2 readers, 1 executor`` -> ``2-readers-1-executor``."""
    return tag.replace(", ", "-").replace(" ", "-")


def spark_setups(master: str, executors: Sequence[int]) -> list[SparkSetup]:
    """``--executors``: one setup per count N, N executors of one core each: on a standalone
    ``spark://`` master the same master with ``spark.cores.max = N``, otherwise
    ``local-cluster[N,1,1024]`` (N executor JVMs started by the driver, as on a cluster).
    Without counts, ``master`` as given and no tag."""
    if not executors:
        return [SparkSetup(master)]
    setups = []
    for count in executors:
        tag = f"{count} executor{'s' if count > 1 else ''}"
        if master.startswith("spark://"):
            conf = {"spark.cores.max": str(count), "spark.executor.cores": "1"}
            setups.append(SparkSetup(master, conf, tag))
        else:
            setups.append(SparkSetup(f"local-cluster[{count},1,1024]", {}, tag))
    return setups


@dataclass
class Measurement:
    """One line of a result table: ``rows`` in ``seconds``, and the contender's peak tree RSS."""

    label: str
    rows: int
    seconds: float
    peak_rss_mb: float | None
    note: str = ""
    #: CPU seconds of the contender's whole process tree over its whole run (start-up included)
    cpu_seconds: float | None = None
    #: cores kept busy by other processes (not the contender, not the server) meanwhile
    background_cores: float | None = None

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def of(
        cls, run: ChildRun, label: str, rows: int, seconds: float, note: str = ""
    ) -> Measurement:
        """A line measured on ``run``: its peak memory, CPU and background load."""
        return cls(
            label,
            rows,
            seconds,
            run.peak_rss_mb,
            note,
            cpu_seconds=run.cpu_seconds,
            background_cores=run.background_cores,
        )


class Measured:
    """A result whose table lines are found by label (the figures a bar compares)."""

    measurements: list[Measurement]

    def get(self, label: str) -> Measurement | None:
        """The line ``label``, else the first tagged one (``label [2 executors]``)."""
        exact = next((m for m in self.measurements if m.label == label), None)
        if exact is not None:
            return exact
        return next((m for m in self.measurements if m.label.startswith(label + " [")), None)


@dataclass
class ChildRun:
    """A finished child process: exit code, wall time, peak tree RSS and its parsed result."""

    returncode: int
    wall: float
    peak_rss_mb: float
    result: WorkerResult
    log_path: Path
    started_at: float
    ended_at: float
    cpu: dict[str, float] = field(default_factory=dict)
    server_cpu: float = 0.0
    background_cpu: float = 0.0
    #: the peak of the tree's summed PSS (None where the system cannot say)
    peak_pss_mb: float | None = None
    #: at the RSS peak: MB per kind of process (``process_kind``)
    rss_at_peak: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    @property
    def background_cores(self) -> float:
        """Cores kept busy on average by processes that are neither contender nor server."""
        return self.background_cpu / self.wall if self.wall > 0 else 0.0

    def cpu_line(self) -> str:
        parts = ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in self.cpu.items())
        return (
            f"{self.cpu_seconds:.1f} CPU-s ({parts}); server {self.server_cpu:.1f} CPU-s; "
            f"background {self.background_cpu:.1f} CPU-s ({self.background_cores:.2f} cores)"
        )

    def memory_line(self) -> str:
        parts = ", ".join(f"{kind} {mb:,.0f}" for kind, mb in self.rss_at_peak.items())
        pss = (
            f"; peak PSS {self.peak_pss_mb:,.0f} MB (shared pages counted once)"
            if self.peak_pss_mb is not None
            else ""
        )
        return f"peak RSS {self.peak_rss_mb:,.0f} MB summed over the tree ({parts}){pss}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class BenchError(RuntimeError):
    """A contender failed; the message carries its log tail, ``log_path`` the whole log."""

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path


#: a log line that names an exception: Python's last line, a JVM's ``Caused by``, or py4j's
#: ``: java.lang.SomeException`` under its ``Py4JJavaError``
_CAUSE = re.compile(r"^(Caused by: |: )?[\w.$]+(Error|Exception)\b")


def failure_note(label: str, exc: BenchError, causes: int = 3) -> str:
    """A failed contender in a few lines, for a bench that goes on without it: how it ended,
    and the last lines of its log that name an exception (a JVM's stack ends in frames, so the
    log's tail alone seldom says why)."""
    head = str(exc).partition("\n")[0]
    text = str(exc)
    if exc.log_path is not None:
        with suppress(OSError):
            text = exc.log_path.read_text(errors="replace")
    why = list(dict.fromkeys(line.strip() for line in text.splitlines() if _CAUSE.match(line)))
    lines = [f"{label} failed, not measured: {head}", *(f"  {line}" for line in why[-causes:])]
    return "\n".join(lines)


def process_kind(proc: psutil.Process, root_pid: int) -> str:
    """A short name for a process of a contender's tree, to say where its CPU time went."""
    try:
        name = proc.name()
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if proc.pid == root_pid:
        return "main python"
    if name == "java" or "/java" in cmdline.split(" ", 1)[0]:
        return "jvm"
    if "spark.daemon pyspark.worker" in cmdline:  # pyspark's daemon, or ours (spark/daemon.py)
        return "spark python workers"
    if "pyspark" in cmdline:
        return "spark python helpers"
    return "other"


class TreeMemorySampler(threading.Thread):
    """Samples the summed RSS of a process and all its descendants; keeps the peak.

    It also keeps each process's last-seen CPU time, so a run can say which part of the tree
    (the JVM, Spark's Python workers, the main interpreter) burned the CPU. Sampling every 100 ms
    can miss an RSS spike shorter than that, and the CPU of a process that lives less than that;
    the contenders here allocate and compute for seconds, so neither matters.
    """

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True, name=f"rss-sampler-{pid}")
        self.pid = pid
        self.interval = interval
        self.peak_bytes = 0
        self.peak_pss: int | None = 0
        #: bytes per kind of process at the RSS peak
        self.at_peak: dict[str, int] = {}
        self.samples = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.kinds: dict[tuple[int, str], str] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop_event.is_set():
            total = 0
            pss: int | None = 0
            by_kind: dict[str, int] = {}
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for proc in procs:
                with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    rss = proc.memory_info().rss
                    times = proc.cpu_times()
                    # keyed by name too: spark-submit's bash wrapper execs the JVM in place
                    key = (proc.pid, proc.name())
                    if key not in self.kinds:
                        self.kinds[key] = process_kind(proc, self.pid)
                    kind = self.kinds[key]
                    self.cpu[proc.pid] = (kind, times.user + times.system)
                    total += rss
                    by_kind[kind] = by_kind.get(kind, 0) + rss
                    pss = _add_pss(pss, proc)
            if total > self.peak_bytes:
                self.peak_bytes = total
                self.at_peak = by_kind
            if pss is None or self.peak_pss is None:
                self.peak_pss = None
            else:
                self.peak_pss = max(self.peak_pss, pss)
            self.samples += 1
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        """Stop sampling; return the peak in MB."""
        self._stop_event.set()
        self.join(5)
        return self.peak_bytes / 2**20

    def peak_pss_mb(self) -> float | None:
        return self.peak_pss / 2**20 if self.peak_pss is not None else None

    def rss_at_peak_mb(self) -> dict[str, float]:
        ordered = sorted(self.at_peak.items(), key=lambda item: -item[1])
        return {kind: size / 2**20 for kind, size in ordered}

    def total_cpu(self) -> float:
        return sum(seconds for _, seconds in self.cpu.values())

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + seconds
        return dict(sorted(out.items(), key=lambda item: -item[1]))


def _add_pss(total: int | None, proc: psutil.Process) -> int | None:
    """``total`` plus the process's PSS; None from then on where the system has no PSS."""
    if total is None:
        return None
    try:
        return total + int(proc.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return None


def _busy_cpu() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores)."""
    times = psutil.cpu_times()
    return float(sum(times)) - float(times.idle) - float(getattr(times, "iowait", 0.0))


def process_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


def run_child(
    args: Sequence[str],
    log_path: Path,
    env: dict[str, str],
    timeout: float,
    server_pid: int | None = None,
) -> ChildRun:
    """Run ``args`` in its own session, sample its tree's RSS, parse its ``BENCH-RESULT`` line.

    Its own session (process group) lets a timeout kill the JVM and workers along with it. The
    machine's busy CPU during the run, minus the contender's and the server's, is recorded as
    background load: on a shared 2-core machine a figure means little without it.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    clock = time.monotonic()
    busy_before, server_before = _busy_cpu(), process_cpu(server_pid)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            list(args),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, **env},
        )
        sampler = TreeMemorySampler(proc.pid)
        sampler.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            sampler.stop()
            raise BenchError(
                f"{' '.join(args[:5])} did not finish within {timeout:.0f}s; log: {log_path}",
                log_path,
            ) from None
        except BaseException:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise
        finally:
            peak = sampler.stop()
    wall = time.monotonic() - clock
    server_cpu = process_cpu(server_pid) - server_before
    background = _busy_cpu() - busy_before - server_cpu - sampler.total_cpu()
    result: WorkerResult = {}
    text = log_path.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    run = ChildRun(
        code,
        wall,
        peak,
        result,
        log_path,
        started,
        time.time(),
        sampler.cpu_by_kind(),
        server_cpu,
        max(0.0, background),
        sampler.peak_pss_mb(),
        sampler.rss_at_peak_mb(),
    )
    if code != 0:
        raise BenchError(
            f"{' '.join(args[:5])} exited {code}; log {log_path}:\n{run.log_tail()}", log_path
        )
    return run


def worker_command(kind: str, params: Mapping[str, object]) -> list[str]:
    return [sys.executable, "-m", "cdc_console.bench.workers", kind, json.dumps(params)]


def pipeline_command(config: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cdc_console",
        "run",
        "--config",
        str(config),
        "--until-caught-up",
    ]


@dataclass
class BenchEnv:
    """The sandbox, the least-privileged user's password and the folders of one benchmark run."""

    workdir: Path
    sandbox: MySQLSandbox
    password: str
    keep: bool = False
    runs: int = 0
    child_env: dict[str, str] = field(default_factory=dict)

    def connect(self, **kwargs: PassThrough) -> pymysql.connections.Connection:
        """A root connection to the bench database (for seeding and writing changes)."""
        return self.sandbox.connect(database=BENCH_DB, **kwargs)

    def execute(self, *statements: str) -> None:
        self.sandbox.execute(*statements, database=BENCH_DB)

    def source_params(self) -> dict[str, str | int]:
        """Connection parameters for workers; the password travels in the environment only."""
        return {
            "host": self.sandbox.host,
            "port": self.sandbox.port,
            "user": BENCH_USER,
            "password_env": PASSWORD_ENV,
            "database": BENCH_DB,
            "table": BENCH_TABLE,
        }

    def run(self, args: Sequence[str], log_path: Path, timeout: float) -> ChildRun:
        """``run_child`` with the password in the environment and the server's CPU accounted."""
        server = self.sandbox.process.pid if self.sandbox.process is not None else None
        return run_child(args, log_path, self.child_env, timeout, server)

    def next_dir(self, name: str) -> Path:
        self.runs += 1
        path = self.workdir / f"{self.runs:02d}-{name}"
        path.mkdir(parents=True, exist_ok=True)
        return path


@contextmanager
def bench_env(workdir: Path | None, keep: bool) -> Iterator[BenchEnv]:
    """Start a private server with a 1 GiB buffer pool (so every contender reads from memory)."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    prepare_class_archive()
    root = Path(tempfile.mkdtemp(prefix="cdc-bench-", dir=workdir))
    sandbox = MySQLSandbox(root / "mysql", extra_args=["--innodb-buffer-pool-size=1G"])
    sandbox.start()
    if sandbox.flavour != "mariadb":
        sandbox.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise BenchError(
            "the benchmarks need MariaDB (they seed with its sequence engine); found "
            f"{sandbox.flavour}: install mariadb-server"
        )
    password = secrets.token_urlsafe(12)
    grants = ["SELECT ON *.*", "REPLICATION SLAVE ON *.*", "REPLICATION CLIENT ON *.*"]
    if sandbox.flavour == "mariadb":
        grants.append("BINLOG MONITOR ON *.*")
    try:
        sandbox.create_user(BENCH_USER, password, grants)
        conn = sandbox.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {BENCH_DB}")
        conn.close()
        env = BenchEnv(root, sandbox, password, keep, child_env={PASSWORD_ENV: password})
        env.execute(ORDERS_DDL)
        yield env
    finally:
        sandbox.stop()
        if keep:
            print(f"kept the benchmark folder {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def prepare_class_archive() -> None:
    """Build the driver JVM's class archive before anything is timed (the job maps it; a first
    run on a fresh machine would otherwise measure a start without it, beside its build)."""
    done = subprocess.run(
        [sys.executable, "-m", "cdc_console.spark.class_archive_build", "--if-missing"],
        capture_output=True,
        text=True,
        check=False,
    )
    line = (done.stdout.strip().splitlines() or ["class archive: no output"])[-1]
    print(line if done.returncode == 0 else f"class archive not built: {done.stderr[-300:]}")


def seed_rows(env: BenchEnv, first: int, last: int) -> float:
    """Insert ids ``first..last``; return seconds. MariaDB only (the sequence engine)."""
    clock = time.monotonic()
    conn = env.connect()
    try:
        with conn.cursor() as cur:
            for lo in range(first, last + 1, SEED_STATEMENT_ROWS):
                cur.execute(seed_sql(lo, min(last, lo + SEED_STATEMENT_ROWS - 1)))
            # Warm the buffer pool along the primary key, so the first contender is not penalised.
            cur.execute(f"SELECT COUNT(*), SUM(LENGTH(note)) FROM {BENCH_TABLE}")
            cur.fetchall()
    finally:
        conn.close()
    return time.monotonic() - clock


def write_pipeline_config(
    folder: Path,
    env: BenchEnv,
    *,
    master: str,
    startup_mode: str = "initial",
    chunk_size: int = SnapshotConfig.chunk_size,
    parallelism: int = 2,
    changelog: bool = False,
    extra: Mapping[str, object] | None = None,
    tables: list[str] | None = None,
    trigger_seconds: float = 0.5,
    spark_conf: Mapping[str, str] | None = None,
    wake_on_data: bool | None = None,
) -> Path:
    """A pipeline TOML for the bench table, with its state, lake and checkpoint in ``folder``;
    ``extra`` adds sections (``{"lake": {...}}``). The defaults are the job's own (a snapshot,
    then the stream, into a mirror without changelog, as the peers write one copy)."""
    return write_config(
        folder / "pipeline.toml",
        {
            "name": "bench",
            "source": {
                "host": env.sandbox.host,
                "port": env.sandbox.port,
                "user": BENCH_USER,
                "password_env": PASSWORD_ENV,
                "tables": tables or [f"{BENCH_DB}.{BENCH_TABLE}"],
                "server_id": PIPELINE_SERVER_IDS,
            },
            "snapshot": {
                "chunk_size": chunk_size,
                "parallelism": parallelism,
                "startup_mode": startup_mode,
            },
            "sink": {"kind": "delta", "path": "lake", "changelog": changelog},
            "state": {"path": "state/pipeline.sqlite"},
            "spark": {
                "master": master,
                "trigger_seconds": trigger_seconds,
                "checkpoint": "checkpoints",
                **({"wake_on_data": wake_on_data} if wake_on_data is not None else {}),
                **({"conf": dict(spark_conf)} if spark_conf else {}),
            },
            **(extra or {}),
        },
    )


def machine_line() -> str:
    """Cores, memory and load: figures from a busy 2-core box mean little without the load."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    mem = psutil.virtual_memory().total / 2**30
    return (
        f"machine: {platform.node()}, {os.cpu_count()} cores, {mem:.0f} GiB, "
        f"{platform.system()} {platform.release()}, python {platform.python_version()}; "
        f"load average {load}; disk readahead {_readahead()}; row decoders {_decoders()}"
    )


def _readahead() -> str:
    """The readahead of the disk pyarrow's libraries load from.

    Measured: with 8 MiB (a VM's setting) each process that imports pyarrow holds its whole
    libraries resident, 72 MB of file pages against 37 MB with the kernel's 128 KiB, and the
    job's tree of ten Python processes sums about 200 MB more RSS for the same code (PSS, which
    counts a shared page once, moves about 60 MB). A peak RSS means little without it.
    """
    import pyarrow

    try:
        where = Path(pyarrow.__file__).parent
        dev = os.stat(where).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
        for queue in (block / "queue", block.resolve().parent / "queue"):
            setting = queue / "read_ahead_kb"
            if setting.exists():
                return f"{int(setting.read_text().strip()):,} KiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def _decoders() -> str:
    """Which row decoders ours runs (``mysql.native``): figures of the Python twins are not
    the compiled ones'."""
    decoders = native.decoders_in_use()
    if decoders == "not built":
        return "pure Python (the compiled ones were not built)"
    if decoders == "switched off":
        return f"pure Python ({native.PURE_PYTHON_ENV}=1)"
    return "compiled"


def load_line(phase: str) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"load average {phase}: {load}"


def format_table(title: str, rows: Sequence[Measurement], reference: str) -> str:
    """The side-by-side table; ``ratio`` is rows/s relative to the ``reference`` label's.

    ``CPU s`` is the contender's process tree over its whole run, start-up included; ``bg`` the
    cores other processes kept busy meanwhile (2 cores: bg 1.0 means half the machine was taken).
    """
    ref = next((m for m in rows if m.label == reference), None)
    header = (
        f"{'label':<38} {'rows':>10} {'seconds':>8} {'rows/s':>10} {'ratio':>7} "
        f"{'peak RSS MB':>11} {'CPU s':>7} {'bg':>5}  note"
    )
    lines = [title, header, "-" * len(header)]
    for m in rows:
        ratio = f"{m.rate / ref.rate:.2f}x" if ref is not None and ref.rate > 0 else "-"
        peak = f"{m.peak_rss_mb:.0f}" if m.peak_rss_mb is not None else "-"
        cpu = f"{m.cpu_seconds:.1f}" if m.cpu_seconds is not None else "-"
        bg = f"{m.background_cores:.2f}" if m.background_cores is not None else "-"
        note = m.note + (" [reference]" if ref is m else "")
        lines.append(
            f"{m.label:<38} {m.rows:>10,} {m.seconds:>8.1f} {m.rate:>10,.0f} {ratio:>7} "
            f"{peak:>11} {cpu:>7} {bg:>5}  {note.strip()}"
        )
    return "\n".join(lines)


def ratio(ours: Measurement | None, reference: Measurement | None) -> float | None:
    if ours is None or reference is None or reference.rate <= 0:
        return None
    return ours.rate / reference.rate


def bar_line(name: str, value: float | None, bar: float, detail: str) -> str:
    if value is None:
        return f"bar {name} >= {bar:.1f}x: not measured ({detail})"
    verdict = "MET" if value >= bar else "MISSED"
    return f"bar {name} >= {bar:.1f}x: {value:.2f}x {verdict} ({detail})"


def met_line(name: str, value: float | None, bar: float, unit: str, detail: str) -> str:
    """A performance target: MET or NOT MET (``unit`` after each figure)."""
    if value is None:
        return f"target {name} >= {bar:g}{unit}: not measured ({detail})"
    verdict = "MET" if value >= bar else "NOT MET"
    return f"target {name} >= {bar:g}{unit}: {value:.2f}{unit} {verdict} ({detail})"


def dump_json(path: Path, document: Mapping[str, object]) -> None:
    """Write results as JSON: dataclasses field by field (measurements with their rows/s)."""

    def default(obj: object) -> object:
        if isinstance(obj, Measurement):
            return {**asdict(obj), "rows_per_s": round(obj.rate, 1)}
        if is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name) for f in fields(obj)}
        if isinstance(obj, frozenset | set):
            return sorted(obj)
        return str(obj)

    options = document.get("options")
    if isinstance(options, dict):
        document = {**document, "options": {k: v for k, v in options.items() if not callable(v)}}

    path.write_text(json.dumps(document, indent=2, default=default))


def breakdown_line(batches: Sequence[BatchTimes], job: ChildRun) -> str:
    """Where the pipeline's wall time went, from its own timestamps.

    start-up: process start to the first plan (interpreter, preflight, Spark session, query
    start); read+stage: plan to staged Parquet (Spark tasks reading MySQL, rows to the JVM and back
    to the driver as Arrow, staging write); apply: staged to committed (decode staged rows, Delta
    MERGE, SQLite commit), of which "overlapped" ran while the next batch was already planned
    and read (``source.plan_past``); shutdown: last commit to process exit.
    """
    done = [b for b in batches if b.applied_at is not None]
    if not done:
        return "ours breakdown: no batch applied"
    first = min(b.created_at for b in done)
    last = max(b.applied_at for b in done if b.applied_at is not None)
    read = sum((b.staged_at or b.created_at) - b.created_at for b in done)
    apply = sum((b.applied_at or 0.0) - (b.staged_at or b.created_at) for b in done)
    ordered = sorted(done, key=lambda b: b.batch_no)
    overlapped = sum(
        max(0.0, (b.applied_at or 0.0) - after.created_at)
        for b, after in itertools.pairwise(ordered)
    )
    gaps = (last - first) - read - apply + overlapped
    return (
        f"ours breakdown: start-up {first - job.started_at:.1f}s, {len(done)} batches in "
        f"{last - first:.1f}s = read+stage {read:.1f}s + apply {apply:.1f}s "
        f"({overlapped:.1f}s of it overlapped by the next batch's read) + between batches "
        f"{gaps:.1f}s; shutdown {job.ended_at - last:.1f}s"
    )


def start_streaming_job(config: Path, env: BenchEnv, log_path: Path) -> subprocess.Popen[str]:
    """The job streaming until SIGTERM (not ``--until-caught-up``: the load comes after)."""
    args = [sys.executable, "-m", "cdc_console", "run", "--config", str(config)]
    log = log_path.open("w")
    return subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, **env.child_env},
    )


def wait_for_state(
    state_path: Path,
    timeout: float,
    ready: Callable[[StateStore], bool],
    failure: str,
    interval: float = 0.5,
) -> None:
    """Until ``ready`` holds on a fresh look at the job's state database; ``BenchError`` with
    ``failure`` after ``timeout`` seconds. A new store each time: the job writes meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = StateStore(state_path)
        try:
            if ready(store):
                return
        finally:
            store.close()
        time.sleep(interval)
    raise BenchError(failure)


def wait_running(state_path: Path, timeout: float) -> None:
    """Until the restarted job is running (its run row) and planning batches again."""

    def running(store: StateStore) -> bool:
        runs = store.runs(1)
        return bool(runs and runs[0].status == "running" and runs[0].heartbeat_at)

    wait_for_state(
        state_path, timeout, running, f"the job did not start streaming within {timeout:.0f}s"
    )


def wait_caught_up(env: BenchEnv, state_path: Path, timeout: float) -> None:
    conn = env.connect()
    try:
        head = current_position(conn)
    finally:
        conn.close()

    def caught_up(store: StateStore) -> bool:
        committed = store.committed_offset()
        return committed is not None and committed >= head

    wait_for_state(
        state_path,
        timeout,
        caught_up,
        f"the job did not catch up with {head} within {timeout:.0f}s",
    )
