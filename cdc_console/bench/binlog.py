"""``cdc-console bench binlog --changes N``: applying a backlog of binlog changes, two ways.

Procedure (all against one private server):

1. seed the table and run the pipeline once until caught up (snapshot, then streaming);
2. with the job stopped, write N row changes (``--workload``): ``mixed`` (the default) half
   through multi-row statements (100 rows per INSERT … SELECT / UPDATE / DELETE range), half
   through single-row statements (50 per transaction), inserts, updates and deletes mixed,
   because multi-row events decode several times faster per row than single-row ones (field
   notes) and real workloads mix both; ``single`` all through single-row statements (an OLTP
   application's), ``multi`` all through multi-row ones (a batch job's);
3. **raw decode**: a bare ``BinLogStreamReader`` decodes exactly that window ``[P0, P1)`` (the
   binlog head before and after the writes) — the reference of the bar "stream >= 0.7x raw";
4. **ours**: ``cdc-console run --until-caught-up`` again. Its *apply window* runs from the plan of
   the first batch that carries changes to the commit of the last batch (state database
   timestamps): Spark start-up before and shutdown after are left out, everything in between —
   binlog read and decode, normalisation, the trip through Spark, staging, Delta MERGE and the
   state commit — is in. Its *process wall* time is reported too.

Rows are the N row changes written (an UPDATE row counts once although the pipeline emits it as a
``-U``/``+U`` pair), so both rows/s figures count the same thing.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pymysql.cursors import Cursor

from cdc_console.bench.common import (
    BENCH_TABLE,
    PASSWORD_ENV,
    RAW_BINLOG_SERVER_ID,
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
from cdc_console.bench.processes import BenchError, pipeline_command, worker_command
from cdc_console.core.offset import BinlogOffset
from cdc_console.mysql.position import current_position
from cdc_console.state.readonly import batch_times, events_applied

RAW = "raw BinLogStreamReader decode"
#: the machine's limit: the server's own client decoding every row image (``-v``) in C
C_DECODE = "C decode (mariadb-binlog -v) to /dev/null"
OURS_WINDOW = "ours binlog -> delta (window)"
OURS_WALL = "ours binlog -> delta (process wall)"
STREAM_BAR = 0.7
MULTI_ROWS = 100
SINGLE_PER_TXN = 50
INSERT_BASE = 10_000_000


@dataclass(kw_only=True)
class BinlogOptions(SnapshotRunOptions):
    changes: int
    seed_rows: int = 100_000
    skip: frozenset[str] = frozenset()
    changelog: bool = False
    #: ``[pipeline] binlog_readers`` of ours, one run each from the same state (the first is
    #: the one the bars judge)
    binlog_readers: tuple[int, ...] = (2,)
    #: how the changes are written (``WORKLOADS``)
    workload: str = "mixed"


#: ``--workload``: which statements write the changes, as the results name them
WORKLOAD_TEXT = {
    "mixed": "half multi-row",
    "single": "single-row",
    "multi": f"multi-row, {MULTI_ROWS} rows each",
}


@dataclass
class BinlogResult(Measured):
    changes: int
    measurements: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class ChangeWriter:
    """Writes a reproducible mix of changes to ids ``1..seeded``; counts rows actually changed.

    Updates cycle over the first half of the seeded ids (``amount + 1`` always changes the row,
    so the server always logs it); deletes walk the second half once, so none misses; inserts use
    fresh ids from ``INSERT_BASE`` on.
    """

    env: BenchEnv
    seeded: int
    workload: str = "mixed"
    written: int = 0
    statements: int = 0
    next_insert: int = INSERT_BASE
    next_update: int = 1
    next_delete: int = 0

    def __post_init__(self) -> None:
        self.next_delete = self.seeded // 2 + 1

    def write(self, total: int) -> float:
        clock = time.monotonic()
        conn = self.env.connect()
        kinds_multi = ("insert", "update", "insert", "update", "delete")
        kinds_single = ("update", "insert", "update", "delete", "update", "insert")
        try:
            with conn.cursor() as cur:
                i = 0
                while self.written < total:
                    room = total - self.written
                    # one multi-row statement, then as many rows again in single-row statements
                    n = min(MULTI_ROWS, room)
                    if self.workload != "single":
                        self.written += self._multi(cur, kinds_multi[i % len(kinds_multi)], n)
                    singles = min(n, total - self.written) if self.workload != "multi" else 0
                    for start in range(0, singles, SINGLE_PER_TXN):
                        cur.execute("START TRANSACTION")
                        for j in range(start, min(singles, start + SINGLE_PER_TXN)):
                            self.written += self._single(cur, kinds_single[j % len(kinds_single)])
                        cur.execute("COMMIT")
                    i += 1
        finally:
            conn.close()
        return time.monotonic() - clock

    def _update_range(self, n: int) -> tuple[int, int]:
        half = max(1, self.seeded // 2)
        if self.next_update + n - 1 > half:
            self.next_update = 1
        lo = self.next_update
        self.next_update += n
        return lo, lo + n - 1

    def _multi(self, cur: Cursor, kind: str, n: int) -> int:
        execute = cur.execute
        if kind == "insert":
            lo = self.next_insert
            self.next_insert += n
            execute(
                f"INSERT INTO {BENCH_TABLE} SELECT seq, 'bench insert', seq / 100, 'multi', "
                f"NOW(6) FROM seq_{lo}_to_{lo + n - 1}"
            )
        elif kind == "update":
            lo, hi = self._update_range(n)
            execute(
                f"UPDATE {BENCH_TABLE} SET amount = amount + 1, note = 'multi update', "
                f"updated = NOW(6) WHERE id BETWEEN {lo} AND {hi}"
            )
        else:
            lo = self.next_delete
            self.next_delete += n
            execute(f"DELETE FROM {BENCH_TABLE} WHERE id BETWEEN {lo} AND {lo + n - 1}")
        self.statements += 1
        return int(cur.rowcount)

    def _single(self, cur: Cursor, kind: str) -> int:
        execute = cur.execute
        if kind == "insert":
            execute(
                f"INSERT INTO {BENCH_TABLE} VALUES (%s, 'bench insert', 1.25, 'single', NOW(6))",
                (self.next_insert,),
            )
            self.next_insert += 1
        elif kind == "update":
            lo, _ = self._update_range(1)
            execute(
                f"UPDATE {BENCH_TABLE} SET amount = amount + 1, note = 'single update', "
                "updated = NOW(6) WHERE id = %s",
                (lo,),
            )
        else:
            execute(f"DELETE FROM {BENCH_TABLE} WHERE id = %s", (self.next_delete,))
            self.next_delete += 1
        self.statements += 1
        return int(cur.rowcount)


@dataclass(frozen=True)
class OursRun:
    """One catch-up of ours: its binlog readers, where it runs, and the tag of its lines."""

    readers: int
    setup: SparkSetup
    tag: str


def head(env: BenchEnv) -> BinlogOffset:
    conn = env.connect()
    try:
        return current_position(conn)
    finally:
        conn.close()


def run_binlog_bench(options: BinlogOptions) -> BinlogResult:
    result = BinlogResult(options.changes)
    print(machine_line(), flush=True)
    # deletes take ~20% of the changes from the second half of the seeded ids; keep it ample
    seeded = max(options.seed_rows, options.changes // 2)
    with bench_env(options.workdir, options.keep) as env:
        seconds = seed_rows(env, 1, seeded)
        print(f"seeded {BENCH_TABLE} with {seeded:,} rows in {seconds:.1f}s", flush=True)
        folder = env.next_dir("ours-binlog")
        runs = [
            OursRun(
                count,
                setup,
                run_tag(f"{count} readers" if count != options.binlog_readers[0] else "", setup),
            )
            for count in options.binlog_readers
            for setup in spark_setups(options.master, options.executors)
        ]

        def configure(where: Path, planned: OursRun) -> Path:
            return write_pipeline_config(
                where,
                env,
                chunk_size=options.chunk_size,
                parallelism=options.parallelism,
                changelog=options.changelog,
                master=planned.setup.master,
                extra={"pipeline": {"binlog_readers": planned.readers}},
                spark_conf=planned.setup.conf,
            )

        config = configure(folder, runs[0])
        state = folder / "state" / "pipeline.sqlite"
        others: list[tuple[OursRun, Path]] = []
        if "ours" not in options.skip:
            first = env.run(pipeline_command(config), folder / "catch-up.log", options.timeout)
            print(
                f"initial run (snapshot {seeded:,} rows, then caught up): {first.wall:.1f}s",
                flush=True,
            )
            for later in runs[1:]:
                # the same caught-up state, lake and checkpoint: each run catches up alike
                copy = env.next_dir(f"ours-binlog-{tag_slug(later.tag)}")
                shutil.copytree(folder, copy, dirs_exist_ok=True)
                others.append((later, configure(copy, later)))
        start = head(env)
        writer = ChangeWriter(env, seeded, options.workload)
        seconds = writer.write(options.changes)
        end = head(env)
        print(
            f"wrote {writer.written:,} row changes ({options.workload} workload) in "
            f"{writer.statements:,} statements in "
            f"{seconds:.1f}s ({writer.written / seconds:,.0f} rows/s), binlog [{start}, {end})",
            flush=True,
        )
        result.notes.append(load_line("before"))
        if "raw" not in options.skip:
            _raw_decode(env, start, end, writer.written, options, result)
        if "c" not in options.skip:
            _c_decode(env, start, end, writer.written, options, result)
        if "ours" not in options.skip:
            _ours(env, config, state, writer.written, options, result, runs[0])
            for later, other in others:
                state_copy = other.parent / "state" / "pipeline.sqlite"
                _ours(env, other, state_copy, writer.written, options, result, later)
        result.notes.append(load_line("after"))
    _report(options, writer, result)
    return result


def _raw_decode(
    env: BenchEnv,
    start: BinlogOffset,
    end: BinlogOffset,
    written: int,
    options: BinlogOptions,
    result: BinlogResult,
) -> None:
    """The pure-Python contender: python-mysql-replication's reader over the same window."""
    params = {
        **env.source_params(),
        "server_id": RAW_BINLOG_SERVER_ID,
        "start": start.to_dict(),
        "end": end.to_dict(),
    }
    run = env.run(
        worker_command("binlog-decode", params),
        env.next_dir("binlog-decode") / "worker.log",
        options.timeout,
    )
    decoded = int(run.result["rows"])
    if decoded != written:
        result.notes.append(f"WARNING: raw decode saw {decoded:,} rows, {written:,} were written")
    result.measurements.append(
        Measurement.of(
            run,
            RAW,
            decoded,
            run.result["seconds"],
            note=f"{run.result['events']:,} row events",
        )
    )


