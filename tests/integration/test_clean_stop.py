"""A clean stop: a signal mid-batch lets the batch finish, then the job exits 0 saying where it
stopped, with no error line and no traceback; a second signal exits at once, and the next start
converges all the same (nothing lost, no change applied twice).

On ``local[2]`` with SIGTERM (what ``cdc-console stop``, systemd and Kubernetes send) and on
``local-cluster`` (separate executor JVMs) with SIGINT (Ctrl-C, which the SparkContext would
otherwise turn into a KeyboardInterrupt); on both, systemd's stop (SIGTERM to every process of the
job at once). One snapshot is stopped several times in a row, each run mid-snapshot, and the last
start converges: a start costs far less than a fresh table and its final catch-up.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import BatchStatus
from cdc_console.state.store import StateStore
from tests.conftest import SourceDb
from tests.integration.harness import (
    JobProcess,
    Writer,
    caught_up,
    changelog_replay,
    create_orders,
    finished_splits,
    load,
    mirror_rows,
    running,
    source_rows,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ROWS, CHUNK = 24_000, 1_000
#: what a clean stop must not print: our CLI's error line, a Python traceback, an ERROR log line
NOT_CLEAN = re.compile(r"^error: |Traceback \(most recent call last\)| ERROR ", re.MULTILINE)
#: what a Python worker slow to connect back on a loaded machine prints, Spark's line for the
#: query it ended and the late worker's own traceback, once the job started the query again
#: (``spark.query_restarts``, whose warning says so)
RECOVERED = re.compile(
    r"^.* ERROR MicroBatchExecution: Query .* terminated with error$"
    r"|^Traceback \(most recent call last\):\n(?: .*\n)*?"
    r"pyspark\.errors\.exceptions\.base\.PySparkRuntimeError: \[CANNOT_OPEN_SOCKET\].*$",
    re.MULTILINE,
)
RESTART_SAID = "the streaming query failed (Python worker failed to connect back"


def finished_chunks(config: PipelineConfig) -> int:
    return len(finished_splits(config))


def all_chunks(config: PipelineConfig) -> int:
    store = StateStore(config.state_path)
    try:
        return sum(len(store.splits(table.table_id)) for table in store.tables())
    finally:
        store.close()


def last_batch_status(config: PipelineConfig) -> str | None:
    store = StateStore(config.state_path)
    try:
        last = store.last_batch()
        return last.status if last else None
    finally:
        store.close()


def prepare(source_db: SourceDb, tmp_path: Path) -> tuple[Path, PipelineConfig, Writer]:
    create_orders(source_db, ROWS)
    config_path = write_config(
        source_db, tmp_path, chunk_size=CHUNK, snapshot="chunks_per_batch = 4"
    )
    writer = Writer(source_db, "orders", list(range(1, ROWS, CHUNK)), rate=80)
    writer.start()
    return config_path, load(config_path), writer


def converge(
    source_db: SourceDb, config_path: Path, config: PipelineConfig, writer: Writer
) -> None:
    writer.stop()
    assert not writer.errors, writer.errors
    final = JobProcess(config_path, args=["--until-caught-up"]).start()
    assert final.wait(300) == 0, final.output()
    assert caught_up(source_db, config)
    expected = source_rows(source_db, "orders", "id")
    assert mirror_rows(config, source_db.name, "orders", "id") == expected
    replayed, binlog_changes, duplicates = changelog_replay(config, source_db.name, "orders", "id")
    assert duplicates == 0 and binlog_changes > 0
    assert [replayed[k] for k in sorted(replayed)] == expected


def signal_every_process(pid: int, signum: int) -> list[int]:
    """``signum`` to every process of the job's tree at once, as systemd's default
    ``KillMode=control-group`` does (and more than ``kill -<pgid>``: Spark's Python daemon
    runs in a process group of its own); returns the pids signalled."""
    root = psutil.Process(pid)
    tree = [root, *root.children(recursive=True)]
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signum)
    return [p.pid for p in tree]


def _lines_around(text: str, at: int, lines: int = 6) -> str:
    """The lines of ``text`` around offset ``at``: what a failed cleanliness check saw."""
    before = text[:at].splitlines()[-lines:]
    after = text[at:].splitlines()[: lines + 1]
    return "\n".join([*before, *after])


def stop_cleanly(
    config: PipelineConfig, job: JobProcess, signum: int, *, every_process: bool = False
) -> None:
    """Signal ``job`` once mid-snapshot, after it finished a batch of its own; it finishes the
    batch in flight and exits 0, saying where. ``every_process``: the signal reaches the JVMs
    and Python workers too, at the same time."""
    before = finished_chunks(config) if config.state_path.exists() else 0
    with running(job):
        wait_for(lambda: finished_chunks(config) > before, 240, "a finished batch", job)
        assert job.proc is not None
        if every_process:
            signalled = signal_every_process(job.proc.pid, signum)
            assert len(signalled) >= 3, signalled  # the driver, its JVM, Python workers
        else:
            job.proc.send_signal(signum)
        code = job.wait(120)
    output = job.output()
    assert code == 0, output
    assert f"stop requested (signal {signum})" in output
    assert re.search(r"stopped (at binlog\.\d+:\d+ )?after batch \d+", output), output
    unrecovered = RECOVERED.sub("", output) if RESTART_SAID in output else output
    found = NOT_CLEAN.search(unrecovered)
    assert not found, _lines_around(unrecovered, found.start() if found else 0)
    # The batch in flight was finished and committed, not abandoned.
    assert last_batch_status(config) == BatchStatus.APPLIED
    assert finished_chunks(config) < all_chunks(config), "stopped mid-snapshot"


def test_sigterm_stops_cleanly_and_a_second_signal_at_once(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """``cdc-console stop``'s SIGTERM to the driver, then systemd's to every process (the driver,
    its JVM and the Python workers at once: only the driver acts on it), each a clean stop; then
    two signals in a row end the job at once."""
    config_path, config, writer = prepare(source_db, tmp_path)
    stop_cleanly(config, JobProcess(config_path), signal.SIGTERM)
    stop_cleanly(config, JobProcess(config_path), signal.SIGTERM, every_process=True)

    before = finished_chunks(config)
    job = JobProcess(config_path)
    with running(job):
        wait_for(lambda: finished_chunks(config) > before, 240, "more chunks", job)
        assert job.proc is not None
        job.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        job.proc.send_signal(signal.SIGTERM)
        clock = time.monotonic()
        code = job.wait(60)
        seconds = time.monotonic() - clock
    assert code == 128 + signal.SIGTERM, job.output()
    assert seconds < 15, seconds
    assert job.log_path is not None  # the whole log: Java's traces of the exit may follow
    assert "second signal (15): exiting now" in job.log_path.read_text()
    converge(source_db, config_path, config, writer)


def test_sigint_and_sigterm_to_every_process_on_local_cluster_stop_cleanly(
    source_db: SourceDb, tmp_path: Path
) -> None:
    """With executor JVMs of their own: Ctrl-C's SIGINT to the driver, then systemd's SIGTERM
    to the driver, its JVM, the executor JVMs and their Python workers at once."""
    config_path, config, writer = prepare(source_db, tmp_path)
    master = ["--master", "local-cluster[2,1,1024]"]
    stop_cleanly(config, JobProcess(config_path, args=master), signal.SIGINT)
    stop_cleanly(config, JobProcess(config_path, args=master), signal.SIGTERM, every_process=True)
    converge(source_db, config_path, config, writer)
