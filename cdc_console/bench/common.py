"""What every benchmark shares: the sandbox, seeding, the pipeline's config and its waits,
the measurements and their table.

The contenders run as child processes (``bench.processes``), each measured the same way. The
server is a sibling of the contenders (a child of this process, not of theirs), so it is never
counted in a contender's memory.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path

import psutil
import pymysql

from cdc_console.bench.processes import BenchError, ChildRun, run_child
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
