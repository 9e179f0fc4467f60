"""``cdc-console plan``: each table's chunk plan, as the job would split it now, read-only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SourceDb
from tests.integration.harness import load, run_cli, write_config

pytestmark = pytest.mark.mysql


def test_plan_shows_each_tables_chunks_and_counts_them(source_db: SourceDb, tmp_path: Path) -> None:
    db = source_db
    db.execute(
        "CREATE TABLE even (id INT PRIMARY KEY, v INT)",
        "INSERT INTO even SELECT seq, seq FROM seq_1_to_1000",
        "CREATE TABLE words (w VARCHAR(20) NOT NULL PRIMARY KEY)",
        "INSERT INTO words SELECT CONCAT('w', seq) FROM seq_1_to_450",
        "CREATE TABLE tiny (id INT PRIMARY KEY)",
        "INSERT INTO tiny VALUES (1), (2)",
        "CREATE TABLE heap (k INT NOT NULL, v INT, KEY (k))",
        "INSERT INTO heap SELECT seq DIV 3, 0 FROM seq_1_to_300",
    )
    config_path = write_config(db, tmp_path, chunk_size=100)
    done = run_cli("plan", "--config", str(config_path), "--count", "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    plans = {p["table"].split(".", 1)[1]: p for p in json.loads(done.stdout)}
    assert plans["even"]["chunks"] == 10 and plans["even"]["how"].startswith("evenly: step 100")
    assert sum(plans["even"]["rows"]) == 1000
    assert plans["even"]["rows_spread"]["max"] <= 100
    assert plans["words"]["how"] == "unevenly, boundaries from the server's order"
    assert sum(plans["words"]["rows"]) == 450 and max(plans["words"]["rows"]) <= 100
    assert (
        plans["tiny"]["chunks"] == 1 and plans["tiny"]["how"] == "2 rows (counted) fit in one chunk"
    )
    assert plans["even"]["rows_told_apart_by"] == "primary key (id)"
    # a table without a unique key: counted, chunked on an indexed column, duplicates kept
    assert plans["heap"]["rows_told_apart_by"] == (
        "their whole content, duplicates counted (no unique key)"
    )
    assert plans["heap"]["chunk_key"] == "k" and sum(plans["heap"]["rows"]) == 300
    assert not load(config_path).state_path.exists()  # read-only

    text = run_cli("plan", "--config", str(config_path), "--table", f"{db.name}.even", timeout=120)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"{db.name}.even: 10 chunk(s) on id (chunk_size 100): {plans['even']['how']}; "
        "rows told apart by primary key (id)"
    )
    assert lines[1].split() == ["0", "(-inf,", "101)"] and "  ..." in lines
    assert lines[-1].split() == ["9", "[901,", "+inf)"]
