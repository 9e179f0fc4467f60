"""The demo, start to finish: server, seed, pipeline config, job, workload, console or verdict.

Everything the demo creates lives in one folder (``.demo`` by default) as files a user can open:
``pipeline.toml``, the Delta mirrors under ``lake/``, the SQLite state under ``state/``, Spark's
checkpoint under ``checkpoints/``, logs under ``logs/``, and the sandbox's data under ``mysql/``.

On the way out the demo stops exactly what it started, in reverse order: the workload, the job
(and a job the console restarted for the same pipeline during the session), the sandbox (unless
``--keep``). A server given with ``--source`` is never stopped. SIGTERM unwinds the same way as
Ctrl-C.

Whether the pipeline state can be reused follows from the data it mirrors: whenever the demo
database is (re)seeded, the old state, mirrors and checkpoint are removed, since their binlog
positions and rows belong to data that no longer exists.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Protocol, cast

from cdc_console import launcher
from cdc_console.config import PipelineConfig, SnapshotConfig, load_config
from cdc_console.config_writer import write_config
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.values import JSONObject, JSONValue
from cdc_console.demo import (
    ADMIN_PASSWORD_ENV,
    DEFAULT_DATABASE,
    DEFAULT_DIR,
    DEFAULT_RATE,
    DEFAULT_ROWS,
    shop,
)
from cdc_console.demo.report import (
    DemoResult,
    _captured,
    _progress,
    job_failure,
    summary,
)
from cdc_console.demo.server import DemoSandbox, DemoServer, external_server, read_record
from cdc_console.demo.workload import Workload, WorkloadMix
from cdc_console.errors import CdcError, UsageError, register_secret
from cdc_console.logs import logging_to
from cdc_console.state.store import StateStore

log = logging.getLogger("cdc_console.demo")

PASSWORD_ENV = "CDC_DEMO_PASSWORD"
CDC_USER = "cdc"
#: On a server the demo does not own, its own account, so an existing 'cdc' is never touched.
EXTERNAL_CDC_USER = "cdc_demo"
SERVER_IDS = "5400-5410"
DEFAULT_HEADLESS_SECONDS = 60.0
PROGRESS_EVERY_SECONDS = 10.0
#: Folders of pipeline state, removed when the data they mirror is re-seeded.
PIPELINE_DIRS = ("lake", "state", "checkpoints")


@dataclass
class DemoOptions:
    directory: Path = DEFAULT_DIR
    rows: int = DEFAULT_ROWS
    rate: float = DEFAULT_RATE
    mix: WorkloadMix = field(default_factory=WorkloadMix)
    threads: int = 2
    keep: bool = False
    source: str | None = None
    admin_user: str = "root"
    admin_password_env: str = ADMIN_PASSWORD_ENV
    database: str = DEFAULT_DATABASE
    headless: bool = False
    duration: float | None = None
    catch_up_timeout: float = 600.0
    chunk_size: int | None = None
    seed: int = 42


def default_chunk_size(rows: int) -> int:
    """About 40 chunks over the demo tables: enough to watch progress, few enough to be quick."""
    return max(256, min(SnapshotConfig.chunk_size, rows // 40))


class DemoInterrupted(KeyboardInterrupt):
    """SIGTERM, turned into the same unwinding as Ctrl-C."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the clean-up finish
        raise DemoInterrupted()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Console(Protocol):
    def run(self) -> object: ...


class ConsoleFactory(Protocol):
    """What the demo needs of the console class: built on config files, then run."""

    def __call__(self, *, config_paths: Sequence[Path]) -> _Console: ...


def load_console() -> ConsoleFactory:
    """The console class, imported only when a screen is wanted (it pulls in Textual)."""
    try:
        from cdc_console.tui.app import ConsoleApp
    except ImportError as exc:
        raise CdcError(
            f"the console is not available in this installation ({exc})",
            "run the demo without a screen: 'cdc-console demo --headless --duration 60'",
        ) from None
    return ConsoleApp