def _report(options: BinlogOptions, writer: ChangeWriter, result: BinlogResult) -> None:
    """The table of contenders, the notes, and ours against the decoders and the bars."""
    print(
        "\n"
        + format_table(
            f"binlog benchmark: {writer.written:,} row changes ({writer.statements:,} statements, "
            f"{WORKLOAD_TEXT[options.workload]}) on {BENCH_TABLE}, {options.master}",
            result.measurements,
            RAW,
        ),
        flush=True,
    )
    for note in result.notes:
        print(note, flush=True)
    window = ratio(result.get(OURS_WINDOW), result.get(RAW))
    share = ratio(result.get(OURS_WINDOW), result.get(C_DECODE))
    if share is not None:
        print(
            f"ours window as a share of the C decode (the machine's limit): {share:.1%}",
            flush=True,
        )
    print(bar_line("stream vs raw decode", window, STREAM_BAR, "window vs decode"), flush=True)
    print(met_line("stream window vs raw decode", window, 3.0, "x", "the target"), flush=True)


def _binlog_files(env: BenchEnv, start: BinlogOffset, end: BinlogOffset) -> list[str]:
    """The server's binlog files from ``start``'s to ``end``'s, in order."""
    conn = env.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            names = [str(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()
    return names[names.index(start.file) : names.index(end.file) + 1]


def _c_decode(
    env: BenchEnv,
    start: BinlogOffset,
    end: BinlogOffset,
    changes: int,
    options: BinlogOptions,
    result: BinlogResult,
) -> None:
    """The same window read from the server and decoded row by row by its own C client
    (``mariadb-binlog``, or ``mysqlbinlog`` on MySQL), its text thrown away: what the machine
    can do, as ours is measured against it."""
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if tool is None:
        result.notes.append("the C decode was not run: no mariadb-binlog or mysqlbinlog on PATH")
        return
    params = env.source_params()
    command = [
        tool,
        "--read-from-remote-server",
        f"--host={params['host']}",
        f"--port={params['port']}",
        f"--user={params['user']}",
        "--base64-output=decode-rows",
        "--verbose",
        f"--start-position={start.pos}",
        f"--stop-position={end.pos}",
        *_binlog_files(env, start, end),
    ]
    # the password from the environment (MYSQL_PWD), never on a command line
    shell = ["sh", "-c", f'MYSQL_PWD="${PASSWORD_ENV}" exec "$@" > /dev/null', "c-decode"]
    run = env.run([*shell, *command], env.next_dir("c-decode") / "decode.log", options.timeout)
    result.measurements.append(
        Measurement.of(run, C_DECODE, changes, run.wall, note=Path(tool).name)
    )


def _ours(
    env: BenchEnv,
    config: Path,
    state: Path,
    changes: int,
    options: BinlogOptions,
    result: BinlogResult,
    run: OursRun,
) -> None:
    """One catch-up run of ours with ``[pipeline] binlog_readers = run.readers`` on its setup."""
    tag = f" [{run.tag}]" if run.tag else ""
    readers = run.readers
    before = events_applied(state)
    job = env.run(pipeline_command(config), config.parent / "stream.log", options.timeout)
    batches = batch_times(state, since=job.started_at)
    # a batch of control records only (one per task) carried no change
    carrying = [b for b in batches if b.records > 1 and b.applied_at is not None]
    if not carrying:
        raise BenchError(f"no batch carried the changes; log {job.log_path}:\n{job.log_tail()}")
    first = min(b.created_at for b in carrying)
    last = max(b.applied_at for b in batches if b.applied_at is not None)
    emitted = events_applied(state) - before
    result.measurements.append(
        Measurement.of(
            job,
            OURS_WINDOW + tag,
            changes,
            last - first,
            note=f"{len(carrying)} batch(es), {emitted:,} records, {readers} binlog readers"
            + (f", {run.setup.master}" if run.setup.tag else ""),
        )
    )
    result.measurements.append(Measurement.of(job, OURS_WALL + tag, changes, job.wall))
    result.notes.append(breakdown_line(batches, job).replace("ours", f"ours{tag}", 1))
    result.notes.append(f"ours{tag} CPU: {job.cpu_line()}")
    result.notes.append(f"ours{tag} memory: {job.memory_line()}")
