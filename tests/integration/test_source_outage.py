"""A source that goes away and comes back is waited out, not fatal.

A private MariaDB (not the session's: this one is stopped) serves a table under a writer that
reconnects by itself. The job runs while the server is stopped for 15 s four times: once during
the snapshot and three times in a row while streaming. The job never exits; while the server is
down, ``status --json`` reports the outage as ``reconnecting``; afterwards the mirror equals the
source and the changelog has no change twice. A source that stays away past
``source_outage_seconds`` ends the job with exit status 3 and the message that says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_console.mysql.sandbox import MySQLSandbox
from tests.conftest import CDC_PASSWORD_ENV, CDC_USER, SourceDb
from tests.integration.harness import (
    JobProcess,
    ReconnectingWriter,
    caught_up,
    changelog_replay,
    create_orders,
    events,
    finished_splits,
    last_run,
    load,
    mirror_rows,
    run_cli,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ROWS, CHUNK = 20_000, 1_000
DOWN_SECONDS = 15
#: the two later restarts in a row are shorter: the first two already show a 15 s outage
SHORT_DOWN_SECONDS = 6


@pytest.fixture
def own_server(mariadb: MySQLSandbox, tmp_path: Path) -> Iterator[SourceDb]:
    """A server of its own, with the same ``cdc`` user (the session fixture set its password)."""
    import os

    sandbox = MySQLSandbox(tmp_path / "own-mariadb")
    sandbox.start()
    try:
        grants = ["SELECT ON *.*", "REPLICATION SLAVE ON *.*", "REPLICATION CLIENT ON *.*"]
        if sandbox.flavour == "mariadb":
            grants.append("BINLOG MONITOR ON *.*")
        sandbox.create_user(CDC_USER, os.environ[CDC_PASSWORD_ENV], grants)
        sandbox.execute("CREATE DATABASE shop")
        yield SourceDb(sandbox, "shop")
    finally:
        sandbox.stop()


def status_json(config_path: Path) -> dict[str, Any]:
    result = run_cli("status", "--config", str(config_path), "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def outage_while_down(
    db: SourceDb, config_path: Path, job: JobProcess, seconds: float = DOWN_SECONDS
) -> str:
    """Stop the server for ``seconds``; return what ``status --json`` said meanwhile."""
    db.sandbox.stop()
    seen = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert job.proc is not None and job.proc.poll() is None, job.output()
        outage = status_json(config_path).get("outage")
        if outage and outage["summary"].startswith("reconnecting (attempt "):
            seen = outage["summary"]
        time.sleep(1)
    db.sandbox.start()
    return seen


def test_the_job_rides_through_four_server_restarts(own_server: SourceDb, tmp_path: Path) -> None:
    db = own_server
    create_orders(db, ROWS)
    config_path = write_config(
        db,
        tmp_path,
        chunk_size=CHUNK,
        snapshot="chunks_per_batch = 2",
        extra="[pipeline]\nsource_outage_seconds = 300\n",
    )
    config = load(config_path)
    writer = ReconnectingWriter(db, "orders", list(range(1, ROWS, CHUNK)), rate=60)
    writer.start()
    job = JobProcess(config_path)
    summaries: list[str] = []
    with running(job):
        wait_for(lambda: len(finished_splits(config)) >= 2, 240, "the snapshot under way", job)
        summaries.append(outage_while_down(db, config_path, job))
        wait_for(
            lambda: all(t["state"] == "STREAMING" for t in status_json(config_path)["tables"]),
            300,
            "the snapshot to finish after the restart",
            job,
        )
        for seconds in (DOWN_SECONDS, SHORT_DOWN_SECONDS, SHORT_DOWN_SECONDS):
            # Every part of the job back before the next restart, so each is an outage of its
            # own (a lag probe still backing off would see two restarts as one outage).
            wait_for(lambda: status_json(config_path)["outage"] is None, 60, "reconnected", job)
            time.sleep(3)  # a few windows of stream between restarts
            summaries.append(outage_while_down(db, config_path, job, seconds))
        writer.stop()
        wait_for(lambda: caught_up(db, config), 300, "the job to catch up", job)
        assert job.proc is not None and job.proc.poll() is None, "the job never exited"
        wait_for(lambda: status_json(config_path)["outage"] is None, 30, "the outage's end", job)
        job.terminate()
        assert job.wait(120) == 0, job.output()

    assert all(summaries), f"status --json showed no outage during a restart: {summaries}"
    assert all("Connection refused" in s or "Lost connection" in s for s in summaries), summaries
    expected = source_rows(db, "orders", "id")
    assert mirror_rows(config, db.name, "orders", "id") == expected
    replayed, binlog_changes, duplicates = changelog_replay(config, db.name, "orders", "id")
    assert duplicates == 0 and binlog_changes > 0
    assert [replayed[k] for k in sorted(replayed)] == expected
    journal = [e.message for e in events(config) if "source" in e.message]
    assert sum("source unreachable" in m for m in journal) >= 4, journal
    assert sum("source reachable again" in m for m in journal) >= 4, journal


def test_a_source_that_stays_away_ends_the_job_with_exit_3(
    own_server: SourceDb, tmp_path: Path
) -> None:
    db = own_server
    create_orders(db, 2_000)
    config_path = write_config(db, tmp_path, extra="[pipeline]\nsource_outage_seconds = 8\n")
    config = load(config_path)
    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: caught_up(db, config), 240, "the snapshot", job)
        db.sandbox.stop()
        code = job.wait(180)
    output = job.output()
    assert code == 3, output
    assert "error: source unreachable for 8 s: " in output, output
    assert "state kept, start again" in output
    # The CLI's last word is the reason and the fix (Spark's own trace stays above it in the log).
    assert output.rstrip().splitlines()[-2].startswith("error: source unreachable for "), output
    run = last_run(config)
    assert (run.status, run.exit_code) == ("failed", 3)
    assert run.error is not None and run.error.startswith("source unreachable for ")
