"""``cdc-console bench snapshot --rows N[,M…]``: reading a whole table, three ways.

For each size (the table grows in place: 1M, then 2M more rows for 3M) it runs, each in its own
process:

- **pymysql chunk scan**: ``SELECT *`` in primary-key ranges of ``chunk_size`` over the whole
  table, one connection, default converters. The single-process client ceiling.
- **spark jdbc → parquet**: Spark's built-in JDBC reader with the MariaDB Connector/J jar, 2
  partitions on ``id``, written to Parquet. The peer a Spark user picks for a one-off copy, and
  the reference of the bar "snapshot >= 0.5x the JDBC reader".
- **ours**: ``cdc-console run --until-caught-up`` with ``startup_mode = "snapshot-only"`` into a
  fresh Delta mirror (no changelog unless ``--changelog``: the JDBC peer writes one copy too).

"ours" is reported twice: the *snapshot window*, from the first batch's plan to the last batch's
commit (timestamps in the state database), which leaves out interpreter, preflight and Spark
start-up and the shutdown after the last commit; and the *process wall* time, comparable with the
JDBC process wall (which also pays for a Spark session). The JDBC *job* time likewise excludes its
Spark start-up, so the window-vs-job ratio compares steady-state throughput.

Peak memory is the summed RSS of each contender's process tree; run with two sizes to see whether
the pipeline's peak stays flat as the table grows (it should: a batch holds at most
``2 * parallelism`` chunks).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cdc_console.bench.common import (
    BENCH_TABLE,
    PASSWORD_ENV,
    BenchEnv,
    Measured,
    Measurement,
    SnapshotRunOptions,
    SparkSetup,
    bar_line,
    bench_env,
    breakdown_line,
    format_table,
    load_line,
    machine_line,
    met_line,
    ratio,
    run_tag,
    seed_rows,
    spark_setups,
    tag_slug,
    write_pipeline_config,
)
from cdc_console.bench.processes import (
    BenchError,
    ChildRun,
    failure_note,
    pipeline_command,
    worker_command,
)
from cdc_console.state.readonly import BatchTimes, batch_times, split_totals

PYMYSQL = "pymysql chunk scan"
#: the machine's limit: the server's own C client reading the table, rows thrown away
C_READ = "C client read (mariadb --quick), {n} conn"
JDBC_JOB = "spark jdbc -> parquet (job)"
JDBC_WALL = "spark jdbc -> parquet (process wall)"
OURS_WINDOW = "ours snapshot -> delta (window)"
OURS_WALL = "ours snapshot -> delta (process wall)"
SNAPSHOT_BAR = 0.5
#: the performance targets: the window at 3M rows vs the JDBC job, process wall vs process wall, and
#: the peak RSS of the pipeline's process tree
ROUND2_WINDOW_BAR = 1.5
ROUND2_WALL_BAR = 1.0
ROUND2_PEAK_MB = 1.2 * 1024


@dataclass(kw_only=True)
class SnapshotOptions(SnapshotRunOptions):
    rows: list[int]
    jdbc_jar: Path | None = None
    skip: frozenset[str] = frozenset()
    changelog: bool = False
    #: ``[lake] snapshot_writes`` of ours, one run each (the first is the one the bars judge)
    snapshot_writes: tuple[str, ...] = ("executors",)


@dataclass
class SizeResult(Measured):
    rows: int
    measurements: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def run_snapshot_bench(options: SnapshotOptions) -> list[SizeResult]:
    """Run every size in ascending order against one sandbox; print each table as it completes."""
    results: list[SizeResult] = []
    print(machine_line(), flush=True)
    with bench_env(options.workdir, options.keep) as env:
        seeded = 0
        for size in sorted(set(options.rows)):
            if size > seeded:
                seconds = seed_rows(env, seeded + 1, size)
                print(f"seeded {BENCH_TABLE} to {size:,} rows in {seconds:.1f}s", flush=True)
                seeded = size
            results.append(_one_size(env, size, options))
    if len(results) > 1:
        print(memory_growth_line(results), flush=True)
    return results


def _one_size(env: BenchEnv, size: int, options: SnapshotOptions) -> SizeResult:
    result = SizeResult(size)
    result.notes.append(load_line("before"))
    params: dict[str, str | int] = {**env.source_params(), "chunk_size": options.chunk_size}
    if "pymysql" not in options.skip:
        run = env.run(
            worker_command("pymysql-scan", params),
            env.next_dir("pymysql-scan") / "worker.log",
            options.timeout,
        )
        result.measurements.append(
            Measurement.of(run, PYMYSQL, run.result["rows"], run.result["seconds"])
        )
    if "c" not in options.skip:
        for connections in (1, 2):
            _c_read(env, size, connections, options, result)
    if "jdbc" not in options.skip:
        _jdbc(env, params, options, result)
    if "ours" not in options.skip:
        setups = spark_setups(options.master, options.executors)
        for mode in options.snapshot_writes:
            for setup in setups:
                variant = mode if mode != options.snapshot_writes[0] else ""
                _ours(env, size, options, result, mode, setup, tag=run_tag(variant, setup))
    result.notes.append(load_line("after"))
    _report(size, options, result)
    return result


def _jdbc(
    env: BenchEnv, params: dict[str, str | int], options: SnapshotOptions, result: SizeResult
) -> None:
    """The peer: Spark's own JDBC reader writing Parquet, split on the key as ours is."""
    jar = options.jdbc_jar
    if jar is None or not jar.exists():
        result.notes.append(
            f"spark jdbc skipped: no JDBC jar at {jar} (Debian: apt-get install "
            "libmariadb-java, or pass --jdbc-jar)"
        )
    else:
        folder = env.next_dir("spark-jdbc")
        low, high = _id_bounds(env)
        jdbc_params = {
            **params,
            "jar": str(jar),
            "master": options.master,
            "min_id": low,
            "max_id": high,
            "out_dir": str(folder),
        }
        try:
            run = env.run(
                worker_command("spark-jdbc", jdbc_params),
                folder / "worker.log",
                options.timeout,
            )
        except BenchError as exc:
            # The reference failing (at 10M rows it has) must not cost ours' figures.
            result.notes.append(failure_note("spark jdbc", exc))
        else:
            rows, seconds = run.result["rows"], run.result["seconds"]
            result.measurements.append(
                Measurement.of(
                    run,
                    JDBC_JOB,
                    rows,
                    seconds,
                    note=f"Spark start-up {run.result['startup']:.1f}s excluded",
                )
            )
            result.measurements.append(Measurement.of(run, JDBC_WALL, rows, run.wall))
            result.notes.append(f"spark jdbc CPU: {run.cpu_line()}")
            result.notes.append(f"spark jdbc memory: {run.memory_line()}")


