"""The benches' first line: the machine, its load, and which row decoders ours runs."""

from __future__ import annotations

import re

import pytest

from cdc_console.bench.common import machine_line


def test_the_machine_line_says_which_row_decoders_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_CONSOLE_PURE_PYTHON_ROWS", "1")
    assert machine_line().endswith("row decoders pure Python (CDC_CONSOLE_PURE_PYTHON_ROWS=1)")
    monkeypatch.delenv("CDC_CONSOLE_PURE_PYTHON_ROWS")
    assert machine_line().endswith("row decoders compiled")


def test_the_machine_line_gives_the_disk_readahead_a_peak_rss_depends_on() -> None:
    line = machine_line()
    assert re.search(r"; disk readahead ([0-9,]+ KiB|unknown); ", line), line
