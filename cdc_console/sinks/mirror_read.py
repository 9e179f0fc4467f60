"""Reading a Delta table whatever its files hold: the one way the pipeline reads its mirrors.

delta-rs' pyarrow readers (``to_pyarrow_table``, ``to_pyarrow_dataset``) refuse a table whose
protocol has the ``deletionVectors`` reader feature. A table without it is read by delta-rs as
before; one with it file by file from its log (``delta_log.active_files``): each active data
file's rows, less the rows its deletion vector marks, in the table's schema (a column a file
predates reads as NULL), then the filter.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, TableFeatures

from cdc_console.sinks.delta_log import ActiveFile, active_files

DELETION_VECTORS = "deletionVectors"


def has_deletion_vectors(table: DeltaTable) -> bool:
    """Whether the table's protocol lets its files carry deletion vectors."""
    return DELETION_VECTORS in (table.protocol().reader_features or [])


def enable_deletion_vectors(table: DeltaTable) -> None:
    """Let the table's files carry deletion vectors (reader 3 / writer 7, ``deletionVectors``;
    a feature is never removed again, as the protocol asks)."""
    if not has_deletion_vectors(table):
        table.alter.add_feature(
            TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
        )
        table.update_incremental()


def table_schema(table: DeltaTable) -> pa.Schema:
    """The table's current schema as pyarrow's."""
    return pa.schema(table.schema().to_arrow())


def read_delta(
    table: DeltaTable,
    columns: Sequence[str] | None = None,
    where: pc.Expression | None = None,
) -> pa.Table:
    """The table's live rows (``columns`` of them, those ``where`` keeps)."""
    if not has_deletion_vectors(table):
        return table.to_pyarrow_dataset().to_table(
            columns=None if columns is None else list(columns), filter=where
        )
    schema = table_schema(table)
    root = table_root(table)
    parts = [
        live_rows(root, file, schema, where)
        for file in active_files(root, table.version()).values()
    ]
    rows = pa.concat_tables(parts) if parts else schema.empty_table()
    return rows if columns is None else rows.select(list(columns))


def table_root(table: DeltaTable) -> Path:
    """The local folder of a table (its ``file://`` URI, percent-decoded)."""
    return Path(unquote(table.table_uri.removeprefix("file://")))


def keep_mask(rows: int, deleted: Sequence[int]) -> pa.BooleanArray:
    """True for each of ``rows`` positions but the ``deleted`` ones (bit-packed directly: the
    cost is the deletions, not the rows)."""
    bits = bytearray(b"\xff" * ((rows + 7) // 8))
    for position in deleted:
        bits[position >> 3] &= ~(1 << (position & 7)) & 0xFF
    mask = pa.Array.from_buffers(pa.bool_(), rows, [None, pa.py_buffer(bytes(bits))])
    assert isinstance(mask, pa.BooleanArray)
    return mask


def read_file(path: Path, columns: Sequence[str]) -> pa.Table:
    """A data file's ``columns``, view types as their plain twins: delta-rs writes some files
    with ``string_view``/``binary_view``, which pyarrow cannot ``take`` or ``filter``."""
    return _plain_views(pq.read_table(path, columns=list(columns)))


def read_positions(
    path: Path,
    columns: Sequence[str],
    positions: Sequence[int],
    metadata: pq.FileMetaData | None = None,
) -> pa.Table:
    """The rows at ``positions`` of a data file, in that order: only the row groups that hold
    them are read and decoded (a changed row costs its row group, not its file)."""
    file = pq.ParquetFile(path, metadata=metadata)
    starts = [0]
    for group in range(file.metadata.num_row_groups):
        starts.append(starts[-1] + file.metadata.row_group(group).num_rows)
    groups = sorted({bisect_right(starts, p) - 1 for p in positions})
    offsets: dict[int, int] = {}
    read = 0
    for group in groups:
        offsets[group] = read - starts[group]
        read += starts[group + 1] - starts[group]
    data = _plain_views(file.read_row_groups(groups, columns=list(columns)))
    local = [p + offsets[bisect_right(starts, p) - 1] for p in positions]
    return data.take(pa.array(local, type=pa.int64()))


def _plain_views(data: pa.Table) -> pa.Table:
    if not any(
        pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) for f in data.schema
    ):
        return data
    fields = [
        pa.field(f.name, pa.string())
        if pa.types.is_string_view(f.type)
        else pa.field(f.name, pa.binary())
        if pa.types.is_binary_view(f.type)
        else f
        for f in data.schema
    ]
    return data.cast(pa.schema(fields))


def live_rows(
    root: Path, file: ActiveFile, schema: pa.Schema, where: pc.Expression | None
) -> pa.Table:
    """One active file's rows less those its deletion vector marks, in ``schema``."""
    present = set(pq.read_schema(root / file.path).names)
    data = read_file(root / file.path, [n for n in schema.names if n in present])
    if file.deletion_vector is not None:
        data = data.filter(keep_mask(data.num_rows, file.deletion_vector.read(root)))
    arrays = [
        data.column(f.name).cast(f.type) if f.name in present else pa.nulls(data.num_rows, f.type)
        for f in schema
    ]
    aligned = pa.Table.from_arrays(arrays, schema=schema)
    return aligned if where is None else aligned.filter(where)
