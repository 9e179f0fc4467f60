"""Following a primary -> replica failover by GTID.

Two private MariaDB servers on loopback: a primary and a replica of it (GTID replication,
``log_slave_updates``, so the replica's own binlog holds the primary's transactions under other
file names and offsets). The job streams from the primary under a writer with
``source.hosts = [primary, replica]``. Then the primary is stopped once the replica has every
transaction, the replica is promoted, and the writer moves to it: the job (still running) finds
the replica, re-maps its state by GTID and goes on; the mirror ends equal to the replica with
no change lost or applied twice. A server that lacks transactions the pipeline already holds is
refused with the GTID and the fix.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_console.errors import SourceError
from cdc_console.mysql.connection import connect
from cdc_console.mysql.gtid import position_of_gtid, server_identity
from cdc_console.mysql.sandbox import MySQLSandbox
from cdc_console.state.store import StateStore
from tests.conftest import CDC_PASSWORD_ENV, CDC_USER, SourceDb
from tests.integration.harness import (
    JobProcess,
    ReconnectingWriter,
    changelog_replay,
    create_orders,
    events,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

GRANTS = [
    "SELECT ON *.*",
    "REPLICATION SLAVE ON *.*",
    "REPLICATION CLIENT ON *.*",
    "BINLOG MONITOR ON *.*",
]


def scalar(sandbox: MySQLSandbox, sql: str) -> Any:
    conn = sandbox.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


@pytest.fixture
def pair(mariadb: MySQLSandbox, tmp_path: Path) -> Iterator[tuple[SourceDb, SourceDb]]:
    """(primary, replica), the replica replicating everything from the ``shop`` database on."""
    if mariadb.flavour != "mariadb":
        pytest.skip("the failover pair is built with MariaDB's GTID replication")
    password = os.environ[CDC_PASSWORD_ENV]
    primary = MySQLSandbox(tmp_path / "primary", extra_args=["--log-slave-updates"])
    replica = MySQLSandbox(
        tmp_path / "replica", extra_args=["--server-id=2", "--log-slave-updates"]
    )
    primary.start()
    replica.start()
    try:
        primary.create_user(CDC_USER, password, GRANTS)
        primary.execute(
            "CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl-secret'",
            "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'",
        )
        conn = replica.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")  # the replica's own setup stays local
                cur.execute(f"CREATE USER '{CDC_USER}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
                for grant in GRANTS:
                    cur.execute(f"GRANT {grant} TO '{CDC_USER}'@'127.0.0.1'")
                start = str(scalar(primary, "SELECT @@gtid_binlog_pos"))
                cur.execute("SET GLOBAL gtid_slave_pos = %s", (start,))
                cur.execute(
                    f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
                    "MASTER_USER='repl', MASTER_PASSWORD='repl-secret', "
                    "MASTER_USE_GTID=slave_pos"
                )
                cur.execute("START SLAVE")
        finally:
            conn.close()
        primary.execute("CREATE DATABASE shop")
        yield SourceDb(primary, "shop"), SourceDb(replica, "shop")
    finally:
        replica.stop()
        primary.stop()


def wait_replica_has_all(primary: SourceDb, replica: SourceDb) -> str:
    position = str(scalar(primary.sandbox, "SELECT @@gtid_binlog_pos"))
    waited = scalar(replica.sandbox, f"SELECT MASTER_GTID_WAIT('{position}', 60)")
    assert waited == 0, f"the replica did not reach {position}"
    return position


def test_the_job_follows_a_failover_to_the_promoted_replica(
    pair: tuple[SourceDb, SourceDb], tmp_path: Path
) -> None:
    primary, replica = pair
    create_orders(primary, 5_000)
    config_path = write_config(
        primary, tmp_path, chunk_size=1_000, extra="[pipeline]\nsource_outage_seconds = 180\n"
    )
    text = config_path.read_text().replace(
        'server_id = "5400-5410"',
        'server_id = "5400-5410"\n'
        f'hosts = ["127.0.0.1:{primary.sandbox.port}", "127.0.0.1:{replica.sandbox.port}"]',
    )
    config_path.write_text(text)
    config = load(config_path)
    writer = ReconnectingWriter(primary, "orders", [1, 1000, 2500], rate=50)
    writer.start()
    job = JobProcess(config_path)
    with running(job):

        def streamed() -> bool:
            store = StateStore(config.state_path)
            try:
                tables = store.tables()
                return bool(tables) and all(
                    t.state == "STREAMING" and t.events_applied > 20 for t in tables
                )
            finally:
                store.close()

        wait_for(streamed, 240, "streaming from the primary", job)

        # The failover: writes pause, the replica catches up, the primary goes away, the
        # replica is promoted and takes the writes.
        writer.db = replica  # its next reconnect goes there; meanwhile writes fail over
        primary_gtid = wait_replica_has_all(primary, replica)
        primary.sandbox.stop()
        replica.sandbox.execute("STOP SLAVE", "RESET SLAVE ALL")
        time.sleep(5)
        writer.stop()
        assert writer.ops > 0

        def caught_up_with_replica() -> bool:
            store = StateStore(config.state_path)
            try:
                committed = store.committed_offset()
                identity = store.source_identity()
            finally:
                store.close()
            conn = replica.connect()
            try:
                from cdc_console.mysql.position import current_position

                head = current_position(conn)
            finally:
                conn.close()
            return identity == "mariadb server_id=2" and committed is not None and committed >= head

        wait_for(caught_up_with_replica, 240, "the job to follow the failover and catch up", job)
        assert job.proc is not None and job.proc.poll() is None, "the job never exited"
        job.terminate()
        assert job.wait(120) == 0, job.output()

    journal = [e.message for e in events(config)]
    followed = [m for m in journal if m.startswith("source failover followed")]
    assert followed and "mariadb server_id=1 -> mariadb server_id=2" in followed[0], journal
    expected = source_rows(replica, "orders", "id")
    assert mirror_rows(config, replica.name, "orders", "id") == expected
    replayed, binlog_changes, duplicates = changelog_replay(config, replica.name, "orders", "id")
    assert duplicates == 0 and binlog_changes > 0
    assert [replayed[k] for k in sorted(replayed)] == expected
    assert primary_gtid.startswith("0-1-")


def test_a_server_missing_transactions_is_refused_with_the_gtid(
    pair: tuple[SourceDb, SourceDb],
) -> None:
    primary, replica = pair
    replica.sandbox.execute("STOP SLAVE")
    primary.execute("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1), (2)")
    ahead = str(scalar(primary.sandbox, "SELECT @@gtid_binlog_pos"))
    source = replica.source_config()
    conn = connect(source)
    try:
        assert server_identity(conn) == "mariadb server_id=2"
        with pytest.raises(SourceError) as refused:
            position_of_gtid(source, conn, ahead, 5400)
        message = str(refused.value)
        assert f"cannot resume this pipeline at GTID {ahead}" in message
        assert "lacks transactions the mirror already holds" in message
        assert "fix: point source.host at a server that has every transaction" in message
        # What it does have is found: the same state on the primary resolves.
        known = str(scalar(replica.sandbox, "SELECT @@gtid_binlog_pos"))
        assert position_of_gtid(source, conn, known, 5400).gtid == known
    finally:
        conn.close()
