"""Tables without a unique key, duplicates included, captured exactly.

A log table whose rows repeat, a link table whose only UNIQUE key is nullable (several NULL rows),
a heap with no index and NULLs in its chunk column, and a MyISAM log (no transactions: its chunks
are read by quiet windows) are snapshotted in several chunks while a writer inserts duplicates and
deletes and updates *one* of several equal rows (``LIMIT 1``); the job is killed with SIGKILL in
the middle and restarted. Each mirror, expanded by its counts, equals its source as a multiset;
``verify`` is clean; a copy removed from a mirror behind the pipeline's back is named and
repaired; a re-dump and a column added online keep it exact.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import PipelineConfig
from cdc_console.core.schema import COUNT_COLUMN
from cdc_console.sinks.mirror_read import read_delta
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    caught_up,
    load,
    run_cli,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_identifiers import tables_state
from tests.integration.test_verify import verify

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

TABLES = ("logs", "links", "heap", "mlog")


def create_tables(db: SourceDb) -> None:
    db.execute(
        "CREATE TABLE logs (ts INT NOT NULL, level VARCHAR(8) NOT NULL, msg VARCHAR(40), KEY (ts))",
        "INSERT INTO logs SELECT seq DIV 7, ELT(1 + seq MOD 3, 'info', 'warn', 'error'), "
        "IF(seq MOD 5 = 0, NULL, CONCAT('m', seq MOD 4)) FROM seq_1_to_240",
        "CREATE TABLE links (a INT NULL, b INT NOT NULL, UNIQUE KEY (a))",
        "INSERT INTO links SELECT IF(seq MOD 4 = 0, NULL, seq), seq MOD 3 FROM seq_1_to_120",
        "CREATE TABLE heap (x VARCHAR(10) NULL, y INT NULL)",
        "INSERT INTO heap SELECT IF(seq MOD 6 = 0, NULL, CONCAT('k', seq MOD 9)), seq MOD 2 "
        "FROM seq_1_to_150",
        "CREATE TABLE mlog (n INT NOT NULL, note VARCHAR(10), KEY (n)) ENGINE=MyISAM",
        "INSERT INTO mlog SELECT seq DIV 5, 'same' FROM seq_1_to_100",
    )


class DuplicateWriter(threading.Thread):
    """Inserts copies of existing rows and deletes or updates one of several equal rows."""

    def __init__(self, db: SourceDb, seed: int) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.statements = 0

    def step(self) -> str:
        rng = self.rng
        ts = rng.randrange(40)
        return rng.choice(
            [
                f"INSERT INTO logs VALUES ({ts}, 'info', 'm1'), ({ts}, 'info', 'm1')",
                f"DELETE FROM logs WHERE ts = {ts} LIMIT 1",
                f"UPDATE logs SET msg = 'moved' WHERE ts = {ts} LIMIT 1",
                f"UPDATE logs SET ts = {ts + 50} WHERE ts = {ts} AND level = 'warn' LIMIT 1",
                f"INSERT INTO links VALUES (NULL, {ts % 3})",
                "DELETE FROM links WHERE a IS NULL LIMIT 1",
                f"INSERT INTO heap VALUES (NULL, {ts % 2}), ('k{ts % 9}', 1)",
                f"DELETE FROM heap WHERE x IS NULL AND y = {ts % 2} LIMIT 1",
                f"UPDATE heap SET x = NULL WHERE x = 'k{ts % 9}' LIMIT 1",
                f"INSERT INTO mlog VALUES ({ts % 20}, 'same')",
                f"DELETE FROM mlog WHERE n = {ts % 20} LIMIT 1",
            ]
        )

    def run(self) -> None:
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(self.step())
                    self.statements += 1
                    time.sleep(0.01)
        finally:
            conn.close()


def source_multiset(db: SourceDb, table: str) -> Counter[tuple[Any, ...]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            return Counter(tuple(r) for r in cur.fetchall())
    finally:
        conn.close()


def mirror_multiset(config: PipelineConfig, db: SourceDb, table: str) -> Counter[tuple[Any, ...]]:
    data = read_delta(DeltaTable(str(config.sink.path / db.name / table))).to_pylist()
    found: Counter[tuple[Any, ...]] = Counter()
    for row in data:
        count = row.pop(COUNT_COLUMN)
        assert count > 0, row
        found[tuple(row.values())] += count
    return found


def all_streaming(config: PipelineConfig) -> bool:
    states = tables_state(config)
    return len(states) == len(TABLES) and set(states.values()) == {"STREAMING"}


def assert_mirrors_equal(config: PipelineConfig, db: SourceDb) -> None:
    for table in TABLES:
        source, mirror = source_multiset(db, table), mirror_multiset(config, db, table)
        assert mirror == source, (table, source - mirror, mirror - source)


def test_tables_without_a_unique_key_are_captured_verified_and_repaired(
    source_db: SourceDb, tmp_path: Path
) -> None:
    create_tables(source_db)
    config_path = write_config(source_db, tmp_path, chunk_size=20)
    config = load(config_path)
    checked = run_cli("check", "--config", str(config_path), timeout=120)
    assert "no unique key: rows are told apart by their whole content" in checked.stdout
    assert "ADD PRIMARY KEY" not in checked.stdout

    writer = DuplicateWriter(source_db, seed=30)
    writer.start()
    try:
        with running(JobProcess(config_path)) as job:
            wait_for(lambda: len(tables_state(config)) == len(TABLES), 120, "tables", job)
            time.sleep(3)
            job.kill()
        with running(JobProcess(config_path)) as job:
            wait_for(lambda: all_streaming(config), 240, "every table to stream", job)
            time.sleep(2)
            writer.stop.set()
            writer.join(30)
            assert writer.statements > 50
            wait_for(lambda: caught_up(source_db, config), 180, "the stream to catch up", job)
            assert_mirrors_equal(config, source_db)

            code, report = verify(config_path)
            assert code == 0, json.dumps(report)[:3000]

            # one copy of a duplicated row disappears from the mirror behind our back
            path = str(config.sink.path / source_db.name / "logs")
            rows = read_delta(DeltaTable(path)).to_pylist()
            victim = next(r for r in rows if r[COUNT_COLUMN] > 1)
            victim[COUNT_COLUMN] -= 1
            schema = read_delta(DeltaTable(path)).schema
            write_deltalake(path, pa.Table.from_pylist(rows, schema), mode="overwrite")
            code, report = verify(config_path)
            assert code == 1
            (logs,) = [t for t in report["tables"] if t["table"].endswith(".logs")]
            (chunk,) = [c for c in logs["chunks"] if c["verdict"] != "equal"]
            assert chunk["detail"]["missing"] == [[victim["ts"], victim["level"], victim["msg"]]], (
                chunk
            )
            repaired = run_cli(
                "verify", "--config", str(config_path), "--repair", "--json", timeout=600
            )
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr + job.output()
            assert_mirrors_equal(config, source_db)

            redump = run_cli(
                "redump",
                "--config",
                str(config_path),
                "--table",
                f"{source_db.name}.heap",
                "--wait",
                timeout=300,
            )
            assert redump.returncode == 0, redump.stdout + redump.stderr
            source_db.execute(
                "ALTER TABLE logs ADD COLUMN tag VARCHAR(5) NULL",
                "INSERT INTO logs VALUES (1, 'info', 'm1', NULL), (1, 'info', 'm1', 't')",
                "DELETE FROM heap WHERE x IS NULL LIMIT 2",
            )
            wait_for(
                lambda: (
                    "tag" in read_delta(DeltaTable(path)).column_names
                    and caught_up(source_db, config)
                ),
                240,
                "logs to be read again in its new shape and caught up",
                job,
            )
            assert_mirrors_equal(config, source_db)
            code, report = verify(config_path)
            assert code == 0, json.dumps(report)[:3000]
    finally:
        writer.stop.set()
        writer.join(30)
