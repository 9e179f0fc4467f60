"""The GTID state after an event group, as a bounded window's end carries it (MariaDB, MySQL)."""

from __future__ import annotations

import pytest

from cdc_console.mysql.window_end import add_gtid

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    ("state", "info", "after"),
    [
        ("0-1-26", "BEGIN GTID 0-1-27", "0-1-27"),
        ("0-1-26", "GTID 0-2-27 cid=41", "0-2-27"),
        ("0-1-26,7-1-3", "BEGIN GTID 7-1-4", "0-1-26,7-1-4"),
        ("0-1-26", "BEGIN GTID 7-1-1", "0-1-26,7-1-1"),
        ("", "GTID 0-1-1", "0-1-1"),
    ],
)
def test_mariadb_keeps_the_last_gtid_per_domain(state: str, info: str, after: str) -> None:
    assert set(add_gtid(state, info).split(",")) == set(after.split(","))


@pytest.mark.parametrize(
    ("state", "number", "after"),
    [
        (f"{UUID}:1-5", 6, f"{UUID}:1-6"),
        (f"{UUID}:1-5:7-9", 6, f"{UUID}:1-9"),
        (f"{UUID}:1-5", 8, f"{UUID}:1-5:8"),
        (f"{UUID.upper()}:1-5,\n{OTHER}:1-2", 6, f"{OTHER}:1-2,{UUID}:1-6"),
        ("", 1, f"{UUID}:1"),
    ],
)
def test_mysql_adds_to_the_set(state: str, number: int, after: str) -> None:
    info = f"SET @@SESSION.GTID_NEXT= '{UUID}:{number}'"
    assert add_gtid(state, info) == after


def test_an_anonymous_group_leaves_the_state_alone() -> None:
    assert add_gtid(f"{UUID}:1-5", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'") == f"{UUID}:1-5"
