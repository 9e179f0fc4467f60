"""Reading a table's mirror together with the binlog position it stands at.

A verification compares the mirror with the source *at one binlog position*, so it must know
exactly which changes the mirror holds. Every mirror commit carries the batch that made it (a
Delta app transaction ``(app_id, batch)``), and the state records each batch's binlog window and
each streaming table's ``stream_from`` (the end of the last window applied to it). Read in this
order, the two give that position without pausing the job:

1. the state: the last applied batch N and the table's ``stream_from`` S (every change of the
   table before S is in the mirror, because the state commits a batch after its Delta commits);
2. the mirror, at its latest version, whose app transaction says it holds batch M.

If M <= N the mirror holds exactly the changes before S (batches after M had none for this
table, or they would have committed to it). If M > N, batches up to M reached Delta after step 1
(batches apply one at a time, in order), and the mirror holds exactly the changes before the end
of batch M's window.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable

from cdc_console.config import SourceConfig
from cdc_console.core.chunk import ChunkRange
from cdc_console.core.lifecycle import Lifecycle
from cdc_console.core.mysqltypes import TypeFamily
from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import COUNT_COLUMN, TableSchema
from cdc_console.figures import table_position
from cdc_console.mysql.key_weights import key_order
from cdc_console.sinks.delta import pipeline_app_id
from cdc_console.sinks.lake_layout import MirrorNames, from_lake, table_app_id
from cdc_console.sinks.mirror_read import read_delta, table_schema
from cdc_console.state.store import StateStore
from cdc_console.values.arrow import arrow_schema, codec_for
from cdc_console.values.canonical import canonical_chunk_key
from cdc_console.verify.compare import typed


class MirrorNotReady(RuntimeError):
    """The mirror cannot be placed at a binlog position (not streaming, not written yet)."""


@dataclass(frozen=True)
class MirrorSnapshot:
    """The rows of a key range of one mirror, and the position before which the mirror holds
    every change of its table and after which none."""

    rows: pa.Table
    #: None for a snapshot-only mirror, whose chunks each stand at their own high watermark
    position: BinlogOffset | None
    version: int


class MirrorReader:
    """Reads one table's mirror with its position (see the module docstring)."""

    def __init__(
        self,
        store: StateStore,
        path: str,
        pipeline: str,
        source: SourceConfig | None = None,
        names: MirrorNames | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.source = source
        self.app_id = pipeline_app_id(pipeline)
        #: ``[sink] mirrors``: a routed table's batches carry an app id of their own
        self.names = names

    def read(self, schema: TableSchema, ranges: list[ChunkRange]) -> MirrorSnapshot:
        table_id = schema.table_id
        found = self.store.table(table_id)
        if found is not None and found.state == Lifecycle.SNAPSHOT_DONE:
            # snapshot-only: each chunk is its state at its own high watermark, and nothing
            # writes the mirror any more; the caller places each chunk by its watermark
            table = DeltaTable(self.path)
            rows = _read_ranges(table, schema, ranges, self.source)
            return MirrorSnapshot(rows, None, table.version())
        stream_from = table_position(found) if found is not None else None
        if found is None or stream_from is None:
            raise MirrorNotReady(f"{table_id} has no stream position yet")
        applied = self.store.last_applied_batch()
        table = DeltaTable(self.path)
        version = table.version()
        batch = table.transaction_version(table_app_id(self.app_id, table_id, self.names))
        position = stream_from
        if batch is not None and batch > applied:
            row = self.store.batch(batch)
            if row is None or row.plan.binlog is None:
                raise MirrorNotReady(
                    f"{table_id}'s mirror holds batch {batch}, which reads no binlog window"
                )
            position = row.plan.binlog.end
        rows = _read_ranges(table, schema, ranges, self.source)
        return MirrorSnapshot(rows, position, version)


def _of_origin(schema: TableSchema) -> pc.Expression | None:
    """The rows of a routed table's mirror that are its own (``TableSchema.origin``)."""
    found = None
    for name, value in schema.origin.items():
        own = ds.field(name) == value
        found = own if found is None else found & own
    return found


def _and(left: pc.Expression | None, right: pc.Expression | None) -> pc.Expression | None:
    if left is None or right is None:
        return left if right is None else right
    return left & right


def _read_ranges(
    table: DeltaTable,
    schema: TableSchema,
    ranges: list[ChunkRange],
    source: SourceConfig | None = None,
) -> pa.Table:
    """The mirror's rows whose chunk key falls in one of ``ranges`` (contiguous, in order), as
    typed source columns. Integer keys are filtered by Delta's file statistics and Arrow; other
    keys compare by collation, which only ``ChunkRange.contains`` knows, so they are filtered
    after reading unless the ranges cover the whole table."""
    wanted = arrow_schema(schema)
    stored_schema = table_schema(table)
    present = [name for name in schema.row_names if name in stored_schema.names]
    if schema.counted:
        present.append(COUNT_COLUMN)
    column = schema.column(schema.chunk_key)
    start, end = ranges[0].start, ranges[-1].end
    expression = None
    if column.family == TypeFamily.INTEGER and (start is not None or end is not None):
        field = ds.field(schema.chunk_key)
        stored = stored_schema.field(schema.chunk_key).type
        if start is not None:
            assert isinstance(start, int), start
            expression = field >= lake_scalar(start, stored)
        if end is not None:
            assert isinstance(end, int), end
            below = field < lake_scalar(end, stored)
            expression = below if expression is None else expression & below
        if start is None and column.nullable:
            expression = expression | field.is_null()
    data = read_delta(table, present, _and(expression, _of_origin(schema)))
    data = from_lake(data, wanted)
    for name in schema.row_names:
        if name not in present:
            # a column added online that no committed batch has written yet: NULL everywhere
            data = data.append_column(name, pa.nulls(data.num_rows, wanted.field(name).type))
    if schema.counted:
        data = expand_counts(data)
    rows = typed(schema, data)
    if expression is None and (start is not None or end is not None):
        rows = rows.filter(pa.array(in_ranges(schema, rows, ranges, source), pa.bool_()))
    return rows


def expand_counts(data: pa.Table) -> pa.Table:
    """A counted mirror's rows as the source holds them: each ``COUNT_COLUMN`` times."""
    counts = data.column(COUNT_COLUMN).to_pylist()
    repeated = [index for index, count in enumerate(counts) for _ in range(count)]
    return data.take(pa.array(repeated, type=pa.int64())).drop_columns([COUNT_COLUMN])


def lake_scalar(value: int, stored: pa.DataType) -> pa.Scalar:
    """An integer key bound as a scalar of the mirror column's own type: a BIGINT UNSIGNED
    mirror column is decimal(20,0), which Arrow compares with neither an int64 (precision) nor
    a Python int above 2**63."""
    if pa.types.is_decimal(stored):
        return pa.scalar(Decimal(value), stored)
    return pa.scalar(value, stored)


def in_ranges(
    schema: TableSchema,
    rows: pa.Table,
    ranges: list[ChunkRange],
    source: SourceConfig | None = None,
) -> list[bool]:
    """Per row of ``rows``: is its chunk key inside one of ``ranges`` (in the server's order,
    asked of ``source`` where Python cannot tell it)?"""
    column = schema.column(schema.chunk_key)
    order = key_order(column, source)
    values = codec_for(column).array_to_canonical(rows.column(schema.chunk_key))
    keys = [canonical_chunk_key(column, v) for v in values]
    return [any(r.contains(k, order) for r in ranges) for k in keys]
