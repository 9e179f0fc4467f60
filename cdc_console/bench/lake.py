"""``cdc-console bench lake --minutes M --rate R``: what the Delta mirror costs under steady writes.

Procedure (one private server, the real job):

1. seed ``orders`` with ``--rows`` rows and run the pipeline until caught up (the snapshot);
2. start the job again, streaming, with the ``[lake]`` settings given (by default maintenance
   every minute and a vacuum retention of 0 h, so the floor is reachable within minutes), and
   write ``--rate`` single-row statements a second for ``--minutes``: 70% UPDATE of a random
   existing id, 20% INSERT at the tail, 10% DELETE of a random id, the shape of an OLTP table;
3. when the job has caught up, stop it (SIGTERM) and measure the mirror ("end of load": what the
   job's own scheduled maintenance left), then run a final optimize and vacuum and measure
   again ("after maintenance").

Reported: lake bytes on disk against live data (the current version's files), files, rows copied
per changed row and MERGE time per batch (the mirror's own Delta history: ``operationMetrics``
of every MERGE during the load), and the change rate the writer reached. Disk holds about
*live + rewrite rate x retention*, so the bench also prints the rewrite rate and what a retention
of one hour would add. Timings are printed, never asserted.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import time
from dataclasses import dataclass, field

from deltalake import DeltaTable

from cdc_console.bench.common import (
    BENCH_DB,
    BENCH_TABLE,
    BenchEnv,
    RunOptions,
    bench_env,
    machine_line,
    seed_rows,
    start_streaming_job,
    wait_caught_up,
    wait_running,
    write_pipeline_config,
)
from cdc_console.bench.processes import pipeline_command
from cdc_console.bench.stream_lag import LagSampler, spread
from cdc_console.config import LakeConfig, load_config
from cdc_console.sinks.delta import pipeline_app_id
from cdc_console.sinks.maintenance import Footprint, LakeTable, footprint, optimize, vacuum
from cdc_console.units import size

DISK_BAR = 2.0
MIX = (("update", 70), ("insert", 20), ("delete", 10))


@dataclass(kw_only=True)
class LakeOptions(RunOptions):
    rows: int
    minutes: float
    rate: float
    optimize_every: str = "1m"
    retention_hours: float = 0.0
    target_file_size: str | None = None
    layout: str = "merge-on-read"


@dataclass
class Phase:
    """The mirror as measured at one point, and the MERGEs that led there."""

    name: str
    files: int
    live_bytes: int
    disk_bytes: int
    rows: int

    @classmethod
    def of(cls, name: str, found: Footprint) -> Phase:
        return cls(name, found.files, found.live_bytes, found.disk_bytes, found.rows)

    @property
    def ratio(self) -> float:
        return self.disk_bytes / self.live_bytes if self.live_bytes else 0.0

    def line(self) -> str:
        return (
            f"{self.name:<22} {self.files:>7,} files {size(self.live_bytes):>10} live "
            f"{size(self.disk_bytes):>10} on disk  disk/live {self.ratio:.2f}x  {self.rows:,} rows"
        )


@dataclass
class LakeResult:
    statements: int = 0
    seconds: float = 0.0
    merges: int = 0
    copied_per_changed: float | None = None
    copied_per_changed_p99: float | None = None
    written_per_changed: float | None = None
    merge_ms_p50: float | None = None
    merge_ms_p99: float | None = None
    rewrite_bytes_per_second: float | None = None
    phases: list[Phase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: (wall clock, the mirror's lag in seconds) once a second while the writer ran
    lags: list[tuple[float, float]] = field(default_factory=list)

    def lag_trend(self) -> tuple[float, float] | None:
        """The mean lag of the first and of the last fifth of the writes: a stream that keeps
        up has them alike; one that falls behind, the second growing with the run."""
        if len(self.lags) < 10:
            return None
        fifth = len(self.lags) // 5
        first = [lag for _, lag in self.lags[:fifth]]
        last = [lag for _, lag in self.lags[-fifth:]]
        return statistics.fmean(first), statistics.fmean(last)


def run_lake_bench(options: LakeOptions) -> LakeResult:
    result = LakeResult()
    print(machine_line(), flush=True)
    with bench_env(options.workdir, options.keep) as env:
        seconds = seed_rows(env, 1, options.rows)
        print(f"seeded {BENCH_TABLE} with {options.rows:,} rows in {seconds:.1f}s", flush=True)
        folder = env.next_dir("lake")
        config_path = write_pipeline_config(
            folder,
            env,
            master=options.master,
            extra={"lake": _lake_section(options)},
        )
        config = load_config(config_path)
        mirror = LakeTable(
            f"{BENCH_DB}.{BENCH_TABLE}", "mirror", config.sink.path / BENCH_DB / BENCH_TABLE
        )
        first = env.run(pipeline_command(config_path), folder / "snapshot.log", options.timeout)
        print(f"snapshot, then caught up: {first.wall:.1f}s", flush=True)
        result.phases.append(Phase.of("after the snapshot", _measure(mirror, config.lake)))

        job = start_streaming_job(config_path, env, folder / "stream.log")
        try:
            wait_running(config.state_path, options.timeout)
            started = time.time()
            os.environ.update(env.child_env)  # the sandbox's password, for the head probes
            sampler = LagSampler(config, mirror.name)
            sampler.start()
            try:
                result.statements, result.seconds = _write(env, options)
            finally:
                sampler.stop()
            result.lags = sampler.lags
            print(
                f"wrote {result.statements:,} statements in {result.seconds:.0f}s "
                f"({result.statements / result.seconds:,.0f}/s)",
                flush=True,
            )
            wait_caught_up(env, config.state_path, options.timeout)
        finally:
            job.send_signal(signal.SIGTERM)
            job.wait(120)
        result.phases.append(Phase.of("end of load", _measure(mirror, config.lake)))
        _merges(mirror, started, result)
        optimize(mirror, config.lake)
        vacuum(mirror, config.lake, app_id=pipeline_app_id(config.name))
        result.phases.append(Phase.of("after maintenance", _measure(mirror, config.lake)))
    _print(result, options)
    return result


def _lake_section(options: LakeOptions) -> dict[str, str | float | bool | None]:
    return {
        "optimize_every": options.optimize_every,
        "vacuum_every": options.optimize_every,
        "vacuum_retention_hours": options.retention_hours,
        "target_file_size": options.target_file_size,
        "deletion_vectors": options.layout == "merge-on-read",
    }


def _measure(mirror: LakeTable, lake: LakeConfig) -> Footprint:
    return footprint(mirror, lake.target_file_size)


def _write(env: BenchEnv, options: LakeOptions) -> tuple[int, float]:
    """``options.rate`` single-row statements a second for ``options.minutes``, autocommitted."""
    rng = random.Random(1124)
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    next_id = options.rows + 1
    conn = env.connect()
    statements = 0
    clock = time.monotonic()
    end = clock + options.minutes * 60
    try:
        with conn.cursor() as cur:
            while (now := time.monotonic()) < end:
                due = int((now - clock) * options.rate) + 1
                while statements < due:
                    kind = rng.choice(kinds)
                    if kind == "insert":
                        cur.execute(
                            f"INSERT INTO {BENCH_TABLE} VALUES (%s, 'lake bench', 1.25, 'insert', "
                            "NOW(6))",
                            (next_id,),
                        )
                        next_id += 1
                    elif kind == "update":
                        cur.execute(
                            f"UPDATE {BENCH_TABLE} SET amount = amount + 1, updated = NOW(6) "
                            "WHERE id = %s",
                            (rng.randint(1, options.rows),),
                        )
                    else:
                        cur.execute(
                            f"DELETE FROM {BENCH_TABLE} WHERE id = %s",
                            (rng.randint(1, options.rows),),
                        )
                    statements += 1
                time.sleep(0.01)
    finally:
        conn.close()
    return statements, time.monotonic() - clock


def _merges(mirror: LakeTable, since: float, result: LakeResult) -> None:
    """Rows copied per changed row and MERGE time, from the mirror's Delta history."""
    copied: list[float] = []
    written: list[float] = []
    millis: list[float] = []
    added = 0
    for commit in DeltaTable(str(mirror.path)).history():
        if commit.get("operation") != "MERGE" or commit.get("timestamp", 0) < since * 1000:
            continue
        metrics: dict[str, int | float | str] = commit.get("operationMetrics") or {}
        changed = sum(
            int(metrics.get(f"num_target_rows_{kind}", 0))
            for kind in ("updated", "deleted", "inserted")
        )
        if changed:
            copied.append(int(metrics.get("num_target_rows_copied", 0)) / changed)
            written.append(int(metrics.get("num_output_rows", 0)) / changed)
        if "execution_time_ms" in metrics:
            millis.append(float(metrics["execution_time_ms"]))
        added += int(metrics.get("num_target_files_added", 0))
    result.merges = len(copied)
    if copied:
        result.copied_per_changed = statistics.fmean(copied)
        result.copied_per_changed_p99 = _p99(copied)
        result.written_per_changed = statistics.fmean(written)
    if millis:
        result.merge_ms_p50 = statistics.median(millis)
        result.merge_ms_p99 = _p99(millis)
    end = result.phases[-1]
    if end.files and result.seconds:
        result.rewrite_bytes_per_second = added * (end.live_bytes / end.files) / result.seconds


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def _print(result: LakeResult, options: LakeOptions) -> None:
    print(
        f"\nlake benchmark: {options.rows:,} rows, {options.rate:g} statements/s for "
        f"{options.minutes:g} min (70% update, 20% insert, 10% delete), {options.master}, "
        f"{options.layout} mirror; "
        f"maintenance every {options.optimize_every}, vacuum retention "
        f"{options.retention_hours:g} h",
        flush=True,
    )
    for phase in result.phases:
        print(phase.line(), flush=True)
    if result.copied_per_changed is not None:
        print(
            f"rows copied per changed row: mean {result.copied_per_changed:,.0f}, p99 "
            f"{result.copied_per_changed_p99:,.0f} over {result.merges} MERGE(s); rows written "
            f"per changed row: mean {result.written_per_changed or 0:,.2f}",
            flush=True,
        )
    if result.merge_ms_p50 is not None:
        print(
            f"MERGE time per batch: p50 {result.merge_ms_p50:,.0f} ms, p99 "
            f"{result.merge_ms_p99:,.0f} ms",
            flush=True,
        )
    if result.lags:
        print(f"mirror lag while writing: {spread([lag for _, lag in result.lags])}", flush=True)
        trend = result.lag_trend()
        if trend is not None:
            print(
                f"mean lag over the first fifth of the writes {trend[0]:.1f} s, over the last "
                f"fifth {trend[1]:.1f} s",
                flush=True,
            )
    if result.rewrite_bytes_per_second is not None:
        hour = result.rewrite_bytes_per_second * 3600
        print(
            f"rewrite rate ~{size(result.rewrite_bytes_per_second)}/s: a vacuum retention of "
            f"1 h keeps ~{size(hour)} more on disk",
            flush=True,
        )
    for note in result.notes:
        print(note, flush=True)
    after = result.phases[-1]
    verdict = "MET" if after.ratio <= DISK_BAR else "MISSED"
    print(
        f"bar disk <= {DISK_BAR:.1f}x live data after maintenance: {after.ratio:.2f}x {verdict}",
        flush=True,
    )
