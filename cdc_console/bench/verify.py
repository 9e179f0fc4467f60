"""``cdc-console bench verify --rows N``: how fast a mirror is verified, next to how fast it was
snapshotted, in one run against one server.

The table is seeded (with a small ``orders_live`` beside it), then ``cdc-console run
--until-caught-up`` snapshots both into fresh Delta mirrors and catches up; then ``cdc-console
verify --table orders`` compares the whole mirror with the source, each chunk through the same
LW / SELECT / HW procedure as the snapshot. Lines:

- **ours snapshot -> delta (window)**: first batch's plan to last commit, as in ``bench
  snapshot``;
- **verify (compare)**: the rows compared over the time ``verify`` itself reports (source reads,
  mirror reads, the binlog fold and the comparison);
- **verify (process wall)**: the same rows over the ``verify`` process's wall time, interpreter
  start-up included.

The bar compares *verify (compare)* with the snapshot window: both are the steady-state work.

Then the stream's side (skipped with ``--no-lag``): the same pipeline streams again while a
writer keeps ``--rate`` single-row UPDATEs a second on ``orders_live`` and the big table is
verified. The lag of ``orders_live`` (``figures.position_lag``, as ``status`` and the metrics
define it) sampled every second before and during the verification gives the bar "the other
tables' lag while a verification runs stays within 2 s of what it was".
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_console.bench.common import (
    BENCH_DB,
    BENCH_TABLE,
    BenchEnv,
    BenchError,
    Measurement,
    bar_line,
    bench_env,
    format_table,
    load_line,
    machine_line,
    ratio,
    seed_rows,
    start_streaming_job,
    wait_caught_up,
    wait_running,
)
from cdc_console.bench.snapshot import OURS_WINDOW, snapshot_ours
from cdc_console.config import PipelineConfig, load_config
from cdc_console.state.store import StateStore
from cdc_console.status import collect_status

VERIFY = "verify (compare)"
VERIFY_WALL = "verify (process wall)"
VERIFY_BAR = 0.8
LIVE = f"{BENCH_TABLE}_live"
LIVE_ROWS = 10_000


@dataclass
class VerifyOptions:
    rows: int
    chunk_size: int = 8096
    parallelism: int = 2
    master: str = "local[2]"
    workdir: Path | None = None
    keep: bool = False
    timeout: float = 3600.0
    no_lag: bool = False
    rate: float = 100.0
    baseline_seconds: float = 20.0
    settle_seconds: float = 40.0
    #: the verification's cap in the lag phase (``verify --rows-per-second``); 0: none
    rows_per_second: int = 0


def run_verify_bench(options: VerifyOptions) -> dict[str, Any]:
    print(machine_line(), flush=True)
    notes = [load_line("before")]
    measurements: list[Measurement] = []
    with bench_env(options.workdir, options.keep) as env:
        seconds = seed_rows(env, 1, options.rows)
        print(f"seeded {BENCH_TABLE} to {options.rows:,} rows in {seconds:.1f}s", flush=True)
        env.execute(
            f"CREATE TABLE {LIVE} LIKE {BENCH_TABLE}",
            f"INSERT INTO {LIVE} SELECT * FROM {BENCH_TABLE} WHERE id <= {LIVE_ROWS}",
        )
        ours = snapshot_ours(
            env,
            "ours-snapshot-then-verify",
            chunk_size=options.chunk_size,
            parallelism=options.parallelism,
            changelog=False,
            master=options.master,
            timeout=options.timeout,
            startup_mode="initial",
            extra={"pipeline": {"heartbeat_seconds": 1}},
            tables=[f"{BENCH_DB}.{BENCH_TABLE}", f"{BENCH_DB}.{LIVE}"],
        )
        config, folder = ours.config, ours.config.parent
        rows = ours.rows - min(options.rows, LIVE_ROWS)
        measurements.append(
            Measurement.of(
                ours.job, OURS_WINDOW, rows, ours.window, note="first plan to last commit"
            )
        )
        run = env.run(_verify_command(config), folder / "verify.log", options.timeout)
        report = _report(run.log_path)
        compared = int(report["rows"])
        if compared != rows:
            notes.append(f"WARNING: verify compared {compared:,} rows, the snapshot read {rows:,}")
        measurements.append(
            Measurement.of(run, VERIFY, compared, float(report["seconds"]), note=report["verdict"])
        )
        measurements.append(Measurement.of(run, VERIFY_WALL, compared, run.wall))
        notes.append(f"verify CPU: {run.cpu_line()}")
        if not options.no_lag:
            notes.extend(_lag_while_verifying(env, options, config))
    notes.append(load_line("after"))
    print(
        "\n"
        + format_table(
            f"verify benchmark: {options.rows:,} rows of {BENCH_TABLE}, chunk "
            f"{options.chunk_size}, parallelism {options.parallelism} (snapshot), {options.master}",
            measurements,
            OURS_WINDOW,
        ),
        flush=True,
    )
    for note in notes:
        print(note, flush=True)
    measured = ratio(_get(measurements, VERIFY), _get(measurements, OURS_WINDOW))
    print(bar_line("verify vs snapshot", measured, VERIFY_BAR, "compare vs window"), flush=True)
    return {"measurements": measurements, "notes": notes, "ratio": measured}


def _verify_command(config: Path, rows_per_second: int = 0) -> list[str]:
    return [
        *(sys.executable, "-m", "cdc_console", "verify", "--config", str(config)),
        *("--table", f"{BENCH_DB}.{BENCH_TABLE}", "--json"),
        *("--rows-per-second", str(rows_per_second)),
    ]


def _lag_while_verifying(env: BenchEnv, options: VerifyOptions, config: Path) -> list[str]:
    folder = config.parent
    state = folder / "state" / "pipeline.sqlite"
    job = start_streaming_job(config, env, folder / "stream.log")
    writer = _Writer(env, LIVE, options.rate)
    os.environ.update(env.child_env)  # the sandbox's password, for the sampler's head probes
    sampler = _LagSampler(load_config(config), f"{BENCH_DB}.{LIVE}")
    try:
        wait_running(state, options.timeout)  # the restarted job, not the last run's state
        wait_caught_up(env, state, options.timeout)
        writer.start()
        sampler.start()
        # the restarted job settles first (its lake upkeep's first pass stalled batches for a
        # few seconds about 20 s in, in our runs): the baseline is the steady stream
        time.sleep(options.settle_seconds + options.baseline_seconds)
        started = time.time()
        run = env.run(
            _verify_command(config, options.rows_per_second),
            folder / "verify-streaming.log",
            options.timeout,
        )
        ended = time.time()
    finally:
        sampler.stop()
        writer.stop()
        job.send_signal(signal.SIGTERM)
        job.wait(120)
    before = [lag for ts, lag in sampler.lags if started - options.baseline_seconds <= ts < started]
    during = [lag for ts, lag in sampler.lags if started <= ts <= ended]
    if not before or not during:
        return ["lag while verifying: not measured (no lag samples in a window)"]
    growth = max(during) - max(before)
    verdict = "MET" if growth <= 2.0 else "NOT met"
    return [
        f"lag of {LIVE} ({writer.statements:,} UPDATEs at {options.rate:g}/s) while "
        f"{BENCH_TABLE} was verified ({run.wall:.1f} s, "
        f"{_cap(options.rows_per_second)}): before {_spread(before)}; during {_spread(during)}",
        "lag samples (seconds since the verification started: lag): "
        + ", ".join(f"{ts - started:.0f}: {lag:.1f}" for ts, lag in sampler.lags if lag >= 2.0),
        f"bar other tables' lag while verifying <= before + 2 s: +{growth:.1f} s {verdict}",
    ]


class _LagSampler(threading.Thread):
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


def _cap(rows_per_second: int) -> str:
    return f"at most {rows_per_second:,} rows/s" if rows_per_second else "no rate cap"


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = ordered[len(ordered) // 2]
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {p50:.1f} s, p95 {p95:.1f} s, max {ordered[-1]:.1f} s ({len(values)} samples)"


class _Writer(threading.Thread):
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


def _get(measurements: list[Measurement], label: str) -> Measurement | None:
    return next((m for m in measurements if m.label == label), None)


def _report(log_path: Path) -> dict[str, Any]:
    """``verify --json``'s document from its log (stdout and stderr share the file)."""
    text = log_path.read_text(errors="replace")
    start = text.find("{")
    if start < 0:
        raise BenchError(f"verify printed no report; log {log_path}")
    document: dict[str, Any] = json.JSONDecoder().raw_decode(text[start:])[0]
    return document
