"""The active files of a Delta table with their deletion vectors, by replaying its log.

delta-rs lists a table's files (``get_add_actions``) without their deletion vectors, and its
pyarrow readers refuse a table that has them; the sink needs both, to read its mirrors and to
mark rows deleted. This is the protocol's "Action Reconciliation": a logical file is
``(path, deletionVector.uniqueId)``; replaying the last checkpoint (classic, one file or in
parts) and then each JSON commit up to the version asked for, the newest reference of each
logical file wins, and the ``add`` actions left are the table.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq

from cdc_console.core.untyped import Loaded
from cdc_console.sinks.base import SinkError
from cdc_console.sinks.deletion_vectors import DeletionVector

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


class DeltaLogError(SinkError):
    """A log this reader cannot replay (a missing commit, a checkpoint kind it does not read):
    a fault of that one table, which the job parks while the others go on."""


@dataclass(frozen=True)
class ActiveFile:
    """One ``add`` action of the table's current snapshot."""

    path: str  # relative to the table, decoded
    size: int
    num_records: int | None
    deletion_vector: DeletionVector | None
    #: the action as the log has it (for writing it again with another deletion vector)
    action: dict[str, Loaded]

    @property
    def deleted(self) -> int:
        return self.deletion_vector.cardinality if self.deletion_vector else 0


def _num_records(stats: object) -> int | None:
    if not isinstance(stats, str) or not stats:
        return None
    value = json.loads(stats).get("numRecords")
    return int(value) if value is not None else None


def _logical_key(action: dict[str, Loaded]) -> tuple[str, str]:
    dv = action.get("deletionVector")
    unique = DeletionVector.from_json(dv).unique_id if isinstance(dv, dict) else ""
    return unquote(str(action["path"])), unique


def _checkpoint(log: Path, version: int | None) -> tuple[int, list[Path]]:
    """The newest complete checkpoint at or before ``version``: its version and its parts."""
    parts: dict[int, dict[int, list[Path]]] = {}
    for entry in log.iterdir():
        match = _CHECKPOINT.match(entry.name)
        if match is None:
            continue
        at = int(match.group(1))
        if version is not None and at > version:
            continue
        total = int(match.group(3) or 1)
        parts.setdefault(at, {}).setdefault(total, []).append(entry)
    for at in sorted(parts, reverse=True):
        for total, files in parts[at].items():
            if len(files) == total:
                return at, sorted(files)
    return -1, []


@dataclass(frozen=True)
class _Replay:
    """A replayed snapshot kept for the next call: the log only grows, so the files at a later
    version are these plus the commits since. ``stamp`` identifies the commit file it was read
    at, so a table deleted and created again at the same path is replayed from scratch."""

    version: int
    stamp: tuple[int, int, int]
    files: dict[tuple[str, str], ActiveFile]


#: replays kept at most (a job has a mirror per table; tests make thousands of tables)
_KEPT_TABLES = 512
_replays: dict[Path, _Replay] = {}
_replays_lock = threading.Lock()


def _stamp(commit: Path) -> tuple[int, int, int] | None:
    try:
        info = commit.stat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _active(add: dict[str, Loaded]) -> ActiveFile:
    dv = add.get("deletionVector")
    return ActiveFile(
        unquote(str(add["path"])),
        int(str(add.get("size") or 0)),
        _num_records(add.get("stats")),
        DeletionVector.from_json(dv) if isinstance(dv, dict) else None,
        dict(add),
    )


def _replay_commits(
    log: Path, files: dict[tuple[str, str], ActiveFile], commits: Sequence[int]
) -> None:
    for commit in commits:
        with (log / f"{commit:020}.json").open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:
                    files[_logical_key(action["add"])] = _active(action["add"])
                elif "remove" in action:
                    files.pop(_logical_key(action["remove"]), None)


def _commits_after(log: Path, after: int, version: int | None) -> list[int]:
    commits = sorted(
        int(m.group(1)) for e in log.iterdir() if (m := _COMMIT.match(e.name)) is not None
    )
    wanted = [v for v in commits if v > after and (version is None or v <= version)]
    if wanted and wanted != list(range(after + 1, wanted[-1] + 1)):
        raise DeltaLogError(f"{log}: commits after version {after} are missing")
    if version is not None and version > after and (not wanted or wanted[-1] != version):
        raise DeltaLogError(f"{log}: commit {version} is missing")
    return wanted


