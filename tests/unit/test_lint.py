"""ruff and mypy run as part of the test command, so CI fails on lint or type errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True)


def test_ruff_check() -> None:
    result = _run(str(BIN / "ruff"), "check", "cdc_console", "tests", "jobs")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", "cdc_console", "tests", "jobs")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
