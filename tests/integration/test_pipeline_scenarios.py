"""The real job (``cdc-console run`` in a child process) through the scenarios around the happy path.

MariaDB JSON columns, the two other startup modes, DDL mid-stream, a purged binlog, the
changelog-json sink and a table without a primary key. Every failure must stop the job with a
non-zero exit and one actionable message (what happened, where, the fix), recorded in the state
database, and the source password must appear nowhere.

Spark's start (about ten seconds) is the cost, so tables are tiny and the JSON, chunk-key and
purge tests share one run (``streamed``). The purge test is last in the module because
``PURGE BINARY LOGS`` acts on the whole session server.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_console.config import PipelineConfig
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle, SplitStatus
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.plan import BatchPlan, PlannedSplit
from cdc_console.core.records import OPS
from cdc_console.core.reports import SplitResult
from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.core.splits import BinlogSplit, SnapshotSplit, TableStreamFilter
from cdc_console.errors import BinlogPurgedError, CdcError, ExitCode, SchemaChangedError
from cdc_console.figures import binlog_needs
from cdc_console.mysql.position import current_position
from cdc_console.mysql.sandbox import MySQLSandbox
from cdc_console.retention import missing_binlog
from cdc_console.sinks.changelog_json import replay_changelog
from cdc_console.source.committer import commit_batch
from cdc_console.source.parking import park_table
from cdc_console.spark.job import PipelineJob, error_from_failure, narrow_pending_plan
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    assert_no_password,
    caught_up,
    changelog_replay,
    events,
    last_run,
    load,
    mirror_rows,
    purge_binary_logs,
    run_cli,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def table_states(config: PipelineConfig) -> dict[str, str]:
    if not config.state_path.exists():
        return {}
    store = StateStore(config.state_path)
    try:
        return {t.table_id.table: t.state for t in store.tables()}
    finally:
        store.close()


def head(db: SourceDb) -> BinlogOffset:
    conn = db.connect()
    try:
        return current_position(conn)
    finally:
        conn.close()


def mirror_version(config: PipelineConfig, db: SourceDb, table: str) -> int:
    return DeltaTable(str(config.sink.path / db.name / table)).version()


def cli_report(output: str) -> str:
    """What the CLI printed last: from its final ``error:`` line to the end."""
    starts = [m.start() for m in re.finditer(r"^error: ", output, re.MULTILINE)]
    assert starts, f"no 'error:' line in the output:\n{output}"
    return output[starts[-1] :]


def wait_caught_up(db: SourceDb, config: PipelineConfig, job: JobProcess, what: str) -> None:
    wait_for(lambda: caught_up(db, config), 120, what, job)


@dataclass
class Streamed:
    """The shared run: its config, the mirrors right after the snapshot, and the job's output."""

    db: SourceDb
    config_path: Path
    config: PipelineConfig
    after_snapshot: dict[str, list[dict[str, Any]]]
    output: str


