"""Canned pipelines for the console tests: a state database with a table in every lifecycle state,
2,000 splits on one of them, lag samples, events, commands and runs, all at frozen times; a
server probe and a job control that answer from memory.

Everything shown on screen derives from ``NOW``, fixed pids and paths relative to the test's
working directory, so SVG snapshots are byte-stable across machines and runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from cdc_console.config import load_config
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import (
    BatchStatus,
    CommandKind,
    CommandStatus,
    Lifecycle,
    SplitStatus,
    Verdict,
)
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.splits import SnapshotSplit
from cdc_console.state.lake import record_footprint
from cdc_console.state.store import StateStore, VerificationRow
from cdc_console.tui.data.jobs import ProcessSample
from cdc_console.tui.data.monitor import PipelineMonitor
from cdc_console.tui.data.server import ServerStatus

NOW = 1_750_000_000.0  # 2025-06-15 15:06:40 UTC
HOST = "console-test"
JOB_PID = 4242
LAUNCHED_PID = 5151
ORDERS = TableId("shop", "orders")
ORDERS_SPLITS = 2000
ORDERS_FINISHED = 1234

CONFIG = """\
name = "{name}"
[source]
host = "127.0.0.1"
port = 3306
tables = ["shop.*"]
[snapshot]
chunk_size = 1000
[state]
path = "state/{name}.sqlite"
[console]
refresh_seconds = 0.05
"""


def binlog(index: int, pos: int) -> BinlogOffset:
    return BinlogOffset(f"binlog.{index:06d}", pos)


HEAD = BinlogOffset("binlog.000042", 9000, gtid="0-1-4711")
SERVER_LOGS = (
    ("binlog.000039", 1_048_576),
    ("binlog.000040", 1_048_576),
    ("binlog.000041", 1_048_576),
    ("binlog.000042", 9000),
)


class FrozenClock:
    """``time.time`` for building a state: starts at a given instant, moves only when told."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@contextmanager
def frozen_time(start: float) -> Iterator[FrozenClock]:
    clock = FrozenClock(start)
    with mock.patch("time.time", clock):
        yield clock


def write_config(directory: Path, name: str = "shop") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(CONFIG.format(name=name))
    return path


def build_state(path: Path) -> None:
    """One table per lifecycle state; shop.orders mid-snapshot with 2,000 chunks."""
    with frozen_time(NOW - 4000) as clock:
        store = StateStore(path)
        tables = {
            "orders": (Lifecycle.SNAPSHOTTING, None),
            "customers": (Lifecycle.STREAMING, binlog(42, 8800)),
            "products": (Lifecycle.CATCHING_UP, binlog(41, 900)),
            "payments": (Lifecycle.PAUSED, binlog(40, 300)),
            "skus": (Lifecycle.REDUMP, binlog(42, 8800)),
            "archive": (Lifecycle.SNAPSHOT_DONE, None),
            "legacy": (Lifecycle.REMOVED, binlog(39, 120)),
        }
        for table, (state, position) in tables.items():
            first = Lifecycle.STREAMING if state == Lifecycle.STREAMING else Lifecycle.SNAPSHOTTING
            store.ensure_table(TableId("shop", table), "id", first, position)
            with store.transaction() as conn:  # one legal move to where the picture needs it
                store.move_table(TableId("shop", table), conn, state)
        _splits(store, ORDERS, ORDERS_SPLITS, ORDERS_FINISHED, clock)
        _splits(store, TableId("shop", "customers"), 12, 12, clock)
        _splits(store, TableId("shop", "skus"), 8, 3, clock)
        with store.transaction() as conn:
            for sql, args in (
                (
                    "rows_snapshotted=?, events_applied=?, last_event_ts=?",
                    (11_800, 48_211, "customers"),
                ),
                ("rows_snapshotted=?, events_applied=?, last_event_ts=?", (5_000, 310, "products")),
                ("rows_snapshotted=?, events_applied=?, last_event_ts=?", (2_500, 77, "payments")),
                ("rows_snapshotted=?, events_applied=?, last_event_ts=?", (3_000, 12, "skus")),
            ):
                rows, events, table = args
                conn.execute(
                    f"UPDATE tables SET {sql} WHERE table_id=?",
                    (rows, events, int((NOW - 3) * 1000), f"shop.{table}"),
                )
            conn.execute(
                "UPDATE tables SET paused_at=?, resume_state=? WHERE table_id='shop.payments'",
                (json.dumps(binlog(40, 300).to_dict()), Lifecycle.STREAMING),
            )
            conn.execute(
                "UPDATE tables SET generation=1 WHERE table_id='shop.skus'",
            )
            conn.execute(
                "UPDATE tables SET removed_by='cli:ops' WHERE table_id='shop.legacy'",
            )
            conn.execute(
                "UPDATE tables SET splits_total=4, splits_done=4, rows_snapshotted=4000 "
                "WHERE table_id='shop.archive'"
            )
            store.set_offset("committed", binlog(41, 900), conn)
        _runs(store, clock)
        _lag_samples(store, clock)
        _events_and_commands(store, clock)
        _verifications(store, clock)
        _lake(store, path.parent / "lake")
        _batches(store)
        store.close()


