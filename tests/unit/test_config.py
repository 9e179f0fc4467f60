"""Bad input to the config loader: every mistake names the key and the fix, no server needed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cdc_console.config import SourceConfig, TablePattern, load_config
from cdc_console.errors import ConfigError, redact

MINIMAL = """
[source]
tables = ["shop.orders"]
"""


def write(tmp_path: Path, text: str, name: str = "pipeline.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return info.value


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.name == "pipeline"  # from the file name
    assert config.source.tables == (TablePattern("shop", "orders"),)
    assert config.source.port == 3306
    assert config.source.server_ids == range(5400, 5405)
    assert config.snapshot.startup_mode == "initial"
    assert config.sink.kind == "delta"


def test_missing_file_names_path_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml")
    assert "nope.toml does not exist" in info.value.message
    assert "--config" in info.value.hint


def test_bad_toml_names_the_line(tmp_path: Path) -> None:
    error = load_error(tmp_path, '[source]\ntables = ["a.b"\nport = 1\n')
    assert "is not valid TOML" in error.message
    assert "line" in error.message
    assert "fix the syntax" in error.hint


def test_not_utf8_is_reported_as_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[source]\ntables = ["caf\xe9.t"]\n')
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(path)


def test_unknown_key_in_section_lists_valid_keys(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + 'hots = "db.example"\n')
    assert error.message == "unknown key source.hots"
    assert "host" in error.hint and "password_env" in error.hint


def test_unknown_top_level_section(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + "[sinks]\nkind = 'delta'\n")
    assert error.message == "unknown section or key 'sinks'"
    assert "[sink]" in error.hint


def test_section_that_is_not_a_table(tmp_path: Path) -> None:
    error = load_error(tmp_path, 'snapshot = 5\n[source]\ntables = ["a.b"]\n')
    assert error.message == "[snapshot] must be a table"


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ('port = "3306"', "source.port must be an integer, got str"),
        ("port = true", "source.port must be an integer, not a boolean"),
        ("host = 127", "source.host must be a string, got int"),
        ("connect_timeout = 'soon'", "source.connect_timeout must be an integer or a number"),
        ('tables = "shop.orders"', "source.tables must be a list, got str"),
    ],
)
def test_wrong_type_names_key_and_expected_type(tmp_path: Path, snippet: str, message: str) -> None:
    base = "[source]\n" if snippet.startswith("tables") else MINIMAL
    error = load_error(tmp_path, base + snippet + "\n")
    assert error.message.startswith(message)
    key = snippet.split(" ")[0]
    assert f"source.{key}" in error.hint


def test_wrong_type_in_other_sections(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + "[snapshot]\nchunk_size = 10.5\n")
    assert error.message == "snapshot.chunk_size must be an integer, got float"
    error = load_error(tmp_path, MINIMAL + "[sink]\nchangelog = 'yes'\n")
    assert error.message == "sink.changelog must be true or false, got str"


def test_tables_entries_must_be_db_dot_table(tmp_path: Path) -> None:
    error = load_error(tmp_path, '[source]\ntables = ["orders"]\n')
    assert "'orders' is not 'database.table'" in error.message
    error = load_error(tmp_path, '[source]\ntables = ["*.orders"]\n')
    assert "'*.orders' is not 'database.table'" in error.message
    error = load_error(tmp_path, "[source]\ntables = [1]\n")
    assert error.message == "source.tables entry 1 must be a string"
    error = load_error(tmp_path, "[source]\ntables = []\n")
    assert error.message == "source.tables is missing or empty"


def test_out_of_range_and_enum_values(tmp_path: Path) -> None:
    assert "out of range" in load_error(tmp_path, MINIMAL + "port = 70000\n").message
    error = load_error(tmp_path, MINIMAL + "[snapshot]\nstartup_mode = 'earliest'\n")
    assert "startup_mode 'earliest' is not one of initial" in error.message
    error = load_error(tmp_path, MINIMAL + "[sink]\nkind = 'kafka'\n")
    assert "sink.kind 'kafka' is not one of delta, changelog-json" in error.message
    error = load_error(tmp_path, MINIMAL + 'time_zone = "Mars; DROP"\n')
    assert "is not a zone" in error.message


def test_relative_paths_resolve_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = MINIMAL + (
        '[sink]\npath = "out/lake"\n[state]\npath = "state/p.sqlite"\n'
        '[spark]\ncheckpoint = "ckpt"\n'
    )
    # A relative --config path, loaded from a different working directory.
    config = load_config(Path("..") / "conf" / write(folder, text).name)
    assert config.sink.path == folder.resolve() / "out" / "lake"
    assert config.state_path == folder.resolve() / "state" / "p.sqlite"
    assert config.spark.checkpoint == folder.resolve() / "ckpt"
    assert config.path == folder.resolve() / "pipeline.toml"


def test_default_paths_also_live_beside_the_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.sink.path == tmp_path.resolve() / "lake"
    assert config.state_path == tmp_path.resolve() / "state" / "pipeline.sqlite"


def test_absolute_and_home_paths_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "abs" / "lake"
    config = load_config(
        write(tmp_path, MINIMAL + f'[sink]\npath = "{target}"\n[state]\npath = "~/s.sqlite"\n')
    )
    assert config.sink.path == target
    assert config.state_path == Path.home() / "s.sqlite"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"5400-5404"', range(5400, 5405)),
        ('" 6000 - 6010 "', range(6000, 6011)),
        ('"7000-7002"', range(7000, 7003)),  # exactly parallelism 2 + 1 binlog reader
    ],
)
def test_server_id_range_parsing(tmp_path: Path, value: str, expected: range) -> None:
    config = load_config(write(tmp_path, MINIMAL + f"server_id = {value}\n"))
    assert config.source.server_ids == expected
    assert (config.source.server_id_min, config.source.server_id_max) == (
        expected.start,
        expected.stop - 1,
    )


@pytest.mark.parametrize("value", ["9000", '"9000"', '"9000-9001"'])
def test_server_id_range_too_small_for_parallelism(tmp_path: Path, value: str) -> None:
    # A bare id (integer or string) parses as a one-id range; every concurrent reader needs its
    # own id, so it cannot serve parallelism 2 plus the binlog reader.
    error = load_error(tmp_path, MINIMAL + f"server_id = {value}\n")
    assert "ids but snapshot.parallelism = 2 needs 3" in error.message
    assert 'widen server_id to "9000-9002"' in error.hint


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"abc"', "source.server_id 'abc' is neither a number nor a range"),
        ('"5400-"', "source.server_id '5400-' is neither a number nor a range"),
        ('"-5"', "source.server_id '-5' is neither a number nor a range"),
        ('"5404-5400"', "source.server_id range '5404-5400' is empty or includes 0"),
        ('"0-4"', "source.server_id range '0-4' is empty or includes 0"),
    ],
)
def test_bad_server_id_ranges(tmp_path: Path, value: str, message: str) -> None:
    error = load_error(tmp_path, MINIMAL + f"server_id = {value}\n")
    assert error.message == message
    assert "server_id" in error.hint or "range of positive ids" in error.hint


def test_password_is_not_accepted_in_config(tmp_path: Path) -> None:
    secret = "hunter2-in-config"
    error = load_error(tmp_path, MINIMAL + f'password = "{secret}"\n')
    assert "source.password is not accepted" in error.message
    assert "password_env" in error.hint
    assert secret not in str(error)


def test_password_env_unset_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_TEST_UNSET_PASSWORD", raising=False)
    source = SourceConfig(password_env="CDC_TEST_UNSET_PASSWORD")
    with pytest.raises(ConfigError) as info:
        source.password()
    assert "CDC_TEST_UNSET_PASSWORD (source.password_env) is not set" in info.value.message
    assert "export CDC_TEST_UNSET_PASSWORD=" in info.value.hint


def test_password_from_env_is_registered_for_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_TEST_SET_PASSWORD", "s3cr3t-value-42")
    source = SourceConfig(password_env="CDC_TEST_SET_PASSWORD")
    assert source.password() == "s3cr3t-value-42"
    assert "s3cr3t-value-42" not in redact("login failed with s3cr3t-value-42")
    assert "password" not in source.connection_kwargs()


def test_chunk_key_must_name_a_table_and_a_column(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL + '[snapshot]\nchunk_key = { "orders" = "id" }\n')
    assert "'orders' is not 'database.table'" in error.message
    error = load_error(tmp_path, MINIMAL + '[snapshot]\nchunk_key = { "shop.orders" = 1 }\n')
    assert error.message == "snapshot.chunk_key for shop.orders must be a column name"


def test_source_outage_seconds_travels_with_the_source(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, MINIMAL)).source.outage_seconds == 600
    config = load_config(write(tmp_path, MINIMAL + "[pipeline]\nsource_outage_seconds = 45\n"))
    assert config.source.outage_seconds == 45
    error = load_error(tmp_path, MINIMAL + "[pipeline]\nsource_outage_seconds = -1\n")
    assert error.message == "pipeline.source_outage_seconds -1 is negative"


def test_source_hosts_and_position(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.source.endpoints() == (("127.0.0.1", 3306),)
    assert config.source.position == "auto"
    text = MINIMAL + 'hosts = ["db1:3307", "db2"]\nposition = "gtid"\n'
    source = load_config(write(tmp_path, text)).source
    assert source.endpoints() == (("db1", 3307), ("db2", 3306))
    assert source.position == "gtid"
    assert source.pinned("db2", 3306).endpoints() == (("db2", 3306),)
    error = load_error(tmp_path, MINIMAL + 'hosts = ["db1:port"]\n')
    assert error.message == "source.hosts entry 'db1:port' is not host:port"
    error = load_error(tmp_path, MINIMAL + 'position = "lsn"\n')
    assert error.message == "source.position 'lsn' is not one of auto, gtid, file"


def test_every_problem_is_reported_at_once_with_ranges_and_the_nearest_key(
    tmp_path: Path,
) -> None:
    error = load_error(
        tmp_path,
        '[source]\ntables = ["shop.*"]\nhosst = "db"\nconect_timeout = 5\n'
        "[snapshot]\nchunk_size = 0\nstartup_mode = 'sometimes'\n"
        "[spark]\ntrigger_seconds = -5\n[pipeline]\nheartbeat_seconds = 0\n[sinks]\n",
    )
    lines = error.message.splitlines()
    assert lines[0] == "7 problems in the config:"
    problems = [
        line.split(". ", 1)[1] for line in lines[1:] if not line.lstrip().startswith("fix:")
    ]
    assert problems == [
        "unknown section or key 'sinks'",
        "unknown key source.conect_timeout",
        "unknown key source.hosst",
        "snapshot.chunk_size must be at least 1",
        "snapshot.startup_mode 'sometimes' is not one of initial, latest-offset, snapshot-only",
        "spark.trigger_seconds must be above 0 (got -5)",
        "pipeline.heartbeat_seconds must be above 0 (got 0)",
    ]
    fixes = [line.strip() for line in lines if line.lstrip().startswith("fix:")]
    assert fixes[0].startswith("fix: did you mean [sink]?")
    assert fixes[1].startswith("fix: did you mean connect_timeout?")
    assert fixes[2].startswith("fix: did you mean host?")
    assert "password," not in error.message and "password_env" in error.message


def test_check_reports_them_all(tmp_path: Path, capsys: object) -> None:
    from cdc_console.cli import main

    path = tmp_path / "p.toml"
    path.write_text(MINIMAL + "[spark]\ntrigger_seconds = -5\n[pipeline]\nheartbeat_seconds = 0\n")
    assert main(["check", "--config", str(path)]) == 1
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "2 problems in the config:" in out and "trigger_seconds" in out and "heartbeat" in out


def test_problems_that_used_to_stop_the_check_are_reported_together(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        '[source]\ntables = ["shop.*", "nodot", 7]\nport = 0\nserver_id = "9-3"\n'
        'time_zone = "Mars/Olympus Mons"\nhosts = ["db1:99999"]\n'
        "[pipeline]\nsource_outage_seconds = -1\nlog_format = 'xml'\n"
        "[snapshot]\nchunks_per_batch = 0\ndistribution_factor_lower = 5\n"
        "distribution_factor_upper = 2\n[spark]\nui_port = 70000\n"
        '[lake]\ntarget_file_size = "huge"\nvacuum_every = "soon"\n'
        "[verify]\nrows_per_second = -1\n[console]\nlag_warn_seconds = 0\n",
    )
    lines = error.message.splitlines()
    problems = [x.split(". ", 1)[1] for x in lines[1:] if not x.lstrip().startswith("fix:")]
    expected = [
        "source.tables entry 7 must be a string",
        "source.tables entry 'nodot' is not 'database.table'",
        "source.port 0 is out of range",
        "source.server_id range '9-3' is empty or includes 0",
        "pipeline.source_outage_seconds -1 is negative",
        "source.hosts entry 'db1:99999' is not host:port",
        "source.time_zone 'Mars/Olympus Mons' is not a zone",
        "snapshot.chunks_per_batch must be at least 1",
        "snapshot.distribution_factor_lower (5) is above distribution_factor_upper (2)",
        "spark.ui_port 70000 is out of range",
        "pipeline.log_format 'xml' is not one of text, json",
        "console.lag_warn_seconds must be above 0 (got 0)",
        "lake.target_file_size 'huge' is not a size",
        "lake.vacuum_every 'soon' is not a duration",
        "verify.rows_per_second -1 is negative",
    ]
    assert sorted(problems) == sorted(expected), problems
    assert lines[0] == f"{len(expected)} problems in the config:"
