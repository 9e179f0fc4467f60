"""Zero and invalid dates follow the configured rule (``[pipeline] invalid_dates``) through the
snapshot, the binlog and ``verify`` alike, per type, table and column; a changed rule reads
its table again so old rows follow it too, and the other table is left alone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cdc_console.core.lifecycle import Lifecycle
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    events,
    load,
    mirror_rows,
    running,
    wait_for,
    write_config,
)
from tests.integration.test_table_control import all_in, caught_up_now, cli, tables_state
from tests.integration.test_verify import verify

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DAY = dt.date(1, 1, 1)
MIDNIGHT = dt.datetime(1, 1, 1)
INVALID = "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'"


def rules(db: SourceDb, t2: str) -> str:
    return (
        "[pipeline]\n"
        'invalid_dates = { date = "sentinel", datetime = "sentinel" }\n'
        f'invalid_dates_for = {{ "{db.name}.t2" = {t2}, "{db.name}.t3" = "text" }}\n'
    )


def dates(config_path: Path, db: SourceDb, table: str) -> list[tuple[object, ...]]:
    """The mirror's rows as tuples; a TIMESTAMP as ("ts", is it NULL) (its value depends on the
    server's zone)."""
    rows = mirror_rows(load(config_path), db.name, table, "id")
    return [tuple(("ts", v is None) if k == "ts" else v for k, v in row.items()) for row in rows]


def test_invalid_dates_follow_one_rule_on_every_path(source_db: SourceDb, tmp_path: Path) -> None:
    db = source_db
    db.execute(
        "CREATE TABLE t1 (id INT PRIMARY KEY, d DATE, dt DATETIME(3), "
        "ts TIMESTAMP NULL DEFAULT NULL)",
        "CREATE TABLE t2 (id INT PRIMARY KEY, d DATE, dt DATETIME(3))",
        "CREATE TABLE t3 (id INT PRIMARY KEY, d DATE, dt DATETIME(3), "
        "ts TIMESTAMP(3) NULL DEFAULT NULL)",
        INVALID,
        "INSERT INTO t3 VALUES (1, '2024-04-31', '2024-02-30 10:00:00.250', NULL), "
        "(2, '2024-04-30', '2024-04-30 10:00:00', NULL)",
        "CREATE TABLE t4 (id INT PRIMARY KEY, d DATE)",
        "INSERT INTO t4 VALUES (1, '2024-04-31'), (2, '2024-04-30')",
        "INSERT INTO t1 VALUES (1, '2024-04-31', '0000-00-00 00:00:00', '0000-00-00 00:00:00'), "
        "(2, '2024-04-30', '2024-04-30 10:00:00.250', '2024-04-30 10:00:00'), "
        "(3, NULL, NULL, NULL)",
        "INSERT INTO t2 VALUES (1, '2024-04-31', '2024-02-30 00:00:00'), (2, '2024-04-30', NULL)",
    )
    names = ["t1", "t2", "t3", "t4"]
    config_path = write_config(db, tmp_path, extra=rules(db, '{ d = "null" }'))
    config = load(config_path)
    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: all_in(config, Lifecycle.STREAMING, names), 120, "streaming", job)
        db.execute(
            INVALID,
            "INSERT INTO t1 VALUES (4, '0000-00-00', '2023-02-29 01:02:03', '0000-00-00')",
            "UPDATE t1 SET d = '2021-02-30' WHERE id = 2",
            "UPDATE t1 SET d = '2024-05-01', dt = '2024-05-01 00:00:00' WHERE id = 1",
            "INSERT INTO t2 VALUES (3, '0000-00-00', '0000-00-00 00:00:00')",
            "INSERT INTO t3 VALUES (3, '0000-00-00', '2023-02-29 01:02:03.5', '0000-00-00')",
            "UPDATE t3 SET d = '2024-05-01' WHERE id = 1",
            "UPDATE t3 SET dt = '2021-11-31 00:00:00' WHERE id = 2",
        )
        wait_for(lambda: caught_up_now(db, config, names), 90, "caught up", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()

    # t1: DATE and DATETIME by their type's rule (sentinel), TIMESTAMP by the default (NULL)
    assert dates(config_path, db, "t1") == [
        (1, dt.date(2024, 5, 1), dt.datetime(2024, 5, 1), ("ts", True)),
        (2, DAY, dt.datetime(2024, 4, 30, 10, 0, 0, 250000), ("ts", False)),
        (3, None, None, ("ts", True)),
        (4, DAY, MIDNIGHT, ("ts", True)),
    ]
    # t2: its column d by its own rule (NULL), dt by its type's (sentinel)
    assert dates(config_path, db, "t2") == [
        (1, None, MIDNIGHT),
        (2, dt.date(2024, 4, 30), None),
        (3, None, MIDNIGHT),
    ]
    # t3, ruled "text": each invalid date NULL, its text beside it, on both paths
    assert mirror_rows(config, db.name, "t3", "id") == [
        {
            "id": 1,
            "d": dt.date(2024, 5, 1),
            "dt": None,
            "ts": None,
            "d__text": None,
            "dt__text": "2024-02-30 10:00:00.250",
            "ts__text": None,
        },
        {
            "id": 2,
            "d": dt.date(2024, 4, 30),
            "dt": None,
            "ts": None,
            "d__text": None,
            "dt__text": "2021-11-31 00:00:00.000",
            "ts__text": None,
        },
        {
            "id": 3,
            "d": None,
            "dt": None,
            "ts": None,
            "d__text": "0000-00-00",
            "dt__text": "2023-02-29 01:02:03.500",
            "ts__text": "0000-00-00 00:00:00.000",
        },
    ]
    code, report = verify(config_path)
    assert code == 0, report

    assert mirror_rows(config, db.name, "t4", "id") == [
        {"id": 1, "d": DAY},
        {"id": 2, "d": dt.date(2024, 4, 30)},
    ]

    # the rule of t2.d changes, and t4's becomes "text": those two alone are read again and
    # follow them (t4's mirror gains the companion column)
    generations = {n: tables_state(config)[n].generation for n in names}
    text = config_path.read_text().replace('{ d = "null" }', '{ d = "sentinel" }')
    t3 = f'"{db.name}.t3" = "text"'
    config_path.write_text(text.replace(t3, f'{t3}, "{db.name}.t4" = "text"'))
    job = JobProcess(config_path)
    with running(job):
        wait_for(
            lambda: all(tables_state(config)[n].generation > generations[n] for n in ("t2", "t4")),
            60,
            "t2 and t4 re-read",
            job,
        )
        wait_for(lambda: caught_up_now(db, config, names), 120, "caught up again", job)
        cli(config_path, "stop", "--wait")
        assert job.wait(120) == 0, job.output()
    assert tables_state(config)["t1"].generation == generations["t1"]
    assert tables_state(config)["t3"].generation == generations["t3"]
    assert any(
        f"{db.name}.t2 changed shape while the pipeline was stopped: followed by reading it "
        "again online (pipeline.invalid_dates changed for column d null -> sentinel)" in e.message
        for e in events(config)
    ), [e.message for e in events(config)]
    assert dates(config_path, db, "t2") == [
        (1, DAY, MIDNIGHT),
        (2, dt.date(2024, 4, 30), None),
        (3, DAY, MIDNIGHT),
    ]
    code, report = verify(config_path)
    assert code == 0, report
    assert mirror_rows(config, db.name, "t4", "id") == [
        {"id": 1, "d": None, "d__text": "2024-04-31"},
        {"id": 2, "d": dt.date(2024, 4, 30), "d__text": None},
    ]
