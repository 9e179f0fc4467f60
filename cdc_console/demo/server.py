"""The demo's source server: a private sandbox in the demo folder, or one named by ``--source``.

A sandbox is started from whatever server binary the machine has (``MySQLSandbox`` probes
MariaDB or MySQL). With ``--keep`` it is left running and recorded in ``sandbox.json``; the next
demo run in the same folder finds it by pid *and* command line (its ``--datadir``), so a reused
pid is never mistaken for it, and adopts it instead of starting another.

``--source host:port`` (e.g. the MySQL 8.4 of ``jobs/mysql84/compose.yaml``) is a server the
demo did not start and never stops; it needs an account that may create a database and users,
whose password is read from an environment variable and never printed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pymysql

from cdc_console.config import SourceConfig
from cdc_console.core.untyped import Connection
from cdc_console.core.values import JSONObject
from cdc_console.demo import ADMIN_PASSWORD_ENV
from cdc_console.errors import CdcError, UsageError, register_secret
from cdc_console.mysql.connection import translate_error
from cdc_console.mysql.probe import ServerInfo, probe_server
from cdc_console.mysql.sandbox import MySQLSandbox, SandboxError, find_server_binary

log = logging.getLogger("cdc_console.demo")

COMPOSE_FILE = "jobs/mysql84/compose.yaml"
COMPOSE_PORT = 3307


def no_server_error() -> CdcError:
    return CdcError(
        "no MySQL-protocol server binary found for the demo's sandbox (looked for mariadbd and "
        "mysqld on PATH, in /usr/sbin and /usr/local/sbin)",
        "install one with 'sudo apt-get install mariadb-server', or run MySQL 8.4 in Docker: "
        f"set {ADMIN_PASSWORD_ENV} and CDC_SOURCE_PASSWORD to new passwords, run "
        f"'docker compose -f {COMPOSE_FILE} up -d --wait', then "
        f"'cdc-console demo --source 127.0.0.1:{COMPOSE_PORT}'",
    )


@dataclass
class DemoServer:
    """A server the demo can administer: where it is, the admin account, what it is."""

    host: str
    port: int
    admin_user: str
    admin_password: str = field(repr=False)
    info: ServerInfo
    #: Stable name of this server for the demo's records (a recreated sandbox is a new one).
    identity: str
    #: Host part of the accounts the demo creates: the sandbox is reached over loopback, a
    #: server in Docker sees connections from its bridge network.
    account_host: str
    #: True for the demo's own sandbox, which it may reset; False for ``--source``.
    owned: bool

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def label(self) -> str:
        name = "MariaDB" if self.info.is_mariadb else "MySQL"
        version = ".".join(str(v) for v in self.info.version)
        kind = "sandbox" if self.owned else "server"
        return f"{name} {version} {kind} on {self.address}"

    def connect(self, database: str | None = None) -> Connection:
        """An admin connection, autocommit, utf8mb4 (seeding, the workload, creating users)."""
        try:
            return pymysql.connect(
                host=self.host,
                port=self.port,
                user=self.admin_user,
                password=self.admin_password,
                database=database,
                autocommit=True,
                charset="utf8mb4",
                connect_timeout=10,
            )
        except pymysql.err.OperationalError as exc:
            raise translate_error(exc, self._as_source()) from None

    def _as_source(self) -> SourceConfig:
        return SourceConfig(
            host=self.host, port=self.port, user=self.admin_user, password_env=ADMIN_PASSWORD_ENV
        )

    def create_cdc_user(self, user: str, password: str, database: str) -> list[str]:
        """Create (or reset) the pipeline's account with the least privileges it needs.

        SELECT on the demo database only, REPLICATION SLAVE to read the binlog, REPLICATION
        CLIENT for its position; MariaDB 10.5.2+ calls the latter BINLOG MONITOR, so both are
        granted there. Returns the privileges granted, for the narration.
        """
        account = f"'{user}'@'{self.account_host}'"
        grants = [
            f"SELECT ON `{database}`.*",
            "REPLICATION SLAVE ON *.*",
            "REPLICATION CLIENT ON *.*",
        ]
        if self.info.is_mariadb and self.info.version >= (10, 5, 2):
            grants.append("BINLOG MONITOR ON *.*")
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY %s", (password,))
                cur.execute(f"ALTER USER {account} IDENTIFIED BY %s", (password,))
                for grant in grants:
                    cur.execute(f"GRANT {grant} TO {account}")
        finally:
            conn.close()
        return [g.split(" ON ")[0] for g in grants]


def _probe(host: str, port: int, user: str, password: str) -> ServerInfo:
    conn = pymysql.connect(
        host=host, port=port, user=user, password=password, connect_timeout=10, autocommit=True
    )
    try:
        return probe_server(conn)
    finally:
        conn.close()


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(
            f"--source {text!r} is not host:port",
            f"write e.g. --source 127.0.0.1:{COMPOSE_PORT}",
        )
    return host, int(port_text)


def external_server(address: str, admin_user: str, password_env: str) -> DemoServer:
    """A server the user runs (``--source``): checked reachable with the admin account."""
    host, port = parse_address(address)
    password = os.environ.get(password_env)
    if password is None:
        raise CdcError(
            f"--source needs the password of the admin account '{admin_user}' in ${password_env}",
            f"set {password_env} in the environment (for {COMPOSE_FILE}: the root password it "
            "was started with), or name another variable with --admin-password-env",
        )
    register_secret(password)
    source = SourceConfig(host=host, port=port, user=admin_user, password_env=password_env)
    try:
        info = _probe(host, port, admin_user, password)
    except pymysql.err.OperationalError as exc:
        raise translate_error(exc, source) from None
    server = DemoServer(
        host=host,
        port=port,
        admin_user=admin_user,
        admin_password=password,
        info=info,
        identity=f"server:{host}:{port}",
        account_host="%",
        owned=False,
    )
    log.info("using %s (the demo will not stop it)", server.label)
    return server


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def read_record(path: Path) -> JSONObject:
    """A JSON object the demo left in ``path`` (``sandbox.json``, ``demo.json``); empty when the
    file is missing, unreadable or not an object, so a damaged record only forgets, never fails."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class DemoSandbox:
    """The demo's private server in ``<dir>/mysql``; started, adopted, stopped and removed here."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.datadir = directory / "mysql"
        self.record_path = directory / "sandbox.json"
        self.sandbox: MySQLSandbox | None = None
        self.pid: int | None = None

    def _record(self) -> JSONObject:
        return read_record(self.record_path)

    def _kept_process(self) -> tuple[int, int] | None:
        """``(pid, port)`` of a sandbox a ``--keep`` run left running on this datadir."""
        record = self._record()
        pid, port = record.get("pid"), record.get("port")
        if not isinstance(pid, int) or not isinstance(port, int):
            return None
        try:
            proc = psutil.Process(pid)
            cmdline = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        if f"--datadir={self.datadir.resolve()}" not in cmdline:
            return None
        return pid, port

    def start(self) -> DemoServer:
        try:
            _, flavour = find_server_binary()
        except SandboxError:
            raise no_server_error() from None
        kept = self._kept_process()
        if kept is not None and (self.datadir / "sandbox-root.secret").exists():
            pid, port = kept
            sandbox = MySQLSandbox(self.datadir.resolve(), port=port, flavour=flavour)
            sandbox.root_password = (self.datadir / "sandbox-root.secret").read_text().strip()
            log.info("reusing the sandbox kept by the previous run (pid %d, port %d)", pid, port)
        else:
            recorded = self._record().get("port")
            port = recorded if isinstance(recorded, int) and _port_free(recorded) else 0
            existing = (self.datadir / "mysql").exists()
            log.info(
                "starting a private %s sandbox in %s (%s)",
                flavour,
                self.datadir,
                "existing data" if existing else "new data directory",
            )
            sandbox = MySQLSandbox(self.datadir, port=port)
            try:
                sandbox.start()
            except SandboxError as exc:
                sandbox.stop()
                raise CdcError(
                    f"the sandbox server did not start: {exc}",
                    f"see {self.datadir / 'mysqld.err'}; delete {self.datadir} to start afresh",
                ) from None
            assert sandbox.process is not None
            pid = sandbox.process.pid
        self.sandbox = sandbox
        self.pid = pid
        self.record_path.write_text(json.dumps({"pid": pid, "port": sandbox.port}))
        register_secret(sandbox.root_password)
        info = _probe(sandbox.host, sandbox.port, "root", sandbox.root_password)
        return DemoServer(
            host=sandbox.host,
            port=sandbox.port,
            admin_user="root",
            admin_password=sandbox.root_password,
            info=info,
            identity=f"sandbox:{self.datadir.resolve()}",
            account_host="127.0.0.1",
            owned=True,
        )

    def stop(self, remove: bool) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s); ``remove`` deletes its data."""
        if self.sandbox is not None and self.sandbox.process is not None:
            self.sandbox.stop()
        elif self.pid is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc = psutil.Process(self.pid)
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except psutil.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self.record_path.unlink(missing_ok=True)
        if remove:
            shutil.rmtree(self.datadir, ignore_errors=True)
            shutil.rmtree(self.datadir.parent / f"{self.datadir.name}-tmp", ignore_errors=True)
        log.info(
            "stopped the sandbox%s", " and removed its data directory" if remove else " (data kept)"
        )
