"""The benches' child processes: how each contender runs, what it costs, and why it failed.

Peak memory is only comparable when each contender is measured the same way, as the summed RSS
of its own process tree sampled by a thread here (``TreeMemorySampler``); the peak of the summed
PSS (each shared page split between its sharers) is printed beside it, what the tree really
holds. A child's last line carries its result (``RESULT_PREFIX``); a failed child's log is
searched for the exception that ended it (``failure_note``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import psutil

#: The line a worker prints last; everything before it is the worker's own log.
RESULT_PREFIX = "BENCH-RESULT "


class WorkerResult(TypedDict, total=False):
    """What a worker (``bench/workers.py``) prints after ``BENCH-RESULT``: ``rows`` and
    ``seconds`` always, the rest where the worker has them."""

    rows: int
    seconds: float
    startup: float
    output: str
    events: int


@dataclass
class ChildRun:
    """A finished child process: exit code, wall time, peak tree RSS and its parsed result."""

    returncode: int
    wall: float
    peak_rss_mb: float
    result: WorkerResult
    log_path: Path
    started_at: float
    ended_at: float
    cpu: dict[str, float] = field(default_factory=dict)
    server_cpu: float = 0.0
    background_cpu: float = 0.0
    #: the peak of the tree's summed PSS (None where the system cannot say)
    peak_pss_mb: float | None = None
    #: at the RSS peak: MB per kind of process (``process_kind``)
    rss_at_peak: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    @property
    def background_cores(self) -> float:
        """Cores kept busy on average by processes that are neither contender nor server."""
        return self.background_cpu / self.wall if self.wall > 0 else 0.0

    def cpu_line(self) -> str:
        parts = ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in self.cpu.items())
        return (
            f"{self.cpu_seconds:.1f} CPU-s ({parts}); server {self.server_cpu:.1f} CPU-s; "
            f"background {self.background_cpu:.1f} CPU-s ({self.background_cores:.2f} cores)"
        )

    def memory_line(self) -> str:
        parts = ", ".join(f"{kind} {mb:,.0f}" for kind, mb in self.rss_at_peak.items())
        pss = (
            f"; peak PSS {self.peak_pss_mb:,.0f} MB (shared pages counted once)"
            if self.peak_pss_mb is not None
            else ""
        )
        return f"peak RSS {self.peak_rss_mb:,.0f} MB summed over the tree ({parts}){pss}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class BenchError(RuntimeError):
    """A contender failed; the message carries its log tail, ``log_path`` the whole log."""

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path


#: a log line that names an exception: Python's last line, a JVM's ``Caused by``, or py4j's
#: ``: java.lang.SomeException`` under its ``Py4JJavaError``
_CAUSE = re.compile(r"^(Caused by: |: )?[\w.$]+(Error|Exception)\b")


def failure_note(label: str, exc: BenchError, causes: int = 3) -> str:
    """A failed contender in a few lines, for a bench that goes on without it: how it ended,
    and the last lines of its log that name an exception (a JVM's stack ends in frames, so the
    log's tail alone seldom says why)."""
    head = str(exc).partition("\n")[0]
    text = str(exc)
    if exc.log_path is not None:
        with suppress(OSError):
            text = exc.log_path.read_text(errors="replace")
    why = list(dict.fromkeys(line.strip() for line in text.splitlines() if _CAUSE.match(line)))
    lines = [f"{label} failed, not measured: {head}", *(f"  {line}" for line in why[-causes:])]
    return "\n".join(lines)


def process_kind(proc: psutil.Process, root_pid: int) -> str:
    """A short name for a process of a contender's tree, to say where its CPU time went."""
    try:
        name = proc.name()
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if proc.pid == root_pid:
        return "main python"
    if name == "java" or "/java" in cmdline.split(" ", 1)[0]:
        return "jvm"
    if "spark.daemon pyspark.worker" in cmdline:  # pyspark's daemon, or ours (spark/daemon.py)
        return "spark python workers"
    if "pyspark" in cmdline:
        return "spark python helpers"
    return "other"


class TreeMemorySampler(threading.Thread):
    """Samples the summed RSS of a process and all its descendants; keeps the peak.

    It also keeps each process's last-seen CPU time, so a run can say which part of the tree
    (the JVM, Spark's Python workers, the main interpreter) burned the CPU. Sampling every 100 ms
    can miss an RSS spike shorter than that, and the CPU of a process that lives less than that;
    the contenders here allocate and compute for seconds, so neither matters.
    """

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True, name=f"rss-sampler-{pid}")
        self.pid = pid
        self.interval = interval
        self.peak_bytes = 0
        self.peak_pss: int | None = 0
        #: bytes per kind of process at the RSS peak
        self.at_peak: dict[str, int] = {}
        self.samples = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.kinds: dict[tuple[int, str], str] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop_event.is_set():
            total = 0
            pss: int | None = 0
            by_kind: dict[str, int] = {}
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for proc in procs:
                with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    rss = proc.memory_info().rss
                    times = proc.cpu_times()
                    # keyed by name too: spark-submit's bash wrapper execs the JVM in place
                    key = (proc.pid, proc.name())
                    if key not in self.kinds:
                        self.kinds[key] = process_kind(proc, self.pid)
                    kind = self.kinds[key]
                    self.cpu[proc.pid] = (kind, times.user + times.system)
                    total += rss
                    by_kind[kind] = by_kind.get(kind, 0) + rss
                    pss = _add_pss(pss, proc)
            if total > self.peak_bytes:
                self.peak_bytes = total
                self.at_peak = by_kind
            if pss is None or self.peak_pss is None:
                self.peak_pss = None
            else:
                self.peak_pss = max(self.peak_pss, pss)
            self.samples += 1
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        """Stop sampling; return the peak in MB."""
        self._stop_event.set()
        self.join(5)
        return self.peak_bytes / 2**20

    def peak_pss_mb(self) -> float | None:
        return self.peak_pss / 2**20 if self.peak_pss is not None else None

    def rss_at_peak_mb(self) -> dict[str, float]:
        ordered = sorted(self.at_peak.items(), key=lambda item: -item[1])
        return {kind: size / 2**20 for kind, size in ordered}

    def total_cpu(self) -> float:
        return sum(seconds for _, seconds in self.cpu.values())

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + seconds
        return dict(sorted(out.items(), key=lambda item: -item[1]))


