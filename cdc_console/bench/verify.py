"""``cdc-console bench verify --rows N``: how fast a mirror is verified, next to how fast it was
snapshotted, in one run against one server.

The table is seeded, then ``cdc-console run`` snapshots it into a fresh Delta mirror
(``startup_mode = "snapshot-only"``, exactly as ``bench snapshot`` runs it); then ``cdc-console
verify`` compares the whole mirror with the source, each chunk through the same LW / SELECT / HW
procedure as the snapshot. Lines:

- **ours snapshot -> delta (window)**: first batch's plan to last commit, as in ``bench
  snapshot``;
- **verify (compare)**: the rows compared over the time ``verify`` itself reports (source reads,
  mirror reads, the binlog fold and the comparison);
- **verify (process wall)**: the same rows over the ``verify`` process's wall time, interpreter
  start-up included.

The bar compares *verify (compare)* with the snapshot window: both are the steady-state work.

Then the stream's side (skipped with ``--no-lag``): a second pipeline captures the same table and
a small ``orders_live`` one, snapshots both and streams; a writer keeps ``--rate`` single-row
UPDATEs a second on ``orders_live`` while the big table is verified. The job's own event-time
lag samples (one a second) before and during the verification give the bar "the other tables'
lag while a verification runs stays within 2 s of what it was".
"""

from __future__ import annotations

import json
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
    write_pipeline_config,
)
from cdc_console.bench.snapshot import OURS_WINDOW, snapshot_ours
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.state.store import LagSample, StateStore

VERIFY = "verify (compare)"
VERIFY_WALL = "verify (process wall)"
VERIFY_BAR = 0.8


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


def run_verify_bench(options: VerifyOptions) -> dict[str, Any]:
    print(machine_line(), flush=True)
    notes = [load_line("before")]
    measurements: list[Measurement] = []
    with bench_env(options.workdir, options.keep) as env:
        seconds = seed_rows(env, 1, options.rows)
        print(f"seeded {BENCH_TABLE} to {options.rows:,} rows in {seconds:.1f}s", flush=True)
        ours = snapshot_ours(
            env,
            "ours-snapshot-then-verify",
            chunk_size=options.chunk_size,
            parallelism=options.parallelism,
            changelog=False,
            master=options.master,
            timeout=options.timeout,
        )
        rows, config, folder = ours.rows, ours.config, ours.config.parent
        measurements.append(
            Measurement.of(
                ours.job, OURS_WINDOW, rows, ours.window, note="first plan to last commit"
            )
        )
        command = [sys.executable, "-m", "cdc_console", "verify", "--config", str(config), "--json"]
        run = env.run(command, folder / "verify.log", options.timeout)
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
            notes.extend(_lag_while_verifying(env, options))
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


def _lag_while_verifying(env: BenchEnv, options: VerifyOptions) -> list[str]:
    live = f"{BENCH_TABLE}_live"
    env.execute(
        f"CREATE TABLE {live} LIKE {BENCH_TABLE}",
        f"INSERT INTO {live} SELECT * FROM {BENCH_TABLE} WHERE id <= 10000",
    )
    folder = env.next_dir("lag-while-verifying")
    config_path = write_pipeline_config(
        folder,
        env,
        startup_mode="initial",
        chunk_size=options.chunk_size,
        parallelism=options.parallelism,
        changelog=False,
        master=options.master,
        extra={"pipeline": {"heartbeat_seconds": 1}},
        tables=[f"{BENCH_DB}.{BENCH_TABLE}", f"{BENCH_DB}.{live}"],
    )
    state = folder / "state" / "pipeline.sqlite"
    job = start_streaming_job(config_path, env, folder / "job.log")
    writer = _Writer(env, live, options.rate)
    try:
        _wait_all_streaming(state, 2, options.timeout)
        writer.start()
        time.sleep(options.baseline_seconds)
        started = time.time()
        command = [
            sys.executable,
            "-m",
            "cdc_console",
            "verify",
            "--config",
            str(config_path),
            "--table",
            f"{BENCH_DB}.{BENCH_TABLE}",
            "--json",
        ]
        run = env.run(command, folder / "verify.log", options.timeout)
        ended = time.time()
        time.sleep(3)
    finally:
        writer.stop()
        job.send_signal(signal.SIGTERM)
        job.wait(120)
    store = StateStore(state)
    try:
        samples = store.lag_samples(100_000)
    finally:
        store.close()
    before = _lags(samples, started - options.baseline_seconds, started)
    during = _lags(samples, started, ended)
    if not before or not during:
        return ["lag while verifying: not measured (no lag samples in a window)"]
    growth = max(during) - max(before)
    verdict = "MET" if growth <= 2.0 else "NOT met"
    return [
        f"lag of {live} ({writer.statements:,} UPDATEs at {options.rate:g}/s) while "
        f"{BENCH_TABLE} was verified ({run.wall:.1f} s): before p50 {_p50(before):.1f} s, max "
        f"{max(before):.1f} s ({len(before)} samples); during p50 {_p50(during):.1f} s, max "
        f"{max(during):.1f} s ({len(during)} samples)",
        f"bar other tables' lag while verifying <= before + 2 s: +{growth:.1f} s {verdict}",
    ]


def _lags(samples: list[LagSample], start: float, end: float) -> list[float]:
    return [
        s.event_lag_ms / 1000
        for s in samples
        if start <= s.ts <= end and s.event_lag_ms is not None
    ]


def _p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _wait_all_streaming(state: Path, tables: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists():
            store = StateStore(state)
            try:
                found = store.tables()
            finally:
                store.close()
            if len(found) == tables and all(t.state == Lifecycle.STREAMING for t in found):
                return
        time.sleep(0.5)
    raise BenchError(f"the tables did not all stream within {timeout:.0f}s")


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
