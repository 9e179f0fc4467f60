"""The benches' first line: the machine, its load, and which row decoders ours runs."""

from __future__ import annotations

import pytest

from cdc_console.bench.common import machine_line


def test_the_machine_line_says_which_row_decoders_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_CONSOLE_PURE_PYTHON_ROWS", "1")
    assert machine_line().endswith("row decoders pure Python (CDC_CONSOLE_PURE_PYTHON_ROWS=1)")
    monkeypatch.delenv("CDC_CONSOLE_PURE_PYTHON_ROWS")
    assert machine_line().endswith("row decoders compiled")