class Demo:
    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.directory = options.directory.resolve()
        self.config_path = self.directory / "pipeline.toml"
        self.job_log = self.directory / "logs" / "job.log"
        self.record_path = self.directory / "demo.json"
        self.job_pid: int | None = None
        self.result = DemoResult()
        self.started = time.monotonic()

    # -- the whole run --------------------------------------------------------------------------

    def run(self) -> int:
        console = None if self.options.headless else self._console_or_fail()
        self.directory.mkdir(parents=True, exist_ok=True)
        log.info("demo folder %s", self.directory)
        with _sigterm_unwinds(), ExitStack() as cleanup:
            server = self._server(cleanup)
            self.result.server_label = server.label
            fresh = self._prepare_database(server)
            if fresh:
                self._reset_pipeline_state()
            config = self._write_config(server)
            self._preflight(config)
            self._launch(cleanup, config)
            workload = Workload(
                lambda: server.connect(self.options.database),
                self.options.database,
                rate=self.options.rate,
                mix=self.options.mix,
                threads=self.options.threads,
            )
            workload.prepare()
            cleanup.callback(workload.stop)
            if console is None:
                return self._headless(config, workload)
            return self._interactive(console, config, workload)
        raise AssertionError("unreachable")

    def _console_or_fail(self) -> ConsoleFactory:
        console = load_console()
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError(
                "the console needs a terminal, and this one is not interactive",
                "run it in a terminal, or without a screen: 'cdc-console demo --headless "
                "--duration 60'",
            )
        return console

    # -- server and data ------------------------------------------------------------------------

    def _server(self, cleanup: ExitStack) -> DemoServer:
        if self.options.source:
            return external_server(
                self.options.source, self.options.admin_user, self.options.admin_password_env
            )
        sandbox = DemoSandbox(self.directory)
        server = sandbox.start()
        log.info("%s is up", server.label)
        if self.options.keep:
            cleanup.callback(
                log.info,
                "leaving the sandbox running for the next run (--keep): %s, data in %s",
                server.address,
                sandbox.datadir,
            )
        else:
            cleanup.callback(self._remove_sandbox, sandbox)
        return server

    def _remove_sandbox(self, sandbox: DemoSandbox) -> None:
        log.info("stopping the sandbox (pass --keep to leave it for the next run)")
        sandbox.stop(remove=True)
        record = self._record()
        record.pop("seed", None)
        self._save_record(record)

    def _record(self) -> JSONObject:
        return read_record(self.record_path)

    def _save_record(self, record: JSONObject) -> None:
        self.record_path.write_text(json.dumps(record, indent=2) + "\n")

    def _prepare_database(self, server: DemoServer) -> bool:
        """Seed the demo database unless this folder's previous run seeded it on this server.

        Returns True when it was (re)seeded, i.e. any earlier pipeline state is stale.
        """
        database = self.options.database
        record = self._record()
        seeded = cast(JSONObject, record.get("seed") or {})  # the demo writes it as an object
        conn = server.connect()
        try:
            exists = shop.database_exists(conn, database)
            ours = (
                exists
                and seeded.get("server") == server.identity
                and seeded.get("database") == database
                and seeded.get("complete") is True
            )
            if ours:
                counts = shop.existing_tables(conn, database)
                if set(counts) == set(shop.TABLE_NAMES):
                    self.result.reused_rows = sum(counts.values())
                    log.info(
                        "reusing %s seeded by an earlier run (%s rows now; --rows ignored)",
                        database,
                        f"{self.result.reused_rows:,}",
                    )
                    return False
            if exists:
                if not server.owned and not ours:
                    raise CdcError(
                        f"database {database} already exists on {server.address} and was not "
                        f"seeded by the demo in {self.directory}",
                        "choose another name with --database NAME, or drop it if it is a "
                        f"leftover of an earlier demo (DROP DATABASE `{database}`)",
                    )
                log.info(
                    "dropping %s (not seeded by this demo folder, or seeding was interrupted) "
                    "to seed it afresh",
                    database,
                )
                with conn.cursor() as cur:
                    cur.execute(f"DROP DATABASE `{database}`")
            record["seed"] = {"server": server.identity, "database": database, "complete": False}
            self._save_record(record)
            log.info(
                "seeding %s with %s rows (orders like Flink CDC's demo_orders, customers, "
                "products, coupons keyed by a string)",
                database,
                f"{self.options.rows:,}",
            )
            self.result.seeded = shop.seed(
                conn, database, self.options.rows, seed=self.options.seed
            )
            record["seed"] = {
                "server": server.identity,
                "database": database,
                "complete": True,
                "rows": cast(JSONValue, self.result.seeded.rows),  # dict[str, int]
                "seconds": round(self.result.seeded.seconds, 2),
            }
            self._save_record(record)
            return True
        finally:
            conn.close()

    def _reset_pipeline_state(self) -> None:
        removed = [name for name in PIPELINE_DIRS if (self.directory / name).exists()]
        for name in removed:
            shutil.rmtree(self.directory / name)
        if removed:
            log.info("removed the previous pipeline state (%s): its data was re-seeded", removed)

    def _write_config(self, server: DemoServer) -> PipelineConfig:
        password = secrets.token_urlsafe(18)
        register_secret(password)
        user = CDC_USER if server.owned else EXTERNAL_CDC_USER
        granted = server.create_cdc_user(user, password, self.options.database)
        log.info(
            "created the pipeline's user '%s'@'%s' with %s only",
            user,
            server.account_host,
            ", ".join(granted),
        )
        os.environ[PASSWORD_ENV] = password
        secret = self.directory / "cdc.secret"
        secret.touch(mode=0o600)
        secret.chmod(0o600)
        secret.write_text(password + "\n")
        chunk = self.options.chunk_size or default_chunk_size(self.options.rows)
        write_config(
            self.config_path,
            {
                "name": "demo",
                "source": {
                    "host": server.host,
                    "port": server.port,
                    "user": user,
                    "password_env": PASSWORD_ENV,
                    "tables": [f"{self.options.database}.*"],
                    "server_id": SERVER_IDS,
                },
                "snapshot": {"chunk_size": chunk, "parallelism": 2},
                "sink": {"kind": "delta", "path": "lake", "changelog": True},
                "state": {"path": "state/pipeline.sqlite"},
                "spark": {
                    "master": "local[2]",
                    "trigger_seconds": 1.0,
                    "checkpoint": "checkpoints",
                },
                "console": {"job_log": "logs/job.log"},
            },
            header=f"Written by 'cdc-console demo'; rewritten on every run.\n"
            f"The password is not here: the job reads it from ${PASSWORD_ENV} (also in "
            "cdc.secret, mode 600).",
        )
        log.info("wrote the pipeline config %s (chunk size %d)", self.config_path, chunk)
        return load_config(self.config_path)

    def _preflight(self, config: PipelineConfig) -> None:
        """The job's own checks, run here first so a misconfigured ``--source`` fails in a
        second with the fix rather than after the job has started."""
        from cdc_console.mysql.checks import preflight

        server, tables, _ = preflight(config)
        log.info("preflight passed: %s, %d tables to capture", server.label, len(tables))

    # -- the job --------------------------------------------------------------------------------

    def _launch(self, cleanup: ExitStack, config: PipelineConfig) -> None:
        self.job_pid = launcher.launch_job(self.config_path, self.job_log)
        log.info(
            "launched the pipeline job (pid %d) on local Spark; its log: %s",
            self.job_pid,
            self.job_log,
        )
        cleanup.callback(self._stop_jobs, config)

    def _stop_jobs(self, config: PipelineConfig) -> None:
        """Stop the job the demo launched, and one the console started for this pipeline.

        The launched one is stopped even when it already died, so what is left of its process
        group (a JVM whose driver was killed) goes too.
        """
        pids = [self.job_pid] if self.job_pid is not None else []
        if config.state_path.exists():
            store = StateStore(config.state_path)
            try:
                proc = launcher.job_process(store, config_path=self.config_path)
            finally:
                store.close()
            if proc is not None and proc.pid not in pids:
                pids.append(proc.pid)
        for pid in pids:
            if not launcher.is_alive(pid):
                launcher.stop_job(pid)
                continue
            log.info("stopping the pipeline job (pid %d)", pid)
            started = time.monotonic()
            launcher.stop_job(pid, timeout=60)
            log.info("job stopped in %.1f s", time.monotonic() - started)

    # -- headless -------------------------------------------------------------------------------

    def _headless(self, config: PipelineConfig, workload: Workload) -> int:
        duration = self.options.duration or DEFAULT_HEADLESS_SECONDS
        log.info(
            "headless: workload for %.0f s, then wait for the job to catch up and compare every "
            "mirror with its source",
            duration,
        )
        workload.start()
        deadline = time.monotonic() + duration
        next_progress = time.monotonic() + PROGRESS_EVERY_SECONDS
        announced_ui = False
        while time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            failure = job_failure(self.job_pid, config, self.job_log)
            if failure:
                workload.stop()
                return self._finish_failed(config, failure)
            if not announced_ui:
                announced_ui = self._announce_ui(config)
            if time.monotonic() >= next_progress:
                next_progress += PROGRESS_EVERY_SECONDS
                log.info(
                    "%s; workload %s statements", _progress(config), f"{workload.counts.total:,}"
                )
        self.result.counts = workload.stop()
        log.info("workload stopped: %s", self.result.counts.summary())
        if workload.failures:
            log.warning("workload: %s", "; ".join(workload.failures))
        stopped = time.monotonic()
        failure = self._wait_caught_up(config)
        if failure:
            return self._finish_failed(config, failure)
        self.result.catch_up_seconds = time.monotonic() - stopped
        log.info("job caught up %.1f s after the workload stopped", self.result.catch_up_seconds)
        store = StateStore(config.state_path)
        try:
            tables = [t for t in store.tables() if t.state != Lifecycle.REMOVED]
            self.result.chunks = (
                sum(t.splits_done for t in tables),
                sum(t.splits_total or 0 for t in tables),
            )
            from cdc_console.demo.verify import verify_mirrors

            log.info("comparing every mirror with its source, row for row")
            self.result.report = verify_mirrors(config, store)
        finally:
            store.close()
        print(summary(self.result, config, self.config_path, self.job_log, self.started))
        return 0 if self.result.report.equal else 1

    def _announce_ui(self, config: PipelineConfig) -> bool:
        if not config.state_path.exists():
            return False
        store = StateStore(config.state_path)
        try:
            runs = store.runs(1)
        finally:
            store.close()
        if runs and runs[0].spark_ui:
            log.info("job running, Spark UI %s", runs[0].spark_ui)
            return True
        return False

    def _wait_caught_up(self, config: PipelineConfig) -> str | None:
        """Wait until every table streams and the committed position reaches the server's head;
        return why not when the job dies or the timeout passes."""
        from cdc_console.mysql.connection import connect
        from cdc_console.mysql.position import current_position

        timeout = self.options.catch_up_timeout
        log.info("waiting for the job to catch up (up to %.0f s)", timeout)
        deadline = time.monotonic() + timeout
        next_progress = time.monotonic() + PROGRESS_EVERY_SECONDS
        conn = connect(config.source)
        try:
            while True:
                failure = job_failure(self.job_pid, config, self.job_log)
                if failure:
                    return failure
                if config.state_path.exists():
                    tables, committed = _captured(config)
                    head = current_position(conn)
                    if (
                        len(tables) >= len(shop.TABLES)
                        and all(t.state == Lifecycle.STREAMING for t in tables)
                        and committed is not None
                        and committed >= head
                    ):
                        return None
                if time.monotonic() >= deadline:
                    return f"the job did not catch up within {timeout:.0f} s ({_progress(config)})"
                if time.monotonic() >= next_progress:
                    next_progress += PROGRESS_EVERY_SECONDS
                    log.info("%s", _progress(config))
                time.sleep(0.5)
        finally:
            conn.close()

    def _finish_failed(self, config: PipelineConfig, failure: str) -> int:
        self.result.failure = failure
        log.error("%s", failure)
        print(summary(self.result, config, self.config_path, self.job_log, self.started))
        return 1

    # -- with the console -----------------------------------------------------------------------

    def _interactive(
        self, console: ConsoleFactory, config: PipelineConfig, workload: Workload
    ) -> int:
        workload.start()
        timer = None
        if self.options.duration:
            timer = threading.Timer(self.options.duration, workload.stop)
            timer.daemon = True
            timer.start()
        demo_log = self.directory / "logs" / "demo.log"
        log.info("opening the console; the demo's own log continues in %s", demo_log)
        with logging_to(demo_log):
            console(config_paths=[self.config_path]).run()
        if timer is not None:
            timer.cancel()
        self.result.counts = workload.stop()
        print(f"workload: {self.result.counts.summary()}")
        print(f"files: config {self.config_path}, mirrors {config.sink.path}")
        if self.options.keep:
            print(
                f"the sandbox keeps running (--keep); to look again: export {PASSWORD_ENV}="
                f"$(cat {self.directory / 'cdc.secret'}); cdc-console status --config "
                f"{self.config_path}"
            )
        return 0
