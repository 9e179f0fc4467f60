"""The job launcher with harmless stand-in processes: detached start, finding a job again by its
``job_runs`` row (and not a process that merely reuses its pid), stopping a whole process tree,
and measuring one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from cdc_console import launcher
from cdc_console.errors import ExitCode
from cdc_console.state.store import StateStore

SLEEPER = "import time\nwhile True: time.sleep(0.05)"
# Ignores SIGTERM and starts a grandchild that does too: only SIGKILL ends this tree.
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
    "while True: time.sleep(0.05)\n"
)
# A parent and a child that both burn CPU, to see the whole tree measured.
BUSY_TREE = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
    "while True: pass\n"
)


def _config(folder: Path) -> Path:
    path = folder / "pipeline.toml"
    path.write_text(
        '[source]\ntables = ["shop.*"]\n[state]\npath = "state/pipeline.sqlite"\n', "utf-8"
    )
    return path


def _fake_job(config: Path, log: Path, script: str = SLEEPER) -> int:
    """A process whose command line looks like ``cdc-console run --config F`` but only sleeps.

    Returned once it has exec'd: until then its command line is the forking test's own, which
    a busy machine (three test workers on two cores) showed to ``job_process`` as a stranger."""
    pid = launcher.spawn_detached(
        [sys.executable, "-c", script, "cdc_console", "run", "--config", str(config)], log
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if "cdc_console" in psutil.Process(pid).cmdline():
                break
        time.sleep(0.01)
    return pid


@pytest.fixture
def pids() -> Iterator[list[int]]:
    started: list[int] = []
    yield started
    for pid in started:
        tree: list[psutil.Process] = []
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            tree = [proc, *proc.children(recursive=True)]
        for member in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        launcher.is_alive(pid)


def _wait(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_launch_job_is_detached_and_logs_and_reports_its_exit(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "job.log"
    missing = tmp_path / "missing.toml"
    pid = launcher.launch_job(missing, log)
    assert _wait(lambda: not launcher.is_alive(pid), 60)
    assert launcher.exit_code(pid) == ExitCode.CONFIG  # the config file is missing
    text = log.read_text()
    assert "run --config" in text and str(missing) in text
    assert "does not exist" in text


def test_spawned_process_has_its_own_session_and_outlives_nothing(
    tmp_path: Path, pids: list[int]
) -> None:
    config = _config(tmp_path)
    pid = _fake_job(config, tmp_path / "job.log")
    pids.append(pid)
    assert launcher.is_alive(pid)
    assert launcher.exit_code(pid) is None
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid
    assert os.getsid(pid) != os.getsid(os.getpid())


def test_job_process_finds_the_latest_run(tmp_path: Path, pids: list[int]) -> None:
    config = _config(tmp_path)
    store = StateStore(tmp_path / "state" / "pipeline.sqlite")
    assert launcher.job_process(store) is None
    pid = _fake_job(config, tmp_path / "job.log")
    pids.append(pid)
    store.start_run(pid, socket.gethostname(), "local[2]")
    found = launcher.job_process(store)
    assert found is not None and found.pid == pid
    assert launcher.job_process(store, config_path=config) is not None
    assert launcher.job_process(store, config_path=tmp_path / "other.toml") is None


def test_job_process_ignores_a_reused_pid(tmp_path: Path, pids: list[int]) -> None:
    config = _config(tmp_path)
    store = StateStore(tmp_path / "state" / "pipeline.sqlite")
    pid = _fake_job(config, tmp_path / "job.log")
    pids.append(pid)
    run_id = store.start_run(pid, socket.gethostname(), "local[2]")
    # The run claims to have started long before this process existed: the pid was reused.
    store.update_run(run_id, started_at=psutil.Process(pid).create_time() - 3600)
    assert launcher.job_process(store) is None


def test_job_process_ignores_a_process_of_another_program_or_config(
    tmp_path: Path, pids: list[int]
) -> None:
    config = _config(tmp_path)
    store = StateStore(tmp_path / "state" / "pipeline.sqlite")
    stranger = launcher.spawn_detached([sys.executable, "-c", SLEEPER], tmp_path / "s.log")
    pids.append(stranger)
    store.start_run(stranger, socket.gethostname(), "local[2]")
    assert launcher.job_process(store) is None

    other = tmp_path / "other"
    other.mkdir()
    other_job = _fake_job(_config(other), tmp_path / "o.log")
    pids.append(other_job)
    store.start_run(other_job, socket.gethostname(), "local[2]")
    assert launcher.job_process(store) is None
    assert config.exists()


def test_job_process_of_a_dead_or_remote_run_is_none(tmp_path: Path, pids: list[int]) -> None:
    config = _config(tmp_path)
    store = StateStore(tmp_path / "state" / "pipeline.sqlite")
    pid = _fake_job(config, tmp_path / "job.log")
    pids.append(pid)
    store.start_run(pid, "some-other-host", "local[2]")
    assert launcher.job_process(store) is None
    store.start_run(pid, socket.gethostname(), "local[2]")
    launcher.stop_job(pid, timeout=5)
    assert not launcher.is_alive(pid)
    assert launcher.job_process(store) is None


def test_stop_job_terminates_gracefully(tmp_path: Path, pids: list[int]) -> None:
    pid = _fake_job(_config(tmp_path), tmp_path / "job.log")
    pids.append(pid)
    started = time.monotonic()
    launcher.stop_job(pid, timeout=10)
    assert time.monotonic() - started < 5
    assert not launcher.is_alive(pid)
    assert launcher.exit_code(pid) == -signal.SIGTERM


def test_stop_job_kills_a_tree_that_ignores_sigterm(tmp_path: Path, pids: list[int]) -> None:
    pid = _fake_job(_config(tmp_path), tmp_path / "job.log", STUBBORN)
    pids.append(pid)
    proc = psutil.Process(pid)
    assert _wait(lambda: len(proc.children()) == 1)
    grandchild = proc.children()[0]
    launcher.stop_job(pid, timeout=0.5)
    assert not launcher.is_alive(pid)
    assert launcher.exit_code(pid) == -signal.SIGKILL
    assert _wait(lambda: not grandchild.is_running() or grandchild.status() == "zombie", 5)


def test_stop_job_of_a_killed_job_kills_what_is_left_of_its_group(
    tmp_path: Path, pids: list[int]
) -> None:
    # Like a driver killed with -9 whose JVM lives on: the grandchild stays in the job's group.
    pid = launcher.spawn_detached(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "time.sleep(600)\n",
        ],
        tmp_path / "orphan.log",
    )
    pids.append(pid)
    proc = psutil.Process(pid)
    assert _wait(lambda: len(proc.children()) == 1)
    leftover = proc.children()[0]
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: not launcher.is_alive(pid))
    assert leftover.is_running() and os.getpgid(leftover.pid) == pid
    launcher.stop_job(pid)
    assert _wait(lambda: not leftover.is_running(), 5)


def test_stop_job_of_a_gone_pid_is_quiet(tmp_path: Path) -> None:
    pid = launcher.spawn_detached([sys.executable, "-c", "pass"], tmp_path / "x.log")
    assert _wait(lambda: not launcher.is_alive(pid))
    launcher.stop_job(pid, timeout=1)


def test_tree_usage_sums_the_whole_tree(tmp_path: Path, pids: list[int]) -> None:
    pid = launcher.spawn_detached([sys.executable, "-c", BUSY_TREE], tmp_path / "busy.log")
    pids.append(pid)
    proc = psutil.Process(pid)
    assert _wait(lambda: len(proc.children()) == 1)
    child = proc.children()[0]
    cpu_first, rss = launcher.tree_usage(proc)
    assert rss >= proc.memory_info().rss + child.memory_info().rss * 0.5
    assert cpu_first >= 0.0

    def used(p: psutil.Process) -> float:
        times = p.cpu_times()
        return float(times.user + times.system)

    before = (used(proc), used(child), time.time())
    time.sleep(1.0)
    cpu, _ = launcher.tree_usage(proc)
    after = (used(proc), used(child), time.time())
    elapsed = after[2] - before[2]
    parent_only = (after[0] - before[0]) / elapsed * 100
    both = (after[0] - before[0] + after[1] - before[1]) / elapsed * 100
    # Whatever the machine's load, the figure is the whole tree's, not the parent's alone.
    assert cpu == pytest.approx(both, rel=0.3)
    assert cpu > parent_only * 1.3
