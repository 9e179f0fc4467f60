"""A first-snapshot chunk's Delta data files, written where the chunk was read.

Why: a first-snapshot chunk used to travel from the reader task to the driver as Arrow bytes
inside a Spark row -- through the JVM, into the batch's staging file, back out -- and the driver
then wrote every row to Delta alone. Now the reader writes the chunk's Parquet files straight
into the mirror's (and changelog's) folder and sends the driver only what their add actions
need; the driver commits them in the batch's one Delta commit per table, with the batch's app
transaction (``DeltaSink._append_table``). The rows cross no process boundary, and the writing
runs in as many tasks as there are readers.

Exactness is the commit's, as before: a file is part of the mirror only once the batch's
commit names it, and that commit is made once (app transaction). A batch read again after a
crash writes new files (new names); the first attempt's files are orphans that no version
references, and ``maintenance.vacuum`` deletes them once their batch is committed to the table
(its app transaction, the batch id is in the file's name), or, where it cannot tell, once they
are old enough that no batch can still be about to commit them (``IN_FLIGHT_SECONDS``).

Statistics. The driver commits the add actions as they are, so the reader computes each file's
Delta statistics itself, over the same columns ``lake_layout.stats_columns`` keeps. Only
bounds whose Delta encoding is exact are written (integers, strings, dates, booleans, scale-0
decimals up to 18 digits: every key type of a chunked table but the temporal ones); other
columns get their null count only, which merely stops a reader from skipping that file by that
column. Wrong bounds would make delta-rs' MERGE skip a file holding a key (a duplicate row),
so ``tests/unit/test_delta_files.py`` checks them against delta-rs' own.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from dataclasses import asdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc_console.core.schema import TableSchema
from cdc_console.core.values import JSONValue
from cdc_console.sinks.base import DataFile, SinkSchemaError, TypedChunk, WrittenChunk
from cdc_console.sinks.lake_layout import (
    ROW_GROUP_ROWS,
    changelog_path,
    changelog_schema,
    lake_schema,
    mirror_path,
    stats_columns,
    to_lake,
)
from cdc_console.sinks.lake_target import LakeTarget
from cdc_console.values.arrow import arrow_schema, mirror_schema

#: names of the files readers write; ``maintenance.vacuum`` spares young ones (in flight)
FILE_PREFIX = "snap-"
#: a file this young may belong to a batch still being read or applied
IN_FLIGHT_SECONDS = 3600.0
_EXACT_DECIMAL_DIGITS = 18


def file_batch(name: str) -> int | None:
    """The batch a reader wrote this data file for (its name, see ``write_chunk``), or None
    for a file no reader wrote."""
    stem = Path(name).name
    if not stem.startswith(FILE_PREFIX + "b"):
        return None
    digits, _, _ = stem[len(FILE_PREFIX) + 1 :].partition("-")
    return int(digits) if digits.isdigit() else None


def write_chunk(
    target: LakeTarget, schema: TableSchema, batch_id: int, chunk: TypedChunk
) -> WrittenChunk:
    """Write one chunk's rows as mirror (and changelog) data files; commit nothing."""
    check_rows(schema, chunk)
    lake = lake_schema(mirror_schema(schema), target.lake)
    rows = to_lake(chunk.rows, lake)
    _, _, number = chunk.split_id.rpartition(":")
    stem = f"{FILE_PREFIX}b{batch_id:09d}-s{number or 0}"
    size = target.lake.target_file_size
    mirror = write_files(mirror_path(target.root, schema.table_id, target.names), rows, size, stem)
    changelog: tuple[DataFile, ...] = ()
    if target.changelog:
        log_rows = snapshot_changelog(changelog_schema(lake), batch_id, chunk, rows)
        changelog = write_files(
            changelog_path(target.root, schema.table_id, target.names), log_rows, size, stem
        )
    return WrittenChunk(
        chunk.split_id,
        chunk.position,
        chunk.ts_ms,
        rows.num_rows,
        mirror,
        changelog,
        columns_of(lake),
    )


