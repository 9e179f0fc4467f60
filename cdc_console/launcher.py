"""Starting, finding, measuring and stopping pipeline jobs as detached processes.

The console and the demo start a job exactly as a user would (``python -m cdc_console.cli run
--config F``), but detached: its own session, so a Ctrl-C or a closed terminal of the starter does
not reach it, and its output appended to a log file, so nothing ties it to the starter's terminal.
A job therefore outlives whoever started it, and a restarted console finds it again through the
state database: ``job_runs`` holds the pid of the latest run, and ``job_process`` checks that the
pid still belongs to a ``cdc-console run`` of the same pipeline (pids are reused).

A job writes its ``job_runs`` row only after preflight (a second or more after it starts), so
``launch_job`` returns the pid at once and ``is_alive`` / ``exit_code`` answer for a pid this
process launched before that row exists.

The Spark JVM and its Python workers are children of the job, and a job killed outright leaves
them orphaned; ``stop_job`` therefore ends the whole process group, and ``tree_usage`` sums CPU and
memory over the whole tree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from cdc_console.config import PipelineConfig
from cdc_console.state.store import StateStore

#: Allowed gap between a job's process start and its ``job_runs.started_at``: the process always
#: starts first (preflight runs before the row is written); a reused pid belongs to a process that
#: started after the job's run row was written. The slack covers the coarse ``create_time`` clock.
PID_REUSE_SLACK_SECONDS = 2.0

#: A CPU sample not refreshed for this long belongs to a process nobody watches any more.
CPU_SAMPLE_TTL = 600.0

_launched: dict[int, subprocess.Popen[bytes]] = {}
_launched_lock = threading.Lock()
# (pid, create_time) -> (cpu seconds, wall-clock time) at the previous tree_usage sample.
_cpu_samples: dict[tuple[int, float], tuple[float, float]] = {}
_cpu_lock = threading.Lock()


def job_command(config_path: Path, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line of a job: this interpreter, so the job runs the same installation."""
    return [
        sys.executable,
        "-m",
        "cdc_console.cli",
        "run",
        "--config",
        str(Path(config_path).resolve()),
        *extra_args,
    ]


def spawn_detached(command: Sequence[str], log_path: Path, cwd: Path | None = None) -> int:
    """Start ``command`` in its own session, stdin closed, stdout+stderr appended to ``log_path``.

    The environment is passed through unchanged: that is how the source password (named by the
    config's ``password_env``) reaches the job without ever being written down.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"--- {stamp} starting: {' '.join(command[1:])}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd=str(cwd) if cwd is not None else None,
            env=dict(os.environ),
        )
    with _launched_lock:
        _launched[proc.pid] = proc
    return proc.pid


def launch_job(config_path: Path, log_path: Path, extra_args: Sequence[str] = ()) -> int:
    """Start ``cdc-console run --config config_path`` detached; return its pid at once.

    The job runs in the config's folder, so Spark's stray files (``spark-warehouse``, Derby logs)
    land next to the pipeline's state rather than in the starter's working directory.
    """
    config = Path(config_path).resolve()
    return spawn_detached(job_command(config, extra_args), log_path, cwd=config.parent)


def launch_verify(config_path: Path, log_path: Path, table: str | None = None) -> int:
    """Start ``cdc-console verify --config config_path [--table table]`` detached; its verdicts
    reach the state database (and the console) as it goes."""
    config = Path(config_path).resolve()
    command = [sys.executable, "-m", "cdc_console.cli", "verify", "--config", str(config)]
    if table is not None:
        command += ["--table", table]
    return spawn_detached(command, log_path, cwd=config.parent)


def _own_child(pid: int) -> subprocess.Popen[bytes] | None:
    with _launched_lock:
        return _launched.get(pid)


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count); reaps it if this process launched it."""
    child = _own_child(pid)
    if child is not None:
        return child.poll() is None
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def exit_code(pid: int) -> int | None:
    """The exit status of a job this process launched, or None while it runs (or if unknown).

    A negative value is the signal that ended it, as in ``subprocess``.
    """
    child = _own_child(pid)
    return child.poll() if child is not None else None


def _config_argument(cmdline: Sequence[str]) -> str | None:
    for index, arg in enumerate(cmdline):
        if arg == "--config" and index + 1 < len(cmdline):
            return cmdline[index + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def _is_cdc_console(cmdline: Sequence[str]) -> bool:
    """A ``cdc-console run`` however started: ``-m cdc_console[.cli]``, the script, spark-submit."""
    for arg in cmdline:
        name = Path(arg).name
        if arg in ("cdc_console", "cdc_console.cli", "cdc_console.__main__"):
            return "run" in cmdline
        if name == "cdc-console":
            return "run" in cmdline
        if name == "pipeline.py":
            return True
    return False


def runs_config(proc: psutil.Process, config_path: Path) -> bool:
    """Whether ``proc`` is a ``cdc-console run`` of ``config_path`` (a relative --config resolves
    against the process's working directory)."""
    try:
        cmdline = proc.cmdline()
        if not _is_cdc_console(cmdline):
            return False
        argument = _config_argument(cmdline)
        if argument is None:
            return False
        path = Path(argument)
        if not path.is_absolute():
            path = Path(proc.cwd()) / path
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return _same_file(path, Path(config_path))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except OSError:
        return False


def _config_of_store(proc: psutil.Process, store: StateStore) -> bool:
    """Whether ``proc`` runs the config whose state database is ``store`` (read from its TOML)."""
    from cdc_console.config import load_config
    from cdc_console.errors import CdcError

    try:
        cmdline = proc.cmdline()
        argument = _config_argument(cmdline) if _is_cdc_console(cmdline) else None
        if argument is None:
            return False
        path = Path(argument)
        if not path.is_absolute():
            path = Path(proc.cwd()) / path
        config = load_config(path)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, CdcError):
        return False
    return _same_file(config.state_path, store.path)


