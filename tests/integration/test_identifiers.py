"""Names users really have: a database with a dot, a table whose name looks like a pattern or
holds quotes and a backtick. ``source.tables`` says each exactly (a part in backticks where
a plain reading would take it apart), nothing else is captured, and the tables snapshot,
stream, take a control command and appear in the lake under their own names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.schema import TableId
from cdc_console.mysql.checks import run_checks
from cdc_console.sinks.lake_layout import mirror_path
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    caught_up,
    load,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import cli

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ODD = "special\"[`]$'"


@pytest.fixture
def dotted(source_db: SourceDb) -> Iterator[str]:
    """A second database whose name holds a dot, dropped afterwards."""
    name = f"{source_db.name}.0"
    source_db.sandbox.execute(
        f"CREATE DATABASE `{name}`",
        f"CREATE TABLE `{name}`.`customers3.0` (id INT PRIMARY KEY, name VARCHAR(40))",
        f"INSERT INTO `{name}`.`customers3.0` VALUES (1, 'ada'), (2, 'bob')",
    )
    try:
        yield name
    finally:
        source_db.sandbox.execute(f"DROP DATABASE `{name}`")


def tables_state(config: PipelineConfig) -> dict[str, str]:
    if not config.state_path.exists():
        return {}
    store = StateStore(config.state_path)
    try:
        return {str(t.table_id): str(t.state) for t in store.tables()}
    finally:
        store.close()


def _toml(text: str) -> str:
    """``text`` for inside a TOML basic string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _mirror(config_path: Path, database: str, table: str) -> list[tuple[object, ...]]:
    path = mirror_path(load(config_path).sink.path, TableId(database, table))
    rows = read_delta(DeltaTable(str(path))).to_pylist()
    return sorted((r["id"], r["name"]) for r in rows)


def test_names_with_dots_quotes_and_pattern_characters_are_captured_exactly(
    source_db: SourceDb, dotted: str, tmp_path: Path
) -> None:
    db = source_db.name
    source_db.execute(
        *(
            f"CREATE TABLE `{t.replace('`', '``')}` (id INT PRIMARY KEY, name VARCHAR(40))"
            for t in ("t1", "t2", "t[12]", ODD)
        ),
        "INSERT INTO `t[12]` VALUES (1, 'bracket')",
        f"INSERT INTO `{ODD.replace('`', '``')}` VALUES (1, 'odd')",
        "INSERT INTO t1 VALUES (1, 'never captured')",
    )
    entries = [f"`{dotted}`.customers3.0", f"{db}.t[12]", f"{db}.{ODD}"]
    config_path = write_config(source_db, tmp_path, tables=[_toml(e) for e in entries])
    config = load(config_path)
    wanted = {TableId(dotted, "customers3.0"), TableId(db, "t[12]"), TableId(db, ODD)}

    _, tables, results = run_checks(config)
    assert [r for r in results if not r.ok] == []
    assert {t.table_id for t in tables} == wanted
    assert {str(t.table_id) for t in tables} == {f"`{dotted}`.customers3.0", *entries[1:]}

    with running(JobProcess(config_path)) as job:
        wait_for(
            lambda: (
                set(tables_state(config).values()) == {"STREAMING"}
                and len(tables_state(config)) == 3
            ),
            240,
            "the three tables to stream",
            job,
        )
        assert set(tables_state(config)) == {str(t) for t in wanted}
        source_db.sandbox.execute(
            f"INSERT INTO `{dotted}`.`customers3.0` VALUES (3, 'cy')",
            f"UPDATE `{db}`.`t[12]` SET name = 'bracket 2' WHERE id = 1",
            f"INSERT INTO `{db}`.`{ODD.replace('`', '``')}` VALUES (2, 'odd 2')",
            f"INSERT INTO `{db}`.t2 VALUES (1, 'never captured')",
        )
        # a control command names the dotted database's table the way status prints it
        cli(config_path, "pause", "--table", f"`{dotted}`.customers3.0", "--wait")
        cli(config_path, "resume", "--table", f"`{dotted}`.customers3.0", "--wait")
        wait_for(lambda: caught_up(source_db, config), 180, "the stream to catch up", job)

    assert _mirror(config_path, dotted, "customers3.0") == [(1, "ada"), (2, "bob"), (3, "cy")]
    assert _mirror(config_path, db, "t[12]") == [(1, "bracket 2")]
    assert _mirror(config_path, db, ODD) == [(1, "odd"), (2, "odd 2")]
    lake = load(config_path).sink.path
    assert not (lake / db / "t1").exists() and not (lake / db / "t2").exists()
    assert (lake / db / "t~5B12~5D").is_dir()  # the lake's folder for t[12], documented
