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
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_console.bench.common import (
    BENCH_TABLE,
    BenchError,
    Measurement,
    bar_line,
    bench_env,
    format_table,
    load_line,
    machine_line,
    pipeline_command,
    ratio,
    seed_rows,
    write_pipeline_config,
)
from cdc_console.state.readonly import batch_times, split_totals

OURS_WINDOW = "ours snapshot -> delta (window)"
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


def run_verify_bench(options: VerifyOptions) -> dict[str, Any]:
    print(machine_line(), flush=True)
    notes = [load_line("before")]
    measurements: list[Measurement] = []
    with bench_env(options.workdir, options.keep) as env:
        seconds = seed_rows(env, 1, options.rows)
        print(f"seeded {BENCH_TABLE} to {options.rows:,} rows in {seconds:.1f}s", flush=True)
        folder = env.next_dir("ours-snapshot-then-verify")
        config = write_pipeline_config(
            folder,
            env,
            startup_mode="snapshot-only",
            chunk_size=options.chunk_size,
            parallelism=options.parallelism,
            changelog=False,
            master=options.master,
        )
        job = env.run(pipeline_command(config), folder / "job.log", options.timeout)
        state = folder / "state" / "pipeline.sqlite"
        applied = [b for b in batch_times(state) if b.applied_at is not None]
        if not applied:
            raise BenchError(f"the pipeline applied no batch; log {job.log_path}")
        rows = split_totals(state).rows
        first = min(b.created_at for b in applied)
        last = max(b.applied_at for b in applied if b.applied_at is not None)
        measurements.append(
            Measurement.of(job, OURS_WINDOW, rows, last - first, note="first plan to last commit")
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
