"""The stream's side of a benchmark: a big table with a small live one beside it, a writer on
the live one, and its lag sampled as ``status`` reports it (``figures.position_lag``) while
something else runs (a verification, a re-dump of the big table)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from cdc_console.bench.common import (
    BENCH_DB,
    BENCH_TABLE,
    BenchEnv,
    SnapshotRunOptions,
    seed_rows,
    start_streaming_job,
    wait_caught_up,
    wait_running,
)
from cdc_console.bench.snapshot import OursSnapshot, snapshot_ours
from cdc_console.config import PipelineConfig, load_config
from cdc_console.state.store import StateStore
from cdc_console.status import collect_status

T = TypeVar("T")

LIVE = f"{BENCH_TABLE}_live"
LIVE_ROWS = 10_000


@dataclass(kw_only=True)
class LiveTableOptions(SnapshotRunOptions):
    """The flags of the benchmarks that measure a live table's lag while something else runs on
    the bench table (``bench verify``, ``bench redump``); each sets its own waits' defaults."""

    rows: int
    #: UPDATEs a second on the live table
    rate: float = 100.0
    #: seconds the restarted job streams before the baseline starts
    settle_seconds: float
    #: seconds of lag measured before the action starts
    baseline_seconds: float


def snapshot_with_live_table(env: BenchEnv, name: str, options: LiveTableOptions) -> OursSnapshot:
    """Seed ``options.rows`` rows and a ``LIVE_ROWS``-row copy beside them, and snapshot both into
    fresh mirrors that stream on (``initial``, caught up, lag sampled once a second)."""
    rows = options.rows
    seconds = seed_rows(env, 1, rows)
    print(f"seeded {BENCH_TABLE} to {rows:,} rows in {seconds:.1f}s", flush=True)
    env.execute(
        f"CREATE TABLE {LIVE} LIKE {BENCH_TABLE}",
        f"INSERT INTO {LIVE} SELECT * FROM {BENCH_TABLE} WHERE id <= {LIVE_ROWS}",
    )
    return snapshot_ours(
        env,
        name,
        options,
        changelog=False,
        startup_mode="initial",
        extra={"pipeline": {"heartbeat_seconds": 1}},
        tables=[f"{BENCH_DB}.{BENCH_TABLE}", f"{BENCH_DB}.{LIVE}"],
    )


class LagSampler(threading.Thread):
    """A table's lag once a second, as ``status`` reports it (its own head probe included)."""

    def __init__(self, config: PipelineConfig, table: str) -> None:
        super().__init__(daemon=True)
        self.config, self.table = config, table
        self.lags: list[tuple[float, float]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        store = StateStore(self.config.state_path)
        try:
            while not self._stop_event.wait(1.0):
                status = collect_status(self.config, store)
                found = next((t for t in status.tables if t.table == self.table), None)
                if found is not None and found.lag_seconds is not None:
                    self.lags.append((time.time(), found.lag_seconds))
        finally:
            store.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by nearest rank (a lag bar is about what was seen)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def spread(values: list[float]) -> str:
    return (
        f"p50 {quantile(values, 0.5):.1f} s, p99 {quantile(values, 0.99):.1f} s, "
        f"max {max(values):.1f} s ({len(values)} samples)"
    )


@dataclass
class LagAround(Generic[T]):
    """A table's lag before and while ``action`` ran, and what it returned."""

    before: list[float]
    during: list[float]
    samples: list[tuple[float, float]]
    started: float
    result: T
    statements: int


def lag_around(
    env: BenchEnv,
    config: Path,
    table: str,
    options: LiveTableOptions,
    action: Callable[[], T],
) -> LagAround[T]:
    """Stream ``config``'s pipeline with ``options.rate`` UPDATEs a second on ``table`` (in the
    bench database), sample its lag, and run ``action`` once the stream is steady."""
    rate, timeout = options.rate, options.timeout
    settle_seconds, baseline_seconds = options.settle_seconds, options.baseline_seconds
    folder = config.parent
    state = folder / "state" / "pipeline.sqlite"
    job = start_streaming_job(config, env, folder / "stream.log")
    writer = UpdateWriter(env, table, rate)
    os.environ.update(env.child_env)  # the sandbox's password, for the sampler's head probes
    sampler = LagSampler(load_config(config), f"{BENCH_DB}.{table}")
    try:
        wait_running(state, timeout)  # the restarted job, not the last run's state
        wait_caught_up(env, state, timeout)
        writer.start()
        sampler.start()
        # the restarted job settles first (its lake upkeep's first pass stalled batches for a
        # few seconds about 20 s in, in our runs): the baseline is the steady stream
        time.sleep(settle_seconds + baseline_seconds)
        started = time.time()
        result = action()
        ended = time.time()
    finally:
        sampler.stop()
        writer.stop()
        job.send_signal(signal.SIGTERM)
        job.wait(120)
    return LagAround(
        before=[lag for ts, lag in sampler.lags if started - baseline_seconds <= ts < started],
        during=[lag for ts, lag in sampler.lags if started <= ts <= ended],
        samples=sampler.lags,
        started=started,
        result=result,
        statements=writer.statements,
    )


class UpdateWriter(threading.Thread):
    """``rate`` autocommitted single-row UPDATEs a second on ``table``, until stopped."""

    def __init__(self, env: BenchEnv, table: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.env, self.table, self.rate = env, table, rate
        self.statements = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        rng = random.Random(1125)
        conn = self.env.connect()
        clock = time.monotonic()
        try:
            with conn.cursor() as cur:
                while not self._stop_event.is_set():
                    due = int((time.monotonic() - clock) * self.rate) + 1
                    while self.statements < due:
                        cur.execute(
                            f"UPDATE {self.table} SET amount = amount + 1, updated = NOW(6) "
                            "WHERE id = %s",
                            (rng.randint(1, 10_000),),
                        )
                        self.statements += 1
                    time.sleep(0.01)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)