def columns_of(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    return tuple((f.name, str(f.type)) for f in schema)


def check_written(schema: TableSchema, lake: pa.Schema, chunk: WrittenChunk) -> None:
    """Refuse files written in another shape than the mirror's (the table changed meanwhile)."""
    if chunk.columns != columns_of(lake):
        raise SinkSchemaError(
            f"files of {chunk.split_id} have columns {list(chunk.columns)} but "
            f"{schema.table_id} maps to {list(columns_of(lake))}"
        )


def chunk_to_json(chunk: WrittenChunk) -> bytes:
    """A written chunk as it travels from its reader to the driver (inverse: ``chunk_from_json``)."""
    return json.dumps(asdict(chunk), separators=(",", ":")).encode()


def chunk_from_json(payload: bytes) -> WrittenChunk:
    data = json.loads(payload)

    def files(items: list[dict[str, str | int]]) -> tuple[DataFile, ...]:
        return tuple(
            DataFile(str(f["path"]), int(f["size"]), int(f["modification_time"]), str(f["stats"]))
            for f in items
        )

    file_index, pos, event_index, row_index = (int(v) for v in data["position"])
    return WrittenChunk(
        split_id=str(data["split_id"]),
        position=(file_index, pos, event_index, row_index),
        ts_ms=int(data["ts_ms"]),
        rows=int(data["rows"]),
        mirror=files(data["mirror"]),
        changelog=files(data["changelog"]),
        columns=tuple((str(name), str(kind)) for name, kind in data["columns"]),
    )


def check_rows(schema: TableSchema, chunk: TypedChunk) -> None:
    """Refuse rows that are not the table's typed rows (the table changed shape meanwhile)."""
    if chunk.rows.schema != arrow_schema(schema):
        raise SinkSchemaError(
            f"typed rows of {chunk.split_id} have columns {chunk.rows.schema} but "
            f"{schema.table_id} maps to {arrow_schema(schema)}"
        )


def snapshot_changelog(
    schema: pa.Schema, batch_id: int, chunk: TypedChunk, rows: pa.Table
) -> pa.Table:
    """A chunk's changelog rows: ``+I`` at its HW, seq = row in the chunk."""
    count = rows.num_rows
    file_index, pos, event_index, row_index = chunk.position
    meta = [
        pa.array(["+I"] * count, type=pa.string()),
        pa.array([file_index] * count, type=pa.int64()),
        pa.array([pos] * count, type=pa.int64()),
        pa.array([event_index] * count, type=pa.int64()),
        pa.array([row_index] * count, type=pa.int64()),
        pa.array(range(count), type=pa.int64()),
        pa.array([chunk.ts_ms] * count, type=pa.int64()),
        pa.array([batch_id] * count, type=pa.int64()),
    ]
    return pa.Table.from_arrays([*rows.columns, *meta], schema=schema)


def write_files(
    directory: Path, data: pa.Table, target_size: int, stem: str
) -> tuple[DataFile, ...]:
    """``data`` as Parquet files of at most about ``target_size`` bytes, in row order, each
    complete under its final name before it is reported (written aside, then renamed)."""
    if data.num_rows == 0:
        return ()
    directory.mkdir(parents=True, exist_ok=True)
    whole = _encode(data)
    pieces = max(1, math.ceil(len(whole) / target_size))
    if pieces == 1:
        parts = [(data, whole)]
    else:
        step = math.ceil(data.num_rows / pieces)
        slices = [data.slice(start, step) for start in range(0, data.num_rows, step)]
        parts = [(piece, _encode(piece)) for piece in slices]
    indexed = stats_columns(data.schema)
    files = []
    for n, (piece, encoded) in enumerate(parts):
        name = f"{stem}-{n:03d}-{uuid.uuid4().hex}.snappy.parquet"
        aside = directory / f"{name}.tmp"
        aside.write_bytes(encoded)
        os.replace(aside, directory / name)
        files.append(
            DataFile(name, len(encoded), int(time.time() * 1000), file_stats(piece, indexed))
        )
    return tuple(files)


def _encode(data: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(
        data,
        sink,
        compression="snappy",
        use_dictionary=dictionary_columns(data),
        row_group_size=ROW_GROUP_ROWS,
    )
    return bytes(sink.getvalue())


#: rows of a column looked at to decide whether it repeats enough for a dictionary
_DICTIONARY_SAMPLE = 1024


def dictionary_columns(data: pa.Table) -> list[str] | bool:
    """The columns worth dictionary-encoding: those whose first rows repeat (at most one
    distinct value in four), e.g. a status or a country, not a key, an amount or a time.

    Parquet writers try a dictionary for every column and fall back to plain encoding when it
    grows too large; for the unique values most mirror columns hold, that attempt was 40% of
    encoding a chunk (0.35 -> 0.21 µs per row of the bench's table), and the files come out no
    larger. ``True`` (every column, the writer's default) where a name could be read as a
    nested path or a type has no distinct count.
    """
    names = data.column_names
    if any("." in name for name in names):
        return True
    rows = min(data.num_rows, _DICTIONARY_SAMPLE)
    chosen = []
    for name in names:
        try:
            distinct = pc.count_distinct(data.column(name).slice(0, rows)).as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            return True
        if distinct * 4 <= rows:
            chosen.append(name)
    return chosen


def file_stats(data: pa.Table, columns: list[str]) -> str:
    """Delta's statistics of a file holding ``data``, for ``columns`` (see the module text)."""
    lows: dict[str, JSONValue] = {}
    highs: dict[str, JSONValue] = {}
    nulls: dict[str, JSONValue] = {}
    for name in columns:
        column = data.column(name)
        nulls[name] = column.null_count
        bounds = _bounds(column)
        if bounds is not None:
            lows[name], highs[name] = bounds
    stats: dict[str, JSONValue] = {
        "numRecords": data.num_rows,
        "minValues": lows,
        "maxValues": highs,
        "nullCount": nulls,
    }
    return json.dumps(stats, separators=(",", ":"))


def _exact_bounds(kind: pa.DataType) -> bool:
    if pa.types.is_decimal(kind):
        return bool(kind.scale == 0 and kind.precision <= _EXACT_DECIMAL_DIGITS)
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_boolean(kind)
    )


def _bounds(column: pa.ChunkedArray) -> tuple[JSONValue, JSONValue] | None:
    if not _exact_bounds(column.type) or column.null_count == len(column):
        return None
    found = pc.min_max(column)
    return _json(found["min"].as_py()), _json(found["max"].as_py())


def _json(value: object) -> JSONValue:
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value)
    if isinstance(value, bool | int | str):
        return value
    raise TypeError(f"no exact Delta statistic for {value!r}")
