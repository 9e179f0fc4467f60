"""Per-table control against a real MariaDB and real Spark, with a writer on three tables throughout.

One job runs the whole first scenario: pause T1 while T2 and T3 keep streaming; resume it; re-dump
T2 while its mirror's row count is sampled; add T4; pause and resume the pipeline. The second
scenario kills the job with SIGKILL in the middle of a re-dump and in the middle of a catch-up.
After each, every mirror equals its source and each table's changelog replays to its source with
no binlog change applied twice.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.sinks.schema_history import read_schema_changes
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    changelog_replay,
    load,
    mirror_rows,
    run_cli,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ROWS = 12_000
CHUNK = 2_000


def create_table(db: SourceDb, name: str, rows: int = ROWS) -> None:
    db.execute(
        f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), updated DATETIME(6)) ENGINE=InnoDB",
        f"INSERT INTO {name} SELECT seq, CONCAT('c', seq % 97), seq / 100, NULL, "
        f"'2024-01-01 00:00:00.000001' FROM seq_1_to_{rows}",
    )


def tables_state(config: PipelineConfig) -> dict[str, Any]:
    if not config.state_path.exists():
        return {}
    store = StateStore(config.state_path)
    try:
        return {t.table_id.table: t for t in store.tables()}
    finally:
        store.close()


def states(config: PipelineConfig) -> dict[str, str]:
    return {name: t.state for name, t in tables_state(config).items()}


def all_in(config: PipelineConfig, state: str, names: list[str]) -> bool:
    found = states(config)
    return all(found.get(n) == state for n in names)


def mirror_count(config: PipelineConfig, db: SourceDb, table: str) -> int:
    path = config.sink.path / db.name / table
    return int(read_delta(DeltaTable(str(path))).num_rows)


def source_count(db: SourceDb, table: str) -> int:
    return int(db.rows(f"SELECT COUNT(*) FROM {table}")[0][0])  # type: ignore[call-overload]


def caught_up_now(db: SourceDb, config: PipelineConfig, names: list[str]) -> bool:
    """Every named table streaming and the committed position at the server's head."""
    from cdc_console.mysql.position import current_position

    if not all_in(config, Lifecycle.STREAMING, names):
        return False
    store = StateStore(config.state_path)
    try:
        committed = store.committed_offset()
    finally:
        store.close()
    conn = db.connect()
    try:
        return committed is not None and committed >= current_position(conn)
    finally:
        conn.close()


def assert_converged(
    db: SourceDb,
    config: PipelineConfig,
    names: list[str],
    lost: dict[str, int] | None = None,
    kept: dict[str, set[str]] | None = None,
) -> None:
    """Mirrors equal sources; changelogs replay to the sources with no change applied twice.

    ``lost`` names keys deleted from a mirror by hand (``damage_mirror``): the changelog never
    saw that delete, so when the source deleted the key later, before the repair chunk's high
    watermark, the changelog still holds the key's last image. ``kept`` names columns the
    source dropped (or renamed) that the mirror keeps: they are compared apart.
    """
    for name in names:
        source = source_rows(db, name, "id")
        retired = (kept or {}).get(name, set())

        def live(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{k: v for k, v in r.items() if k not in retired} for r in rows]  # noqa: B023

        mirror = mirror_rows(config, db.name, name, "id")
        assert all(retired <= r.keys() for r in mirror), f"{name} lost one of {retired}"
        assert live(mirror) == source, f"mirror of {name} differs"
        replay, _, duplicates = changelog_replay(config, db.name, name, "id")
        assert duplicates == 0, f"{name}: {duplicates} binlog changes applied twice"
        damaged = (lost or {}).get(name)
        if damaged is not None and damaged not in {r["id"] for r in source}:
            replay.pop(damaged, None)
        assert live(sorted(replay.values(), key=lambda r: r["id"])) == source, f"{name} log"


