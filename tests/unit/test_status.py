"""``status`` over a canned state database: no server, no Spark."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cdc_console.cli import main
from cdc_console.config import config_from_dict
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.core.splits import SnapshotSplit
from cdc_console.errors import ExitCode
from cdc_console.state.store import StateStore
from cdc_console.status import collect_status, format_status

ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "p.toml"
    path.write_text('[source]\ntables = ["shop.*"]\nport = 1\n[state]\npath = "state.sqlite"\n')
    return path


def canned_state(path: Path) -> None:
    store = StateStore(path)
    store.ensure_table(ORDERS, "id", Lifecycle.SNAPSHOTTING)
    store.ensure_table(USERS, "name", Lifecycle.STREAMING, BinlogOffset("binlog.000002", 400))
    splits = [
        SnapshotSplit(ORDERS, i, "id", ChunkRange(a, b))
        for i, (a, b) in enumerate([(None, 100), (100, 200), (200, None)])
    ]
    store.add_splits(ORDERS, splits)
    with store.transaction() as conn:
        conn.execute(
            "UPDATE tables SET splits_done=2, rows_snapshotted=200 WHERE table_id=?", (str(ORDERS),)
        )
        conn.execute("UPDATE tables SET events_applied=17 WHERE table_id=?", (str(USERS),))
        store.set_offset("committed", BinlogOffset("binlog.000002", 400, gtid="0-1-42"), conn)
    run = store.start_run(1234, "host", "local[2]")
    store.update_run(run, status="failed", error="DDL on captured table shop.users")
    store.log_event("job", "job failed: DDL on captured table shop.users", level="error")
    store.add_lag_sample(
        BinlogOffset("binlog.000002", 400), BinlogOffset("binlog.000003", 10), 1000, 1, 2500
    )
    store.close()


def test_status_text_without_probing_the_server(tmp_path: Path) -> None:
    canned_state(tmp_path / "state.sqlite")
    config = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "state": {"path": str(tmp_path / "state.sqlite")}}
    )
    store = StateStore.open_existing(config.state_path)
    status = collect_status(config, store, probe=False)
    text = format_status(status)
    assert "shop.orders                      SNAPSHOTTING           2/3         200" in text
    assert (
        "shop.users                       STREAMING              0/?           0        17" in text
    )
    assert "committed binlog.000002:400 (gtid 0-1-42)" in text
    assert "event-time lag: 2.5 s" in text
    assert "last error: job failed: DDL on captured table shop.users" in text


def test_status_json_via_cli(tmp_path: Path, capsys: object) -> None:
    canned_state(tmp_path / "state.sqlite")
    config = write_config(tmp_path)
    assert main(["status", "--config", str(config), "--json", "--no-probe"]) == 0
    out = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert [
        (t["table"], t["state"], t["chunks_done"], t["chunks_total"]) for t in out["tables"]
    ] == [("shop.orders", "SNAPSHOTTING", 2, 3), ("shop.users", "STREAMING", 0, None)]
    assert out["committed"] == {"file": "binlog.000002", "pos": 400, "gtid": "0-1-42"}
    assert out["job"]["status"] == "failed"
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    for when in (out["generated_at"], out["job"]["started_at"], out["recent_events"][0]["ts"]):
        assert re.fullmatch(iso, when), when


def test_status_before_any_run_says_how_to_start(tmp_path: Path, capsys: object) -> None:
    config = write_config(tmp_path)
    assert main(["status", "--config", str(config)]) == ExitCode.OPERATOR_ACTION
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "the pipeline has not run yet" in err and "cdc-console run --config" in err
    assert not (tmp_path / "state.sqlite").exists()


def test_status_json_is_a_document_even_when_the_pipeline_never_ran(
    tmp_path: Path, capsys: object
) -> None:
    config = write_config(tmp_path)
    assert main(["status", "--config", str(config), "--json"]) == ExitCode.OPERATOR_ACTION
    out = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert out["ran"] is False and out["tables"] == [] and out["job"] is None
    assert "has not run yet" in out["error"] and "cdc-console run --config" in out["fix"]
    assert not (tmp_path / "state.sqlite").exists()


def test_status_without_probing_says_so_and_shows_each_table_lag(
    tmp_path: Path, capsys: object
) -> None:
    canned_state(tmp_path / "state.sqlite")
    config = write_config(tmp_path)
    assert main(["status", "--config", str(config), "--no-probe"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "server head not asked (--no-probe)" in out and "None" not in out
    assert out.splitlines()[3].split()[-1] == "lag"
    assert main(["status", "--config", str(config), "--json", "--no-probe"]) == 0
    document = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert document["ran"] is True and document["purge"] is None


def test_version_and_verbose_after_the_subcommand(capsys: object) -> None:
    import pytest

    from cdc_console import __version__

    with pytest.raises(SystemExit) as shown:
        main(["--version"])
    assert shown.value.code == 0
    assert capsys.readouterr().out.strip() == f"cdc-console {__version__}"  # type: ignore[attr-defined]
    from cdc_console.cli import build_parser

    assert build_parser().parse_args(["status", "--config", "x", "-v"]).verbose is True
    assert build_parser().parse_args(["-v", "status", "--config", "x"]).verbose is True
    assert build_parser().parse_args(["status", "--config", "x"]).verbose is False


def test_a_placeholder_in_a_fix_is_not_taken_for_a_password() -> None:
    from cdc_console.errors import redact

    assert redact("export CDC_SOURCE_PASSWORD=... before running") == (
        "export CDC_SOURCE_PASSWORD=... before running"
    )
    assert redact("password=<yours>, PASSWORD: $CDC_PW") == "password=<yours>, PASSWORD: $CDC_PW"
    assert redact("password=hunter22 and password=$ecret!") == (
        "password=****** and password=******"
    )


def test_status_reads_without_migrating_and_names_a_schema_it_does_not_know(
    tmp_path: Path, capsys: object
) -> None:
    import sqlite3

    from cdc_console.state.migrations import MIGRATIONS

    canned_state(tmp_path / "state.sqlite")
    config = write_config(tmp_path)
    db = sqlite3.connect(tmp_path / "state.sqlite")
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(len(MIGRATIONS) + 1),))
    db.commit()
    assert main(["status", "--config", str(config)]) == ExitCode.OPERATOR_ACTION
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert f"schema version {len(MIGRATIONS) + 1}, newer than this cdc-console's" in err

    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(len(MIGRATIONS) - 1),))
    db.commit()
    assert main(["status", "--config", str(config)]) == ExitCode.OPERATOR_ACTION
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "older than this cdc-console's" in err and "'cdc-console run' migrates" in err
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert version == str(len(MIGRATIONS) - 1), "status must not migrate under a running job"
    assert main(["pause", "--config", str(config), "--table", "shop.orders"]) == (
        ExitCode.OPERATOR_ACTION
    )
    assert "older than this cdc-console's" in capsys.readouterr().err  # type: ignore[attr-defined]
    version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert version == str(len(MIGRATIONS) - 1), "a command queues without migrating"
    db.close()


def test_migrations_are_cut_where_sqlite_says_a_statement_ends() -> None:
    from cdc_console.state.database import statements

    script = """
    CREATE TABLE a (x TEXT DEFAULT 'one; two');
    CREATE TRIGGER t AFTER INSERT ON a BEGIN
        UPDATE a SET x = 'still; one statement';
    END;
    CREATE INDEX i ON a (x);
    """
    found = list(statements(script))
    assert len(found) == 3
    assert found[1].startswith("CREATE TRIGGER") and found[1].endswith("END;")


def test_status_says_why_chunk_reads_yield_while_the_job_runs_and_only_then(
    tmp_path: Path,
) -> None:
    canned_state(tmp_path / "state.sqlite")
    config = config_from_dict(
        {"source": {"tables": ["shop.*"]}, "state": {"path": str(tmp_path / "state.sqlite")}}
    )
    store = StateStore(config.state_path)
    store.record_throttled("Threads_running 61 > 50")
    assert collect_status(config, store, probe=False).throttled is None  # the run failed
    run = store.start_run(4321, "host", "local[2]")
    status = collect_status(config, store, probe=False)
    assert status.throttled is not None and status.throttled["reason"] == (
        "Threads_running 61 > 50"
    )
    text = format_status(status)
    assert (
        "  chunk reads yield to a busy source: Threads_running 61 > 50 ([source] max_load, for "
        in text
    )
    assert json.loads(json.dumps(status.to_dict()))["throttled"]["since_at"].endswith("Z")
    store.update_run(run, status="stopped")
    store.close()