def active_files(table: Path, version: int | None = None) -> dict[str, ActiveFile]:
    """Path -> the table's active file at ``version`` (the newest when None).

    The sink asks for the newest version before every batch; replaying the whole log each time
    cost more than the batch's own work, so the last replay of each table is kept and the
    commits after it are laid on a copy of it."""
    log = table / "_delta_log"
    key = log.resolve()
    with _replays_lock:
        kept = _replays.get(key)
    files: dict[tuple[str, str], ActiveFile] | None = None
    if (
        kept is not None
        and (version is None or version >= kept.version)
        and _stamp(log / f"{kept.version:020}.json") == kept.stamp
    ):
        files = dict(kept.files)
        commits = _commits_after(log, kept.version, version)
        _replay_commits(log, files, commits)
        at = commits[-1] if commits else kept.version
    else:
        at, checkpoint = _checkpoint(log, version)
        files = {}
        for part in checkpoint:
            for row in pq.read_table(part, columns=["add"]).column("add").to_pylist():
                if row is not None:
                    files[_logical_key(row)] = _active(row)
        commits = _commits_after(log, at, version)
        _replay_commits(log, files, commits)
        at = commits[-1] if commits else at
    stamp = _stamp(log / f"{at:020}.json")
    if stamp is not None and (kept is None or at >= kept.version):
        with _replays_lock:
            if len(_replays) >= _KEPT_TABLES and key not in _replays:
                _replays.clear()
            _replays[key] = _Replay(at, stamp, dict(files))
    return {path: file for (path, _), file in files.items()}


@dataclass(frozen=True)
class _Removed:
    """The vector files removes name, scanned up to ``version`` (kept between vacuums: the
    log holds an hour of commits, each naming every file a batch touched)."""

    version: int
    stamp: tuple[int, int, int]
    #: vector file -> the newest deletionTimestamp of a remove naming it (None: one had none)
    named: dict[Path, int | None]


_removed: dict[Path, _Removed] = {}


def _note_remove(table: Path, named: dict[Path, int | None], action: object) -> None:
    if not isinstance(action, dict) or not isinstance(action.get("deletionVector"), dict):
        return
    vector = DeletionVector.from_json(action["deletionVector"])
    if vector.storage_type == "i":
        return
    path = vector.file_path(table)
    stamp = action.get("deletionTimestamp")
    known = named.get(path, 0)
    if not isinstance(stamp, int) or known is None:
        named[path] = None
    else:
        named[path] = max(known, stamp)


def _scan_commit(table: Path, named: dict[Path, int | None], commit: Path) -> None:
    with commit.open(encoding="utf-8") as handle:
        for line in handle:
            if '"remove"' in line and "deletionVector" in line:
                _note_remove(table, named, json.loads(line).get("remove"))


def referenced_vectors(table: Path, removed_since_ms: int = 0) -> set[Path]:
    """The deletion vector files that a version a reader may still open names: those of the
    live files, and those of files removed at or after ``removed_since_ms`` (the vacuum
    retention): what vacuum must leave.

    delta-rs' full vacuum sees these files as untracked; deleting one breaks every version
    that names it. A vector of a file removed before the retention belongs only to versions
    vacuum has taken the data of already. The removes are scanned once: the next call reads
    only the commits since (the same path made anew is scanned again from scratch).
    """
    log = table / "_delta_log"
    live = active_files(table)
    referenced = {
        f.deletion_vector.file_path(table)
        for f in live.values()
        if f.deletion_vector is not None and f.deletion_vector.storage_type != "i"
    }
    key = log.resolve()
    with _replays_lock:
        kept = _removed.get(key)
    commits = sorted(
        int(m.group(1)) for e in log.iterdir() if (m := _COMMIT.match(e.name)) is not None
    )
    if kept is not None and _stamp(log / f"{kept.version:020}.json") == kept.stamp:
        named = dict(kept.named)
        for commit in (c for c in commits if c > kept.version):
            _scan_commit(table, named, log / f"{commit:020}.json")
    else:
        named = {}
        for entry in log.iterdir():
            if _CHECKPOINT.match(entry.name):
                for row in pq.read_table(entry, columns=["remove"]).column("remove").to_pylist():
                    _note_remove(table, named, row)
        for commit in commits:
            _scan_commit(table, named, log / f"{commit:020}.json")
    # a vector only removes older than every retention name was vacuumed with its data already
    named = {p: at for p, at in named.items() if at is None or at >= removed_since_ms}
    if commits and (stamp := _stamp(log / f"{commits[-1]:020}.json")) is not None:
        with _replays_lock:
            if len(_removed) >= _KEPT_TABLES and key not in _removed:
                _removed.clear()
            _removed[key] = _Removed(commits[-1], stamp, named)
    referenced.update(named)
    return referenced
