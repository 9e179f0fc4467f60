"""``cdc-console bench redump --rows N``: the other tables' lag while one table is re-dumped.

The table is seeded (with a small ``orders_live`` beside it), snapshotted into fresh Delta
mirrors by ``cdc-console run --until-caught-up``; then, for each chunk budget of ``--budgets``
(``[snapshot] batch_seconds_while_streaming``; 0 is no cap, a re-dump planned like a first
snapshot), the pipeline streams again while a writer keeps ``--rate`` single-row UPDATEs a
second on ``orders_live``, and ``cdc-console redump --table bench.orders`` re-reads the big
table. The lag of ``orders_live`` (``figures.position_lag``, as ``status`` and the metrics define
it) is sampled every second before the re-dump and until the table streams again.

The bar: the other tables' lag p99 while a table is re-dumped stays at or under 2 s.

Each pass also checks the finish-time estimates (``figures``) against the clock: the forecast
``redump`` prints before the re-dump starts (from the table's last read), and the estimate
``status`` shows once a quarter of the new chunks are done, each against the time it really took.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from cdc_console.bench.common import (
    BENCH_DB,
    BENCH_TABLE,
    BenchEnv,
    bench_env,
    load_line,
    machine_line,
)
from cdc_console.bench.processes import BenchError
from cdc_console.bench.stream_lag import (
    LIVE,
    LiveTableOptions,
    lag_around,
    quantile,
    snapshot_with_live_table,
    spread,
)
from cdc_console.config import load_config
from cdc_console.config_writer import write_config
from cdc_console.core.estimate import FinishEstimate
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.schema import TableId
from cdc_console.figures import ReadPacing, read_estimates, redump_forecast
from cdc_console.state.store import StateStore

LAG_BAR_SECONDS = 2.0


@dataclass(kw_only=True)
class RedumpOptions(LiveTableOptions):
    #: ``batch_seconds_while_streaming`` of each pass, comma separated
    budgets: str = "0,1"
    settle_seconds: float = 30.0
    baseline_seconds: float = 15.0


@dataclass
class RedumpPass:
    budget: float
    seconds: float
    batches: int
    before: list[float]
    during: list[float]
    #: the finish time forecast before the re-dump started, in seconds (None: no forecast)
    forecast: float | None = None
    #: (time left as estimated with a quarter of the chunks done, time it really took then)
    quarter: tuple[float, float] | None = None

    @property
    def p99(self) -> float | None:
        return quantile(self.during, 0.99) if self.during else None


class RedumpFigures(TypedDict):
    """What ``bench redump`` saves with ``--json``."""

    passes: list[RedumpPass]
    notes: list[str]


def run_redump_bench(options: RedumpOptions) -> RedumpFigures:
    print(machine_line(), flush=True)
    notes = [load_line("before")]
    budgets = [float(b) for b in options.budgets.split(",") if b.strip()]
    if not budgets:
        raise BenchError("--budgets names no budget; e.g. --budgets 0,1")
    passes: list[RedumpPass] = []
    with bench_env(options.workdir, options.keep) as env:
        ours = snapshot_with_live_table(env, "ours-snapshot-then-redump", options)
        for budget in budgets:
            passes.append(_one_pass(env, options, ours.config, budget))
            print(_pass_line(passes[-1], options), flush=True)
    notes.append(load_line("after"))
    print(
        f"\nredump benchmark: {options.rows:,} rows of {BENCH_TABLE} re-dumped while {LIVE} "
        f"streams {options.rate:g} UPDATEs/s; chunk {options.chunk_size}, parallelism "
        f"{options.parallelism}, {options.master}",
        flush=True,
    )
    for one in passes:
        print(_pass_line(one, options), flush=True)
    for note in notes:
        print(note, flush=True)
    last = passes[-1]
    p99 = "not measured" if last.p99 is None else f"{last.p99:.1f} s"
    verdict = "" if last.p99 is None else " MET" if last.p99 <= LAG_BAR_SECONDS else " MISSED"
    print(
        f"bar other tables' lag p99 while re-dumping <= {LAG_BAR_SECONDS:g} s: {p99}{verdict} "
        f"(budget {last.budget:g} s)",
        flush=True,
    )
    return {"passes": passes, "notes": notes}


def _pass_line(one: RedumpPass, options: RedumpOptions) -> str:
    if not one.before or not one.during:
        return f"budget {one.budget:g} s: lag not measured (no samples in a window)"
    return (
        f"budget {one.budget:g} s: re-dump {options.rows:,} rows in {one.seconds:.1f} s "
        f"({one.batches} batches, {options.rows / one.seconds:,.0f} rows/s); lag of {LIVE} "
        f"before {spread(one.before)}; during {spread(one.during)}; {_estimates_line(one)}"
    )


def _estimates_line(one: RedumpPass) -> str:
    """The finish-time estimates against the clock, each with its error."""

    def error(estimated: float, actual: float) -> str:
        return f"{estimated:.1f} s for {actual:.1f} s ({(estimated - actual) / actual:+.0%})"

    forecast = (
        "forecast none" if one.forecast is None else f"forecast {error(one.forecast, one.seconds)}"
    )
    quarter = "at a quarter none" if one.quarter is None else f"at a quarter {error(*one.quarter)}"
    return f"finish time {forecast}, {quarter}"


def _one_pass(env: BenchEnv, options: RedumpOptions, config: Path, budget: float) -> RedumpPass:
    _set_budget(config, budget)
    state = config.parent / "state" / "pipeline.sqlite"

    forecast: float | None = None
    quarter: list[tuple[float, float]] = []

    def redump() -> tuple[float, int]:
        nonlocal forecast
        estimate = _forecast(config, state)
        forecast = estimate.seconds if estimate is not None else None
        clock = time.monotonic()
        first_batch, generation, _ = _progress(state)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "cdc_console", "redump", "--config", str(config)),
                *("--table", f"{BENCH_DB}.{BENCH_TABLE}"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **env.child_env},
        )
        if done.returncode != 0:
            raise BenchError(f"redump was refused: {done.stdout}{done.stderr}")
        deadline = time.monotonic() + options.timeout
        at_quarter: tuple[float, float] | None = None
        while True:
            last_batch, now_generation, streams = _progress(state)
            if now_generation > generation and streams:
                end = time.monotonic()
                if at_quarter is not None:
                    quarter.append((at_quarter[1], end - at_quarter[0]))
                return end - clock, last_batch - first_batch
            if at_quarter is None and now_generation > generation:
                left = _quarter_estimate(state)
                if left is not None:
                    at_quarter = (time.monotonic(), left)
            if time.monotonic() > deadline:
                raise BenchError(f"{BENCH_TABLE} did not stream again after its re-dump")
            time.sleep(0.2)

    lag = lag_around(env, config, LIVE, options, redump)
    seconds, batches = lag.result
    return RedumpPass(
        budget,
        seconds,
        batches,
        lag.before,
        lag.during,
        forecast,
        quarter[0] if quarter else None,
    )


def _forecast(config: Path, state: Path) -> FinishEstimate | None:
    """What ``redump`` forecasts, as it paces the read."""
    pacing = ReadPacing.of(load_config(config))
    store = StateStore(state)
    try:
        return redump_forecast(store, TableId(BENCH_DB, BENCH_TABLE), pacing)
    finally:
        store.close()


def _quarter_estimate(state: Path) -> float | None:
    """The time left as ``status`` estimates it, once a quarter of the chunks are done."""
    store = StateStore(state)
    try:
        table = next(t for t in store.tables() if t.table_id.table == BENCH_TABLE)
        if not table.splits_total or table.splits_done * 4 < table.splits_total:
            return None
        found = read_estimates(store, [table], time.time()).tables.get(table.table_id)
        return found.seconds if found is not None else None
    finally:
        store.close()


def _set_budget(config: Path, budget: float) -> None:
    doc = tomllib.loads(config.read_text())
    doc.setdefault("snapshot", {})["batch_seconds_while_streaming"] = budget
    write_config(config, doc)


def _progress(state: Path) -> tuple[int, int, bool]:
    """The last applied batch, the bench table's generation (a re-dump adds one) and whether it
    streams, in one read."""
    store = StateStore(state)
    try:
        table = next(t for t in store.tables() if t.table_id.table == BENCH_TABLE)
        return store.last_applied_batch(), table.generation, table.state == Lifecycle.STREAMING
    finally:
        store.close()
