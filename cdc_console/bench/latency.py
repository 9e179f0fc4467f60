"""``cdc-console bench latency --rates 1000,4000 --seconds 30``: change -> mirror latency, seen
from outside the pipeline.

A ``latency`` table is captured by a streaming pipeline. For each rate, writers insert single
rows (autocommit: one statement and one transaction per row, several statements per round trip)
carrying the time they were sent, for ``--seconds``;
a watcher outside the job tails the Delta mirror's log as a streaming reader would (every
50 ms), and takes each new row's latency as the commit time of the version that brought it
minus its send time. Per rate: p50, p90,
p99 and max; then the highest rate whose p99 stayed within 3 s with every row arrived and the
writers keeping up.

Targets: at 1,000 inserts/s p50 <= 0.5 s; 20,000/s sustained with p99 <= 3 s.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict
from urllib.parse import unquote

import pyarrow.parquet as pq
from pymysql.constants import CLIENT

from cdc_console.bench.common import (
    BENCH_DB,
    BenchEnv,
    RunOptions,
    bench_env,
    load_line,
    machine_line,
    start_streaming_job,
    wait_for_state,
    wait_running,
    write_pipeline_config,
)
from cdc_console.bench.processes import BenchError, TreeMemorySampler, process_cpu
from cdc_console.bench.stream_lag import quantile
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.state.store import StateStore

TABLE = "latency"
P99_BAR_SECONDS = 3.0
P50_BAR_SECONDS = 0.5
P50_BAR_RATE = 1_000
RATE_BAR = 20_000
#: single-row autocommit INSERTs a second one connection keeps up with comfortably, its
#: statements sent ``PER_SEND`` at most to a query
PER_WRITER = 5_000
#: most INSERT statements sent in one query (see ``Inserter``)
PER_SEND = 50
SERVER = "server"
BENCH = "bench"


@dataclass(kw_only=True)
class LatencyOptions(RunOptions):
    rates: str = "1000,4000"
    seconds: float = 30.0
    trigger_seconds: float = 0.2
    #: ``[spark] wake_on_data``: plan as soon as the binlog moves (the job's default)
    wake_on_data: bool = True
    #: seconds the pipeline's CPU is measured with no writes, before the first rate
    idle_seconds: float = 10.0
    timeout: float = 600.0


@dataclass
class RateResult:
    """One rate's figures (seconds from send to the mirror version that holds the row)."""

    rate: int
    sent: int
    achieved: float
    arrived: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    #: cores each part of the machine kept busy while the writers ran (see ``CpuShares``)
    cores: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        rate: int,
        sent: int,
        achieved: float,
        latencies: list[float],
        cores: dict[str, float] | None = None,
    ) -> RateResult:
        def q(at: float) -> float | None:
            return round(quantile(latencies, at), 3) if latencies else None

        top = round(max(latencies), 3) if latencies else None
        return cls(rate, sent, achieved, len(latencies), q(0.5), q(0.9), q(0.99), top, cores or {})

    @property
    def missing(self) -> int:
        return max(0, self.sent - self.arrived)

    @property
    def sustained(self) -> bool:
        return (
            self.missing == 0
            and self.p99 is not None
            and self.p99 <= P99_BAR_SECONDS
            and self.achieved >= 0.95 * self.rate
        )

    def line(self) -> str:
        if self.p50 is None or self.p90 is None or self.p99 is None or self.max is None:
            return f"{self.rate:>7,}/s: no row arrived"
        lost = (
            f", {self.missing:,} NOT ARRIVED (the mirror took no row for a minute)"
            if self.missing
            else ""
        )
        return (
            f"{self.rate:>7,}/s: sent {self.sent:,} (achieved {self.achieved:,.0f}/s): "
            f"p50 {self.p50:.2f} s, p90 {self.p90:.2f} s, p99 {self.p99:.2f} s, "
            f"max {self.max:.2f} s{lost}"
        )

    def report(self) -> str:
        return "\n".join(line for line in (self.line(), self.cores_line()) if line)

    def cores_line(self) -> str:
        """Who used the CPU during the rate: on one box the writers, the server and the
        pipeline share it, and a latency is only as good as the pipeline's share."""
        if not self.cores:
            return ""
        pipeline = {k: v for k, v in self.cores.items() if k not in (SERVER, BENCH)}
        parts = ", ".join(f"{kind} {cores:.2f}" for kind, cores in pipeline.items())
        return (
            f"{'':>9}cores busy: pipeline {sum(pipeline.values()):.2f} ({parts}), "
            f"server {self.cores.get(SERVER, 0.0):.2f}, "
            f"bench writers and watcher {self.cores.get(BENCH, 0.0):.2f}"
        )


class LatencyFigures(TypedDict):
    """What ``bench latency`` saves with ``--json``."""

    results: list[RateResult]
    notes: list[str]