def job_process(store: StateStore, config_path: Path | None = None) -> psutil.Process | None:
    """The live process of the latest ``job_runs`` row, or None.

    Live means: on this host, running (not a zombie), started no later than the run it claims
    (a reused pid belongs to a younger process), and its command line is a ``cdc-console run`` of
    this pipeline: of ``config_path`` when given, else of a config whose state is ``store``.
    """
    runs = store.runs(1)
    run = runs[0] if runs else None
    if run is None or not run.pid:
        return None
    if run.host and run.host != socket.gethostname():
        return None
    pid = run.pid
    if not is_alive(pid):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.create_time() > float(run.started_at) + PID_REUSE_SLACK_SECONDS:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    if config_path is not None:
        return proc if runs_config(proc, config_path) else None
    return proc if _config_of_store(proc, store) else None


def job_alive(config: PipelineConfig) -> bool:
    """Whether a job of this pipeline runs now: ``job_process`` over its state database, the one
    check the CLI's commands, the console and the demo share."""
    if not config.state_path.exists():
        return False
    store = StateStore.open_existing(config.state_path, read_only=True)
    try:
        return job_process(store) is not None
    finally:
        store.close()


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return [proc]


def _wait_exit(pid: int, proc: psutil.Process, timeout: float) -> bool:
    """Wait up to ``timeout`` for ``pid`` to end; True when it did (and was reaped if ours)."""
    child = _own_child(pid)
    if child is not None:
        try:
            child.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        proc.wait(timeout)
        return True
    except psutil.TimeoutExpired:
        return False
    except psutil.NoSuchProcess:
        return True


def stop_job(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM the job (it finishes its batch and stops Spark), wait, then SIGKILL what is left.

    What is left is the job's process group when the job leads one (as every launched job does),
    plus the descendants it had when asked to stop, so a JVM orphaned by a killed driver does not
    linger. A pid that is already gone is not an error; if this process launched it, what is
    left of its process group (a JVM whose driver was killed) is killed.
    """
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        if _own_child(pid) is not None:
            is_alive(pid)
            _kill_leftover_group(pid)
        return
    tree = _tree(proc)
    try:
        leads_group = os.getpgid(pid) == pid
    except ProcessLookupError:
        leads_group = False
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.send_signal(signal.SIGTERM)
    stopped = _wait_exit(pid, proc, timeout)
    rest = tree[1:]
    if stopped:
        _, rest = psutil.wait_procs(rest, timeout=5)
    if leads_group:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    for member in rest if stopped else [proc, *rest]:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            member.kill()
    if not stopped:
        _wait_exit(pid, proc, 10.0)
    psutil.wait_procs(rest, timeout=5)


def _kill_leftover_group(pgid: int) -> None:
    """SIGKILL the remaining members of the process group a dead job led.

    Safe against pid reuse: while any member is left the kernel does not hand out ``pgid`` as a
    pid, so the group can only be the job's; if a process with that pid exists, the group is
    gone and the pid belongs to someone else, and nothing is killed.
    """
    members: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == pgid:
                return
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            member.kill()
    psutil.wait_procs(members, timeout=5)


def tree_usage(proc: psutil.Process) -> tuple[float, int]:
    """CPU percent (100 = one core) and resident bytes of ``proc`` and all its descendants.

    CPU is measured between two calls for the same processes, without blocking; a process seen
    for the first time contributes its average since it started. RSS is summed as is (shared
    pages count once per process, as ``ps`` shows them).
    """
    now = time.time()
    cpu = 0.0
    rss = 0
    for member in _tree(proc):
        try:
            with member.oneshot():
                times = member.cpu_times()
                rss += member.memory_info().rss
                created = member.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        used = times.user + times.system
        key = (member.pid, created)
        with _cpu_lock:
            previous = _cpu_samples.get(key)
            _cpu_samples[key] = (used, now)
        before, since = previous if previous is not None else (0.0, created)
        elapsed = now - since
        if elapsed > 0:
            cpu += max(0.0, used - before) / elapsed * 100.0
    with _cpu_lock:
        for key in [k for k, (_, at) in _cpu_samples.items() if now - at > CPU_SAMPLE_TTL]:
            del _cpu_samples[key]
    return cpu, rss