@pytest.fixture(scope="module")
def streamed(mariadb: MySQLSandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streamed]:
    """Snapshot then stream a MariaDB JSON table and a table without a primary key, then stop.

    One Spark run serves three tests: the JSON and chunk-key tests check its mirrors, and the
    purge test, last in this module, restarts it after purging the binlog it stopped at.
    """
    db = SourceDb(mariadb, f"scenarios_{secrets.token_hex(3)}")
    root = mariadb.connect()
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db.name}`")
    root.close()
    db.execute(
        "CREATE TABLE docs (id INT PRIMARY KEY, doc JSON, doc_nn JSON NOT NULL, note LONGTEXT)",
        "INSERT INTO docs VALUES "
        """(1, '{"b": 1, "a": [1, 2.5, "x"]}', '[ ]', '{"b": 1,  "a": 2}'), """
        """(2, NULL, 'null', NULL), """
        """(3, '{"é": "ü", "n": {"z": true, "y": null}}', ' "s" ', 'plain'), """
        """(5, 'null', 'null', NULL)""",
        "CREATE TABLE events (event_id BIGINT NOT NULL, kind VARCHAR(20), payload INT, "
        "UNIQUE KEY uq_event (event_id))",
        "INSERT INTO events SELECT seq * 3, CONCAT('k', seq % 4), seq FROM seq_1_to_40",
    )
    config_path = write_config(
        db,
        tmp_path_factory.mktemp("streamed"),
        chunk_size=10,
        snapshot=f'chunk_key = {{ "{db.name}.events" = "event_id" }}',
    )
    config = load(config_path)
    try:
        with running(JobProcess(config_path)) as job:
            wait_caught_up(db, config, job, "the snapshot")
            after_snapshot = {
                "docs": mirror_rows(config, db.name, "docs", "id"),
                "events": mirror_rows(config, db.name, "events", "event_id"),
            }
            db.execute(
                """INSERT INTO docs VALUES (4, '{ "z" : 1e2, "a" : {"d": 1, "c": [ ]} }', """
                """'{"k": "v"}', '{ "z" : 1 }')""",
                """UPDATE docs SET doc = '{"y": false,   "x": "new"}', doc_nn = '0' WHERE id = 1""",
                "UPDATE docs SET doc = JSON_OBJECT('q', 1, 'p', JSON_ARRAY(1, 2)) WHERE id = 2",
                "DELETE FROM docs WHERE id = 3",
                "UPDATE docs SET doc = NULL, note = 'was json null' WHERE id = 5",
                "INSERT INTO docs VALUES (6, 'null', '1', NULL)",
                "INSERT INTO events VALUES (1000, 'new', 0)",
                "UPDATE events SET kind = 'changed' WHERE event_id = 30",
                "DELETE FROM events WHERE event_id = 60",
                "UPDATE events SET event_id = 2000 WHERE event_id = 90",
            )
            wait_caught_up(db, config, job, "the binlog changes")
            job.terminate()
            assert job.wait(60) == 0, job.output()
        yield Streamed(db, config_path, config, after_snapshot, job.output())
    finally:
        db.execute(f"DROP DATABASE IF EXISTS `{db.name}`")


def test_mariadb_json_column_mirrors_as_canonical_json(streamed: Streamed) -> None:
    """MariaDB JSON (LONGTEXT + json_valid CHECK) reaches the mirror as canonical JSON text.

    Written with spaces and unsorted keys, by literals and by JSON functions; canonical is sorted
    keys, compact separators, numbers as ``json.loads`` reads them. A plain LONGTEXT holding
    JSON-looking text stays verbatim: the schema decides, not the value.
    """
    config, db = streamed.config, streamed.db
    store = StateStore(config.state_path)
    schema = store.schemas()[TableId(db.name, "docs")]
    store.close()
    columns = {c.name: c.data_type for c in schema.columns}
    assert columns == {"id": "int", "doc": "json", "doc_nn": "json", "note": "longtext"}
    assert streamed.after_snapshot["docs"] == [
        {"id": 1, "doc": '{"a":[1,2.5,"x"],"b":1}', "doc_nn": "[]", "note": '{"b": 1,  "a": 2}'},
        {"id": 2, "doc": None, "doc_nn": "null", "note": None},
        {"id": 3, "doc": '{"n":{"y":null,"z":true},"é":"ü"}', "doc_nn": '"s"', "note": "plain"},
        {"id": 5, "doc": "null", "doc_nn": "null", "note": None},
    ]
    # Every row below changed after the snapshot finished: these values came from the binlog.
    assert mirror_rows(config, db.name, "docs", "id") == [
        {"id": 1, "doc": '{"x":"new","y":false}', "doc_nn": "0", "note": '{"b": 1,  "a": 2}'},
        {"id": 2, "doc": '{"p":[1,2],"q":1}', "doc_nn": "null", "note": None},
        {
            "id": 4,
            "doc": '{"a":{"c":[],"d":1},"z":100.0}',
            "doc_nn": '{"k":"v"}',
            "note": '{ "z" : 1 }',
        },
        # the JSON value null and SQL NULL stay apart, through the binlog too
        {"id": 5, "doc": None, "doc_nn": "null", "note": "was json null"},
        {"id": 6, "doc": "null", "doc_nn": "1", "note": None},
    ]
    # Binlog changes only (snapshot rows carry event_index -1): +I twice, -U/+U three times, -D.
    _, changes, duplicates = changelog_replay(config, db.name, "docs", "id")
    assert changes == 9 and duplicates == 0


def test_table_without_primary_key_uses_the_chunk_key(streamed: Streamed) -> None:
    """No primary key, a configured NOT NULL UNIQUE chunk key: chunked, mirrored, streamed."""
    config, db = streamed.config, streamed.db
    store = StateStore(config.state_path)
    table = store.table(TableId(db.name, "events"))
    assert table is not None
    splits = store.splits(table.table_id)
    store.close()
    assert table.chunk_key == "event_id" and table.state == Lifecycle.STREAMING
    assert len(splits) >= 4 and {s.split.chunk_key for s in splits} == {"event_id"}
    assert all(s.status == SplitStatus.FINISHED for s in splits)
    assert len(streamed.after_snapshot["events"]) == 40
    expected = source_rows(db, "events", "event_id")
    assert mirror_rows(config, db.name, "events", "event_id") == expected
    assert {r["event_id"] for r in expected} >= {1000, 2000}
    replayed, changes, duplicates = changelog_replay(config, db.name, "events", "event_id")
    assert changes == 6 and duplicates == 0  # +I, -U/+U twice, -D; not the 40 snapshot rows
    assert [replayed[k] for k in sorted(replayed)] == expected


def test_latest_offset_streams_only_changes_after_start(
    source_db: SourceDb, tmp_path: Path
) -> None:
    source_db.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO items VALUES (1, 'old'), (2, 'old'), (3, 'old')",
    )
    config_path = write_config(source_db, tmp_path, snapshot='startup_mode = "latest-offset"')
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        # Tables are registered at the server's head before the stream starts.
        wait_for(
            lambda: table_states(config) == {"items": Lifecycle.STREAMING}, 60, "registration", job
        )
        source_db.execute(
            "INSERT INTO items VALUES (4, 'new')",
            "UPDATE items SET name = 'changed' WHERE id = 2",
            "DELETE FROM items WHERE id = 3",
        )
        wait_caught_up(source_db, config, job, "the changes after start")
        job.terminate()
        assert job.wait(60) == 0, job.output()

    # Row 1 was never touched: absent. Row 2 arrives through its update, row 3's delete is a no-op.
    assert mirror_rows(config, source_db.name, "items", "id") == [
        {"id": 2, "name": "changed"},
        {"id": 4, "name": "new"},
    ]
    store = StateStore(config.state_path)
    table = store.tables()[0]
    assert store.splits(table.table_id) == []
    assert table.rows_snapshotted == 0 and table.events_applied == 4  # +I, -U, +U, -D
    store.close()


def test_snapshot_only_exits_after_the_snapshot(source_db: SourceDb, tmp_path: Path) -> None:
    source_db.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO items SELECT seq, CONCAT('n', seq) FROM seq_1_to_50",
    )
    config_path = write_config(
        source_db, tmp_path, chunk_size=10, snapshot='startup_mode = "snapshot-only"'
    )
    config = load(config_path)
    job = JobProcess(config_path).start()
    assert job.wait(180) == 0, job.output()  # no signal, no --until-caught-up: it ends by itself
    assert table_states(config) == {"items": Lifecycle.SNAPSHOT_DONE}
    snapshot = source_rows(source_db, "items", "id")
    assert mirror_rows(config, source_db.name, "items", "id") == snapshot
    store = StateStore(config.state_path)
    splits = store.splits(store.tables()[0].table_id)
    assert len(splits) >= 5 and all(s.status == SplitStatus.FINISHED for s in splits)
    assert store.committed_offset() is None  # no binlog window was ever read
    store.close()

    source_db.execute(
        "INSERT INTO items VALUES (100, 'later')",
        "UPDATE items SET name = 'later' WHERE id = 1",
        "DELETE FROM items WHERE id = 2",
    )
    again = JobProcess(config_path).start()
    assert again.wait(60) == 0, again.output()
    assert "already snapshotted, nothing to do" in again.output()
    assert last_run(config).spark_ui is None  # decided before starting Spark
    assert mirror_rows(config, source_db.name, "items", "id") == snapshot


def test_ddl_on_a_captured_table_stops_the_job_with_the_fix(
    source_db: SourceDb, tmp_path: Path
) -> None:
    db = source_db.name
    source_db.execute(
        *(
            f"CREATE TABLE {t} (id INT PRIMARY KEY, note VARCHAR(20))"
            for t in ("orders", "other", "audit")
        ),
        *(f"INSERT INTO {t} SELECT seq, 'initial' FROM seq_1_to_5" for t in ("orders", "other")),
    )
    # schema_changes = "stop": the whole job stops (the default, "evolve", follows the change
    # or parks only the table: tests/integration/test_table_control.py)
    stop = '[pipeline]\nschema_changes = "stop"\n'
    config_path = write_config(
        source_db, tmp_path, tables=[f"{db}.orders", f"{db}.other"], extra=stop
    )
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        wait_caught_up(source_db, config, job, "the snapshot")

        # DDL on a table of the same database that is not captured: no stop.
        source_db.execute(
            "ALTER TABLE audit ADD COLUMN extra INT",
            "INSERT INTO audit VALUES (1, 'x', 1)",
            "INSERT INTO other VALUES (6, 'after audit ddl')",
        )
        wait_caught_up(source_db, config, job, "the change after the audit DDL")
        assert {"id": 6, "note": "after audit ddl"} in mirror_rows(config, db, "other", "id")

        before_ddl = head(source_db)
        source_db.execute(
            "INSERT INTO other VALUES (7, 'before ddl')",
            "ALTER TABLE orders ADD COLUMN extra INT",
            "INSERT INTO orders VALUES (6, 'wrong shape', 42)",
            "INSERT INTO other VALUES (8, 'after ddl')",
        )
        after_ddl = head(source_db)
        code = job.wait(120)
    output = job.output()
    assert code == ExitCode.OPERATOR_ACTION, output

    # The CLI's last word is one message: the table, the position, the statement and the fix,
    # no traceback. (Spark logs the task failure with its traces before that, on stderr.)
    report = cli_report(output)
    match = re.fullmatch(
        rf"error: DDL on captured table {db}\.orders at (\S+): ALTER TABLE orders ADD COLUMN "
        r"extra INT\n  fix: (.+)\n",
        report,
    )
    assert match, report
    file, pos = match.group(1).rsplit(":", 1)
    assert before_ddl <= BinlogOffset(file, int(pos)) < after_ddl
    assert "cdc-console redump --table" in match.group(2)
    assert "remove it from source.tables" in match.group(2)

    run = last_run(config)
    assert run.status == "failed" and run.exit_code == ExitCode.OPERATOR_ACTION
    assert run.error.startswith(f"DDL on captured table {db}.orders at {file}:{pos}")
    assert "\n  fix: " in run.error
    assert any(f"DDL on captured table {db}.orders" in e.message for e in events(config, "error"))
    status = run_cli("status", "--config", str(config_path))
    assert status.returncode == 0, status.stderr
    assert f"last error: job failed: DDL on captured table {db}.orders" in status.stdout

    # Nothing with the new shape reached the mirror; the failed batch applied nothing at all.
    orders = DeltaTable(str(config.sink.path / db / "orders"))
    assert [f.name for f in orders.schema().fields] == ["id", "note"]
    assert [r["id"] for r in mirror_rows(config, db, "orders", "id")] == [1, 2, 3, 4, 5]
    # Row 7 went in before the DDL: a batch may have ended between the two statements.
    assert [r["id"] for r in mirror_rows(config, db, "other", "id")] in (
        [1, 2, 3, 4, 5, 6],
        [1, 2, 3, 4, 5, 6, 7],
    )

    # The first fix the hint names: re-dump the table. Queued while no job runs, it applies at
    # the next start; the mirror takes the new column without ever being empty, the other
    # table loses nothing.
    redump = run_cli("redump", "--table", f"{db}.orders", "--config", str(config_path))
    assert redump.returncode == 0, redump.stderr
    assert "no job is running: it applies when the job next starts" in redump.stdout
    fixed = JobProcess(config_path, args=["--until-caught-up"]).start()
    assert fixed.wait(180) == 0, fixed.output()
    assert table_states(config) == {"orders": Lifecycle.STREAMING, "other": Lifecycle.STREAMING}
    for table in ("orders", "other"):
        assert mirror_rows(config, db, table, "id") == source_rows(source_db, table, "id")
        _, _, duplicates = changelog_replay(config, db, table, "id")
        assert duplicates == 0
    assert {"id": 6, "note": "wrong shape", "extra": 42} in mirror_rows(config, db, "orders", "id")
    assert list((config.sink.path / "_changelog" / db).glob("orders.before-v*"))

    # With schema_changes = "evolve" (the default), a table reshaped while the job was down is
    # read again by itself at the next start, in its new shape, while the other one streams.
    write_config(source_db, tmp_path, tables=[f"{db}.orders", f"{db}.other"])
    source_db.execute(
        "ALTER TABLE orders ADD COLUMN tag VARCHAR(8) NOT NULL DEFAULT 'd'",
        "INSERT INTO orders VALUES (7, 'new shape', 1, 'x')",
        "INSERT INTO other VALUES (9, 'while reshaped')",
    )
    final = JobProcess(config_path, args=["--until-caught-up"]).start()
    assert final.wait(180) == 0, final.output()
    assert table_states(config) == {"orders": Lifecycle.STREAMING, "other": Lifecycle.STREAMING}
    for table in ("orders", "other"):
        assert mirror_rows(config, db, table, "id") == source_rows(source_db, table, "id")
    assert any(
        f"{db}.orders changed shape while the pipeline was stopped: followed by reading it "
        "again online" in e.message
        for e in events(config, "info")
    ), [e.message for e in events(config, "info")]
    assert_no_password(
        output,
        fixed.output(),
        final.output(),
        status.stdout,
        status.stderr,
        files=(config.state_path,),
    )


def test_changelog_json_sink_end_to_end(source_db: SourceDb, tmp_path: Path) -> None:
    source_db.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2))",
        "INSERT INTO items SELECT seq, CONCAT('n', seq), seq / 4 FROM seq_1_to_30",
    )
    config_path = write_config(source_db, tmp_path, chunk_size=8, sink_kind="changelog-json")
    config = load(config_path)
    with running(JobProcess(config_path)) as job:
        wait_caught_up(source_db, config, job, "the snapshot")
        source_db.execute(
            "INSERT INTO items VALUES (100, 'new', 1.5)",
            "UPDATE items SET name = 'changed', amount = amount + 1 WHERE id = 5",
            "DELETE FROM items WHERE id = 7",
            "UPDATE items SET id = 200 WHERE id = 10",
        )
        wait_caught_up(source_db, config, job, "the binlog changes")
        job.terminate()
        assert job.wait(60) == 0, job.output()

    folder = config.sink.path / source_db.name / "items"
    files = sorted(folder.glob("batch-*.jsonl"))
    assert files and all(re.fullmatch(r"batch-\d{12}\.jsonl", f.name) for f in files)
    lines = [line for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        message = json.loads(line)
        assert list(message) == ["data", "op"] and message["op"] in OPS
        assert list(message["data"]) == ["id", "name", "amount"]
        assert line == json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    assert lines[0] == '{"data":{"id":1,"name":"n1","amount":"0.25"},"op":"+I"}'
    ops = [json.loads(line)["op"] for line in lines]
    assert ops.count("+I") == 31 and ops.count("-U") == ops.count("+U") == 2
    assert ops.count("-D") == 1
    expected = {
        (r["id"],): {"id": r["id"], "name": r["name"], "amount": str(r["amount"])}
        for r in source_rows(source_db, "items", "id")
    }
    assert replay_changelog(lines, ["id"], strict=True) == expected
    assert not (config.sink.path / "_changelog").exists()


def test_purged_binlog_fails_fast_before_spark(streamed: Streamed) -> None:
    """Last in the module: the purge removes every binlog but the newest from the shared server."""
    config, db = streamed.config, streamed.db
    store = StateStore(config.state_path)
    committed = store.committed_offset()
    store.close()
    assert committed is not None
    versions = {t: mirror_version(config, db, t) for t in ("docs", "events")}

    db.execute(
        "INSERT INTO events VALUES (5000, 'lost', 0)",
        "UPDATE docs SET note = 'lost' WHERE id = 1",
    )
    newest = purge_binary_logs(db)

    clock = time.monotonic()
    failing = JobProcess(streamed.config_path).start()
    code = failing.wait(60)
    elapsed = time.monotonic() - clock
    output = failing.output()
    assert code == ExitCode.OPERATOR_ACTION, output
    report = cli_report(output)
    assert report.startswith(
        f"error: the source server no longer has binlog {committed.file}: {db.name}.docs "
        f"must resume from {committed}, but the oldest binlog left is {newest}, so the changes "
        "made in between were purged"
    ), report
    assert "\n  fix: start this pipeline over with a fresh snapshot: stop it, delete " in report
    assert str(config.state_path) in report and "binlog_expire_logs_seconds" in report
    assert "Traceback" not in output

    run = last_run(config)
    assert run.status == "failed" and run.exit_code == ExitCode.OPERATOR_ACTION
    assert run.spark_ui is None, run  # decided before Spark started
    assert "no longer has binlog" in run.error
    assert elapsed < 30, f"took {elapsed:.1f}s: the check should come before Spark starts"
    assert {t: mirror_version(config, db, t) for t in ("docs", "events")} == versions
    assert_no_password(output, streamed.output, files=(config.state_path,))


# -- the job's decisions, without Spark or a server ------------------------------------------


def offline_config(folder: Path) -> PipelineConfig:
    path = folder / "pipeline.toml"
    path.write_text('[source]\nuser = "cdc"\ntables = ["shop.*"]\n[sink]\npath = "lake"\n')
    return load(path)


def tiny_schema(name: str) -> TableSchema:
    return TableSchema(
        TableId("shop", name), (ColumnInfo("id", "int", "int(11)", False),), ("id",), "id"
    )


def at(pos: int, file: str = "binlog.000002") -> BinlogOffset:
    return BinlogOffset(file, pos)


def test_removed_tables_leave_the_pending_plan_and_resume_when_named_again(
    tmp_path: Path,
) -> None:
    """The fix a DDL stop suggests, "remove it from source.tables", must really unblock the job."""
    config = offline_config(tmp_path)
    job = PipelineJob(config)
    store = StateStore(config.state_path)
    a, b, c = tiny_schema("a"), tiny_schema("b"), tiny_schema("c")
    job.register_tables(store, [a, b, c])
    splits = {
        s.table_id.table: s
        for s in (SnapshotSplit(t.table_id, 0, "id", ChunkRange(None, None)) for t in (a, b, c))
    }
    for split in splits.values():
        store.add_splits(split.table_id, [split])
    first = BatchPlan(1, (PlannedSplit(splits["a"], 5401), PlannedSplit(splits["b"], 5402)))
    store.create_batch(1, first.to_dict(), [splits["a"], splits["b"]])
    results = [
        SplitResult(f"shop.{t}:0", at(100), at(hw), 1, 0, time.time(), 1)
        for t, hw in (("a", 200), ("b", 300))
    ]
    commit_batch(store, first, results, None)
    filters = tuple(
        TableStreamFilter(
            TableId("shop", t), at(hw), tuple(store.finished_splits(TableId("shop", t)))
        )
        for t, hw in (("a", 200), ("b", 300))
    )
    second = BatchPlan(
        2, (PlannedSplit(splits["c"], 5401),), BinlogSplit(at(200), at(900), filters), 5400
    )
    store.create_batch(2, second.to_dict(), [splits["c"]])

    job.register_tables(store, [b])
    narrow_pending_plan(store)
    assert table_states(config) == {
        "a": Lifecycle.REMOVED,
        "b": "CATCHING_UP",
        "c": Lifecycle.REMOVED,
    }
    pending = store.batch(2)
    assert pending is not None and pending.status == "planned"
    narrowed = pending.plan
    assert narrowed.snapshot == ()
    assert narrowed.binlog == BinlogSplit(at(200), at(900), filters[1:])
    assert [s.status for s in store.splits(TableId("shop", "c"))] == [SplitStatus.PENDING]
    assert binlog_needs(store) == [("shop.b", at(300))]

    job.register_tables(store, [a, b, c])
    assert table_states(config) == {"a": "CATCHING_UP", "b": "CATCHING_UP", "c": "SNAPSHOTTING"}
    restored = store.table(TableId("shop", "a"))
    assert restored is not None and restored.stream_from == at(200)
    assert binlog_needs(store) == [("shop.a", at(200)), ("shop.b", at(300))]
    store.close()


def test_a_parked_table_leaves_the_pending_plan_and_its_purged_start_with_it(
    tmp_path: Path,
) -> None:
    """A window planned for a table whose binlog was purged since must not start there once the
    table is parked: the next start reads from the other tables' positions only."""
    config = offline_config(tmp_path)
    store = StateStore(config.state_path)
    store.ensure_table(TableId("shop", "a"), "id", Lifecycle.STREAMING, at(200, "binlog.000001"))
    store.ensure_table(TableId("shop", "b"), "id", Lifecycle.STREAMING, at(300))
    filters = tuple(
        TableStreamFilter(TableId("shop", t), position)
        for t, position in (("a", at(200, "binlog.000001")), ("b", at(300)))
    )
    plan = BatchPlan(1, (), BinlogSplit(at(200, "binlog.000001"), at(900), filters), 5400)
    store.create_batch(1, plan.to_dict(), [])
    park_table(store, TableId("shop", "a"), at(200, "binlog.000001"), ["binlog.000002"])
    narrow_pending_plan(store)
    pending = store.batch(1)
    assert pending is not None and pending.status == "planned"
    assert pending.plan.binlog == BinlogSplit(at(300), at(900), filters[1:])
    assert binlog_needs(store) == [("shop.b", at(300))]

    park_table(store, TableId("shop", "b"), at(300), ["binlog.000003"])
    narrow_pending_plan(store)
    pending = store.batch(1)
    assert pending is not None and pending.plan.binlog == BinlogSplit(at(900), at(900), ())
    store.close()


def test_missing_binlog_tells_purged_from_reset(tmp_path: Path) -> None:
    config = offline_config(tmp_path)
    needs = [("shop.b", at(300, "binlog.000004")), ("shop.a", at(200, "binlog.000003"))]
    logs = [("binlog.000003", 500), ("binlog.000004", 900)]
    assert missing_binlog(needs, logs, config) is None
    purged = missing_binlog(needs, logs[1:], config)
    assert isinstance(purged, BinlogPurgedError)
    assert purged.message.startswith(
        "the source server no longer has binlog binlog.000003: shop.a must resume from "
        "binlog.000003:200, but the oldest binlog left is binlog.000004"
    )
    reset = missing_binlog(needs, [("binlog.000001", 300)], config)
    assert reset is not None and not isinstance(reset, BinlogPurgedError)
    assert "the binlog was reset (RESET MASTER)" in reset.message
    assert str(config.state_path) in reset.hint


def test_error_from_a_spark_failure_is_ours_with_its_fix() -> None:
    trace = (
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.\n"
        "pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the "
        'Python worker:\nTraceback (most recent call last):\n  File "binlog.py", line 188\n'
        "cdc_console.errors.SchemaChangedError: DDL on captured table shop.a at "
        "binlog.000001:45: ALTER TABLE a ADD x INT\n  fix: re-snapshot shop.a\n\n"
        "\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n"
    )
    error = error_from_failure(RuntimeError(trace))
    assert type(error) is SchemaChangedError
    assert str(error) == (
        "DDL on captured table shop.a at binlog.000001:45: ALTER TABLE a ADD x INT\n"
        "  fix: re-snapshot shop.a"
    )
    multiline = trace.replace("ALTER TABLE a ADD", "ALTER TABLE a\n    ADD")
    assert str(error_from_failure(RuntimeError(multiline))) == (
        "DDL on captured table shop.a at binlog.000001:45: ALTER TABLE a\n    ADD x INT\n"
        "  fix: re-snapshot shop.a"
    )
    bare = "cdc_console.errors.SourceError: binlog read failed\n\tat py4j.Protocol.x(P.java:1)"
    assert str(error_from_failure(RuntimeError(bare))) == "binlog read failed"
    other = error_from_failure(RuntimeError("java.lang.OutOfMemoryError: Java heap space\n\tat x"))
    assert type(other) is CdcError
    assert other.message == "the pipeline failed: java.lang.OutOfMemoryError: Java heap space"
    assert "full Spark trace" in other.hint
