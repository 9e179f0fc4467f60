"""How the console is reached: ``cdc-console`` alone, ``cdc-console console``, and what it imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdc_console import cli
from cdc_console.commands import console


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    calls: list[tuple[list[str], str]] = []
    monkeypatch.setattr(
        console, "run_console", lambda paths, screen="tables": calls.append((list(paths), screen))
    )
    return calls


def test_no_command_and_no_config_prints_help(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    opened: list[tuple[list[str], str]],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(console.CONFIG_ENV, raising=False)
    assert cli.main([]) == 0
    assert "usage: cdc-console" in capsys.readouterr().out
    assert opened == []


def test_no_command_opens_the_console_on_found_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[tuple[list[str], str]]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(console.CONFIG_ENV, "a.toml:b.toml")
    assert cli.main([]) == 0
    assert opened == [(["a.toml", "b.toml"], "tables")]


def test_console_command_takes_several_configs(opened: list[tuple[list[str], str]]) -> None:
    assert (
        cli.main(["console", "--config", "a.toml", "--config", "b.toml", "--screen", "jobs"]) == 0
    )
    assert opened == [(["a.toml", "b.toml"], "jobs")]


def test_console_without_any_config_says_how(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(console.CONFIG_ENV, raising=False)
    assert cli.main(["console"]) == 2
    err = capsys.readouterr().err
    assert "no pipeline config to watch" in err and "--config" in err


def test_two_configs_with_one_name_are_refused(tmp_path: Path) -> None:
    from cdc_console.errors import CdcError
    from cdc_console.tui.data.monitor import open_monitors

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "shop.toml").write_text('[source]\ntables = ["shop.*"]\n')
    with pytest.raises(CdcError, match="both named 'shop'"):
        open_monitors([tmp_path / "a" / "shop.toml", tmp_path / "b" / "shop.toml"])


def test_the_console_does_not_import_spark() -> None:
    code = (
        "import sys, cdc_console.tui.app, cdc_console.commands.console\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
