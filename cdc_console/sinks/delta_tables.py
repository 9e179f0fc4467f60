"""Opening and creating the sink's Delta tables, and the table properties that keep them cheap.

Write amplification. Delta without deletion vectors is copy-on-write: a MERGE that changes one
row rewrites the whole data file holding it (delta-rs 1.6.6 rewrites only the files with a
matched row, measured). So the rows copied per changed row are about the rows of one file, and
the file size is the lever: mirrors are created with ``delta.targetFileSize`` (the MERGE writer
splits its output at that size; without it one MERGE wrote every touched file into one file,
whose wide key range then made every later change rewrite it) and first-snapshot chunks are
written in key order at that size, so files start with narrow, disjoint key ranges that let the
MERGE skip files by their statistics. delta-rs 1.6.6 writes no deletion vectors.

Change Data Feed. Mirrors are created with ``delta.enableChangeDataFeed``: each MERGE writes
``_change_data`` files in the same commit as its data (insert / update_preimage /
update_postimage / delete), appends count as inserts, and compaction (``dataChange=false``)
adds nothing; Spark's ``readChangeFeed`` and delta-rs ``load_cdf`` read it. Exactly-once
follows from the commit: a batch's commit carries its app transaction, so a retried batch
commits nothing and its changes appear once.

Properties are set only when a table is created. delta-rs 1.6.6 ``alter.set_table_properties``
on an existing table raises its protocol and adds table features it does not use (``variantType``
as a *reader* feature, measured), which would lock out readers; so a mirror created by an older
release keeps its properties until it is re-created (see the README, "The lake").
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, Schema

from cdc_console.config import LakeConfig
from cdc_console.sinks.base import SinkSchemaError
from cdc_console.sinks.lake_layout import stats_columns, unsafe_decimals

_log = logging.getLogger(__name__)


def open_table(path: Path) -> DeltaTable:
    if not DeltaTable.is_deltatable(str(path)):
        raise FileNotFoundError(f"no Delta table at {path}")
    return DeltaTable(str(path))


def open_or_create(
    path: Path,
    schema: pa.Schema,
    configuration: dict[str, str | None],
    *,
    new_columns_in_write: bool = False,
) -> DeltaTable:
    """Open the Delta table at ``path``, creating it empty with ``schema`` and the table
    properties ``configuration`` on first use. Columns of ``schema`` the table lacks (a source
    table evolved online) are added in a metadata commit, or, with ``new_columns_in_write``,
    left to the caller's write (``merge_schema`` / ``schema_mode="merge"``), so the table's
    schema changes in the same commit as its first rows of the new shape."""
    if DeltaTable.is_deltatable(str(path)):
        table = reopen(path)
        if new_columns_in_write:
            later = set(addable_columns(table, schema))
            check_schema(table, pa.schema([f for f in schema if f.name not in later]), path)
            return table
        if add_new_columns(table, schema):
            table = DeltaTable(str(path))
        check_schema(table, schema, path)
        return table
    path.mkdir(parents=True, exist_ok=True)
    return DeltaTable.create(str(path), schema, mode="ignore", configuration=configuration)


_kept: dict[Path, tuple[DeltaTable, int, tuple[int, int, int] | None]] = {}
_kept_lock = threading.Lock()


def _commit_stamp(path: Path, version: int) -> tuple[int, int, int] | None:
    try:
        info = (path / "_delta_log" / f"{version:020}.json").stat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def reopen(path: Path) -> DeltaTable:
    """The table at ``path`` as of now: the one opened last time brought up to date
    (``update_incremental`` reads only the commits since; opening reads the whole log, tens
    of milliseconds per table per batch). A table set aside and created anew at the same path
    is told apart by the commit file the kept one was opened at, and opened afresh."""
    with _kept_lock:
        kept = _kept.pop(path, None)
    table: DeltaTable | None = None
    anchor = -1
    stamp: tuple[int, int, int] | None = None
    if kept is not None:
        held, anchor, stamp = kept
        if stamp is not None and _commit_stamp(path, anchor) == stamp:
            held.update_incremental()
            table = held
    if table is None:
        table = DeltaTable(str(path))
        anchor = table.version()
        stamp = _commit_stamp(path, anchor)
    with _kept_lock:
        if len(_kept) >= _KEPT_TABLES:
            _kept.clear()
        _kept[path] = (table, anchor, stamp)
    return table


#: tables kept open at most (a job has a mirror and a changelog per captured table)
_KEPT_TABLES = 1024


def set_aside(path: Path, name: str) -> Path:
    """Move a Delta table's folder to ``<folder>.<name>`` (``-2``, ``-3``… when an earlier one
    took that name: history is never overwritten) and return where."""
    aside = path.with_name(f"{path.name}.{name}")
    again = 2
    while aside.exists():
        aside = path.with_name(f"{path.name}.{name}-{again}")
        again += 1
    path.rename(aside)
    return aside


def table_properties(
    schema: pa.Schema, lake: LakeConfig, change_data_feed: bool
) -> dict[str, str | None]:
    """Properties of a new mirror (``change_data_feed``) or changelog table.

    Retention durations are Delta's own, so any engine's VACUUM or log cleanup on these tables
    honours the pipeline's settings too; ``cdc-console lake vacuum`` passes the same value.
    """
    props: dict[str, str | None] = {
        "delta.targetFileSize": str(lake.target_file_size),
        "delta.checkpointInterval": str(lake.checkpoint_interval),
        "delta.deletedFileRetentionDuration": _interval(lake.vacuum_retention_hours),
        "delta.logRetentionDuration": _interval(lake.log_retention_hours),
    }
    if change_data_feed:
        props["delta.enableChangeDataFeed"] = "true"
    props.update(stats_properties(schema))
    return props


def _interval(hours: float) -> str:
    return f"interval {round(hours * 3600)} seconds"


def stats_properties(schema: pa.Schema) -> dict[str, str | None]:
    """Keep file statistics off the decimals delta-rs gets wrong.

    delta-rs 1.6.6 clamps the min/max statistics of a scale-0 decimal to the int64 range: a file
    holding 18446744073709551615 in a ``decimal(20,0)`` (BIGINT UNSIGNED) records max
    9223372036854775807. Any reader that skips files by statistics -- delta-rs' own MERGE file
    pruning, Spark's data skipping -- then misses the row; a MERGE inserted a duplicate key in
    our tests. Decimals wider than 18 digits therefore get no statistics (scaled ones above the
    int64 range get none from delta-rs anyway); the first 32 other columns, Delta's default
    count, keep theirs.
    """
    if not unsafe_decimals(schema):
        return {}
    indexed = stats_columns(schema)
    if not indexed:
        return {"delta.dataSkippingNumIndexedCols": "0"}
    return {"delta.dataSkippingStatsColumns": ",".join(f"`{n}`" for n in indexed)}


def _columns(table: DeltaTable) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in table.schema().fields]


def _expected(schema: pa.Schema) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in Schema.from_arrow(schema).fields]


def addable_columns(table: DeltaTable, expected: pa.Schema) -> list[str]:
    """The columns of ``expected`` ``table`` lacks, when it has no others and every column it
    has keeps its type (a source table evolved online); else none."""
    have = dict(_columns(table))
    want = _expected(expected)
    missing = [name for name, _ in want if name not in have]
    if not missing or set(have) - {name for name, _ in want}:
        return []
    if any(have[name] != kind for name, kind in want if name in have):
        return []
    return missing


def add_new_columns(table: DeltaTable, expected: pa.Schema) -> bool:
    """Give ``table`` the ``addable_columns`` of ``expected``, nullable, in one metadata commit;
    True when it made one. Writers match columns by name, so their place at the end of the
    Delta schema does not matter."""
    missing = addable_columns(table, expected)
    if not missing:
        return False
    fields = Schema.from_arrow(pa.schema([expected.field(name) for name in missing])).fields
    table.alter.add_columns(list(fields))
    _log.warning("%s: added the column(s) %s (the source table evolved)", table.table_uri, missing)
    return True


def check_schema(table: DeltaTable, expected: pa.Schema, path: Path) -> None:
    have, want = sorted(_columns(table)), sorted(_expected(expected))
    if have != want:
        raise SinkSchemaError(
            f"Delta table {path} has columns {have} but the source table maps to {want}; "
            "re-dump the table ('cdc-console redump --table <db.table>'), which migrates "
            "the mirror to the new columns"
        )


def same_schema(table: DeltaTable, expected: pa.Schema) -> bool:
    return sorted(_columns(table)) == sorted(_expected(expected))