def run_latency_bench(options: LatencyOptions) -> LatencyFigures:
    print(machine_line(), flush=True)
    rates = [int(float(r)) for r in options.rates.split(",") if r.strip()]
    if not rates:
        raise BenchError("--rates names no rate; e.g. --rates 1000,4000")
    notes = [load_line("before")]
    results: list[RateResult] = []
    with bench_env(options.workdir, options.keep) as env:
        env.execute(
            f"CREATE TABLE {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
            "sent_at DOUBLE NOT NULL, note VARCHAR(40)) ENGINE=InnoDB"
        )
        folder = env.next_dir("ours-latency")
        config = write_pipeline_config(
            folder,
            env,
            master=options.master,
            tables=[f"{BENCH_DB}.{TABLE}"],
            extra={"pipeline": {"heartbeat_seconds": 1}},
            trigger_seconds=options.trigger_seconds,
            wake_on_data=options.wake_on_data,
        )
        job = start_streaming_job(config, env, folder / "stream.log")
        cpu = CpuShares(job.pid, env.sandbox.process.pid if env.sandbox.process else None)
        try:
            state = folder / "state" / "pipeline.sqlite"
            wait_running(state, options.timeout)
            _wait_streaming(state, options.timeout)
            idle = _idle_cores(cpu, options.idle_seconds)
            notes.append(
                f"idle pipeline (no writes for {options.idle_seconds:g} s): "
                + ", ".join(f"{part} {cores:.3f}" for part, cores in idle.items())
                + " cores"
            )
            print(notes[-1], flush=True)
            watcher = _MirrorWatcher(folder / "lake" / BENCH_DB / TABLE)
            watcher.start()
            try:
                for rate in rates:
                    results.append(_one_rate(env, watcher, cpu, rate, options.seconds))
                    print(results[-1].report(), flush=True)
            finally:
                watcher.stop()
        finally:
            cpu.stop()
            job.terminate()
            job.wait(120)
    notes.append(load_line("after"))
    print(
        f"\nlatency benchmark: single-row INSERTs into {TABLE}, {options.seconds:g} s per rate, "
        f"{options.master}, trigger_seconds = {options.trigger_seconds:g}"
        f", wake_on_data = {str(options.wake_on_data).lower()}; "
        "commit -> Delta version visible",
        flush=True,
    )
    for result in results:
        print(result.report(), flush=True)
    for note in notes:
        print(note, flush=True)
    for line in _bars(results):
        print(line, flush=True)
    return {"results": results, "notes": notes}


def _bars(results: list[RateResult]) -> list[str]:
    lines = []
    at_bar = next((r for r in results if r.rate == P50_BAR_RATE), None)
    p50 = at_bar.p50 if at_bar is not None else None
    if p50 is None:
        lines.append(f"bar p50 at {P50_BAR_RATE:,}/s <= {P50_BAR_SECONDS:g} s: not measured")
    else:
        verdict = "MET" if p50 <= P50_BAR_SECONDS else "MISSED"
        lines.append(
            f"bar p50 at {P50_BAR_RATE:,}/s <= {P50_BAR_SECONDS:g} s: {p50:.2f} s {verdict}"
        )
    sustained = [r.rate for r in results if r.sustained]
    best = max(sustained) if sustained else None
    verdict = "MET" if best is not None and best >= RATE_BAR else "MISSED"
    lines.append(
        f"bar highest rate with p99 <= {P99_BAR_SECONDS:g} s >= {RATE_BAR:,}/s: "
        + (f"{best:,}/s" if best is not None else "none of the rates tried")
        + f" {verdict}"
    )
    return lines


def _wait_streaming(state: Path, timeout: float) -> None:
    def streaming(store: StateStore) -> bool:
        tables = store.tables()
        return bool(tables) and all(t.state == Lifecycle.STREAMING for t in tables)

    wait_for_state(
        state, timeout, streaming, f"{TABLE} was not streaming within {timeout:.0f}s", 0.2
    )


def _one_rate(
    env: BenchEnv, watcher: _MirrorWatcher, cpu: CpuShares, rate: int, seconds: float
) -> RateResult:
    count = math.ceil(rate / PER_WRITER)
    writers = [Inserter(env, rate / count, seconds) for _ in range(count)]
    first = watcher.max_id
    clock = time.monotonic()
    before = cpu.read()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    elapsed = time.monotonic() - clock
    cores = {
        part: max(0.0, (spent - before.get(part, 0.0)) / elapsed)
        for part, spent in cpu.read().items()
    }
    errors = [w.error for w in writers if w.error is not None]
    if errors:
        raise BenchError(f"a writer failed: {errors[0]}")
    sent = sum(w.sent for w in writers)
    last = _max_id(env)
    # Every row up to the last is waited for while the mirror keeps taking rows (a job far
    # behind catches up for minutes); a minute without progress ends the wait.
    quiet = max(60.0, seconds)
    deadline = time.monotonic() + quiet
    arrived = watcher.arrived()
    while watcher.next_missing <= last and time.monotonic() < deadline:
        time.sleep(0.1)
        if watcher.arrived() > arrived:
            arrived = watcher.arrived()
            deadline = time.monotonic() + quiet
    latencies = watcher.latencies_between(first, last)
    return RateResult.of(rate, sent, sent / elapsed, latencies, cores)


