"""Running the real pipeline as a child process against the session's MariaDB, and checking it.

The job runs as ``python -m cdc_console run`` in its own process group, exactly as a user runs it,
so tests can stop it gracefully (SIGTERM) or kill it and its JVM outright (SIGKILL).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pymysql
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig, load_config
from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.mysql.position import current_position
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.state.store import EventRow, RunRow, StateStore
from tests.conftest import CDC_PASSWORD_ENV, CDC_USER, SourceDb


def write_config(
    db: SourceDb,
    folder: Path,
    *,
    tables: list[str] | None = None,
    chunk_size: int = 8096,
    extra: str = "",
    snapshot: str = "",
    sink_kind: str = "delta",
) -> Path:
    """A pipeline config for ``db``; ``snapshot`` adds lines to [snapshot], ``extra`` at the end.

    Batches are planned without the chunk budget (``batch_seconds_while_streaming = 0``, unless
    ``snapshot`` sets it): it only decides how many chunks share a batch, which the tests vary
    with ``chunks_per_batch`` anyway, and on a loaded 2-core box its one-chunk batches made the
    multi-table tests minutes slower. ``bench redump`` (and its smoke test) runs with it on.
    """
    budget = (
        "" if "batch_seconds_while_streaming" in snapshot else "batch_seconds_while_streaming = 0\n"
    )
    patterns = ", ".join(f'"{t}"' for t in (tables or [f"{db.name}.*"]))
    path = folder / "pipeline.toml"
    path.write_text(
        f"""
[source]
host = "127.0.0.1"
port = {db.sandbox.port}
user = "{CDC_USER}"
password_env = "{CDC_PASSWORD_ENV}"
tables = [{patterns}]
server_id = "5400-5410"

[snapshot]
chunk_size = {chunk_size}
parallelism = 2
{budget}{snapshot}

[sink]
kind = "{sink_kind}"
path = "lake"

[state]
path = "state/pipeline.sqlite"

[spark]
master = "local[2]"
trigger_seconds = 0.5

[metrics]
listen = "127.0.0.1:0"
{extra}
"""
    )
    return path


@dataclass
class JobProcess:
    config_path: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    log_path: Path | None = None

    def start(self) -> JobProcess:
        self.log_path = self.config_path.parent / f"job-{int(time.time() * 1000)}.log"
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdc_console",
                "run",
                "--config",
                str(self.config_path),
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, **self.env},
        )
        return self

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"job did not exit within {timeout}s:\n{self.output()}") from None

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the whole process group: driver, JVM and Python workers, like a crash."""
        assert self.proc is not None
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def output(self) -> str:
        return self.log_path.read_text()[-8000:] if self.log_path else ""


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, job: JobProcess | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if job is not None and job.proc is not None and job.proc.poll() is not None:
            raise AssertionError(
                f"job exited ({job.proc.returncode}) while waiting for {what}:\n{job.output()}"
            )
        time.sleep(0.3)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}:\n" + (job.output() if job else "")
    )


def state(config: PipelineConfig) -> StateStore | None:
    return StateStore(config.state_path) if config.state_path.exists() else None


def caught_up(db: SourceDb, config: PipelineConfig) -> bool:
    store = state(config)
    if store is None:
        return False
    try:
        tables = store.tables()
        committed = store.committed_offset()
        if not tables or any(t.state != Lifecycle.STREAMING for t in tables) or committed is None:
            return False
        conn = db.connect()
        try:
            return committed >= current_position(conn)
        finally:
            conn.close()
    finally:
        store.close()


def mirror_rows(
    config: PipelineConfig, database: str, table: str, key: str
) -> list[dict[str, Any]]:
    path = config.sink.path / database / table
    rows: list[dict[str, Any]] = read_delta(DeltaTable(str(path))).to_pylist()
    return sorted(rows, key=lambda r: r[key])


