"""Shared fixtures: one private MariaDB per test session, a fresh database per test.

The server is real (``mariadbd`` with a ROW binlog on a free loopback port); tests that need it
are marked ``mysql`` and skip with the install hint only when no server binary exists at all, which
``.ci/run`` prevents by installing ``mariadb-server``.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from cdc_console.config import SourceConfig, TablePattern
from cdc_console.mysql.sandbox import MySQLSandbox, SandboxError, find_server_binary

CDC_USER = "cdc"
CDC_PASSWORD_ENV = "CDC_TEST_SOURCE_PASSWORD"
_db_counter = itertools.count(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist with three or more workers, the Spark tests (a minute or more each) go to
    all workers but one, dealt evenly and first in each share; the last worker starts on the
    quick tests.

    ``--dist worksteal`` hands each worker a contiguous block of the collection and lets an
    idle worker steal from the end of a busy one's. Each Spark test runs ``local[2]``, so on
    the 2-core box three at once slowed every one of them by a third (measured: the suite went
    from 18 to 21.5 min when all three workers started on them); in collection order they
    bunched in the first blocks instead, and one started late held the run up at its end.
    """
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 3:
        return
    heavy = [item for item in items if item.get_closest_marker("spark")]
    light = [item for item in items if not item.get_closest_marker("spark")]
    size = -(-len(items) // workers)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, item in enumerate(heavy):
        shares[n % (workers - 1)].append(item)
    rest = iter(light)
    for share in shares:
        share.extend(itertools.islice(rest, max(0, size - len(share))))
    shares[-1].extend(rest)
    items[:] = [item for share in shares for item in share]


def _require_server() -> None:
    try:
        find_server_binary()
    except SandboxError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MySQLSandbox]:
    _require_server()
    sandbox = MySQLSandbox(tmp_path_factory.mktemp("mariadb") / "data")
    sandbox.start()
    password = secrets.token_urlsafe(12)
    os.environ[CDC_PASSWORD_ENV] = password
    grants = ["SELECT ON *.*", "REPLICATION SLAVE ON *.*", "REPLICATION CLIENT ON *.*"]
    if sandbox.flavour == "mariadb":
        grants.append("BINLOG MONITOR ON *.*")
    sandbox.create_user(CDC_USER, password, grants)
    try:
        yield sandbox
    finally:
        sandbox.stop()


@dataclass
class SourceDb:
    """A fresh database on the session server, and a SourceConfig for the least-privileged user."""

    sandbox: MySQLSandbox
    name: str

    def source_config(self, tables: list[str] | None = None, **overrides: object) -> SourceConfig:
        patterns = tuple(TablePattern(*(t.split(".", 1))) for t in (tables or [f"{self.name}.*"]))
        fields: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.sandbox.port,
            "user": CDC_USER,
            "password_env": CDC_PASSWORD_ENV,
            "tables": patterns,
            "server_id_min": 5400,
            "server_id_max": 5410,
        }
        fields.update(overrides)
        return SourceConfig(**fields)  # type: ignore[arg-type]

    def connect(self) -> pymysql.connections.Connection:
        """Root connection to this database, autocommit: for writers and fixtures."""
        return self.sandbox.connect(database=self.name)

    def execute(self, *statements: str) -> None:
        self.sandbox.execute(*statements, database=self.name)

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()


@pytest.fixture
def source_db(mariadb: MySQLSandbox) -> Iterator[SourceDb]:
    name = f"t{next(_db_counter)}_{secrets.token_hex(3)}"
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    conn.close()
    try:
        yield SourceDb(mariadb, name)
    finally:
        conn = mariadb.connect()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Path:
    return tmp_path