def _add_pss(total: int | None, proc: psutil.Process) -> int | None:
    """``total`` plus the process's PSS; None from then on where the system has no PSS."""
    if total is None:
        return None
    try:
        return total + int(proc.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return None


def _busy_cpu() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores)."""
    times = psutil.cpu_times()
    return float(sum(times)) - float(times.idle) - float(getattr(times, "iowait", 0.0))


def process_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


def run_child(
    args: Sequence[str],
    log_path: Path,
    env: dict[str, str],
    timeout: float,
    server_pid: int | None = None,
) -> ChildRun:
    """Run ``args`` in its own session, sample its tree's RSS, parse its ``BENCH-RESULT`` line.

    Its own session (process group) lets a timeout kill the JVM and workers along with it. The
    machine's busy CPU during the run, minus the contender's and the server's, is recorded as
    background load: on a shared 2-core machine a figure means little without it.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    clock = time.monotonic()
    busy_before, server_before = _busy_cpu(), process_cpu(server_pid)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            list(args),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, **env},
        )
        sampler = TreeMemorySampler(proc.pid)
        sampler.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            sampler.stop()
            raise BenchError(
                f"{' '.join(args[:5])} did not finish within {timeout:.0f}s; log: {log_path}",
                log_path,
            ) from None
        except BaseException:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise
        finally:
            peak = sampler.stop()
    wall = time.monotonic() - clock
    server_cpu = process_cpu(server_pid) - server_before
    background = _busy_cpu() - busy_before - server_cpu - sampler.total_cpu()
    result: WorkerResult = {}
    text = log_path.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    run = ChildRun(
        code,
        wall,
        peak,
        result,
        log_path,
        started,
        time.time(),
        sampler.cpu_by_kind(),
        server_cpu,
        max(0.0, background),
        sampler.peak_pss_mb(),
        sampler.rss_at_peak_mb(),
    )
    if code != 0:
        raise BenchError(
            f"{' '.join(args[:5])} exited {code}; log {log_path}:\n{run.log_tail()}", log_path
        )
    return run


def worker_command(kind: str, params: Mapping[str, object]) -> list[str]:
    return [sys.executable, "-m", "cdc_console.bench.workers", kind, json.dumps(params)]


def pipeline_command(config: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cdc_console",
        "run",
        "--config",
        str(config),
        "--until-caught-up",
    ]