def source_rows(db: SourceDb, table: str, key: str) -> list[dict[str, Any]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}` ORDER BY `{key}`")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        conn.close()


def changelog_replay(
    config: PipelineConfig, database: str, table: str, key: str
) -> tuple[dict[Any, dict[str, Any]], int, int]:
    """Fold the changelog in order; return (final rows, binlog changes, duplicate binlog changes)."""
    path = config.sink.path / "_changelog" / database / table
    data: pa.Table = read_delta(DeltaTable(str(path)))
    rows = data.to_pylist()
    rows.sort(
        key=lambda r: (
            r["_batch_id"],
            r["_file_index"],
            r["_pos"],
            r["_event_index"],
            r["_row_index"],
            r["_seq"],
        )
    )
    state_rows: dict[Any, dict[str, Any]] = {}
    seen: set[tuple[Any, ...]] = set()
    duplicates = binlog = 0
    for r in rows:
        if r["_event_index"] >= 0:
            binlog += 1
            ident = (
                r["_file_index"],
                r["_pos"],
                r["_event_index"],
                r["_row_index"],
                r["_op"],
                r[key],
            )
            duplicates += ident in seen
            seen.add(ident)
        image = {k: v for k, v in r.items() if not k.startswith("_")}
        if r["_op"] in ("+I", "+U"):
            state_rows[r[key]] = image
        else:
            state_rows.pop(r[key], None)
    return state_rows, binlog, duplicates


_CDF_RANK = {"delete": 0, "update_preimage": 0, "insert": 1, "update_postimage": 1}


def change_feed_replay(
    config: PipelineConfig, database: str, table: str, key: str
) -> tuple[dict[Any, dict[str, Any]], int]:
    """Fold the mirror's Delta change data feed in commit order, as a downstream consumer of
    ``readChangeFeed`` would; return (final rows, changes that contradict the state).

    A contradiction is an insert or post-image of a key already present, or a delete or
    pre-image of a key absent or holding another row: what a change delivered twice, or lost,
    looks like in a feed.
    """
    path = config.sink.path / database / table
    feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=0))
    meta = {"_change_type", "_commit_version", "_commit_timestamp"}
    rows = [
        ({k: v for k, v in r.items() if k not in meta}, r["_change_type"], r["_commit_version"])
        for r in feed.to_pylist()
    ]
    rows.sort(key=lambda item: (item[2], _CDF_RANK[item[1]]))
    state_rows: dict[Any, dict[str, Any]] = {}
    contradictions = 0
    for image, kind, _ in rows:
        if kind in ("delete", "update_preimage"):
            contradictions += state_rows.pop(image[key], None) != image
        else:
            contradictions += image[key] in state_rows
            state_rows[image[key]] = image
    return state_rows, contradictions


def create_orders(db: SourceDb, rows: int) -> None:
    """The ``orders`` table ``Writer`` works on, with ``rows`` rows (ids 1..rows)."""
    db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), updated DATETIME(6))",
        f"INSERT INTO orders SELECT seq, CONCAT('c', seq % 97), seq / 100, NULL, NOW(6) "
        f"FROM seq_1_to_{rows}",
    )


def finished_splits(config: PipelineConfig) -> dict[str, tuple[object, object]]:
    """Every finished split's high watermark and finish time, by split id."""
    if not config.state_path.exists():
        return {}
    store = StateStore(config.state_path)
    try:
        return {
            s.split.split_id: (s.high_watermark, s.finished_at)
            for table in store.tables()
            for s in store.splits(table.table_id)
            if s.status == SplitStatus.FINISHED
        }
    finally:
        store.close()


class Writer(threading.Thread):
    """A background writer mixing inserts, updates, deletes and key moves on one table."""

    def __init__(
        self, db: SourceDb, table: str, targets: list[int], seed: int = 7, rate: float = 150.0
    ) -> None:
        super().__init__(daemon=True)
        self.db, self.table, self.targets = db, table, targets
        self.random = random.Random(seed)
        self.rate = rate
        self.stop_event = threading.Event()
        self.ops = 0
        #: rows that left the table: deletes and the old keys of key moves
        self.deleted = 0
        self.errors: list[BaseException] = []
        self.next_id = 10_000_000
        self.started = self.stopped = 0.0
        self._slot = 0.0

    @property
    def achieved_rate(self) -> float:
        """Statements a second it actually ran, start to stop."""
        seconds = (self.stopped or time.monotonic()) - self.started
        return self.ops / seconds if seconds > 0 else 0.0

    def _pace(self) -> None:
        """Wait for the next statement's slot: ``rate`` a second counted from the start (a sleep
        after each statement would add the statement's own time and run slower than asked).
        Behind by over a second, it starts counting afresh rather than burst to catch up."""
        now = time.monotonic()
        if not self._slot:
            self.started = self._slot = now
        self._slot += 1.0 / self.rate
        if self._slot < now - 1.0:
            self._slot = now
        elif self._slot > now:
            self.stop_event.wait(self._slot - now)

    def run(self) -> None:
        conn = self.db.connect()
        try:
            while not self.stop_event.is_set():
                self._pace()
                try:
                    self.step(conn)
                    self.ops += 1
                except Exception as exc:
                    if "Duplicate entry" not in str(exc):
                        self.errors.append(exc)
                        return
        finally:
            self.stopped = time.monotonic()
            conn.close()

    def step(self, conn: Any) -> None:
        r = self.random
        t = self.table
        key = r.choice(self.targets) if r.random() < 0.5 else r.randint(1, 100_000)
        roll = r.random()
        with conn.cursor() as cur:
            if roll < 0.3:
                cur.execute(
                    f"UPDATE {t} SET amount = amount + 1, note = %s, updated = NOW(6) "
                    "WHERE id = %s",
                    (f"u{self.ops}", key),
                )
            elif roll < 0.45:
                self.deleted += cur.execute(f"DELETE FROM {t} WHERE id = %s", (key,))
            elif roll < 0.6:
                cur.execute(
                    f"INSERT INTO {t} (id, customer, amount, note, updated) VALUES "
                    "(%s, %s, %s, 'reinsert', NOW(6))",
                    (key, f"c{key % 97}", Decimal("1.50")),
                )
            elif roll < 0.75:
                self.next_id += 1
                cur.execute(
                    f"INSERT INTO {t} (id, customer, amount, note, updated) VALUES "
                    "(%s, 'new', 9.99, 'tail', NOW(6))",
                    (self.next_id,),
                )
            else:
                dest = r.randint(100_001, 9_000_000)
                moved = cur.execute(
                    f"UPDATE {t} SET id = %s, note = 'moved' WHERE id = %s", (dest, key)
                )
                self.deleted += moved
                if r.random() < 0.5:
                    self.deleted += cur.execute(
                        f"UPDATE {t} SET id = %s, note = 'moved back' WHERE id = %s",
                        (r.randint(1, 100_000), dest),
                    )

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)


class ReconnectingWriter(Writer):
    """The writer as an application behaves through an outage or a failover: a failed statement
    drops the connection and it reconnects, to whichever server ``self.db`` names by then."""

    def run(self) -> None:
        conn: Any = None
        current = self.db
        while not self.stop_event.is_set():
            self._pace()
            try:
                if conn is None or current is not self.db:
                    current = self.db
                    conn = current.connect()
                self.step(conn)
                self.ops += 1
            except pymysql.err.MySQLError as exc:
                if "Duplicate entry" not in str(exc):
                    conn = None
                    time.sleep(0.3)
        self.stopped = time.monotonic()


@contextmanager
def running(job: JobProcess) -> Iterator[JobProcess]:
    job.start()
    try:
        yield job
    finally:
        if job.proc is not None and job.proc.poll() is None:
            job.kill()


def load(config_path: Path) -> PipelineConfig:
    return load_config(config_path)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``cdc-console ARGS`` as a user runs it; stdout and stderr kept apart."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_console", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def assert_no_password(*texts: str, files: tuple[Path, ...] = ()) -> None:
    """The source password appears in none of ``texts`` nor ``files`` (a SQLite file's -wal too)."""
    password = os.environ[CDC_PASSWORD_ENV]
    for text in texts:
        assert password not in text, "the source password leaked into the output"
    for path in files:
        for candidate in (path, path.with_name(path.name + "-wal")):
            if candidate.exists():
                assert password.encode() not in candidate.read_bytes(), f"password in {candidate}"


def last_run(config: PipelineConfig) -> RunRow:
    store = StateStore(config.state_path)
    try:
        return store.runs(1)[0]
    finally:
        store.close()


def events(config: PipelineConfig, level: str | None = None) -> list[EventRow]:
    store = StateStore(config.state_path)
    try:
        return [e for e in store.events(1000) if level is None or e.level == level]
    finally:
        store.close()


def purge_binary_logs(db: SourceDb, timeout: float = 20.0) -> str:
    """Rotate twice and purge every binlog but the newest; return the newest file's name.

    MariaDB refuses (silently) to purge a file until its binlog checkpoint has moved on, which
    happens shortly after a rotation; so retry until only the newest file is left.
    """
    db.execute("FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
    newest = str(db.rows("SHOW BINARY LOGS")[-1][0])
    deadline = time.monotonic() + timeout
    while True:
        db.execute(f"PURGE BINARY LOGS TO '{newest}'")
        if [str(r[0]) for r in db.rows("SHOW BINARY LOGS")] == [newest]:
            return newest
        if time.monotonic() > deadline:
            raise AssertionError(f"binlogs before {newest} were not purged within {timeout}s")
        time.sleep(0.2)
