"""The demo's pipeline: its own user on the server, and the config the job runs with."""

from __future__ import annotations

import logging
import os
import secrets
import time
from pathlib import Path

from cdc_console import launcher
from cdc_console.config import PipelineConfig, SnapshotConfig, load_config
from cdc_console.config_writer import write_config
from cdc_console.demo.server import DemoServer
from cdc_console.errors import register_secret
from cdc_console.state.store import StateStore

log = logging.getLogger("cdc_console.demo")

PASSWORD_ENV = "CDC_DEMO_PASSWORD"
CDC_USER = "cdc"
#: On a server the demo does not own, its own account, so an existing 'cdc' is never touched.
EXTERNAL_CDC_USER = "cdc_demo"
SERVER_IDS = "5400-5410"


def default_chunk_size(rows: int) -> int:
    """About 40 chunks over the demo tables: enough to watch progress, few enough to be quick."""
    return max(256, min(SnapshotConfig.chunk_size, rows // 40))


def write_demo_config(
    directory: Path, config_path: Path, server: DemoServer, database: str, chunk: int
) -> PipelineConfig:
    """A user of the pipeline's own on ``server`` (a fresh password, kept out of the config and
    the logs), and the config the job runs with, at ``config_path``."""
    password = secrets.token_urlsafe(18)
    register_secret(password)
    user = CDC_USER if server.owned else EXTERNAL_CDC_USER
    granted = server.create_cdc_user(user, password, database)
    log.info(
        "created the pipeline's user '%s'@'%s' with %s only",
        user,
        server.account_host,
        ", ".join(granted),
    )
    os.environ[PASSWORD_ENV] = password
    secret = directory / "cdc.secret"
    secret.touch(mode=0o600)
    secret.chmod(0o600)
    secret.write_text(password + "\n")
    write_config(
        config_path,
        {
            "name": "demo",
            "source": {
                "host": server.host,
                "port": server.port,
                "user": user,
                "password_env": PASSWORD_ENV,
                "tables": [f"{database}.*"],
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
    log.info("wrote the pipeline config %s (chunk size %d)", config_path, chunk)
    return load_config(config_path)


def stop_jobs(config: PipelineConfig, config_path: Path, job_pid: int | None) -> None:
    """Stop the job the demo launched, and one the console started for this pipeline.

    The launched one is stopped even when it already died, so what is left of its process
    group (a JVM whose driver was killed) goes too.
    """
    pids = [job_pid] if job_pid is not None else []
    if config.state_path.exists():
        store = StateStore(config.state_path)
        try:
            proc = launcher.job_process(store, config_path=config_path)
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