def _idle_cores(cpu: CpuShares, seconds: float) -> dict[str, float]:
    """Cores each part kept busy over ``seconds`` with no writes (the pipeline's parts and the
    server)."""
    before = cpu.read()
    time.sleep(seconds)
    return {
        part: max(0.0, (spent - before.get(part, 0.0)) / seconds)
        for part, spent in cpu.read().items()
        if part != BENCH
    }


class CpuShares:
    """CPU seconds so far of the pipeline's process tree (by kind: JVM, Spark's Python
    workers, the driver's interpreter), of the server, and of this process (the writers and
    the watcher)."""

    def __init__(self, job_pid: int, server_pid: int | None) -> None:
        self.tree = TreeMemorySampler(job_pid, interval=0.5)
        self.tree.start()
        self.server_pid = server_pid

    def read(self) -> dict[str, float]:
        parts = dict(self.tree.cpu_by_kind())
        parts[SERVER] = process_cpu(self.server_pid)
        parts[BENCH] = process_cpu(os.getpid())
        return parts

    def stop(self) -> None:
        self.tree.stop()


def _max_id(env: BenchEnv) -> int:
    conn = env.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COALESCE(MAX(id), 0) FROM {TABLE}")
            row = cur.fetchone()
    finally:
        conn.close()
    return int(row[0]) if row else 0


class Inserter(threading.Thread):
    """``rate`` autocommitted single-row INSERTs a second for ``seconds``, each with its send
    time.

    The INSERTs due at a tick travel together in one multi-statement query (at most
    ``PER_SEND``): each is still its own statement and its own transaction, so the binlog holds
    exactly what as many separate round trips would write. One round trip per row cost the
    bench's one Python process 30 µs of CPU per row under the GIL: 0.6 of the machine's two
    cores at 20,000/s, taken from the server and the pipeline it measures. A row's ``sent_at``
    is the time its query left, so a wait in the server's queue still counts as latency.
    """

    def __init__(self, env: BenchEnv, rate: float, seconds: float) -> None:
        super().__init__(daemon=True)
        self.env, self.rate, self.seconds = env, rate, seconds
        self.sent = 0
        self.error: str | None = None

    def run(self) -> None:
        try:
            conn = self.env.connect(client_flag=CLIENT.MULTI_STATEMENTS)
        except Exception as exc:
            self.error = str(exc)
            return
        clock = time.monotonic()
        try:
            with conn.cursor() as cur:
                while (now := time.monotonic() - clock) < self.seconds:
                    due = int(now * self.rate) + 1
                    while self.sent < due:
                        count = min(due - self.sent, PER_SEND)
                        cur.execute(_inserts(count, time.time()))
                        while cur.nextset():
                            pass
                        self.sent += count
                    time.sleep(0.002)
        except Exception as exc:
            self.error = str(exc)
        finally:
            conn.close()


def _inserts(count: int, sent_at: float) -> str:
    """``count`` single-row INSERT statements as one query text."""
    return f"INSERT INTO {TABLE} (sent_at, note) VALUES ({sent_at!r}, 'bench');" * count


class _MirrorWatcher(threading.Thread):
    """Follows the mirror's Delta log like an outside streaming reader; each row's latency is
    the commit time of the version that first brought it minus its ``sent_at``.

    It reads each commit file of ``_delta_log`` in version order and the Parquet files its
    ``add`` actions name with ``dataChange`` (a compaction re-adds rows already seen and is
    skipped), as Delta's streaming sources do. It used to open the table through delta-rs at
    every new version (history, then a scan over every file): that grew with the table to half
    a core at 1,000 rows/s after a few minutes, on the machine the pipeline it measures runs on,
    and gave rows of every version landed since the last poll the newest version's time.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.max_id = 0
        #: every id below it has been seen (writers commit out of id order)
        self.next_missing = 1
        self._by_id: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def run(self) -> None:
        version = 0
        while not self._stop_event.wait(0.05):
            while not self._stop_event.is_set():
                try:
                    text = (self.path / "_delta_log" / f"{version:020d}.json").read_text()
                except FileNotFoundError:
                    break  # not committed yet (a commit file appears whole, by rename)
                self._take(text)
                version += 1

    def _take(self, commit: str) -> None:
        committed: float | None = None
        added: list[str] = []
        for line in commit.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                committed = float(action["commitInfo"]["timestamp"]) / 1000.0
            elif "add" in action and action["add"].get("dataChange", True):
                added.append(unquote(action["add"]["path"]))
        if committed is None or not added:
            return
        for name in added:
            rows = pq.read_table(self.path / name, columns=["id", "sent_at"]).to_pydict()
            with self._lock:
                for key, sent in zip(rows["id"], rows["sent_at"], strict=True):
                    self._by_id.setdefault(int(key), committed - float(sent))
                if rows["id"]:
                    self.max_id = max(self.max_id, max(int(k) for k in rows["id"]))
                while self.next_missing in self._by_id:
                    self.next_missing += 1

    def arrived(self) -> int:
        with self._lock:
            return len(self._by_id)

    def latencies_between(self, first: int, last: int) -> list[float]:
        with self._lock:
            return [v for k, v in self._by_id.items() if first < k <= last]

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)
