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
from cdc_console.config import PipelineConfig
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
from cdc_console.demo.pipeline import PASSWORD_ENV, default_chunk_size, stop_jobs, write_demo_config
from cdc_console.demo.report import (
    PROGRESS_EVERY_SECONDS,
    DemoResult,
    _progress,
    job_failure,
    summary,
    wait_caught_up,
)
from cdc_console.demo.server import DemoSandbox, DemoServer, external_server, read_record
from cdc_console.demo.workload import Workload, WorkloadMix
from cdc_console.errors import CdcError, UsageError
from cdc_console.logs import logging_to
from cdc_console.state.store import StateStore

log = logging.getLogger("cdc_console.demo")

DEFAULT_HEADLESS_SECONDS = 60.0
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
            config = write_demo_config(
                self.directory,
                self.config_path,
                server,
                self.options.database,
                self.options.chunk_size or default_chunk_size(self.options.rows),
            )
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
        cleanup.callback(lambda: stop_jobs(config, self.config_path, self.job_pid))

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
        failure = wait_caught_up(config, self.job_pid, self.job_log, self.options.catch_up_timeout)
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
