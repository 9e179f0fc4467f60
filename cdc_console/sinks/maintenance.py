"""Keeping a lake small for months: compaction, vacuum, and what each Delta table holds.

Every batch adds files: a MERGE writes the files it rewrote plus one for its inserts (and
``_change_data`` files for the change feed), every changelog append one more, and each replaced
file stays on disk for readers of older versions. Left alone, a table's folder grows with every
batch while its live data stays the same size. Two operations bound it:

- **optimize**: delta-rs compaction bin-packs small files into larger ones, keeping neighbouring
  files together (its ``preserveLocality`` planner), in a commit with ``dataChange=false``:
  readers of the change feed see nothing. It packs up to the size the *writer* makes for this
  table (``compaction_target``), not up to ``target_file_size``: delta-rs' writer cuts files by
  an uncompressed estimate (a 256 KiB target gave ~57 KB Parquet files, measured), compaction by
  bytes on disk, so packing to the nominal target doubled or quadrupled the rows per file and
  with them the rows every later change copies.
- **vacuum**: deletes the files that no version younger than the retention references: files
  replaced more than ``vacuum_retention_hours`` ago, expired ``_change_data`` files and files a
  crashed writer left behind (delta-rs' *full* mode lists the folder; a file younger than the
  retention is never touched, so a reader of any version inside the retention keeps working).
  Then the expired log entries go too (``delta.logRetentionDuration``).

Both commit to the table, so they must not race the pipeline's own MERGEs: the job runs them
between batches (``spark/lake_upkeep.py``), and ``cdc-console lake`` queues them to a running
job instead of running them itself. Nothing here imports Spark or the state database.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from cdc_console.config import LakeConfig
from cdc_console.sinks.delta_dv import rewrite_deleted
from cdc_console.sinks.delta_files import FILE_PREFIX, IN_FLIGHT_SECONDS, file_batch
from cdc_console.sinks.delta_log import active_files, referenced_vectors
from cdc_console.sinks.lake_layout import CHANGELOG_DIR, MirrorNames, table_of_folders
from cdc_console.sinks.mirror_read import has_deletion_vectors, table_root
from cdc_console.units import size

OPTIMIZE = "optimize"
VACUUM = "vacuum"


@dataclass(frozen=True)
class LakeTable:
    """One Delta table of the lake: a mirror (``shop.orders``) or a changelog."""

    name: str
    kind: str  # "mirror" | "changelog"
    path: Path

    @property
    def label(self) -> str:
        return self.name if self.kind == "mirror" else f"{self.name} (changelog)"


@dataclass(frozen=True)
class Footprint:
    """What a table holds: live data (the current version's files) and everything on disk
    (older versions' files, ``_change_data``, the log)."""

    version: int
    files: int
    live_bytes: int
    disk_bytes: int
    small_files: int
    rows: int

    @property
    def amplification(self) -> float:
        """Disk over live data; 1.0 is a table with nothing but its current files."""
        return self.disk_bytes / self.live_bytes if self.live_bytes else 0.0


@dataclass(frozen=True)
class MaintenanceResult:
    table: LakeTable
    action: str
    dry_run: bool
    files_removed: int
    files_added: int
    bytes_removed: int
    seconds: float

    def describe(self) -> str:
        verb = {
            (OPTIMIZE, True): "would compact",
            (OPTIMIZE, False): "compacted",
            (VACUUM, True): "would delete",
            (VACUUM, False): "deleted",
        }[self.action, self.dry_run]
        if self.action == OPTIMIZE:
            what = f"{self.files_removed} small file(s) ({size(self.bytes_removed)})"
            if not self.dry_run:
                what += f" into {self.files_added}"
        else:
            what = f"{self.files_removed} unreferenced file(s) ({size(self.bytes_removed)})"
        return f"{self.table.label}: {verb} {what} in {self.seconds:.1f} s"


def lake_tables(root: Path, names: MirrorNames | None = None) -> list[LakeTable]:
    """The lake's Delta tables: ``<root>/<db>/<t>`` mirrors, ``<root>/_changelog/<db>/<t>``,
    each by the table it holds (a mirror placed by name, ``[sink] mirrors``, too)."""
    found: list[LakeTable] = []
    if not root.is_dir():
        return found
    for database in sorted(p for p in root.iterdir() if p.is_dir()):
        kind = "changelog" if database.name == CHANGELOG_DIR else "mirror"
        databases = (
            sorted(p for p in database.iterdir() if p.is_dir()) if kind == "changelog" else []
        )
        for folder in databases or [database]:
            for table in sorted(p for p in folder.iterdir() if p.is_dir()):
                if (table / "_delta_log").is_dir():
                    name = table_of_folders(folder.name, table.name, names)
                    found.append(LakeTable(str(name), kind, table))
    return found


def compaction_target(sizes: Sequence[int], rows: Sequence[int], target_file_size: int) -> int:
    """The file size compaction packs up to: half the smallest *full* file of the table.

    A full file holds at least half the table's typical (90th percentile) rows and is not tiny
    (1/16 of ``target_file_size``): what its writer cuts. Rows, not bytes, decide, because a
    MERGE's output compresses about half as well as the snapshot's key-ordered files with the
    same rows (measured). Packing below half a full file means compaction never makes a file
    hold more rows than the writer's, so it never raises what a change copies: it only gathers
    the small per-batch files. A table with no full file yet is packed to a quarter target.
    """
    floor = max(target_file_size // 16, 1)
    if not sizes:
        return target_file_size // 4
    ordered = sorted(rows)
    typical = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    full = [s for s, r in zip(sizes, rows, strict=True) if r * 2 >= typical and s >= floor]
    if not full:
        return target_file_size // 4
    return max(floor // 2, min(full) // 2)


def _sizes(delta: DeltaTable) -> tuple[list[int], list[int]]:
    """Per active file: its bytes and its live rows (less those its deletion vector marks)."""
    if has_deletion_vectors(delta):
        files = active_files(table_root(delta), delta.version()).values()
        return [f.size for f in files], [(f.num_records or 0) - f.deleted for f in files]
    actions = pa.table(delta.get_add_actions(flatten=True))
    if not actions.num_rows:
        return [], []
    rows = [r or 0 for r in actions.column("num_records").to_pylist()]
    return actions.column("size_bytes").to_pylist(), rows


def footprint(table: LakeTable, target_file_size: int) -> Footprint:
    """Files and bytes of the current version, and bytes on disk under the table's folder."""
    delta = DeltaTable(str(table.path))
    sizes, rows = _sizes(delta)
    if has_deletion_vectors(delta):
        small_files = sum(1 for r in rows if r < MERGE_ON_READ_FILE_ROWS // 2)
    else:
        small = compaction_target(sizes, rows, target_file_size)
        small_files = sum(1 for n in sizes if n < small)
    disk = 0
    for folder, _, names in os.walk(table.path):
        for name in names:
            try:
                disk += os.stat(os.path.join(folder, name)).st_size
            except FileNotFoundError:  # vacuumed while we walked
                continue
    return Footprint(
        version=delta.version(),
        files=len(sizes),
        live_bytes=sum(sizes),
        disk_bytes=disk,
        small_files=small_files,
        rows=sum(rows),
    )


#: a merge-on-read file whose vector marks this share of its rows is rewritten by ``optimize``
DELETED_SHARE = 0.25
#: the rows a merge-on-read mirror's files are packed to. There a change marks a row whatever
#: its file holds, while every file a batch touches costs a remove and an add with its
#: statistics in the commit: a 10M-row mirror left in its 1,200 snapshot chunks wrote about
#: 1 MB of log per batch of random changes. Row groups stay small (``ROW_GROUP_ROWS``), so
#: reading one row back stays cheap.
MERGE_ON_READ_FILE_ROWS = 1 << 20
#: the small files' live rows one compaction pass packs at most. It runs between batches: a
#: fresh 10M-row snapshot packed in one pass held the stream about 10 s once (bench lake,
#: p99 lag 10.5 s); packed 2M rows a pass, the chunks' large commits went on for the whole
#: 5-minute run and the lag grew (0.6 -> 3.3 s). Bounded for the tables ten times larger.
PACK_PASS_ROWS = 16 * MERGE_ON_READ_FILE_ROWS


def _commit(action: str) -> CommitProperties:
    return CommitProperties(custom_metadata={"cdc_console.maintenance": action})


def optimize(table: LakeTable, lake: LakeConfig, dry_run: bool = False) -> MaintenanceResult:
    """Pack the files below ``compaction_target`` into files of about that size.

    The dry run counts the files delta-rs would consider (those below the target, when there are
    at least two); delta-rs leaves a file alone in its bin, so the real run may take fewer.
    """
    clock = time.monotonic()
    delta = DeltaTable(str(table.path))
    sizes, rows = _sizes(delta)
    merge_on_read = has_deletion_vectors(delta)
    target = compaction_target(sizes, rows, lake.target_file_size)
    if dry_run:
        small = [
            n
            for n, r in zip(sizes, rows, strict=True)
            if (r < MERGE_ON_READ_FILE_ROWS // 2 if merge_on_read else n < target)
        ]
        count = len(small) if len(small) > 1 else 0
        return MaintenanceResult(
            table, OPTIMIZE, True, count, 0, sum(small) if count else 0, time.monotonic() - clock
        )
    if merge_on_read:
        # our own packing by rows: delta-rs packs by bytes and writes by an uncompressed
        # estimate, so its output of large files would be small enough to pack again
        before = {f.path: f.size for f in active_files(table_root(delta), delta.version()).values()}
        removed_files, added_files = rewrite_deleted(
            delta,
            DELETED_SHARE,
            {"cdc_console.maintenance": OPTIMIZE},
            MERGE_ON_READ_FILE_ROWS,
            pass_rows=PACK_PASS_ROWS,
        )
        delta.update_incremental()
        after = active_files(table_root(delta), delta.version())
        freed = sum(size for path, size in before.items() if path not in after)
        return MaintenanceResult(
            table,
            OPTIMIZE,
            False,
            removed_files,
            added_files,
            freed,
            time.monotonic() - clock,
        )
    metrics = delta.optimize.compact(target_size=target, commit_properties=_commit(OPTIMIZE))
    removed = _size_stat(metrics.get("filesRemoved"))
    return MaintenanceResult(
        table,
        OPTIMIZE,
        False,
        int(metrics.get("numFilesRemoved", 0)),
        int(metrics.get("numFilesAdded", 0)),
        removed,
        time.monotonic() - clock,
    )


def _in_flight(path: Path, name: str, committed: int | None) -> bool:
    """A file a reader wrote for a batch that may not be committed yet (``delta_files``).

    ``committed`` is the last batch the table's app transaction records. A batch is committed
    to a table once, in one commit that names all its files there, so a file of a batch up to
    it that no version holds will never be named: a crashed attempt's, or one a later change
    rewrote whose tombstone the log no longer keeps (a retention shorter than the checkpoint
    interval drops it from the checkpoint). Only where that cannot be told does age decide.
    """
    if not Path(name).name.startswith(FILE_PREFIX):
        return False
    batch = file_batch(name)
    if committed is not None and batch is not None and batch <= committed:
        return False
    try:
        age = time.time() - os.stat(path / name).st_mtime
    except FileNotFoundError:
        return False
    return age < IN_FLIGHT_SECONDS


def _size_stat(text: object) -> int:
    """``totalSize`` out of delta-rs' JSON-in-a-string file statistics."""
    try:
        return int(json.loads(str(text)).get("totalSize", 0))
    except (ValueError, AttributeError):
        return 0


def vacuum(
    table: LakeTable, lake: LakeConfig, dry_run: bool = False, app_id: str | None = None
) -> MaintenanceResult:
    """Delete files no version inside the retention needs, then the expired log entries.

    Files a version once held and none inside the retention does (tombstones) go through
    delta-rs' own vacuum. Files no version ever held are orphans (left by a crashed attempt of
    a batch) -- or a batch's files that readers wrote and its commit has yet to name
    (``delta_files``): those are spared, whatever the retention, while their batch is not yet
    committed to the table by the pipeline's ``app_id`` and, where that is not known, while they
    are younger than ``IN_FLIGHT_SECONDS``, since deleting one would leave that commit naming a
    missing file.
    """
    clock = time.monotonic()
    delta = DeltaTable(str(table.path))
    retention = math.ceil(lake.vacuum_retention_hours)
    # The pipeline's setting is the authority (tables it creates carry the same value as
    # delta.deletedFileRetentionDuration, older ones Delta's default of a week, which delta-rs
    # would enforce), hence no enforce_retention_duration.
    every = delta.vacuum(
        retention_hours=retention, dry_run=True, enforce_retention_duration=False, full=True
    )
    retired = set(
        delta.vacuum(retention_hours=retention, dry_run=True, enforce_retention_duration=False)
    )
    committed = delta.transaction_version(app_id) if app_id is not None else None
    vectors = referenced_vectors(
        table.path, int((time.time() - lake.vacuum_retention_hours * 3600) * 1000)
    )
    orphans = [
        name
        for name in every
        if name not in retired
        and table.path / name not in vectors
        and not _in_flight(table.path, name, committed)
    ]
    doomed = [*retired, *orphans]
    sizes = 0
    for name in doomed:
        try:
            sizes += os.stat(table.path / name).st_size
        except FileNotFoundError:
            continue
    if not dry_run:
        if retired:
            delta.vacuum(
                retention_hours=retention,
                dry_run=False,
                enforce_retention_duration=False,
                commit_properties=_commit(VACUUM),
            )
        for name in orphans:
            (table.path / name).unlink(missing_ok=True)
        delta.cleanup_metadata()
    return MaintenanceResult(
        table, VACUUM, dry_run, len(doomed), 0, sizes, time.monotonic() - clock
    )
