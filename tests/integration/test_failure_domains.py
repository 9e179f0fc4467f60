"""Each table is its own failure domain: what one table holds or suffers parks that table with
its reason and fix, while a writer's table streams on and the job never exits.

The cases came from tables of other CDC projects' own test suites, each of which used to stop
every table: a column of a type that is not captured, a table altered while the job was down in
the middle of its snapshot, and a column retyped with ``SQL_LOG_BIN = 0`` (the DDL never reaches
the binlog) before rows in the new type arrive.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    events,
    load,
    mirror_rows,
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

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def _journal(config: PipelineConfig) -> list[str]:
    return [e.message for e in events(config)]


def _finished_chunks(config: PipelineConfig, table: str) -> int:
    found = tables_state(config).get(table)
    return int(found.splits_done or 0) if found is not None else 0


def test_one_tables_type_shape_or_values_never_stop_the_others(
    source_db: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = source_db
    # every type MariaDB 10.11 has is captured: INET4 stands for one a newer server adds
    monkeypatch.setenv("CDC_TEST_UNKNOWN_TYPES", "inet4")
    create_table(db, "t1", rows=3_000)
    db.execute(
        "CREATE TABLE t2 (id INT PRIMARY KEY, age INT NOT NULL, name VARCHAR(20))",
        "INSERT INTO t2 SELECT seq, seq % 90, CONCAT('n', seq) FROM seq_1_to_1000",
        "CREATE TABLE t3 (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
        "INSERT INTO t3 SELECT seq, CONCAT('v', seq) FROM seq_1_to_12000",
        "CREATE TABLE t4 (id INT PRIMARY KEY, u INET4 NOT NULL)",
        "INSERT INTO t4 SELECT seq, CONCAT('10.0.0.', seq) FROM seq_1_to_50",
        "CREATE TABLE t5 (id INT PRIMARY KEY, day DATE)",
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "INSERT INTO t5 VALUES (1, '2024-04-31'), (2, '2024-04-30')",
    )
    names = ["t1", "t2", "t3", "t4"]
    config_path = write_config(
        db,
        tmp_path,
        tables=[f"{db.name}.{n}" for n in [*names, "t5"]],
        chunk_size=500,
        snapshot="chunks_per_batch = 1\n",
    )
    config = load(config_path)
    checked = cli(config_path, "check")
    assert f"{db.name}.t4: column u has type inet4, which is not captured" in checked, checked
    writer = Writer(db, "t1", [1, 1500, 2999], seed=5, rate=30)
    writer.start()

    def t1_moves(job: JobProcess) -> None:
        applied = tables_state(config)["t1"].events_applied
        wait_for(
            lambda: tables_state(config)["t1"].events_applied > applied, 90, "t1 streaming", job
        )

    try:
        job = JobProcess(config_path)
        with running(job):
            # the uncaptured type parks t4 at once; the others start
            wait_for(lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["t4"]), 60, "t4 parked", job)
            assert any(
                ".t4 parked (NEEDS_REDUMP): column u has type inet4" in m for m in _journal(config)
            )
            wait_for(lambda: _finished_chunks(config, "t3") >= 2, 180, "t3 part way through", job)
            assert all_in(config, Lifecycle.SNAPSHOTTING, ["t3"])
            job.kill()

        # altered while the job is down in the middle of its snapshot: read again, not refused
        db.execute("ALTER TABLE t3 ADD COLUMN extra INT NOT NULL DEFAULT 5")
        job = JobProcess(config_path)
        with running(job):
            wait_for(
                lambda: all_in(config, Lifecycle.STREAMING, ["t1", "t2", "t3", "t5"]),
                240,
                "t3 read again in its new shape",
                job,
            )
            # an invalid date written while streaming reads as the snapshot read one: NULL
            db.execute(
                "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
                "INSERT INTO t5 VALUES (3, '2023-02-30')",
                "UPDATE t5 SET day = '2021-02-29' WHERE id = 2",
            )
            wait_for(lambda: len(mirror_rows(config, db.name, "t5", "id")) == 3, 60, "t5 rows", job)
            assert [(r["id"], r["day"]) for r in mirror_rows(config, db.name, "t5", "id")] == [
                (1, None),
                (2, None),
                (3, None),
            ]
            assert all_in(config, Lifecycle.STREAMING, ["t5"])
            assert any(
                ".t3 changed shape while the pipeline was stopped: followed by reading it "
                "again online" in m
                for m in _journal(config)
            ), _journal(config)

            # a retype the binlog never saw, then rows in the new type: t2 parks, alone
            db.execute(
                "SET SESSION SQL_LOG_BIN = 0",
                "ALTER TABLE t2 MODIFY age VARCHAR(10) NOT NULL",
                "SET SESSION SQL_LOG_BIN = 1",
                "UPDATE t2 SET age = 'age1' WHERE id = 1",
            )
            wait_for(lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["t2"]), 90, "t2 parked", job)
            parked = [m for m in _journal(config) if ".t2 " in m and "NEEDS_REDUMP" in m]
            assert parked and "cdc-console redump --table" in parked[-1], parked
            t1_moves(job)
            assert job.proc is not None and job.proc.poll() is None
            cli(config_path, "stop", "--wait")
            assert job.wait(120) == 0, job.output()

        # a restart starts whatever state one table is in; the fixes the messages name work
        job = JobProcess(config_path)
        with running(job):
            t1_moves(job)
            cli(config_path, "redump", "--table", f"{db.name}.t2", "--wait")
            db.execute("ALTER TABLE t4 MODIFY u CHAR(36) NOT NULL")
            cli(config_path, "redump", "--table", f"{db.name}.t4", "--wait")
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 240, "all back", job)
            writer.stop()
            assert not writer.errors, writer.errors
            time.sleep(1)
            wait_for(lambda: caught_up_now(db, config, names), 120, "caught up", job)
            cli(config_path, "stop", "--wait")
            assert job.wait(120) == 0, job.output()
    finally:
        writer.stop()
    assert_converged(db, config, names)
