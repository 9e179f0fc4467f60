"""Sharded tables routed into one mirror (``[sink] mirrors`` with a table pattern), against real
MariaDB and Spark: shards with overlapping ids under writers, a kill -9, one shard re-dumped,
one shard altered (ADD COLUMN), and a table outside the route streaming beside them. The
merged mirror equals the union of the shards with their origin columns, row for row, and
``verify`` checks each shard on its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    create_orders,
    events,
    load,
    run_cli,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import all_in, caught_up_now, cli, tables_state
from tests.integration.test_verify import verify

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SHARDS = [("u1", "user_table_1_1"), ("u1", "user_table_1_2"), ("u2", "user_table_2_1")]
ROWS = 300


@pytest.fixture
def shards(source_db: SourceDb) -> Iterator[list[tuple[str, str]]]:
    """Two more databases holding three shards of one ``orders``-shaped table, ids 1..ROWS in
    each (so every id is held by every shard), dropped afterwards."""
    databases = sorted({f"{source_db.name}_{d}" for d, _ in SHARDS})
    statements = [f"CREATE DATABASE `{d}`" for d in databases]
    for d, table in SHARDS:
        database = f"`{source_db.name}_{d}`"
        name = f"{database}.`{table}`"
        statements += [
            f"CREATE TABLE {name} (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
            "amount DECIMAL(12,2) NOT NULL, note VARCHAR(40), updated DATETIME(6))",
            f"INSERT INTO {name} SELECT seq, CONCAT('{table}-', seq), seq / 100, NULL, "
            f"'2024-01-01 00:00:00.000001' FROM {database}.seq_1_to_{ROWS}",
        ]
    source_db.sandbox.execute(*statements)
    try:
        yield [(f"{source_db.name}_{d}", t) for d, t in SHARDS]
    finally:
        source_db.sandbox.execute(*[f"DROP DATABASE `{d}`" for d in databases])


def union_of_shards(db: SourceDb, shards: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    conn = db.connect()
    try:
        for database, table in shards:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{database}`.`{table}`")
                names = [d[0] for d in cur.description]
                for values in cur.fetchall():
                    row = dict(zip(names, values, strict=True))
                    rows.append({**row, "_cdc_database": database, "_cdc_table": table})
    finally:
        conn.close()
    return rows


def merged_mirror(config_path: Path) -> list[dict[str, Any]]:
    path = load(config_path).sink.path / "crm" / "users"
    return read_delta(DeltaTable(str(path))).to_pylist()


def by_origin(
    rows: list[dict[str, Any]], columns: list[str]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    found = {
        (r["_cdc_database"], r["_cdc_table"], r["id"]): tuple(r.get(c) for c in columns)
        for r in rows
    }
    assert len(found) == len(rows), "two rows of one shard hold one id"
    return found


def applied_since_start(config: PipelineConfig) -> bool:
    """A batch applied by the job's second run."""
    started = [e.ts for e in events(config) if e.message.startswith("job started (run 2")]
    if not started:
        return False
    store = StateStore(config.state_path)
    try:
        applied = store.last_applied_at()
    finally:
        store.close()
    return applied is not None and applied > started[0]


def test_shards_routed_into_one_mirror_through_writers_a_crash_a_redump_and_an_alter(
    source_db: SourceDb, shards: list[tuple[str, str]], tmp_path: Path
) -> None:
    db = source_db
    create_orders(db, ROWS)  # a table outside the route, streaming beside the shards
    tables = [f"{d}.user_table_*" for d in sorted({d for d, _ in shards})] + [f"{db.name}.*"]
    config_path = write_config(db, tmp_path, tables=tables, chunk_size=64)
    text = config_path.read_text().replace(
        'path = "lake"\n',
        f'path = "lake"\nmirrors = {{ "{db.name}_u*.user_table_*" = "crm/users" }}\n',
    )
    config_path.write_text(text)
    config = load(config_path)
    names = [t for _, t in shards] + ["orders"]
    writers = [
        Writer(db, f"`{d}`.`{t}`", list(range(1, ROWS + 1)), seed=n, rate=25.0)
        for n, (d, t) in enumerate(shards)
    ] + [Writer(db, "orders", list(range(1, ROWS + 1)), seed=9, rate=25.0)]

    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 180, "streaming", job)
        for writer in writers:
            writer.start()
        time.sleep(4)
        job.kill()  # kill -9 of the whole job while the writers write
    job = JobProcess(config_path)
    with running(job):
        # the state says STREAMING from before the crash: wait for this run's own batches, so
        # that the ALTER below is met in the binlog, not found at start
        wait_for(lambda: applied_since_start(config), 120, "a batch of the new run", job)
        # one shard gains a column online; the others never have it
        altered_db, altered = shards[2]
        db.execute(f"ALTER TABLE `{altered_db}`.`{altered}` ADD COLUMN tier INT NULL")
        db.execute(f"UPDATE `{altered_db}`.`{altered}` SET tier = id % 3 WHERE id <= 40")
        # one shard is re-dumped while the writers write: only its rows are replaced
        generations = {n: tables_state(config)[n].generation for n in names}
        generation = generations[shards[1][1]]
        cli(config_path, "redump", "--table", f"{shards[1][0]}.{shards[1][1]}")
        wait_for(
            lambda: (
                tables_state(config)[shards[1][1]].generation > generation
                and all_in(config, Lifecycle.STREAMING, names)
            ),
            180,
            "the re-dumped shard streams again",
            job,
        )
        others = [n for n in names if n != shards[1][1]]
        assert [tables_state(config)[n].generation for n in others] == [
            generations[n] for n in others
        ], "\n".join(e.message for e in events(config))
        time.sleep(2)
        for writer in writers:
            writer.stop()
        assert not [w.errors for w in writers if w.errors]
        assert all(w.ops > 50 for w in writers), [w.ops for w in writers]
        wait_for(lambda: caught_up_now(db, config, names), 120, "caught up", job)
        # a row of one shard taken from the mirror behind the job's back: verify names that
        # shard alone, and --repair re-dumps its chunk without touching the other shards
        victim_db, victim = shards[0]
        key = db.rows(f"SELECT MIN(id) FROM `{victim_db}`.`{victim}`")[0][0]
        mirror = DeltaTable(str(config.sink.path / "crm" / "users"))
        mirror.delete(f"_cdc_table = '{victim}' AND id = {key}")
        code, before = verify(config_path)
        assert code == 1, before
        damaged = [t["table"] for t in before["tables"] if t["verdict"] != "equal"]
        assert damaged == [f"{victim_db}.{victim}"], before
        repaired = run_cli(
            "verify", "--config", str(config_path), "--repair", "--json", timeout=600
        )
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr + job.output()
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()

    columns = ["customer", "amount", "note", "updated", "tier"]
    expected = by_origin(union_of_shards(db, shards), columns)
    merged = merged_mirror(config_path)
    assert {"tier", "_cdc_database", "_cdc_table"} <= set(merged[0])
    mirrored = by_origin(merged, columns)
    assert len(expected) > 3 * ROWS * 0.8
    assert mirrored == expected
    # the table outside the route keeps its own mirror
    assert (config.sink.path / db.name / "orders" / "_delta_log").is_dir()
    code, report = verify(config_path)
    assert code == 0, report
    assert {t["table"] for t in report["tables"]} >= {f"{d}.{t}" for d, t in shards}