def _report(size: int, options: SnapshotOptions, result: SizeResult) -> None:
    """The table of contenders, the notes, and ours against the client's read and the bars."""
    reference = JDBC_JOB if result.get(JDBC_JOB) else PYMYSQL
    print(
        "\n"
        + format_table(
            f"snapshot benchmark: {size:,} rows of {BENCH_TABLE}, chunk {options.chunk_size}, "
            f"parallelism {options.parallelism}, {options.master}",
            result.measurements,
            reference,
        ),
        flush=True,
    )
    for note in result.notes:
        print(note, flush=True)
    window = ratio(result.get(OURS_WINDOW), result.get(JDBC_JOB))
    wall = ratio(result.get(OURS_WALL), result.get(JDBC_WALL))
    for connections in (1, 2):
        share = ratio(result.get(OURS_WINDOW), result.get(C_READ.format(n=connections)))
        if share is not None:
            print(
                f"ours window as a share of the C client's read on {connections} "
                f"connection(s) (the machine's limit): {share:.1%}",
                flush=True,
            )
    print(
        bar_line(
            "snapshot vs spark jdbc",
            window,
            SNAPSHOT_BAR,
            f"window vs job; process wall vs wall {wall:.2f}x" if wall else "window vs job",
        ),
        flush=True,
    )
    for line in round2_lines(result):
        print(line, flush=True)


