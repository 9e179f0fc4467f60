"""The sandbox's Unix socket path always fits a socket address, however deep its folder."""

from __future__ import annotations

import os
from pathlib import Path

from cdc_console.mysql.sandbox import MySQLSandbox


def test_a_shallow_data_directory_keeps_its_socket_inside(tmp_path: Path) -> None:
    sandbox = MySQLSandbox(Path("/tmp/s/data"))
    assert sandbox.socket_path == Path("/tmp/s/data/mysqld.sock")


def test_a_deep_data_directory_gets_a_short_socket_every_process_can_find(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "mysql"
    first, again = MySQLSandbox(deep), MySQLSandbox(deep)
    other = MySQLSandbox(tmp_path / ("d" * 60) / ("e" * 60) / "other")
    assert len(os.fsencode(first.socket_path)) < 108
    assert first.socket_path == again.socket_path != other.socket_path
