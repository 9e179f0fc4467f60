"""Reads that yield to a busy source, against a real MariaDB and, for the snapshot, real Spark.

The load is made the way it comes in production: sessions running statements at once, which
``Threads_running`` counts. The snapshot must hold its chunks while the load is above
``[source] max_load``, go on by itself once it drops, and still converge exactly; the streaming
table's changes must keep arriving meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.figures import change_stages
from cdc_console.mysql.checks import run_checks
from cdc_console.mysql.connection import connect
from cdc_console.mysql.position import current_position
from cdc_console.mysql.source_load import read_load, replica_lag
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.source.throttle import LoadThrottle
from cdc_console.state.rows import AppliedBatch
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    events,
    load,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import (
    all_in,
    assert_converged,
    caught_up_now,
    cli,
    create_table,
    tables_state,
)

pytestmark = pytest.mark.mysql

#: sessions the load generator keeps running at once
BUSY_SESSIONS = 8


@contextmanager
def busy_source(db: SourceDb, sessions: int = BUSY_SESSIONS) -> Iterator[None]:
    """``sessions`` sessions each running a long ``SELECT SLEEP`` until the block ends."""
    conns = [db.sandbox.connect() for _ in range(sessions)]
    ids = [c.thread_id() for c in conns]

    def sleep(conn: object) -> None:
        try:
            with conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute("SELECT SLEEP(600)")
        except Exception:
            pass

    threads = [threading.Thread(target=sleep, args=(c,), daemon=True) for c in conns]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and running_threads(db) <= sessions:
            time.sleep(0.05)
        yield
    finally:
        for thread_id in ids:
            db.sandbox.execute(f"KILL QUERY {thread_id}")
        for thread in threads:
            thread.join(10)
        for conn in conns:
            conn.close()


def running_threads(db: SourceDb) -> float:
    conn = connect(db.source_config())
    try:
        return read_load(conn, ["Threads_running"])["Threads_running"]
    finally:
        conn.close()


def test_the_load_figures_are_read_as_the_server_reports_them(source_db: SourceDb) -> None:
    conn = connect(source_db.source_config())
    try:
        quiet = read_load(conn, ["threads_RUNNING", "Threads_connected", "No_such_figure"])
        assert set(quiet) == {"threads_RUNNING", "Threads_connected"}  # names as given
        with busy_source(source_db):
            busy = read_load(conn, ["Threads_running"])["Threads_running"]
        assert busy > BUSY_SESSIONS >= quiet["threads_RUNNING"]
        # the source user may not read a replica's status on MariaDB (SLAVE MONITOR): no figure
        assert read_load(conn, ["replica_lag"]) == {}
        root = source_db.sandbox.connect()
        try:
            assert replica_lag(root) is None  # the sandbox replicates from no primary
            assert read_load(root, ["replica_lag"]) == {}
        finally:
            root.close()
    finally:
        conn.close()


def test_a_throttle_over_the_real_server_yields_while_it_is_busy(
    source_db: SourceDb, tmp_path: Path
) -> None:
    store = StateStore(tmp_path / "state.sqlite")
    conn = connect(source_db.source_config())
    clock = [0.0]
    throttle = LoadThrottle(
        {"Threads_running": BUSY_SESSIONS - 2},
        lambda names: read_load(conn, names),
        store,
        clock=lambda: clock[0],
    )
    try:
        assert throttle.reason() is None
        with busy_source(source_db):
            clock[0] += 2
            reason = throttle.reason()
            assert reason is not None and reason.startswith("Threads_running ")
            assert reason.endswith(f" > {BUSY_SESSIONS - 2}")
        clock[0] += 2
        assert throttle.reason() is None
    finally:
        conn.close()
    assert [e.level for e in store.events() if e.kind == "throttle"] == ["warning", "info"]


def test_check_names_a_limit_the_server_does_not_report(
    source_db: SourceDb, tmp_path: Path
) -> None:
    source_db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    config = load(write_config(source_db, tmp_path))
    for limits, ok in (
        ((("Threads_running", 50.0),), True),
        ((("Threads_runing", 50.0), ("replica_lag", 30.0)), False),
    ):
        checked = replace(config, source=replace(config.source, max_load=limits))
        _, _, results = run_checks(checked)
        found = [r for r in results if r.name == "max_load"]
        assert len(found) == 1 and found[0].ok is ok, found
        if not ok:
            assert found[0].detail.startswith(
                "source.max_load names Threads_runing, replica_lag, which the server does not "
                "report (the source user may not read the replica's status: Access denied"
            ), found[0].detail
            assert found[0].fix.startswith("GRANT SLAVE MONITOR ON *.* TO "), found[0].fix


@pytest.mark.spark
def test_a_snapshot_and_a_redump_yield_to_a_busy_source_while_the_stream_goes_on(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    create_table(db, "big", rows=6_000)
    create_table(db, "live", rows=300)
    # well above what the job itself keeps running (readers, the planner, the probes)
    sessions, limit = 16, 10
    config_path = write_config(
        db,
        tmp_path,
        chunk_size=1_000,
        snapshot="chunks_per_batch = 2",
        extra=f"[source.max_load]\nThreads_running = {limit}\n",
    )
    config = load(config_path)
    assert config.source.max_load == (("Threads_running", float(limit)),)
    writer = Writer(db, "live", [1, 2, 3, 150], seed=3, rate=30)
    writer.start()
    job = JobProcess(config_path)

    def throttled() -> str | None:
        store = StateStore(config.state_path)
        try:
            found = store.throttled()
        finally:
            store.close()
        return found.reason if found else None

    def held_for(seconds: float) -> dict[str, int]:
        """Chunks done per table after ``seconds`` of a busy source; still throttled then."""
        time.sleep(seconds)
        reason = throttled()
        assert reason is not None and reason.startswith("Threads_running "), reason
        return {name: t.splits_done for name, t in tables_state(config).items()}

    busy = busy_source(db, sessions)
    busy.__enter__()  # before the job starts: its very first chunks are held
    try:
        with running(job):
            try:
                wait_for(lambda: throttled() is not None, 120, "the first chunks held", job)
                assert held_for(4) == {"big": 0, "live": 0}
                status = cli(config_path, "status")
                assert "chunk reads yield to a busy source: Threads_running " in status, status
            finally:
                busy.__exit__(None, None, None)
            streaming = ["big", "live"]
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, streaming), 180, "streams", job)
            assert throttled() is None

            with busy_source(db, sessions):
                applied = tables_state(config)["live"].events_applied
                cli(config_path, "redump", "--table", f"{db.name}.big", "--wait")
                wait_for(lambda: throttled() is not None, 30, "the re-dump's chunks held", job)
                assert held_for(4)["big"] == 0
                tables = tables_state(config)
                assert tables["big"].state == Lifecycle.REDUMP
                # the binlog never yields: the writer's changes keep arriving
                assert tables["live"].events_applied > applied
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["big"]), 180, "re-dumped", job)
            writer.stop()
            wait_for(lambda: caught_up_now(db, config, ["big", "live"]), 60, "quiet", job)
            assert_converged(db, config, ["big", "live"])
            assert tables_state(config)["big"].generation == 1
            # where a change's lag went: its stages add up to its end-to-end lag. The stages
            # end when the batch is marked applied, a few ms after the mirror's commit: that
            # is 10% of a 0.3 s lag, so the changes' mean lag is compared
            measured = change_lags(db, config, "live", changes=6)
            lags, stages = (sum(x) / len(measured) for x in zip(*measured, strict=True))
            assert stages == pytest.approx(lags, rel=0.1), measured
    finally:
        writer.stop()
    assert not writer.errors
    said = [e.message for e in events(config) if e.kind == "throttle"]
    assert len(said) == 4 and said[0].startswith("chunk reads yield to a busy source"), said


def change_lags(
    db: SourceDb, config: PipelineConfig, table: str, changes: int
) -> list[tuple[float, float]]:
    """For each of ``changes`` single-row inserts into a quiet ``table``: its end-to-end lag
    (when the mirror's version that first holds it was committed, less when it was written)
    and the sum of its stages (``change_stages`` of the batch whose window reached it)."""
    path = str(config.sink.path / db.name / table)
    conn = connect(db.source_config())
    found: list[tuple[float, float]] = []
    try:
        for i in range(changes):
            mirror = DeltaTable(path)
            before, rows = mirror.version(), read_delta(mirror).num_rows
            db.execute(
                f"INSERT INTO {table} (id, customer, amount) VALUES ({1_900_000_000 + i}, 'x', 1)"
            )
            written_at = time.time()
            position = current_position(conn)

            def arrived(rows: int = rows) -> bool:
                return bool(read_delta(DeltaTable(path)).num_rows > rows)

            wait_for(arrived, 30, f"change {i} in the mirror")
            mirror = DeltaTable(path)
            version = next(
                v
                for v in range(before + 1, mirror.version() + 1)
                if read_delta(DeltaTable(path, version=v)).num_rows > rows
            )
            committed = next(h for h in mirror.history() if h["version"] == version)
            lag = committed["timestamp"] / 1000 - written_at
            applied = applied_batch_of(config, position, since=written_at - 30)
            # its tasks timed their own code: within the span from planned to staged, the rest
            # of which was Spark's
            assert applied.read_seconds is not None and applied.staged_at is not None
            assert 0 < applied.read_seconds <= applied.staged_at - applied.created_at + 0.01
            split = change_stages(written_at, applied)
            print(f"change {i}: lag {lag:.3f} s, stages {split.to_dict()}")
            found.append((lag, split.covered))
            time.sleep(0.3)  # the next write lands at another moment of the trigger's cycle
    finally:
        conn.close()
    return found


def applied_batch_of(config: PipelineConfig, position: BinlogOffset, since: float) -> AppliedBatch:
    """The batch whose binlog window reached ``position``, once the state has it applied (the
    mirror's commit comes a moment before the state's)."""
    found: list[AppliedBatch] = []

    def marked() -> bool:
        store = StateStore(config.state_path)
        try:
            batches = store.applied_batches(since=since)
            reached = min(
                b.batch_no
                for b in batches
                if (row := store.batch(b.batch_no)) is not None
                and row.plan.binlog is not None
                and row.plan.binlog.end >= position
            )
        finally:
            store.close()
        found[:] = [b for b in batches if b.batch_no == reached and b.applied_at is not None]
        return bool(found)

    wait_for(marked, 30, f"the batch that reached {position} marked applied")
    return found[0]
