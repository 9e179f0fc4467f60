"""Column names users really have, through snapshot, binlog, re-dump and verify: spaces, dots,
quotes and a backtick, non-ASCII, reserved words, names differing only in case from SQL
keywords, in a primary key, in a chunk key and in a table without a unique key."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.schema import COUNT_COLUMN, quote_ident
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

#: one name per way a name can trip a quoting rule (MariaDB's identifier rules)
NAMES = [
    "order id",
    "a.b",
    'say "hi"',
    "it's",
    "back`tick",
    "naïve",
    "Größe €",
    "select",
    "From",
    "x-y+z",
    "$dollar",
    "1starts_with_digit",
    "*star",
    "[bracket]",
    "%",
    " leading space",
]


def create(db: SourceDb) -> list[str]:
    columns = ", ".join(f"{quote_ident(n)} VARCHAR(20)" for n in NAMES[1:])
    key = quote_ident(NAMES[0])
    db.execute(
        f"CREATE TABLE odd ({key} INT NOT NULL PRIMARY KEY, {columns})",
        f"CREATE TABLE odd_heap ({key} INT NOT NULL, {columns}, KEY ({key}))",
    )
    statements = []
    for table in ("odd", "odd_heap"):
        for i in range(30):
            values = ", ".join(f"'v{j}.{i % 4}'" for j in range(1, len(NAMES)))
            statements.append(f"INSERT INTO {table} VALUES ({i}, {values})")
    db.execute(*statements)
    return NAMES


def multiset(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    found: Counter[tuple[Any, ...]] = Counter()
    for row in rows:
        count = row.pop(COUNT_COLUMN, 1)
        found[tuple(row[n] for n in NAMES)] += count
    return found


def source(db: SourceDb, table: str) -> Counter[tuple[Any, ...]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            return multiset([dict(zip(names, r, strict=True)) for r in cur.fetchall()])
    finally:
        conn.close()


def mirror(config: PipelineConfig, db: SourceDb, table: str) -> Counter[tuple[Any, ...]]:
    path = config.sink.path / db.name / table
    return multiset(read_delta(DeltaTable(str(path))).to_pylist())


def test_odd_column_names_are_captured_verified_and_redumped(
    source_db: SourceDb, tmp_path: Path
) -> None:
    create(source_db)
    config_path = write_config(source_db, tmp_path, chunk_size=8)
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        wait_for(
            lambda: list(tables_state(config).values()) == ["STREAMING"] * 2,
            240,
            "both tables to stream",
            job,
        )
        a, dot = quote_ident(NAMES[0]), quote_ident(NAMES[1])
        for table in ("odd", "odd_heap"):
            source_db.execute(
                f"UPDATE {table} SET {dot} = 'moved', {quote_ident('select')} = NULL WHERE {a} = 3",
                f"DELETE FROM {table} WHERE {a} = 4",
                f"INSERT INTO {table} ({a}, {quote_ident('naïve')}) VALUES (100, 'née')",
            )
        wait_for(lambda: caught_up(source_db, config), 180, "the stream to catch up", job)
        for table in ("odd", "odd_heap"):
            assert mirror(config, source_db, table) == source(source_db, table), table
        code, report = verify(config_path)
        assert code == 0, json.dumps(report)[:3000]
        done = run_cli(
            "redump",
            "--config",
            str(config_path),
            "--table",
            f"{source_db.name}.odd",
            "--wait",
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for(lambda: caught_up(source_db, config), 180, "the stream to catch up", job)
        assert mirror(config, source_db, "odd") == source(source_db, "odd")