def round2_lines(result: SizeResult) -> list[str]:
    """The snapshot's performance targets, MET or NOT MET, on this size's first ``ours`` run."""
    window = ratio(result.get(OURS_WINDOW), result.get(JDBC_JOB))
    wall = ratio(result.get(OURS_WALL), result.get(JDBC_WALL))
    ours = result.get(OURS_WALL)
    peak = ours.peak_rss_mb if ours is not None else None
    size = f"at {result.rows:,} rows (the bar is set at 3M)"
    lines = [
        met_line("window vs spark jdbc job", window, ROUND2_WINDOW_BAR, "x", size),
        met_line("process wall vs spark jdbc process wall", wall, ROUND2_WALL_BAR, "x", size),
    ]
    if peak is None:
        lines.append("target peak RSS <= 1229 MB: not measured")
    else:
        verdict = "MET" if peak <= ROUND2_PEAK_MB else "NOT MET"
        lines.append(f"target peak RSS <= {ROUND2_PEAK_MB:.0f} MB: {peak:,.0f} MB {verdict}")
    return lines


@dataclass
class OursSnapshot:
    """One ``run --until-caught-up`` in snapshot-only mode into a fresh mirror, and its window."""

    job: ChildRun
    config: Path
    state: Path
    batches: list[BatchTimes]
    rows: int
    #: first batch planned to last batch committed
    window: float


def snapshot_ours(
    env: BenchEnv,
    name: str,
    options: SnapshotRunOptions,
    *,
    changelog: bool,
    startup_mode: str = "snapshot-only",
    extra: Mapping[str, object] | None = None,
    tables: list[str] | None = None,
    setup: SparkSetup | None = None,
) -> OursSnapshot:
    """Snapshot the bench table as ``bench snapshot``'s *ours* line does; ``bench verify`` snapshots
    it with a second table and keeps them streaming (``startup_mode = "initial"``)."""
    folder = env.next_dir(name)
    config = write_pipeline_config(
        folder,
        env,
        startup_mode=startup_mode,
        chunk_size=options.chunk_size,
        parallelism=options.parallelism,
        changelog=changelog,
        master=setup.master if setup is not None else options.master,
        extra=extra,
        tables=tables,
        spark_conf=setup.conf if setup is not None else None,
    )
    job = env.run(pipeline_command(config), folder / "job.log", options.timeout)
    state = folder / "state" / "pipeline.sqlite"
    batches = batch_times(state)
    applied = [b for b in batches if b.applied_at is not None]
    if not applied:
        raise BenchError(f"the pipeline applied no batch; log {job.log_path}:\n{job.log_tail()}")
    first = min(b.created_at for b in applied)
    last = max(b.applied_at for b in applied if b.applied_at is not None)
    return OursSnapshot(job, config, state, batches, split_totals(state).rows, last - first)