def cli(config_path: Path, *args: str) -> str:
    result = run_cli(*args, "--config", str(config_path), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def recent_event_lag_ms(config: PipelineConfig, since: float = 0.0) -> int | None:
    """The job's latest event-time lag sample taken after ``since`` (newest change applied vs
    now), or None when there is none yet."""
    store = StateStore(config.state_path)
    try:
        samples = [s for s in store.lag_samples(5) if s.event_lag_ms is not None and s.ts > since]
    finally:
        store.close()
    return samples[-1].event_lag_ms if samples else None


def applied_batches(config: PipelineConfig) -> int:
    store = StateStore(config.state_path)
    try:
        return store.last_applied_batch()
    finally:
        store.close()


def damage_mirror(config: PipelineConfig, db: SourceDb, table: str) -> tuple[int, int]:
    """Delete the mirror's smallest key and add a key the source never had; return the lost key
    and the number of the table's last chunk (where the stray key falls)."""
    path = str(config.sink.path / db.name / table)
    mirror = DeltaTable(path)
    rows = read_delta(mirror).sort_by("id")
    lost = int(rows["id"][0].as_py())
    mirror.delete(f"id = {lost}")
    stray = rows.slice(0, 1).set_column(0, "id", pa.array([50_000_000_000], pa.int64()))
    write_deltalake(path, stray, mode="append")
    chunks = tables_state(config)[table].splits_total
    assert chunks
    return lost, chunks - 1


class CountSampler(threading.Thread):
    """Samples a mirror's row count until stopped; records the smallest seen."""

    def __init__(self, config: PipelineConfig, db: SourceDb, table: str) -> None:
        super().__init__(daemon=True)
        self.config, self.db, self.table = config, db, table
        self.samples: list[int] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            with contextlib.suppress(Exception):  # a Delta log mid-commit: try again
                self.samples.append(mirror_count(self.config, self.db, self.table))
            time.sleep(0.2)


def test_pause_redump_add_and_pipeline_pause_while_writers_run(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    for name in ("t1", "t2", "t3", "t4"):
        create_table(db, name)
    config_path = write_config(
        db, tmp_path, tables=[f"{db.name}.t1", f"{db.name}.t2", f"{db.name}.t3"], chunk_size=CHUNK
    )
    config = load(config_path)
    writers = {
        name: Writer(db, name, [1, 2000, 2001, 6000], seed=i, rate=40)
        for i, name in enumerate(("t1", "t2", "t3"), start=1)
    }
    for writer in writers.values():
        writer.start()
    job = JobProcess(config_path)
    with running(job):
        wait_for(
            lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2", "t3"]), 240, "streaming", job
        )

        # Pause T1: its mirror freezes while T2 and T3 keep applying with low lag.
        paused_at = time.time()
        out = cli(config_path, "pause", "--table", f"{db.name}.t1", "--wait")
        assert "applied: " in out and f"{db.name}.t1 paused at" in out
        frozen = mirror_rows(config, db.name, "t1", "id")
        before = {n: t.events_applied for n, t in tables_state(config).items()}
        batch = applied_batches(config)
        wait_for(lambda: applied_batches(config) >= batch + 4, 60, "four more batches", job)
        after = tables_state(config)
        assert after["t1"].state == Lifecycle.PAUSED
        assert after["t2"].events_applied > before["t2"]
        assert after["t3"].events_applied > before["t3"]
        assert mirror_rows(config, db.name, "t1", "id") == frozen
        # Samples come every heartbeat, which four small batches can outrun.
        wait_for(lambda: recent_event_lag_ms(config, paused_at) is not None, 30, "a lag sample")
        lag = recent_event_lag_ms(config, paused_at)
        assert lag is not None and lag < 15_000, "T2/T3 fell behind while T1 was paused"
        status = cli(config_path, "status", "--no-probe")
        assert re.search(r"PAUSED .* at binlog\.\d+:\d+ → STREAMING", status), status

        out = cli(config_path, "resume", "--table", f"{db.name}.t1", "--wait")
        assert f"{db.name}.t1 resumed: catching up from" in out
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t1"]), 60, "t1 streaming again", job)

        # Re-dump T2 while its writer runs; the mirror never shrinks below what must remain.
        # The mirror may trail the source by the batch in flight: start from the smaller.
        start_count = min(source_count(db, "t2"), mirror_count(config, db, "t2"))
        deleted_before = writers["t2"].deleted
        sampler = CountSampler(config, db, "t2")
        sampler.start()
        out = cli(config_path, "redump", "--table", f"{db.name}.t2", "--wait")
        assert "re-dump started, generation 1" in out
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t2"]), 180, "t2 re-dumped", job)
        sampler.stop_event.set()
        sampler.join(10)
        deleted_meanwhile = writers["t2"].deleted - deleted_before
        assert sampler.samples, "no mirror samples taken"
        assert min(sampler.samples) >= start_count - deleted_meanwhile
        t2 = tables_state(config)["t2"]
        assert t2.generation == 1 and t2.splits_done == t2.splits_total

        # Add T4 to the running pipeline.
        out = cli(config_path, "add-table", f"{db.name}.t4", "--wait")
        assert f"{db.name}.t4 added: snapshotting on id" in out
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t4"]), 120, "t4 streaming", job)

        # Pipeline-wide pause: no new batches; resume continues.
        cli(config_path, "pause", "--wait")
        paused_at = applied_batches(config)
        time.sleep(3)
        assert applied_batches(config) == paused_at
        assert "PIPELINE PAUSED" in cli(config_path, "status", "--no-probe")
        # While nothing writes to the mirrors, damage T3's (a lost row, a stray row) and queue
        # one-chunk repairs; commands apply while paused, their chunks run after the resume.
        lost, last_chunk = damage_mirror(config, db, "t3")
        cli(config_path, "redump", "--table", f"{db.name}.t3", "--chunk", "0", "--wait")
        cli(config_path, "redump", "--table", f"{db.name}.t3", "--chunk", str(last_chunk))
        assert lost not in {r["id"] for r in mirror_rows(config, db.name, "t3", "id")}
        cli(config_path, "resume", "--wait")
        wait_for(lambda: applied_batches(config) > paused_at, 60, "batches after resume", job)

        for writer in writers.values():
            writer.stop()
            assert not writer.errors, writer.errors
        names = ["t1", "t2", "t3", "t4"]
        wait_for(lambda: caught_up_now(db, config, names), 120, "caught up", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
    assert_converged(db, config, ["t1", "t2", "t3", "t4"], lost={"t3": lost})


def test_kill_minus_nine_mid_redump_and_mid_catch_up_converges(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    for name in ("t1", "t2"):
        create_table(db, name, rows=20_000)
    # Two chunks per batch, so that a kill lands while the re-dump is under way.
    config_path = write_config(
        db,
        tmp_path,
        tables=[f"{db.name}.t1", f"{db.name}.t2"],
        chunk_size=1_000,
        snapshot="chunks_per_batch = 2",
    )
    config = load(config_path)
    writers = [
        Writer(db, name, [1, 1000, 1001], seed=i, rate=40)
        for i, name in enumerate(("t1", "t2"), start=1)
    ]
    for writer in writers:
        writer.start()

    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2"]), 240, "streaming", job)
        cli(config_path, "redump", "--table", f"{db.name}.t2", "--wait")

        def redump_half_done() -> bool:
            t2 = tables_state(config)["t2"]
            return (
                t2.state == Lifecycle.REDUMP and t2.splits_total is not None and t2.splits_done >= 4
            )

        wait_for(redump_half_done, 120, "re-dump under way", job)
        job.kill()
    t2 = tables_state(config)["t2"]
    assert t2.state == Lifecycle.REDUMP and t2.splits_done < (t2.splits_total or 0)

    job = JobProcess(config_path)
    with running(job):
        wait_for(
            lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2"]), 240, "re-dump completed", job
        )
        cli(config_path, "pause", "--table", f"{db.name}.t1", "--wait")
        db.execute(
            "UPDATE t1 SET amount = amount + 1 WHERE id <= 15000",
            "DELETE FROM t1 WHERE id BETWEEN 15001 AND 16000",
        )
        cli(config_path, "resume", "--table", f"{db.name}.t1")
        wait_for(
            lambda: states(config).get("t1") == Lifecycle.CATCHING_UP, 60, "t1 catching up", job
        )
        job.kill()
    assert states(config)["t1"] in (Lifecycle.CATCHING_UP, Lifecycle.STREAMING)

    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2"]), 240, "recovered", job)
        for writer in writers:
            writer.stop()
            assert not writer.errors, writer.errors
        wait_for(lambda: caught_up_now(db, config, ["t1", "t2"]), 120, "caught up", job)
        job.terminate()
        assert job.wait(120) == 0, job.output()
    assert_converged(db, config, ["t1", "t2"])


def purge_behind(db: SourceDb, config: PipelineConfig, streaming: str, timeout: float = 60) -> str:
    """Rotate the binlog, wait until ``streaming``'s position is in the new file (so only a
    table left behind needs the old ones), then purge every older file; return the newest."""
    db.execute("FLUSH BINARY LOGS")
    newest = str(db.rows("SHOW BINARY LOGS")[-1][0])
    wait_for(
        lambda: (
            (t := tables_state(config)[streaming]).stream_from is not None
            and t.stream_from.file == newest
        ),
        timeout,
        f"{streaming} streaming in {newest}",
    )
    deadline = time.monotonic() + timeout
    while [str(r[0]) for r in db.rows("SHOW BINARY LOGS")] != [newest]:
        assert time.monotonic() < deadline, f"binlogs before {newest} were not purged"
        db.execute(f"PURGE BINARY LOGS TO '{newest}'")  # MariaDB waits for its checkpoint
        time.sleep(0.2)
    return newest


def test_a_purge_or_a_ddl_parks_only_that_table_until_its_redump(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """The table that needs a purged binlog is parked in NEEDS_REDUMP
    with the fix while the other one never stops; the re-dump the fix names brings it back.
    Then DDL mid-stream: changes kept exact in place are applied, changes that rewrote rows
    are followed by reading the table again by itself, and a breaking one parks it until its
    re-dump; the other table streams throughout and both end equal to their source."""
    db = source_db
    for name in ("t1", "t2"):
        create_table(db, name, rows=4_000)
    config_path = write_config(
        db, tmp_path, tables=[f"{db.name}.t1", f"{db.name}.t2"], chunk_size=CHUNK
    )
    config = load(config_path)
    writer = Writer(db, "t1", [1, 2000, 2001], seed=3, rate=40)
    writer.start()
    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2"]), 240, "streaming", job)
        cli(config_path, "pause", "--table", f"{db.name}.t2", "--wait")
        db.execute(
            "UPDATE t2 SET note = 'lost in the purge' WHERE id <= 10",
            "DELETE FROM t2 WHERE id = 11",
        )
        newest = purge_behind(db, config, "t1")

        out = cli(config_path, "resume", "--table", f"{db.name}.t2", "--wait")
        assert f"{db.name}.t2 resumed: catching up from" in out
        wait_for(lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["t2"]), 60, "t2 parked", job)
        status = cli(config_path, "status")
        assert f"parked: cdc-console redump --table {db.name}.t2" in status, status
        store = StateStore(config.state_path)
        parked = [e.message for e in store.events(200) if e.level == "error"]
        store.close()
        assert any(
            f"{db.name}.t2 parked (NEEDS_REDUMP)" in m and f"oldest binlog is now {newest}" in m
            for m in parked
        ), parked
        # t1 never stopped: its changes keep arriving while t2 is parked.
        applied = tables_state(config)["t1"].events_applied
        wait_for(
            lambda: tables_state(config)["t1"].events_applied > applied, 60, "t1 streaming", job
        )
        assert job.proc is not None and job.proc.poll() is None

        cli(config_path, "redump", "--table", f"{db.name}.t2", "--wait")
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t2"]), 180, "t2 re-dumped", job)

        # Changes the mirror can follow exactly are applied online: an index, then a nullable
        # column added at the end with no default; rows on both sides of each DDL land right.
        db.execute(
            "UPDATE t2 SET note = 'before the index' WHERE id = 3",
            "ALTER TABLE t2 ADD INDEX by_note (note)",
            "UPDATE t2 SET note = 'before the column' WHERE id = 4",
            "ALTER TABLE t2 ADD COLUMN label VARCHAR(10) NULL",
            "UPDATE t2 SET note = 'after the column', label = 'new' WHERE id = 5",
            "INSERT INTO t2 (id, customer, amount, label) VALUES (90001, 'c', 1.00, 'born new')",
            # t1 evolves too, under its writer, and is never re-dumped: its changelog must
            # replay to the source across the change.
            "ALTER TABLE t1 ADD COLUMN tag VARCHAR(8) NULL",
            "UPDATE t1 SET tag = 'tagged' WHERE id = 3",
        )

        def evolved() -> bool:
            rows = {r["id"]: r for r in mirror_rows(config, db.name, "t2", "id")}
            return 90001 in rows and rows[5].get("label") == "new"

        wait_for(evolved, 60, "t2 in its new shape", job)
        assert all_in(config, Lifecycle.STREAMING, ["t2"])
        rows = {r["id"]: r for r in mirror_rows(config, db.name, "t2", "id")}
        assert rows[3]["note"] == "before the index" and rows[4]["note"] == "before the column"
        assert rows[4]["label"] is None and rows[90001]["label"] == "born new"
        # A dropped column stays in the mirror with the values it holds; rows inserted from
        # then on hold NULL.
        db.execute(
            "ALTER TABLE t2 DROP COLUMN customer",
            "UPDATE t2 SET note = 'after the drop' WHERE id = 8",
            "INSERT INTO t2 (id, amount, note) VALUES (90002, 2.00, 'born after the drop')",
        )
        wait_for(
            lambda: 90002 in {r["id"] for r in mirror_rows(config, db.name, "t2", "id")},
            60,
            "the row born after the drop",
            job,
        )
        rows = {r["id"]: r for r in mirror_rows(config, db.name, "t2", "id")}
        assert rows[8]["note"] == "after the drop" and rows[8]["customer"] == "c8"
        assert rows[90001]["customer"] == "c" and rows[90002]["customer"] is None
        store = StateStore(config.state_path)
        applied_online = [e.message for e in store.events(200) if "applied online" in e.message]
        store.close()
        assert any("added column(s) label" in m for m in applied_online), applied_online
        assert any("no column changed" in m for m in applied_online), applied_online
        assert any(
            "dropped column(s) customer kept in the mirror, null from now on" in m
            for m in applied_online
        ), applied_online

        # A column added with no row written after it is in the mirror's schema all the same.
        db.execute("ALTER TABLE t2 ADD COLUMN quiet INT NULL")

        def mirror_columns() -> list[str]:
            path = config.sink.path / db.name / "t2"
            return [f.name for f in DeltaTable(str(path)).schema().fields]

        wait_for(lambda: "quiet" in mirror_columns(), 60, "quiet in the mirror's schema", job)

        # A widened column goes on too; a value only the new width holds lands whole.
        long_note = "w" * 60
        db.execute(
            "ALTER TABLE t2 MODIFY note VARCHAR(80)",
            f"UPDATE t2 SET note = '{long_note}' WHERE id = 6",
        )
        wait_for(
            lambda: (
                {r["id"]: r for r in mirror_rows(config, db.name, "t2", "id")}[6]["note"]
                == long_note
            ),
            60,
            "the widened column's value",
            job,
        )
        assert all_in(config, Lifecycle.STREAMING, ["t2"])

        # Changes that rewrote rows without row events (a default in existing rows, a DECIMAL
        # whose Delta type grows; then a TRUNCATE) are followed by reading t2 again online, with
        # nobody's help, while t1 goes on.
        db.execute(
            "UPDATE t2 SET note = 'before the ddl' WHERE id = 1",
            "ALTER TABLE t2 ADD COLUMN extra INT NOT NULL DEFAULT 7, "
            "MODIFY amount DECIMAL(14,2) NOT NULL",
            "UPDATE t2 SET note = 'after the ddl', extra = 8, amount = 123456789012.34 "
            "WHERE id = 2",
        )

        def t2_rows() -> dict[int, dict[str, object]]:
            return {int(r["id"]): r for r in mirror_rows(config, db.name, "t2", "id")}

        wait_for(
            lambda: (
                t2_rows().get(2, {}).get("extra") == 8
                and all_in(config, Lifecycle.STREAMING, ["t2"])
            ),
            180,
            "t2 read again in its new shape",
            job,
        )
        rows = t2_rows()
        assert rows[1]["note"] == "before the ddl" and rows[1]["extra"] == 7
        assert str(rows[2]["amount"]) == "123456789012.34" and rows[2]["note"] == "after the ddl"
        db.execute(
            "TRUNCATE TABLE t2", "INSERT INTO t2 VALUES (7, 1.00, 'kept', NULL, NULL, NULL, 9)"
        )
        wait_for(
            lambda: list(t2_rows()) == [7] and all_in(config, Lifecycle.STREAMING, ["t2"]),
            180,
            "t2 emptied by its TRUNCATE",
            job,
        )
        store = StateStore(config.state_path)
        reread = [e.message for e in store.events(300) if "reading it again online" in e.message]
        store.close()
        assert any("changes its Delta type" in m for m in reread), reread
        assert any("TRUNCATE emptied it without row events" in m for m in reread), reread

        # A renamed column, then the cut-over of an online schema change tool (gh-ost's
        # RENAME TABLE swap of a ghost copy in under the captured name): read again each time.
        db.execute("ALTER TABLE t2 RENAME COLUMN note TO memo")
        wait_for(
            lambda: (
                t2_rows().get(7, {}).get("memo") == "kept"
                and all_in(config, Lifecycle.STREAMING, ["t2"])
            ),
            180,
            "t2 read again with its renamed column",
            job,
        )
        db.execute(
            "CREATE TABLE t2_gho LIKE t2",
            "INSERT INTO t2_gho SELECT * FROM t2",
            "INSERT INTO t2_gho (id, amount, memo) VALUES (8, 3.00, 'from the ghost')",
            "RENAME TABLE t2 TO t2_del, t2_gho TO t2",
        )
        wait_for(
            lambda: sorted(t2_rows()) == [7, 8] and all_in(config, Lifecycle.STREAMING, ["t2"]),
            180,
            "t2 swapped in by the cut-over",
            job,
        )
        store = StateStore(config.state_path)
        reread = [e.message for e in store.events(300) if "reading it again online" in e.message]
        store.close()
        assert any("column note renamed to memo" in m for m in reread), reread
        assert any("RENAME TABLE put another table under its name" in m for m in reread), reread

        # A change that breaks the mirror's readers (a type family change) parks t2 at the
        # DDL with the reason; rows before it are applied; t1 goes on.
        db.execute(
            "UPDATE t2 SET memo = 'before the park' WHERE id = 7",
            "ALTER TABLE t2 MODIFY updated TIMESTAMP(6) NULL",
            "UPDATE t2 SET memo = 'after the park' WHERE id = 7",
        )
        wait_for(lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["t2"]), 60, "t2 parked", job)
        store = StateStore(config.state_path)
        parked = [e.message for e in store.events(300) if e.level == "error"]
        store.close()
        assert any(
            f"{db.name}.t2 changed shape at " in m
            and "MODIFY updated TIMESTAMP" in m
            and "not applied online: column updated: datetime(6) -> timestamp(6) changes its "
            "type family"
            in m
            for m in parked
        ), parked
        assert t2_rows()[7]["memo"] == "before the park"
        applied = tables_state(config)["t1"].events_applied
        wait_for(
            lambda: tables_state(config)["t1"].events_applied > applied, 60, "t1 streaming", job
        )
        out = cli(config_path, "redump", "--table", f"{db.name}.t2", "--wait")
        assert "re-dump started" in out, out
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t2"]), 180, "t2 re-dumped", job)
        writer.stop()
        assert not writer.errors, writer.errors
        wait_for(lambda: caught_up_now(db, config, ["t1", "t2"]), 120, "caught up", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
    assert_converged(db, config, ["t1", "t2"], kept={"t2": {"customer"}})
    assert {r["id"]: r for r in mirror_rows(config, db.name, "t1", "id")}[3]["tag"] == "tagged"
    # The lake records each change beside the changelog: where, the statement, how it went.
    history = read_schema_changes(config.sink.path)

    def recorded(table: str, outcome: str, statement: str) -> bool:
        return any(
            (r["table"], r["outcome"]) == (table, outcome) and statement in str(r["statement"])
            for r in history
        )

    assert recorded("t2", "in place", "ADD COLUMN label"), history
    assert recorded("t2", "in place", "DROP COLUMN customer"), history
    assert recorded("t1", "in place", "ADD COLUMN tag"), history
    assert recorded("t2", "re-read", "TRUNCATE TABLE t2"), history
    assert recorded("t2", "parked", "MODIFY updated TIMESTAMP"), history


def test_ddl_mid_snapshot_is_followed_without_stopping_anything(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """Mid-snapshot, under a writer on t1: while t2's snapshot is half done
    its columns are dropped, added with a default, widened and renamed. The dropped and renamed
    ones would fail the next chunk's SELECT: chunks are read with NULL for them, the catch-up
    meets the first DDL with chunks read after it, and t2 is read again by itself in its new
    shape, keeping the stored values of the columns gone from it; t1 never stops, and both end
    equal to their source."""
    db = source_db
    for name in ("t1", "t2"):
        create_table(db, name, rows=6_000)
    config_path = write_config(
        db,
        tmp_path,
        tables=[f"{db.name}.t1", f"{db.name}.t2"],
        chunk_size=500,
        snapshot="chunks_per_batch = 1",
    )
    config = load(config_path)
    writer = Writer(db, "t1", [1, 3000], seed=5, rate=40)
    writer.start()
    with running(JobProcess(config_path)) as job:

        def half_read() -> bool:
            t2 = tables_state(config).get("t2")
            return t2 is not None and t2.splits_done >= 2

        wait_for(half_read, 180, "t2 half read", job)
        cli(config_path, "pause", "--table", f"{db.name}.t2", "--wait")
        db.execute(
            "ALTER TABLE t2 DROP COLUMN customer",
            "UPDATE t2 SET note = 'after the drop' WHERE id = 5999",
            "ALTER TABLE t2 ADD COLUMN extra INT NOT NULL DEFAULT 5",
            "ALTER TABLE t2 MODIFY amount DECIMAL(14,2) NOT NULL",
            "UPDATE t2 SET amount = 123456789012.34 WHERE id = 5998",
            "ALTER TABLE t2 RENAME COLUMN note TO memo",
        )
        cli(config_path, "resume", "--table", f"{db.name}.t2", "--wait")
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t2"]), 240, "t2 streaming", job)
        applied = tables_state(config)["t1"].events_applied
        wait_for(
            lambda: tables_state(config)["t1"].events_applied > applied, 60, "t1 streaming", job
        )
        writer.stop()
        assert not writer.errors, writer.errors
        wait_for(lambda: caught_up_now(db, config, ["t1", "t2"]), 240, "caught up", job)
        store = StateStore(config.state_path)
        reread = [e.message for e in store.events(300) if "reading it again online" in e.message]
        errors = [e.message for e in store.events(300) if e.level == "error"]
        store.close()
        assert reread and not errors, (reread, errors)
        db.execute("INSERT INTO t2 (id, amount, memo) VALUES (90002, 2.00, 'new')")
        wait_for(lambda: caught_up_now(db, config, ["t1", "t2"]), 120, "caught up again", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
    assert_converged(db, config, ["t1", "t2"], kept={"t2": {"customer", "note"}})
    rows = {r["id"]: r for r in mirror_rows(config, db.name, "t2", "id")}
    # Read before the change: the values of the dropped column and of the renamed one (whose
    # rename the re-read could not see, only its result) stay in the mirror.
    assert rows[1]["customer"] == "c1"
    assert rows[90002]["customer"] is None and rows[90002]["extra"] == 5
    assert rows[5999]["memo"] == "after the drop" and str(rows[5998]["amount"]) == (
        "123456789012.34"
    )


def test_a_ddl_inside_a_window_read_in_parts_is_followed_exactly(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """A window read in two parts, each from a transaction start of its own, with a DDL in the
    first: the second part never sees it and, the column names being the same, decodes the
    table's later rows in the new shape without noticing. The driver drops those
    (``source.reshaped``); the wider column is applied and the table read on from the DDL, so
    the mirror ends equal to its source with each change applied once (without the drop, the
    second part's changes are applied twice)."""
    db = source_db
    create_table(db, "t1", rows=500)
    config_path = write_config(
        db,
        tmp_path,
        tables=[f"{db.name}.t1"],
        chunk_size=CHUNK,
        extra='[pipeline]\nbinlog_readers = 2\nbinlog_part_bytes = "1KiB"\n',
    )
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, ["t1"]), 180, "streaming", job)
        cli(config_path, "pause", "--wait")
        # ~18 KB of changes, the DDL, then ~60 KB in the new shape: the cut at the window's
        # middle leaves the DDL in the first part and new-shape rows in the second.
        db.execute(
            *(f"UPDATE t1 SET note = 'old shape {i}' WHERE id = {i}" for i in range(1, 60)),
            "ALTER TABLE t1 MODIFY note VARCHAR(80)",
            *(f"UPDATE t1 SET note = '{'wide ' * 12}{i}' WHERE id = {i}" for i in range(1, 200)),
        )
        cli(config_path, "resume", "--wait")
        wait_for(lambda: caught_up_now(db, config, ["t1"]), 120, "caught up", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
        output = job.output()
    assert "read in 2 parts from transaction starts" in output, output
    assert re.search(r"\d+ changes of \S+\.t1 after its change of shape at \S+ dropped", output)
    assert_converged(db, config, ["t1"])
    rows = {r["id"]: r for r in mirror_rows(config, db.name, "t1", "id")}
    assert rows[1]["note"] == "wide " * 12 + "1" and rows[300]["note"] is None
