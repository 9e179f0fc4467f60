"""One exit code per kind of outcome, so a script can tell a typo from an outage from a bug.

Each code is reached here through the real CLI entry point (``cli.main``), and the table a
user reads (``--help`` and the README) is checked against ``ExitCode`` itself.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from cdc_console import cli
from cdc_console.errors import (
    CdcError,
    ConfigError,
    ExitCode,
    SourceError,
    SourceUnreachableError,
    UsageError,
    register_secret,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def test_each_kind_of_error_has_its_own_code() -> None:
    assert len({int(c) for c in ExitCode}) == len(ExitCode)
    assert UsageError("x").exit_code == ExitCode.USAGE == 2
    assert ConfigError("x").exit_code == ExitCode.CONFIG
    assert CdcError("x").exit_code == ExitCode.OPERATOR_ACTION
    assert SourceError("refused").exit_code == ExitCode.OPERATOR_ACTION
    assert SourceError("lost", transient=True).exit_code == ExitCode.SOURCE_UNREACHABLE
    assert SourceUnreachableError("gone").exit_code == ExitCode.SOURCE_UNREACHABLE


def test_help_and_readme_list_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    readme = README.read_text()
    for code in ExitCode:
        assert re.search(rf"^\s+{int(code)}\s+{re.escape(code.meaning)}$", text, re.M), code
        assert re.search(rf"^\| {int(code)} \|", readme, re.M), f"README lacks exit code {code}"


def test_a_wrong_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["status", "--no-such-option"])
    assert done.value.code == ExitCode.USAGE
    assert cli.main(["verify", "--config", "x.toml", "--chunk", "3"]) == ExitCode.USAGE
    assert "--chunk needs --table" in capsys.readouterr().err


def test_a_broken_config_is_a_config_error_also_for_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "p.toml"
    broken.write_text("[source\ntables = \n")
    assert cli.main(["status", "--config", str(broken)]) == ExitCode.CONFIG
    assert "error:" in capsys.readouterr().err
    assert cli.main(["status", "--config", str(broken), "--json"]) == ExitCode.CONFIG
    document = json.loads(capsys.readouterr().out)
    assert document["exit_code"] == ExitCode.CONFIG and document["ran"] is None
    assert cli.main(["status", "--config", str(tmp_path / "missing.toml")]) == ExitCode.CONFIG


def test_an_unexpected_exception_is_an_internal_error_with_its_trace_and_no_secret(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    register_secret("s3cr3t-pw")

    def crash(args: argparse.Namespace) -> int:
        raise RuntimeError("unexpected: password s3cr3t-pw in a driver message")

    real = cli.build_parser

    def parser_with_crash() -> argparse.ArgumentParser:
        parser = real()
        parser.set_defaults(handler=crash)
        return parser

    monkeypatch.setattr(cli, "build_parser", parser_with_crash)
    assert cli.main(["--verbose"]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError" in err
    assert "internal error" in err and "report it" in err
    assert "s3cr3t-pw" not in err


def test_a_job_failure_of_the_jvm_needs_a_person_and_one_of_python_is_a_bug() -> None:
    from cdc_console.spark.job import error_from_failure

    jvm = error_from_failure(RuntimeError("java.lang.OutOfMemoryError: Java heap space\n\tat x"))
    assert jvm.exit_code == ExitCode.OPERATOR_ACTION
    bug = error_from_failure(KeyError("batch_no"))
    assert bug.exit_code == ExitCode.INTERNAL and "KeyError" not in bug.hint
