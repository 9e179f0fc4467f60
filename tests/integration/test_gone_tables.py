"""A captured table that is gone from the source is a table state, not a config error.

Dropped while the job streams, it parks with the DROP's position while the others go on;
dropped while the job is down (and still named in ``source.tables``, literally and through a
pattern), the job starts all the same and parks it; re-created, it is re-dumped and converges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_console.core.lifecycle import Lifecycle
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    events,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import all_in, caught_up_now, cli, create_table

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def test_a_table_dropped_running_or_stopped_parks_alone_and_a_re_created_one_re_dumps(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db
    for name in ("keep", "dropped_live", "dropped_down"):
        create_table(db, name, rows=300)
    config_path = write_config(
        db, tmp_path, tables=[f"{db.name}.keep", f"{db.name}.dropped_live", f"{db.name}.dropped_*"]
    )
    config = load(config_path)
    names = ["keep", "dropped_live", "dropped_down"]
    with running(JobProcess(config_path)) as job:
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 240, "streaming", job)
        db.execute("DROP TABLE dropped_live", "UPDATE keep SET note = 'after drop' WHERE id = 1")
        wait_for(
            lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["dropped_live"]), 90, "parked", job
        )
        said = [e.message for e in events(config) if "dropped_live" in e.message]
        assert any("DROP TABLE" in m and "binlog." in m for m in said), said
        wait_for(lambda: caught_up_now(db, config, ["keep"]), 90, "keep streaming", job)
        cli(config_path, "stop", "--wait")
    db.execute("DROP TABLE dropped_down", "UPDATE keep SET note = 'while down' WHERE id = 2")

    # both still named in source.tables: check warns, the job starts and parks the other one
    checked = cli(config_path, "check")
    assert f"{db.name}.dropped_down was captured but is gone from the source" in checked
    with running(JobProcess(config_path)) as job:
        wait_for(
            lambda: all_in(config, Lifecycle.NEEDS_REDUMP, ["dropped_live", "dropped_down"]),
            120,
            "the table dropped while down parked",
            job,
        )
        wait_for(lambda: caught_up_now(db, config, ["keep"]), 120, "keep streaming", job)
        assert mirror_rows(config, db.name, "keep", "id") == source_rows(db, "keep", "id")
        assert any(
            "dropped_down parked (NEEDS_REDUMP): it is gone from the source" in e.message
            for e in events(config)
        )
        # re-created: a re-dump captures it again
        create_table(db, "dropped_live", rows=50)
        cli(config_path, "redump", "--table", f"{db.name}.dropped_live", "--wait")
        wait_for(
            lambda: all_in(config, Lifecycle.STREAMING, ["dropped_live", "keep"]),
            180,
            "the re-created table streaming",
            job,
        )
        db.execute("UPDATE dropped_live SET note = 'new life' WHERE id = 7")
        wait_for(lambda: caught_up_now(db, config, ["keep", "dropped_live"]), 120, "caught up", job)
        assert mirror_rows(config, db.name, "dropped_live", "id") == source_rows(
            db, "dropped_live", "id"
        )
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
