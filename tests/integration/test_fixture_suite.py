"""The project's fixture suite (``catalogue``): every table users have, at once, through snapshot
and binlog under a writer, a ``kill -9`` in the middle, one table dropped and one re-created.

Every table ends equal to its source (row for row, duplicates counted, by ``verify`` and by
count), and damage done to each mirror behind the pipeline's back is named and repaired.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import COUNT_COLUMN, TableId
from cdc_console.sinks.lake_layout import mirror_path
from cdc_console.sinks.mirror_read import read_delta
from tests.conftest import SourceDb
from tests.integration.catalogue import Fixture, catalogue
from tests.integration.harness import JobProcess, load, run_cli, running, wait_for, write_config
from tests.integration.test_table_control import all_in, caught_up_now, cli
from tests.integration.test_verify import verify

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

#: ``binary`` is not a character set a VARCHAR can have
UNDECODED = {"binary"}


class CatalogueWriter(threading.Thread):
    """One session with an empty ``sql_mode``, changing random fixtures' rows."""

    def __init__(self, db: SourceDb, fixtures: list[Fixture], seed: int) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.fixtures = fixtures
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.statements = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = ''")
                while not self.stop.is_set():
                    with self.lock:
                        fixture = self.rng.choice(self.fixtures)
                        cur.execute(fixture.changes(self.rng))
                    self.statements += 1
                    time.sleep(0.002)
        finally:
            conn.close()


def mirror_rows(config: PipelineConfig, db: SourceDb, name: str) -> int:
    data = read_delta(DeltaTable(str(mirror_path(config.sink.path, TableId(db.name, name)))))
    if COUNT_COLUMN in data.column_names:
        return int(pc.sum(data[COUNT_COLUMN]).as_py() or 0)
    return data.num_rows


def unequal(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The tables of a verify report that are not equal, with only their unequal chunks."""
    return [
        {**t, "chunks": [c for c in t["chunks"] if c["verdict"] != "equal"]}
        for t in report["tables"]
        if t["verdict"] not in ("equal", "skipped")
    ]


def damage(config: PipelineConfig, db: SourceDb, name: str) -> bool:
    """One row of the mirror goes missing (or, counted, one copy), behind the pipeline's back;
    False when the mirror has no row to lose (the writer may empty a small table)."""
    path = str(mirror_path(config.sink.path, TableId(db.name, name)))
    data = read_delta(DeltaTable(path))
    rows: list[dict[str, Any]] = data.to_pylist()
    if not rows:
        return False
    if COUNT_COLUMN in data.column_names and rows[0][COUNT_COLUMN] > 1:
        rows[0][COUNT_COLUMN] -= 1
    else:
        rows = rows[1:]
    write_deltalake(path, pa.Table.from_pylist(rows, data.schema), mode="overwrite")
    return True


def test_every_fixture_converges_through_a_kill_a_drop_and_a_damage_repaired(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    charsets = sorted(str(r[0]) for r in db.rows("SHOW CHARACTER SET"))
    # a larger run: CDC_FIXTURE_ROWS=200; other drawn key pairs and values: CDC_FIXTURE_SEED
    rows = int(os.environ.get("CDC_FIXTURE_ROWS", "24"))
    seed = int(os.environ.get("CDC_FIXTURE_SEED", "30"))
    fixtures = catalogue([c for c in charsets if c not in UNDECODED], rows=rows, seed=seed)
    assert len(fixtures) >= 60, len(fixtures)
    db.execute(
        "SET SESSION sql_mode = ''",
        *(f.create for f in fixtures),
        *(row for f in fixtures for row in f.rows),
    )
    names = [f.name for f in fixtures]
    config_path = write_config(db, tmp_path, chunk_size=max(10, rows // 3))
    config = load(config_path)
    writer = CatalogueWriter(db, fixtures, seed=seed)
    writer.start()
    try:
        with running(JobProcess(config_path)) as job:
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, names[:5]), 300, "a start", job)
            job.kill()
        dropped, recreated = fixtures[0], fixtures[1]
        with running(JobProcess(config_path)) as job:
            wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 600, "streaming", job)
            with writer.lock:
                writer.fixtures = [f for f in fixtures if f not in (dropped, recreated)]
                db.execute(f"DROP TABLE {dropped.quoted}", f"DROP TABLE {recreated.quoted}")
            wait_for(
                lambda: all_in(config, Lifecycle.NEEDS_REDUMP, [dropped.name, recreated.name]),
                120,
                "the dropped tables to park",
                job,
            )
            db.execute("SET SESSION sql_mode = ''", recreated.create, *recreated.rows)
            cli(config_path, "redump", "--table", f"{db.name}.{recreated.name}", "--wait")
            time.sleep(2)
            writer.stop.set()
            writer.join(30)
            assert writer.statements > 200
            live = [n for n in names if n != dropped.name]
            wait_for(lambda: caught_up_now(db, config, live), 300, "the stream to catch up", job)
            for name in live:
                source = int(db.rows(f"SELECT COUNT(*) FROM `{name.replace('`', '``')}`")[0][0])  # type: ignore[call-overload]
                assert mirror_rows(config, db, name) == source, name
            code, report = verify(config_path)
            assert code == 0, json.dumps(unequal(report))[:6000]
            verified = {t["table"] for t in report["tables"] if t["verdict"] == "equal"}
            assert len(verified) == len(live), sorted(
                set(live) - {v.split(".", 1)[1] for v in verified}
            )

            damaged = {name for name in live if damage(config, db, name)}
            assert len(damaged) > len(live) - 3
            repaired = run_cli(
                "verify", "--config", str(config_path), "--repair", "--json", timeout=900
            )
            assert repaired.returncode == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
            outcome = json.loads(repaired.stdout)
            named = {
                TableId.parse(t["table"]).table
                for t in outcome["before"]["tables"]
                if t["verdict"] == "differs"
            }
            assert named == damaged, (damaged ^ named, outcome["before"])
            assert len(outcome["repaired"]) == len(damaged), outcome["repaired"]
            assert {t["verdict"] for t in outcome["after"]["tables"]} == {"equal"}, outcome
    finally:
        writer.stop.set()
        writer.join(30)