def _batches(store: StateStore) -> None:
    """The last minute's batches: chunk batches read for 8 s (6.5 s of it in our readers, the
    rest Spark's) between binlog-only ones, one held 6 s by lake maintenance, and one still
    being read (batch 7, with two orders chunks)."""
    rows = []
    applied = NOW - 45.0
    for no in range(1, 7):
        created = applied + 0.8
        staged = created + (8.0 if no % 2 else 0.6)
        read = 6.5 if no % 2 else 0.25
        held = 6.0 if no == 4 else 0.0
        applied = staged + held + 0.4
        rows.append(
            (no, "{}", BatchStatus.APPLIED, created, 0.1, staged, read, held or None, applied)
        )
    rows.append((7, "{}", BatchStatus.PLANNED, NOW - 2.0, 0.1, None, None, None, None))
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO batches (batch_no, plan, status, created_at, plan_seconds, staged_at, "
            "read_seconds, held_seconds, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def _lake(store: StateStore, root: Path) -> None:
    """The job's last measurements of the mirrors (orders is still being written)."""
    for table, files, disk in (
        ("orders", 41, 9_400_000),
        ("customers", 12, 3_100_000),
        ("products", 3, 480_000),
        ("payments", 2, 96_000),
        ("skus", 9, 2_600_000),
        ("archive", 1, 52_000),
        ("legacy", 1, 30_000),
    ):
        record_footprint(
            store,
            f"shop.{table}",
            "mirror",
            str(root / "shop" / table),
            version=7,
            files=files,
            live_bytes=disk * 2 // 3,
            disk_bytes=disk,
            small_files=0,
            rows=files * 6000,
        )


def _splits(
    store: StateStore, table: TableId, total: int, finished: int, clock: FrozenClock
) -> None:
    width = 1000
    splits = [
        SnapshotSplit(
            table,
            n,
            "id",
            ChunkRange(None if n == 0 else n * width, None if n == total - 1 else (n + 1) * width),
        )
        for n in range(total)
    ]
    store.add_splits(table, splits)
    rows = []
    for n in range(finished):
        low = binlog(40 + n * 3 // total, 1000 + n * 7)
        high = binlog(40 + n * 3 // total, 1000 + n * 7 + (n % 5) * 13)
        started = clock.now + n
        rows.append(
            (
                SplitStatus.FINISHED,
                json.dumps(low.to_dict()),
                json.dumps(high.to_dict()),
                width,
                n % 3,
                started,
                started + 0.4,
                400 + n % 250,
                f"{table}:{n}",
            )
        )
    with store.transaction() as conn:
        conn.executemany(
            "UPDATE splits SET status=?, low_watermark=?, high_watermark=?, rows=?, "
            "backfill_events=?, started_at=?, finished_at=?, duration_ms=? WHERE split_id=?",
            rows,
        )
        conn.execute(
            "UPDATE splits SET status='ASSIGNED', batch_no=7 WHERE table_id=? AND split_no IN (?, ?)",
            (str(table), finished, finished + 1) if finished + 1 < total else (str(table), -1, -1),
        )
        conn.execute(
            "UPDATE tables SET splits_done=?, rows_snapshotted=? WHERE table_id=?",
            (finished, finished * width, str(table)),
        )


def _verifications(store: StateStore, clock: FrozenClock) -> None:
    """shop.customers verified a minute ago: chunk 3 lost a row, the rest are equal."""
    customers = TableId("shop", "customers")
    for n in range(12):
        store.record_verification(
            VerificationRow(
                customers,
                n,
                NOW - 60,
                binlog(42, 8000),
                Verdict.DIFFERS if n == 3 else Verdict.EQUAL,
                1000,
                1 if n == 3 else 0,
                0,
                0,
                {"missing": [[3_017]]} if n == 3 else {},
            )
        )
    clock.now = NOW - 60
    store.log_event(
        "verify",
        "verify shop.customers: chunk 3 [3000, 4000): 1 row(s) missing from the mirror "
        "(id=3017) (f on Events repairs)",
        level="error",
        table_id="shop.customers",
    )


def _runs(store: StateStore, clock: FrozenClock) -> None:
    clock.now = NOW - 90_000
    first = store.start_run(3131, HOST, "local[2]")
    store.update_run(
        first,
        status="failed",
        exit_code=2,
        ended_at=NOW - 86_000,
        error="the source server no longer has binlog binlog.000012",
    )
    clock.now = NOW - 80_000
    second = store.start_run(3232, HOST, "local[2]")
    store.update_run(second, status="stopped", exit_code=0, ended_at=NOW - 7_000)
    clock.now = NOW - 3_725
    third = store.start_run(JOB_PID, HOST, "local[2]")
    store.update_run(third, heartbeat_at=NOW - 1, spark_ui="http://console-test:4040")


def _lag_samples(store: StateStore, clock: FrozenClock) -> None:
    for i in range(60):
        clock.now = NOW - 300 + i * 5
        head = binlog(40 + i // 20, 100 + (i % 20) * 450)
        committed = binlog(40 + max(0, i - 8) // 20, 100 + (max(0, i - 8) % 20) * 450)
        lag_ms = 1500 + (i % 12) * 900 + (4000 if 30 <= i < 36 else 0)
        store.add_lag_sample(committed, head, 40_000 + i * 100, 0, lag_ms)


def _events_and_commands(store: StateStore, clock: FrozenClock) -> None:
    clock.now = NOW - 3_700
    store.log_event("job", f"job started (run 3, pid {JOB_PID}, master local[2])")
    clock.now = NOW - 3_600
    store.log_event(
        "phase",
        "shop.customers: snapshot finished, CATCHING_UP from binlog.000040:1000",
        table_id="shop.customers",
    )
    clock.now = NOW - 3_500
    store.log_event(
        "phase",
        "shop.customers: caught up at binlog.000041:200, now STREAMING",
        table_id="shop.customers",
    )
    clock.now = NOW - 1_200
    paused = store.queue_command(CommandKind.PAUSE, "shop.payments", issued_by="cli:ops")
    store.finish_command(paused, CommandStatus.APPLIED, "paused at binlog.000040:300")
    store.log_event("command", "command 1: pause shop.payments applied", table_id="shop.payments")
    clock.now = NOW - 900
    redump = store.queue_command(CommandKind.REDUMP, "shop.skus", issued_by="console:ops")
    store.finish_command(redump, CommandStatus.APPLIED, "re-dumping shop.skus in 8 fresh chunks")
    clock.now = NOW - 600
    refused = store.queue_command(CommandKind.RESUME, "shop.legacy", issued_by="cli:ops")
    store.finish_command(
        refused, CommandStatus.FAILED, "shop.legacy is not captured (removed); add it back first"
    )
    clock.now = NOW - 120
    store.log_event(
        "batch",
        "sink write failed for shop.products, retrying: disk full",
        level="error",
        table_id="shop.products",
    )


@dataclass
class CannedServer:
    """A probe answering from memory; ``error`` makes it an unreachable server."""

    head: BinlogOffset | None = HEAD
    logs: tuple[tuple[str, int], ...] = SERVER_LOGS
    expire_seconds: float | None = 7 * 86400
    error: str | None = None
    probes: int = 0

    def probe(self) -> ServerStatus:
        self.probes += 1
        if self.error is not None:
            return ServerStatus(probed_at=NOW, error=self.error)
        return ServerStatus(
            probed_at=NOW,
            head=self.head,
            logs=self.logs,
            expire_seconds=self.expire_seconds,
            expire_setting="binlog_expire_logs_seconds=604800" if self.expire_seconds else None,
            version="10.11.6-MariaDB",
        )

    def close(self) -> None:
        pass


@dataclass
class CannedJobs:
    """Job processes from memory: the running job's tree, what was launched and stopped."""

    running: int | None = JOB_PID
    launched: list[Path] = field(default_factory=list)
    verifying: list[str] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    alive: set[int] = field(default_factory=set)
    exit_codes: dict[int, int] = field(default_factory=dict)

    def sample(self, store: StateStore, config_path: Path) -> ProcessSample | None:
        if self.running is None:
            return None
        return ProcessSample(self.running, 87.5, 1_717_986_918, 9)

    def launch(self, config_path: Path, log_path: Path) -> int:
        self.launched.append(config_path)
        self.alive.add(LAUNCHED_PID)
        return LAUNCHED_PID

    def launch_verify(self, config_path: Path, log_path: Path, table: str) -> int:
        self.verifying.append(table)
        return LAUNCHED_PID + 1

    def stop(self, pid: int, timeout: float) -> None:
        self.stopped.append(pid)
        self.alive.discard(pid)
        if self.running == pid:
            self.running = None

    def is_alive(self, pid: int) -> bool:
        return pid in self.alive or pid == self.running

    def exit_code(self, pid: int) -> int | None:
        return self.exit_codes.get(pid)


def canned_pipeline(
    directory: Path,
    name: str = "shop",
    *,
    with_state: bool = True,
    server: CannedServer | None = None,
    jobs: CannedJobs | None = None,
) -> PipelineMonitor:
    """A monitor over a canned pipeline in ``directory`` (the test's working directory)."""
    config_path = write_config(directory, name)
    config = load_config(config_path)
    if with_state:
        build_state(config.state_path)
        log = config.state_path.parent / "job.log"
        log.write_text(
            "--- 2025-06-15 14:04:35 starting: run --config shop.toml\n"
            "14:04:37 INFO  cdc_console.spark.job: spark 4.3.0 on local[2], UI http://console-test:4040\n"
            "14:05:02 INFO  cdc_console.source.assigner: shop.orders: 2000 chunks of 1000 rows\n"
            "15:04:40 WARN  cdc_console.spark.job: lag probe failed: timed out\n"
        )
    return PipelineMonitor(
        config,
        server or CannedServer(),
        jobs if jobs is not None else CannedJobs(running=JOB_PID if with_state else None),
        config_label=config_path.name,
        clock=lambda: NOW,
        host=HOST,
        issued_by="console:test",
        stop_grace=0.2,
    )


def state_store(directory: Path, name: str = "shop") -> StateStore:
    return StateStore.open_existing(load_config(directory / f"{name}.toml").state_path)