def _ours(
    env: BenchEnv,
    size: int,
    options: SnapshotOptions,
    result: SizeResult,
    mode: str,
    setup: SparkSetup,
    *,
    tag: str,
) -> None:
    """One run of ours with ``[lake] snapshot_writes = mode`` on ``setup``; ``tag`` (if any)
    marks its lines."""
    ours = snapshot_ours(
        env,
        f"ours-snapshot-{mode}" + (f"-{tag_slug(setup.tag)}" if setup.tag else ""),
        options,
        changelog=options.changelog,
        extra={"lake": {"snapshot_writes": mode}},
        setup=setup,
    )
    job, rows, state = ours.job, ours.rows, ours.state
    tag = f" [{tag}]" if tag else ""
    if rows != size:
        result.notes.append(f"WARNING: the pipeline snapshotted {rows:,} rows, expected {size:,}")
    result.measurements.append(
        Measurement.of(
            job,
            OURS_WINDOW + tag,
            rows,
            ours.window,
            note=f"first plan to last commit, {mode}" + (f", {setup.master}" if setup.tag else ""),
        )
    )
    result.measurements.append(Measurement.of(job, OURS_WALL + tag, rows, job.wall))
    result.notes.append(breakdown_line(ours.batches, job).replace("ours", f"ours{tag}", 1))
    totals = split_totals(state)
    result.notes.append(f"ours{tag} CPU: {job.cpu_line()}")
    result.notes.append(f"ours{tag} memory: {job.memory_line()}")
    if totals.timed_splits:
        seconds = totals.timed_ms / 1000
        per_task = totals.timed_rows / seconds if seconds else 0.0
        result.notes.append(
            f"ours{tag} chunk reads: {totals.timed_splits} chunks, {seconds:.1f} task-seconds in "
            f"SnapshotSplitReader.read (LW, SELECT, HW, normalise, records): {per_task:,.0f} "
            "rows/s per task"
        )


def _c_read(
    env: BenchEnv, size: int, connections: int, options: SnapshotOptions, result: SizeResult
) -> None:
    """The table read by the server's own C client (``mariadb --quick``, or ``mysql`` on
    MySQL), its rows thrown away: on ``connections`` connections at once, each a key range."""
    tool = shutil.which("mariadb") or shutil.which("mysql")
    if tool is None:
        result.notes.append("the C client read was not run: no mariadb or mysql on PATH")
        return
    params = env.source_params()
    low, high = _id_bounds(env)
    step = (high - low) // connections + 1
    client = [
        tool,
        "--quick",
        "--batch",
        "--skip-column-names",
        f"--host={params['host']}",
        f"--port={params['port']}",
        f"--user={params['user']}",
        str(params["database"]),
    ]
    queries = [
        f"SELECT * FROM {BENCH_TABLE} WHERE id >= {low + i * step} AND id < {low + (i + 1) * step}"
        for i in range(connections)
    ]
    # each query on its own connection at once, the password from the environment (MYSQL_PWD)
    script = f'export MYSQL_PWD="${PASSWORD_ENV}"; ' + " ".join(
        f'"$@" -e "{query}" > /dev/null & p{i}=$!;' for i, query in enumerate(queries)
    )
    script += " " + " && ".join(f"wait $p{i}" for i in range(connections))
    run = env.run(
        ["sh", "-c", script, "c-read", *client],
        env.next_dir(f"c-read-{connections}") / "read.log",
        options.timeout,
    )
    label = C_READ.format(n=connections)
    result.measurements.append(Measurement.of(run, label, size, run.wall, note=Path(tool).name))


def _id_bounds(env: BenchEnv) -> tuple[int, int]:
    conn = env.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT MIN(id), MAX(id) FROM {BENCH_TABLE}")
            low, high = cur.fetchone()
            return int(low), int(high)
    finally:
        conn.close()


def memory_growth_line(results: list[SizeResult]) -> str:
    """Peak RSS of ours at the smallest and the largest size: the "flat as it grows" check."""
    small, large = results[0], results[-1]
    a, b = small.get(OURS_WALL), large.get(OURS_WALL)
    if a is None or b is None or a.peak_rss_mb is None or b.peak_rss_mb is None:
        return "peak memory growth: not measured"
    growth = b.peak_rss_mb / a.peak_rss_mb
    verdict = "flat (within 15%)" if growth <= 1.15 else "NOT flat"
    return (
        f"peak memory of ours: {a.peak_rss_mb:.0f} MB at {small.rows:,} rows, "
        f"{b.peak_rss_mb:.0f} MB at {large.rows:,} rows ({growth:.2f}x): {verdict}"
    )
