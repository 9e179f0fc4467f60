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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from cdc_console.bench.common import (
    BENCH_DB,
    BENCH_TABLE,
    BenchEnv,
    Measurement,
    bar_line,
    bench_env,
    format_table,
    load_line,
    machine_line,
    ratio,
)
from cdc_console.bench.processes import BenchError, ChildRun
from cdc_console.bench.snapshot import OURS_WINDOW
from cdc_console.bench.stream_lag import (
    LIVE,
    LIVE_ROWS,
    LiveTableOptions,
    lag_around,
    snapshot_with_live_table,
    spread,
)

VERIFY = "verify (compare)"
VERIFY_WALL = "verify (process wall)"
VERIFY_BAR = 0.8


@dataclass(kw_only=True)
class VerifyOptions(LiveTableOptions):
    no_lag: bool = False
    baseline_seconds: float = 20.0
    settle_seconds: float = 40.0
    #: the verification's cap in the lag phase (``verify --rows-per-second``); 0: none
    rows_per_second: int = 0


class VerifyFigures(TypedDict):
    """What ``bench verify`` saves with ``--json``."""

    measurements: list[Measurement]
    notes: list[str]
    ratio: float | None


class _VerifyDocument(TypedDict):
    """The keys of ``verify --json``'s document this benchmark reads."""

    rows: int
    seconds: float
    verdict: str


def run_verify_bench(options: VerifyOptions) -> VerifyFigures:
    print(machine_line(), flush=True)
    notes = [load_line("before")]
    measurements: list[Measurement] = []
    with bench_env(options.workdir, options.keep) as env:
        ours = snapshot_with_live_table(env, "ours-snapshot-then-verify", options)
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
    def verify() -> ChildRun:
        return env.run(
            _verify_command(config, options.rows_per_second),
            config.parent / "verify-streaming.log",
            options.timeout,
        )

    lag = lag_around(env, config, LIVE, options, verify)
    if not lag.before or not lag.during:
        return ["lag while verifying: not measured (no lag samples in a window)"]
    growth = max(lag.during) - max(lag.before)
    verdict = "MET" if growth <= 2.0 else "NOT met"
    return [
        f"lag of {LIVE} ({lag.statements:,} UPDATEs at {options.rate:g}/s) while "
        f"{BENCH_TABLE} was verified ({lag.result.wall:.1f} s, "
        f"{_cap(options.rows_per_second)}): before {spread(lag.before)}; "
        f"during {spread(lag.during)}",
        "lag samples (seconds since the verification started: lag): "
        + ", ".join(f"{ts - lag.started:.0f}: {v:.1f}" for ts, v in lag.samples if v >= 2.0),
        f"bar other tables' lag while verifying <= before + 2 s: +{growth:.1f} s {verdict}",
    ]


def _cap(rows_per_second: int) -> str:
    return f"at most {rows_per_second:,} rows/s" if rows_per_second else "no rate cap"


def _get(measurements: list[Measurement], label: str) -> Measurement | None:
    return next((m for m in measurements if m.label == label), None)


def _report(log_path: Path) -> _VerifyDocument:
    """``verify --json``'s document from its log (stdout and stderr share the file)."""
    text = log_path.read_text(errors="replace")
    start = text.find("{")
    if start < 0:
        raise BenchError(f"verify printed no report; log {log_path}")
    document: _VerifyDocument = json.JSONDecoder().raw_decode(text[start:])[0]
    return document
