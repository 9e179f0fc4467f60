"""A source user who may not list binlog events gets unbounded windows read by one task, and one
warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pymysql
import pytest

from cdc_console.config import config_from_dict
from cdc_console.core.offset import BinlogOffset
from cdc_console.spark import planner as planner_module
from cdc_console.spark.planner import Planner

START = BinlogOffset("binlog.000001", 4)
HEAD = BinlogOffset("binlog.000001", 1 << 30)


def _listing_fails(monkeypatch: pytest.MonkeyPatch, error: Exception) -> list[str]:
    """Make every ``SHOW BINLOG EVENTS`` of the planner fail with ``error``; returns the calls."""
    calls: list[str] = []

    def refuse(*_args: object) -> BinlogOffset:
        calls.append("called")
        raise error

    monkeypatch.setattr(planner_module, "bounded_window_end", refuse)
    monkeypatch.setattr(planner_module, "transaction_starts", refuse)
    monkeypatch.setattr(Planner, "_connection", lambda self: None)
    return calls


def test_denied_listing_leaves_the_window_unbounded_and_whole_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    denied = pymysql.err.OperationalError(
        1227, "Access denied; you need (at least one of) the BINLOG MONITOR privilege(s)"
    )
    calls = _listing_fails(monkeypatch, denied)
    planner = Planner(config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path))
    try:
        with caplog.at_level(logging.WARNING):
            assert planner._part_starts(START, HEAD, [1 << 20]) == []
            assert planner._window_end(START, HEAD) == HEAD
            assert planner._window_end(START, HEAD) == HEAD
            assert planner._part_starts(START, HEAD, [1 << 20]) == []
    finally:
        planner.close()
    assert calls == ["called"]
    warnings = [r.getMessage() for r in caplog.records if "neither bounded" in r.getMessage()]
    assert len(warnings) == 1
    assert "GRANT" in warnings[0] and "BINLOG MONITOR" in warnings[0]


def test_other_failures_surface_for_the_planner_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
    _listing_fails(monkeypatch, lost)
    planner = Planner(config_from_dict({"source": {"tables": ["shop.*"]}}, base=tmp_path))
    try:
        with pytest.raises(pymysql.err.OperationalError):
            planner._window_end(START, HEAD)
        with pytest.raises(pymysql.err.OperationalError):
            planner._part_starts(START, HEAD, [1 << 20])
    finally:
        planner.close()
