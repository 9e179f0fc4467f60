"""A private, throw-away MySQL-protocol server on a free loopback port, with a ROW binlog.

Tests, the demo and the benchmarks all run against a real server started from whatever binary the
machine has (``mariadbd`` from Debian's ``mariadb-server``, or ``mysqld``), never a mock. The
flavour is probed from the binary, not assumed, because MariaDB and MySQL differ in how they are
initialised and in which binlog options they accept.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from cdc_console.core.untyped import PassThrough

log = logging.getLogger(__name__)

#: a Unix socket address holds 108 bytes with its terminating NUL
_SOCKET_PATH_MAX = 108

INSTALL_HINT = (
    "no MySQL-protocol server binary found (looked for mariadbd and mysqld on PATH and in /usr/sbin). "
    "Install one with 'sudo apt-get install mariadb-server', or start MySQL 8.4 with "
    "'docker compose -f jobs/mysql84/compose.yaml up -d --wait' and point --source at "
    "127.0.0.1:3307."
)


class SandboxError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_server_binary() -> tuple[str, str]:
    """Return ``(path, flavour)`` of the first server binary found; flavour is mariadb or mysql."""
    search = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/usr/local/sbin"
    for name, flavour in (("mariadbd", "mariadb"), ("mysqld", "mysql")):
        path = shutil.which(name, path=search)
        if path:
            if flavour == "mysql":
                out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
                flavour = "mariadb" if "mariadb" in out.lower() else "mysql"
            return path, flavour
    raise SandboxError(INSTALL_HINT)


@dataclass
class MySQLSandbox:
    """Owns one server process and its data directory."""

    datadir: Path
    port: int = 0
    root_password: str = ""
    flavour: str = ""
    process: subprocess.Popen[bytes] | None = None
    time_zone: str = "SYSTEM"
    #: Server options appended after the defaults; later options win, so tests can start a
    #: deliberately misconfigured server (e.g. ``["--binlog-format=STATEMENT"]``).
    extra_args: list[str] = field(default_factory=list)

    host = "127.0.0.1"

    @property
    def socket_path(self) -> Path:
        """The server's Unix socket: in the data directory, unless that path is longer than a
        socket address holds (108 bytes, e.g. under a deep test or bench folder); then a name
        in the temp folder that the data directory's path decides, so every process finds it."""
        inside = self.datadir / "mysqld.sock"
        if len(os.fsencode(inside)) < _SOCKET_PATH_MAX:
            return inside
        digest = hashlib.sha1(os.fsencode(self.datadir.resolve())).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"cdc-mysqld-{digest}.sock"

    @property
    def password_file(self) -> Path:
        return self.datadir / "sandbox-root.secret"

    def start(self, timeout: float = 60.0) -> MySQLSandbox:
        binary, self.flavour = find_server_binary()
        self.datadir = self.datadir.resolve()
        fresh = not (self.datadir / "mysql").exists()
        self.datadir.mkdir(parents=True, exist_ok=True)
        if fresh:
            self._initialise(binary)
        # A port picked here can be taken by another process before the server binds it
        # (parallel test workers start servers at once): pick another and start again.
        pick = not self.port
        attempts = 3 if pick else 1
        for attempt in range(attempts):
            if pick:
                self.port = free_port()
            args = self._server_args(binary)
            log.info(
                "starting %s sandbox on 127.0.0.1:%d (datadir %s)",
                self.flavour,
                self.port,
                self.datadir,
            )
            self.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            try:
                self._wait_ready(timeout)
                break
            except SandboxError:
                if attempt + 1 == attempts or "Address already in use" not in self._error_tail():
                    raise
        if fresh:
            self._create_root_password()
        else:
            self.root_password = self.password_file.read_text().strip()
        return self

    def _server_args(self, binary: str) -> list[str]:
        """The server's command line: binlog in ROW format with full images and metadata."""
        args = [
            binary,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--tmpdir={self._tmpdir()}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket_path}",
            f"--pid-file={self.datadir / 'mysqld.pid'}",
            f"--log-error={self.datadir / 'mysqld.err'}",
            "--skip-name-resolve",
            f"--log-bin={self.datadir / 'binlog'}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--server-id=1",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            f"--default-time-zone={self.time_zone}",
            "--max-connections=300",
            *self.extra_args,
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        if os.geteuid() == 0:
            args.append("--user=root")
        return args

    def _initialise(self, binary: str) -> None:
        if self.flavour == "mariadb":
            installer = shutil.which("mariadb-install-db") or shutil.which(
                "mysql_install_db", path="/usr/bin:/usr/local/bin"
            )
            if not installer:
                raise SandboxError(
                    "mariadb-install-db not found: install the mariadb-server package"
                )
            cmd = [
                installer,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--tmpdir={self._tmpdir()}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ]
            if os.geteuid() == 0:
                cmd.append("--user=root")
        else:
            cmd = [binary, "--no-defaults", "--initialize-insecure", f"--datadir={self.datadir}"]
            if os.geteuid() == 0:
                cmd.append("--user=root")
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise SandboxError(f"initialising {self.datadir} failed:\n{result.stderr[-2000:]}")

    def _tmpdir(self) -> Path:
        """A private temp folder: a shared /tmp lets other processes remove the server's files."""
        path = self.datadir.parent / f"{self.datadir.name}-tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise SandboxError(
                    f"server exited at start; see {self.datadir / 'mysqld.err'}:\n"
                    + self._error_tail()
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self.socket_path.exists():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SandboxError(
            f"server did not accept connections within {timeout:.0f}s:\n" + self._error_tail()
        )

    def _error_tail(self) -> str:
        try:
            return (self.datadir / "mysqld.err").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _create_root_password(self) -> None:
        self.root_password = secrets.token_urlsafe(18)
        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", password="")
        try:
            with conn.cursor() as cur:
                for host in ("127.0.0.1", "localhost"):
                    cur.execute(f"CREATE USER IF NOT EXISTS 'root'@'{host}'")
                    cur.execute(
                        f"ALTER USER 'root'@'{host}' IDENTIFIED BY %s", (self.root_password,)
                    )
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
                cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()
        self.password_file.write_text(self.root_password)
        self.password_file.chmod(0o600)

    def connect(
        self, database: str | None = None, **kwargs: PassThrough
    ) -> pymysql.connections.Connection:
        """A root connection over TCP, autocommit on: for fixtures and the workload generator."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user="root",
            password=self.root_password,
            database=database,
            autocommit=True,
            charset="utf8mb4",
            **kwargs,
        )

    def execute(self, *statements: str, database: str | None = None) -> None:
        """Run statements as root on one short-lived connection (seeding, writers, fixtures)."""
        conn = self.connect(database=database)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
        finally:
            conn.close()

    def create_user(self, user: str, password: str, grants: list[str]) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'127.0.0.1'")
                cur.execute(f"ALTER USER '{user}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
                for grant in grants:
                    cur.execute(f"GRANT {grant} TO '{user}'@'127.0.0.1'")
        finally:
            conn.close()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> MySQLSandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
