"""Job processes as the console sees them: find, measure, start, stop.

A thin seam over ``cdc_console.launcher`` so the console's logic (is the job alive, stalled,
starting) is tested with canned processes, and only this adapter touches real ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cdc_console.state.store import StateStore


@dataclass(frozen=True)
class ProcessSample:
    """The live job's process tree at one instant (CPU 100 = one core, JVM included)."""

    pid: int
    cpu_percent: float
    rss_bytes: int
    processes: int
    log_path: Path | None = None


class JobControl(Protocol):
    def sample(self, store: StateStore, config_path: Path) -> ProcessSample | None:
        """The latest run's live process tree, or None when it is not running here."""
        ...

    def launch(self, config_path: Path, log_path: Path) -> int: ...

    def launch_verify(self, config_path: Path, log_path: Path, table: str) -> int: ...

    def stop(self, pid: int, timeout: float) -> None: ...

    def is_alive(self, pid: int) -> bool: ...

    def exit_code(self, pid: int) -> int | None: ...


class LocalJobControl:
    """Jobs on this host, through the launcher (detached sessions, verified command lines)."""

    def sample(self, store: StateStore, config_path: Path) -> ProcessSample | None:
        import psutil

        from cdc_console.launcher import job_process, tree_usage

        proc = job_process(store, config_path)
        if proc is None:
            return None
        cpu, rss = tree_usage(proc)
        try:
            count = 1 + len(proc.children(recursive=True))
        except psutil.Error:
            count = 1
        return ProcessSample(proc.pid, cpu, rss, count, _stdout_file(proc.pid))

    def launch(self, config_path: Path, log_path: Path) -> int:
        from cdc_console.launcher import launch_job

        return launch_job(config_path, log_path)

    def launch_verify(self, config_path: Path, log_path: Path, table: str) -> int:
        from cdc_console.launcher import launch_verify

        return launch_verify(config_path, log_path, table)

    def stop(self, pid: int, timeout: float) -> None:
        from cdc_console.launcher import stop_job

        stop_job(pid, timeout)

    def is_alive(self, pid: int) -> bool:
        from cdc_console.launcher import is_alive

        return is_alive(pid)

    def exit_code(self, pid: int) -> int | None:
        from cdc_console.launcher import exit_code

        return exit_code(pid)


def _stdout_file(pid: int) -> Path | None:
    """The regular file a process writes its stdout to: where a job's log really is.

    Whoever launched the job chose the log path (the demo, another console, a shell redirect);
    the job's own file descriptor 1 says which, on Linux.
    """
    try:
        target = Path(os.readlink(f"/proc/{pid}/fd/1"))
    except OSError:
        return None
    return target if target.is_absolute() and target.is_file() else None
