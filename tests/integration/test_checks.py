"""Preflight checks against real servers: each bad setup is refused with the fix, nothing written.

Every case writes its config as a TOML file into an otherwise empty folder, with the state file,
the lake and the checkpoints at their default places beside it, and asserts afterwards that the
folder still holds only the config: a refused pipeline leaves no trace. Where a check prints a SQL
fix, the test runs that exact statement as root and checks again, so a fix that does not work (or
a check that does not notice it worked) fails the test.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_console.commands import check as check_command
from cdc_console.config import load_config
from cdc_console.errors import ConfigError, SourceError
from cdc_console.mysql.check_result import CheckResult
from cdc_console.mysql.checks import preflight, run_checks
from cdc_console.mysql.sandbox import MySQLSandbox, SandboxError, find_server_binary
from tests.conftest import CDC_PASSWORD_ENV, CDC_USER, SourceDb

pytestmark = pytest.mark.mysql

REPLICATION_GRANTS = ["REPLICATION SLAVE ON *.*", "BINLOG MONITOR ON *.*"]


def write_config(
    folder: Path,
    port: int,
    tables: list[str],
    *,
    user: str = CDC_USER,
    password_env: str = CDC_PASSWORD_ENV,
    chunk_key: dict[str, str] | None = None,
    source_extra: str = "",
) -> Path:
    """A pipeline config in ``folder``; state, lake and checkpoints default to paths beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f'"{t}"' for t in tables)
    text = (
        "[source]\n"
        f'host = "127.0.0.1"\nport = {port}\nuser = "{user}"\npassword_env = "{password_env}"\n'
        f'tables = [{listed}]\nserver_id = "5400-5410"\n{source_extra}'
    )
    if chunk_key:
        entries = ", ".join(f'"{t}" = "{c}"' for t, c in chunk_key.items())
        text += f"[snapshot]\nchunk_key = {{ {entries} }}\n"
    path = folder / "pipeline.toml"
    path.write_text(text)
    return path


def assert_nothing_written(config_path: Path) -> None:
    config = load_config(config_path)
    assert not config.state_path.exists()
    assert not config.state_path.parent.exists()
    assert not config.sink.path.exists()
    assert not config.spark.checkpoint.exists()
    assert [p.name for p in config_path.parent.iterdir()] == [config_path.name]


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def failures(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results if not r.ok}


def run_cli(config_path: Path, *extra: str) -> int:
    """``cdc-console check`` through a parser holding only this command (cli.py's wiring)."""
    parser = argparse.ArgumentParser(prog="cdc-console")
    check_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["check", "--config", str(config_path), *extra])
    return int(args.handler(args))


def root_execute(sandbox: MySQLSandbox, *statements: str) -> None:
    conn = sandbox.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def statement_of(fix: str) -> str:
    """The SQL part of a fix: everything up to and including the first ';'."""
    assert ";" in fix, fix
    return fix[: fix.index(";") + 1]


@pytest.fixture
def users(mariadb: MySQLSandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Create throw-away users on the session server (dropped afterwards); returns the factory."""
    created: list[str] = []

    def make(prefix: str, grants: list[str]) -> tuple[str, str]:
        name = f"{prefix}_{secrets.token_hex(3)}"
        password = secrets.token_urlsafe(12)
        env = f"CDC_TEST_{name.upper()}_PASSWORD"
        monkeypatch.setenv(env, password)
        mariadb.create_user(name, password, grants)
        created.append(name)
        return name, env

    yield make
    for name in created:
        root_execute(mariadb, f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")


@pytest.fixture
def shop(source_db: SourceDb) -> SourceDb:
    source_db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, amount DECIMAL(10,2))",
        "CREATE TABLE order_lines (order_id BIGINT, line INT, sku VARCHAR(20), "
        "PRIMARY KEY (order_id, line))",
        "CREATE TABLE events (code VARCHAR(32) NOT NULL, kind VARCHAR(10), note TEXT, "
        "UNIQUE KEY uq_code (code), KEY ix_kind (kind))",
        "INSERT INTO orders VALUES (1, 9.99), (2, 20.00)",
    )
    return source_db


# -- the good case -----------------------------------------------------------------------------


def test_all_checks_pass_for_least_privileged_user(
    shop: SourceDb, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = shop.name
    path = write_config(
        tmp_path / "conf", shop.sandbox.port, [f"{db}.*"], chunk_key={f"{db}.events": "code"}
    )
    config = load_config(path)
    server, tables, results = run_checks(config)

    assert [r for r in results if not r.ok] == []
    names = [r.name for r in results]
    assert names[:10] == [
        "connect",
        "server",
        "log_bin",
        "binlog_format",
        "binlog_row_image",
        "binlog_row_metadata",
        "server_id",
        "binlog_retention",
        "privilege REPLICATION SLAVE",
        "privilege BINLOG MONITOR",
    ]
    checks = by_name(results)
    assert checks["privilege REPLICATION SLAVE"].detail == (
        "the server accepted a binlog dump request"
    )
    assert checks["binlog_format"].detail == "binlog_format = ROW"
    for table in ("events", "order_lines", "orders"):
        assert checks[f"select {db}.{table}"].ok
    assert checks[f"key {db}.order_lines"].detail == (
        "primary key (order_id, line), chunks on order_id"
    )
    assert (
        checks[f"key {db}.events"].detail == "no primary key; rows told apart by code (configured)"
    )
    # said, not failed: least privilege never sees triggers; the job reports statement logging
    triggers = checks["triggers visible"]
    assert triggers.detail.startswith(f"no: '{CDC_USER}'@'127.0.0.1' cannot see the triggers")
    assert f"GRANT TRIGGER ON `{db}`.* TO '{CDC_USER}'@'127.0.0.1';" in triggers.detail

    shop.sandbox.execute(f"GRANT TRIGGER ON `{db}`.* TO '{CDC_USER}'@'127.0.0.1'")
    seen = by_name(run_checks(config)[2])["triggers visible"]
    assert seen.detail == "the reader sees the triggers of every captured schema"

    assert server is not None and server.flavour == "mariadb" and server.version >= (10, 5, 0)
    assert server.variable("binlog_row_metadata") == "FULL"
    assert {str(t.table_id): t.chunk_key for t in tables} == {
        f"{db}.events": "code",
        f"{db}.order_lines": "order_id",
        f"{db}.orders": "id",
    }

    server2, tables2, gone = preflight(config)
    assert server2.flavour == "mariadb" and tables2 == tables and gone == []

    assert run_cli(path) == 0
    out = capsys.readouterr().out
    assert "✓ privilege REPLICATION SLAVE: the server accepted a binlog dump request" in out
    assert "✗" not in out
    assert out.rstrip().endswith(f"all {len(results) + 1} checks passed")
    assert_nothing_written(path)


def test_check_json_output(
    shop: SourceDb, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, shop.sandbox.port, [f"{shop.name}.orders"])
    assert run_cli(path, "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True
    assert document["server"]["flavour"] == "mariadb"
    assert document["tables"] == [f"{shop.name}.orders"]
    assert all(c["ok"] for c in document["checks"])
    assert_nothing_written(path)


# -- credentials and privileges ----------------------------------------------------------------


def test_wrong_password_is_refused_without_leaking_it(
    shop: SourceDb,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = f"wrong-{secrets.token_hex(8)}"
    monkeypatch.setenv("CDC_TEST_WRONG_PASSWORD", secret)
    path = write_config(
        tmp_path, shop.sandbox.port, [f"{shop.name}.orders"], password_env="CDC_TEST_WRONG_PASSWORD"
    )
    config = load_config(path)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(SourceError) as info:
        preflight(config)
    error = info.value
    where = f"cdc@127.0.0.1:{shop.sandbox.port}"
    assert error.message == f"access denied for {where}: wrong user or password"
    assert "check the password in $CDC_TEST_WRONG_PASSWORD" in error.hint

    server, tables, results = run_checks(config)
    assert (server, tables) == (None, [])
    assert [(r.name, r.ok) for r in results] == [("connect", False)]

    assert run_cli(path) == 1
    text_out = capsys.readouterr()
    assert f"✗ connect: access denied for {where}: wrong user or password" in text_out.out
    assert run_cli(path, "--json") == 1
    json_out = capsys.readouterr()
    assert json.loads(json_out.out)["checks"][1]["detail"].startswith("access denied")

    leaks = [
        str(error),
        repr(error),
        error.hint,
        text_out.out + text_out.err,
        json_out.out + json_out.err,
        caplog.text,
        *(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()),
    ]
    assert all(secret not in text for text in leaks)
    assert_nothing_written(path)


def test_user_without_replication_slave(
    shop: SourceDb, users: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user, env = users("norepl", ["SELECT ON *.*", "BINLOG MONITOR ON *.*"])
    path = write_config(
        tmp_path, shop.sandbox.port, [f"{shop.name}.orders"], user=user, password_env=env
    )
    config = load_config(path)

    _, _, results = run_checks(config)
    failed = failures(results)
    assert list(failed) == ["privilege REPLICATION SLAVE"]
    result = failed["privilege REPLICATION SLAVE"]
    assert result.severity == "error"
    assert result.detail.startswith(
        f"'{user}'@'127.0.0.1' lacks REPLICATION SLAVE, needed to read the binlog"
    )
    assert result.fix == f"GRANT REPLICATION SLAVE ON *.* TO '{user}'@'127.0.0.1';"

    with pytest.raises(SourceError) as info:
        preflight(config)
    assert info.value.message == result.detail
    assert info.value.hint == result.fix

    assert run_cli(path) == 1
    out = capsys.readouterr().out
    assert f"✗ privilege REPLICATION SLAVE: '{user}'@'127.0.0.1' lacks" in out
    assert f"fix: GRANT REPLICATION SLAVE ON *.* TO '{user}'@'127.0.0.1';" in out
    assert_nothing_written(path)

    root_execute(shop.sandbox, result.fix)
    assert failures(run_checks(config)[2]) == {}


def test_user_without_binlog_monitor(shop: SourceDb, users: Any, tmp_path: Path) -> None:
    user, env = users("nomon", ["SELECT ON *.*", "REPLICATION SLAVE ON *.*"])
    path = write_config(
        tmp_path, shop.sandbox.port, [f"{shop.name}.orders"], user=user, password_env=env
    )
    config = load_config(path)

    failed = failures(run_checks(config)[2])
    assert list(failed) == ["privilege BINLOG MONITOR"]
    result = failed["privilege BINLOG MONITOR"]
    assert "may not read the binlog position" in result.detail
    assert result.fix == f"GRANT BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1';"
    with pytest.raises(SourceError, match="may not read the binlog position"):
        preflight(config)
    assert_nothing_written(path)

    root_execute(shop.sandbox, result.fix)
    assert failures(run_checks(config)[2]) == {}


def test_user_without_select_on_one_table(shop: SourceDb, users: Any, tmp_path: Path) -> None:
    db = shop.name
    # INSERT makes order_lines visible in information_schema, yet SELECT is refused.
    user, env = users(
        "nosel",
        [*REPLICATION_GRANTS, f"SELECT ON `{db}`.`orders`", f"INSERT ON `{db}`.`order_lines`"],
    )
    path = write_config(
        tmp_path,
        shop.sandbox.port,
        [f"{db}.orders", f"{db}.order_lines"],
        user=user,
        password_env=env,
    )
    config = load_config(path)

    _, tables, results = run_checks(config)
    failed = failures(results)
    assert list(failed) == [f"select {db}.order_lines"]
    result = failed[f"select {db}.order_lines"]
    assert result.detail.startswith(f"cannot read {db}.order_lines: SELECT command denied")
    assert result.fix == f"GRANT SELECT ON `{db}`.`order_lines` TO '{user}'@'127.0.0.1';"
    assert [str(t.table_id) for t in tables] == [f"{db}.orders"]
    with pytest.raises(SourceError, match="SELECT command denied"):
        preflight(config)
    assert_nothing_written(path)

    root_execute(shop.sandbox, result.fix)
    assert failures(run_checks(config)[2]) == {}


def test_password_env_unset_is_a_config_error(
    shop: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CDC_TEST_NEVER_SET", raising=False)
    path = write_config(
        tmp_path, shop.sandbox.port, [f"{shop.name}.orders"], password_env="CDC_TEST_NEVER_SET"
    )
    with pytest.raises(ConfigError) as info:
        preflight(load_config(path))
    assert "CDC_TEST_NEVER_SET (source.password_env) is not set" in info.value.message
    assert "export CDC_TEST_NEVER_SET=" in info.value.hint
    assert_nothing_written(path)


# -- server settings, on private servers (the shared one must keep its settings) ---------------


@pytest.fixture
def private_server(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """Start a private server with extra options; a cdc user and a ``shop.orders`` table on it."""
    try:
        find_server_binary()
    except SandboxError as exc:
        pytest.skip(str(exc))
    started: list[MySQLSandbox] = []

    def start(extra_args: list[str]) -> MySQLSandbox:
        folder = tmp_path_factory.mktemp("private")
        # A private tmpdir (mariadbd defaults to $TMPDIR): mariadb-install-db's bootstrap once
        # lost its '/tmp/#sql-temptable-*.MAI' file to something else sharing /tmp.
        (folder / "tmp").mkdir()
        monkeypatch.setenv("TMPDIR", str(folder / "tmp"))
        sandbox = MySQLSandbox(folder / "data", extra_args=extra_args)
        started.append(sandbox)
        sandbox.start()
        password = secrets.token_urlsafe(12)
        monkeypatch.setenv("CDC_TEST_PRIVATE_PASSWORD", password)
        sandbox.create_user(CDC_USER, password, ["SELECT ON *.*", *REPLICATION_GRANTS])
        root_execute(
            sandbox, "CREATE DATABASE shop", "CREATE TABLE shop.orders (id INT PRIMARY KEY)"
        )
        return sandbox

    yield start
    for sandbox in started:
        sandbox.stop()


def test_statement_binlog_and_partial_row_images_are_refused(
    private_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox = private_server(
        [
            "--binlog-format=STATEMENT",
            "--binlog-row-image=MINIMAL",
            "--binlog-row-metadata=MINIMAL",
            "--expire-logs-days=0.5",
        ]
    )
    path = write_config(
        tmp_path, sandbox.port, ["shop.orders"], password_env="CDC_TEST_PRIVATE_PASSWORD"
    )
    config = load_config(path)

    failed = failures(run_checks(config)[2])
    assert list(failed) == [
        "binlog_format",
        "binlog_row_image",
        "binlog_row_metadata",
        "binlog_retention",
    ]
    fmt = failed["binlog_format"]
    assert fmt.detail == (
        "binlog_format is STATEMENT, must be ROW: STATEMENT and MIXED binlogs carry SQL text, "
        "not the changed rows"
    )
    assert fmt.fix.startswith("SET GLOBAL binlog_format = 'ROW';")
    assert "add 'binlog_format = ROW' under [mysqld] in my.cnf" in fmt.fix
    assert failed["binlog_row_image"].detail.startswith("binlog_row_image is MINIMAL, must be FULL")
    meta = failed["binlog_row_metadata"]
    assert meta.detail == (
        "binlog_row_metadata is MINIMAL, must be FULL: without it binlog row events carry no "
        "column names"
    )
    assert meta.fix.startswith("SET GLOBAL binlog_row_metadata = FULL;")
    assert "add 'binlog_row_metadata = FULL' under [mysqld] in my.cnf" in meta.fix
    retention = failed.pop("binlog_retention")
    assert retention.severity == "warning"  # shown, but does not block (3 failures below)
    assert retention.detail.startswith("binlogs are purged after 12.0 h")
    assert retention.fix.startswith("SET GLOBAL binlog_expire_logs_seconds = 604800;")
    assert all(r.severity == "error" for r in failed.values())

    with pytest.raises(SourceError) as info:
        preflight(config)
    message = info.value.message
    assert message.startswith("3 preflight checks failed:")
    assert "✗ binlog_format: binlog_format is STATEMENT, must be ROW" in message
    assert "fix: SET GLOBAL binlog_row_metadata = FULL;" in message

    assert run_cli(path) == 1
    out = capsys.readouterr().out
    assert "✗ binlog_format: binlog_format is STATEMENT" in out
    assert "⚠ binlog_retention: binlogs are purged after 12.0 h" in out
    assert out.splitlines()[-1].startswith("3 of ")
    assert out.splitlines()[-1].endswith(" checks failed, 1 warning(s)")
    assert_nothing_written(path)

    # The printed statements are the fix: run them on this private server and check again.
    root_execute(sandbox, *(statement_of(r.fix) for r in [*failed.values(), retention]))
    assert failures(run_checks(config)[2]) == {}


def test_binlog_off_is_refused(private_server: Any, tmp_path: Path) -> None:
    sandbox = private_server(["--skip-log-bin"])
    path = write_config(
        tmp_path, sandbox.port, ["shop.orders"], password_env="CDC_TEST_PRIVATE_PASSWORD"
    )
    config = load_config(path)
    results = run_checks(config)[2]
    blocking = [r.name for r in results if r.blocking]
    assert blocking == ["log_bin"]
    log_bin = by_name(results)["log_bin"]
    assert log_bin.detail.startswith("binary logging is off (log_bin = OFF)")
    assert "add 'log_bin = binlog'" in log_bin.fix and "restart" in log_bin.fix
    assert by_name(results)["privilege BINLOG MONITOR"].severity == "warning"
    with pytest.raises(SourceError, match="binary logging is off"):
        preflight(config)
    assert_nothing_written(path)


def test_server_id_range_must_exclude_the_servers_own(shop: SourceDb, tmp_path: Path) -> None:
    path = write_config(tmp_path, shop.sandbox.port, [f"{shop.name}.orders"])
    path.write_text(path.read_text().replace('server_id = "5400-5410"', 'server_id = "1-5"'))
    with pytest.raises(ConfigError) as info:
        preflight(load_config(path))
    assert info.value.message.startswith(
        "source.server_id range 1-5 includes the server's own server_id 1"
    )
    assert 'set source.server_id to a range that excludes 1, e.g. "5401-5405"' in info.value.hint
    assert_nothing_written(path)


# -- tables and keys -----------------------------------------------------------------------------


def test_unknown_tables_are_all_reported(shop: SourceDb, tmp_path: Path) -> None:
    db = shop.name
    missing_db = f"nodb_{secrets.token_hex(3)}"
    path = write_config(
        tmp_path,
        shop.sandbox.port,
        [f"{db}.orders", f"{db}.ordrs", f"{missing_db}.*", f"{db}.zz_*"],
    )
    config = load_config(path)
    _, tables, results = run_checks(config)
    failed = failures(results)
    assert list(failed) == [f"table {db}.ordrs", f"table {missing_db}.*", f"table {db}.zz_*"]
    assert failed[f"table {db}.ordrs"].detail == (
        f"table {db}.ordrs (source.tables) does not exist, is a view, or the source user "
        "cannot see it"
    )
    assert failed[f"table {db}.ordrs"].fix == (
        f"correct the name in source.tables, or if it exists: GRANT SELECT ON `{db}`.`ordrs` TO "
        "'cdc'@'127.0.0.1';"
    )
    assert f"database {missing_db} has no tables" in failed[f"table {missing_db}.*"].detail
    assert failed[f"table {db}.zz_*"].detail == (
        f"source.tables entry '{db}.zz_*' matches none of the 3 tables in {db}"
    )
    assert all(r.area == "config" for r in failed.values())
    assert [str(t.table_id) for t in tables] == [f"{db}.orders"]

    with pytest.raises(ConfigError) as info:
        preflight(config)
    assert info.value.message.startswith("3 preflight checks failed:")
    assert f"✗ table {db}.ordrs: table {db}.ordrs (source.tables) does not exist" in (
        info.value.message
    )
    assert_nothing_written(path)


def test_empty_database_is_refused(shop: SourceDb, tmp_path: Path) -> None:
    empty = f"empty_{secrets.token_hex(3)}"
    root_execute(shop.sandbox, f"CREATE DATABASE `{empty}`")
    try:
        path = write_config(tmp_path, shop.sandbox.port, [f"{empty}.*"])
        with pytest.raises(ConfigError) as info:
            preflight(load_config(path))
        assert info.value.message == (
            f"source.tables entry '{empty}.*': database {empty} has no tables (or does not exist, "
            "or the source user cannot see it)"
        )
        assert_nothing_written(path)
    finally:
        root_execute(shop.sandbox, f"DROP DATABASE `{empty}`")


def test_a_chunk_key_naming_no_column_is_refused(shop: SourceDb, tmp_path: Path) -> None:
    table = f"{shop.name}.events"
    path = write_config(
        tmp_path, shop.sandbox.port, [table, f"{shop.name}.orders"], chunk_key={table: "nope"}
    )
    config = load_config(path)
    _, tables, results = run_checks(config)
    failed = failures(results)
    assert list(failed) == [f"key {table}"]
    result = failed[f"key {table}"]
    assert result.detail == (
        f"snapshot.chunk_key names column 'nope', which {table} does not have "
        "(columns: code, kind, note)"
    )
    assert result.fix == f"correct the column name in snapshot.chunk_key for {table}"
    assert [str(t.table_id) for t in tables] == [f"{shop.name}.orders"]
    with pytest.raises(ConfigError) as info:
        preflight(config)
    assert info.value.message == result.detail
    assert_nothing_written(path)


@pytest.mark.parametrize(
    ("chunk_key", "detail", "severity"),
    [
        (None, "no primary key; rows told apart by code (its own UNIQUE index)", ""),
        (
            "kind",
            "no unique key: rows are told apart by their whole content, duplicates counted "
            "(_cdc_count in the mirror); chunks on kind, which is nullable: rows where it is "
            "NULL are all read with the first chunk",
            "warning",
        ),
    ],
)
def test_a_table_without_a_primary_key_is_keyed_by_its_unique_column_or_counted(
    shop: SourceDb, tmp_path: Path, chunk_key: str | None, detail: str, severity: str
) -> None:
    """Never refused for want of a key: a NOT NULL column with its own UNIQUE index keys it
    without configuration, and a configured column that is not unique makes it counted."""
    table = f"{shop.name}.events"
    path = write_config(
        tmp_path, shop.sandbox.port, [table], chunk_key={table: chunk_key} if chunk_key else None
    )
    config = load_config(path)
    _, tables, results = run_checks(config)
    result = by_name(results)[f"key {table}"]
    assert result.detail == detail
    assert (result.ok, result.severity if not result.ok else "") == (not severity, severity)
    (schema,) = tables
    assert schema.counted == (chunk_key == "kind")
    assert schema.key_columns == (("code", "kind", "note") if schema.counted else ("code",))
    preflight(config)


def test_nullable_chunk_key_on_keyed_table_warns_but_passes(shop: SourceDb, tmp_path: Path) -> None:
    shop.execute("CREATE TABLE loose (id INT PRIMARY KEY, ref INT NULL)")
    table = f"{shop.name}.loose"
    path = write_config(tmp_path, shop.sandbox.port, [table], chunk_key={table: "ref"})
    config = load_config(path)
    failed = failures(run_checks(config)[2])
    assert list(failed) == [f"key {table}"]
    assert failed[f"key {table}"].severity == "warning"
    assert "rows whose chunk key is NULL are all read with the first chunk" in (
        failed[f"key {table}"].detail
    )
    _, tables, _ = preflight(config)
    assert tables[0].chunk_key == "ref"
    assert_nothing_written(path)


def test_malformed_config_is_one_failed_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text('[source]\ntables = ["a.b"]\nhots = "x"\n')
    assert run_cli(path) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(
        "✗ config: unknown key source.hots — fix: did you mean hosts? (valid in [source]: "
    )
    path.write_text("[source\n")
    assert run_cli(path, "--json") == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False
    assert document["checks"][0]["name"] == "config"
    assert "is not valid TOML" in document["checks"][0]["detail"]
    assert [p.name for p in tmp_path.iterdir()] == ["pipeline.toml"]


def test_names_in_another_case_are_resolved_or_named(shop: SourceDb, tmp_path: Path) -> None:
    """Column names are case-insensitive in SQL, so a chunk key in another case names its
    column; table names are case-sensitive on this server, so the refusal names the table."""
    table = f"{shop.name}.events"
    path = write_config(tmp_path, shop.sandbox.port, [table], chunk_key={table: "CODE"})
    _, tables, results = run_checks(load_config(path))
    assert by_name(results)[f"key {table}"].detail == (
        "no primary key; rows told apart by code (configured)"
    )
    assert [t.chunk_key for t in tables] == ["code"]

    path = write_config(tmp_path / "cased", shop.sandbox.port, [f"{shop.name}.EVENTS"])
    with pytest.raises(ConfigError) as info:
        preflight(load_config(path))
    assert f"table {shop.name}.EVENTS (source.tables) does not exist; {table} does" in (
        info.value.message
    )
    assert info.value.hint == f'write "{table}" in source.tables'


def test_check_names_a_mask_or_exclusion_it_cannot_apply_and_the_missing_key(
    shop: SourceDb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = shop.name
    monkeypatch.delenv("CDC_MASK_KEY", raising=False)
    path = write_config(tmp_path / "conf", shop.sandbox.port, [f"{db}.*"])
    path.write_text(
        path.read_text()
        + "[pipeline]\n"
        + f'exclude_columns = {{ "{db}.orders" = ["id"] }}\n'
        + f'mask_columns = {{ "{db}.events" = {{ note = "sha256" }}, '
        + f'"{db}.order_lines" = {{ skew = "redact" }} }}\n'
    )
    failed = failures(run_checks(load_config(path))[2])
    assert set(failed) == {f"table {db}.orders", f"table {db}.events", f"table {db}.order_lines"}
    assert "leaves out id of" in failed[f"table {db}.orders"].detail
    assert "$CDC_MASK_KEY (its key) is not set" in failed[f"table {db}.events"].detail
    assert "export CDC_MASK_KEY=" in (failed[f"table {db}.events"].fix or "")
    assert "names skew of" in failed[f"table {db}.order_lines"].detail
