"""How a batch's net changes reach a mirror, and the mirror scans that plan them.

Two writes, chosen by the mirror's table features: copy-on-write, one delta-rs MERGE per table
and batch (``merge_nets``), which rewrites every file holding a changed key; and merge-on-read,
deletion vectors (``merge_on_read`` over ``sinks.delta_dv``), which writes only the new rows
and marks the old ones deleted. Both commit the batch's app transaction with the data, so a
retried batch is skipped (``sinks.delta``). The scans read what a plan needs from the mirror
as of before the batch: the keys a range replace deletes (``mirror_absent``, pruned by
``bounds_filter``) and the rows partial row images complete (``mirror_rows``).

The MERGE runs with ``streamed_exec=False`` so delta-rs can skip target files whose key
statistics exclude the batch's keys (4x faster for a small batch on a ten-file table,
delta-rs 1.6.6).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.schema import Field
from deltalake.transaction import CommitProperties

from cdc_console.core.schema import TableSchema
from cdc_console.core.untyped import DeltaMetrics
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.sinks.base import InRange, Key, KeyBounds, SinkError, SinkStats
from cdc_console.sinks.delta_dv import merge_by_deletion_vectors
from cdc_console.sinks.dv_actions import CommitConflict
from cdc_console.sinks.lake_layout import from_lake, to_lake
from cdc_console.sinks.merge_sql import assignments, key_predicate, quote
from cdc_console.sinks.mirror_read import read_delta, table_schema
from cdc_console.values.arrow import codec_for, columns_to_table, mirror_schema, table_to_rows

#: extra source column of the MERGE: 'U' upsert, 'D' delete
MERGE_OP = "__cdc_console_merge_op"
#: tries of a merge-on-read commit whose version another writer took first
CONFLICT_ATTEMPTS = 3

_log = logging.getLogger(__name__)


def merge_stats(stats: SinkStats, metrics: DeltaMetrics) -> None:
    """A MERGE's row and file counts (delta-rs' metrics) into a table's batch stats."""
    inserted = int(metrics.get("num_target_rows_inserted", 0))
    updated = int(metrics.get("num_target_rows_updated", 0))
    stats["inserted"], stats["updated"] = inserted, updated
    stats["deleted"] = int(metrics.get("num_target_rows_deleted", 0))
    stats["upserted"] = inserted + updated
    stats["rows_copied"] = int(metrics.get("num_target_rows_copied", 0))
    stats["files_added"] = int(metrics.get("num_target_files_added", 0))
    stats["files_removed"] = int(metrics.get("num_target_files_removed", 0))


def merge_nets(
    table: DeltaTable,
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CanonicalRow | None],
    commit_properties: CommitProperties | None,
    *,
    merge_schema: bool = False,
) -> DeltaMetrics:
    """One MERGE of the net changes into the mirror; returns delta-rs' metrics. With
    ``merge_schema`` the source's columns the mirror lacks are added in the same commit."""
    key_columns = list(schema.key_columns)
    source_rows: list[Mapping[str, CanonicalValue]] = []
    ops: list[str] = []
    for key, row in nets.items():
        if row is not None:
            source_rows.append(row)
            ops.append("U")
        else:
            if len(key) != len(key_columns):
                raise SinkError(
                    f"{schema.table_id}: key {list(key)} does not match key columns {key_columns}"
                )
            source_rows.append(dict(zip(key_columns, key, strict=True)))
            ops.append("D")
    columns = {name: [row.get(name) for row in source_rows] for name in schema.row_names}
    source = to_lake(columns_to_table(schema, columns), lake).append_column(
        pa.field(MERGE_OP, pa.string()), pa.array(ops, type=pa.string())
    )
    is_delete = f"s.{quote(MERGE_OP)} = 'D'"
    is_upsert = f"s.{quote(MERGE_OP)} = 'U'"
    merger = table.merge(
        source,
        predicate=key_predicate(schema, key_columns),
        source_alias="s",
        target_alias="t",
        streamed_exec=False,  # the source is in memory; lets delta-rs prune files by key bounds
        merge_schema=merge_schema,
        commit_properties=commit_properties,
    )
    # A column the source dropped keeps, in rows it held, the value it had (TableSchema.retired)
    retired = {c.name for c in schema.retired_row_columns}
    inserted = [name for name in source.column_names if name != MERGE_OP]
    updated = [name for name in inserted if name not in retired]
    return (
        merger.when_matched_delete(predicate=is_delete)
        .when_matched_update(assignments(updated), predicate=is_upsert)
        .when_not_matched_insert(assignments(inserted), predicate=is_upsert)
        .execute()
    )


def bounds_filter(lake: pa.Schema, bounds: Sequence[KeyBounds | None]) -> pc.Expression | None:
    """The rows of the mirror any of ``bounds`` can hold, as a filter Delta prunes files by;
    None (read everything) unless every range has integer bounds on one integer column."""
    if not bounds or any(b is None for b in bounds):
        return None
    names = {b.column for b in bounds if b is not None}
    if len(names) != 1:
        return None
    (name,) = names
    if lake.get_field_index(name) < 0 or not pa.types.is_integer(lake.field(name).type):
        return None
    column = pc.field(name)
    where: pc.Expression | None = None
    for b in bounds:
        assert b is not None
        part = column.is_valid()
        if b.start is not None:
            part = part & (column >= b.start)
        if b.end is not None:
            part = part & (column < b.end)
        if b.start is None:
            part = part | column.is_null()  # a NULL chunk key is the first chunk's
        where = part if where is None else where | part
    return where


def mirror_absent(
    table: DeltaTable,
    schema: TableSchema,
    checks: Sequence[tuple[InRange, set[Key]]],
    full_rows: bool,
    where: pc.Expression | None = None,
) -> list[dict[Key, CanonicalRow | None]]:
    """Per check: mirror keys in its range and not in its present set, with the canonical row
    when ``full_rows`` (the changelog's before image), else None. One scan for all checks,
    of the rows ``where`` lets through (a superset of every check's range: ``bounds_filter``)."""
    key_columns = list(schema.key_columns)
    columns = None if full_rows else key_columns
    read = read_delta(table, columns, where)
    data = from_lake(read, mirror_schema(schema))
    result: list[dict[Key, CanonicalRow | None]] = [{} for _ in checks]
    if data.num_rows == 0:
        return result
    key_values = [
        codec_for(schema.column(name)).array_to_canonical(data.column(name)) for name in key_columns
    ]
    hits: list[tuple[int, Key, int]] = []
    for index, values in enumerate(zip(*key_values, strict=True)):
        key_row = dict(zip(key_columns, values, strict=True))
        for check, (in_range, present) in enumerate(checks):
            if values not in present and in_range(key_row):
                hits.append((check, values, index))
    rows: list[CanonicalRow | None] = [None] * len(hits)
    if full_rows and hits:
        indices = pa.array([index for _, _, index in hits], type=pa.int64())
        rows = list(table_to_rows(schema, data.take(indices)))
    for (check, key, _), row in zip(hits, rows, strict=True):
        result[check][key] = row
    return result


def mirror_rows(
    table: DeltaTable, schema: TableSchema, lake: pa.Schema, keys: Collection[Key]
) -> dict[Key, CanonicalRow]:
    """The mirror's rows of ``keys``, canonical: one scan, which Delta prunes by the values of
    the first key column (file statistics), the rest matched here."""
    key_columns = list(schema.key_columns)
    first = key_columns[0]
    wanted = list({key[0] for key in keys})
    typed = to_lake(
        pa.table({first: codec_for(schema.column(first)).to_arrow(wanted)}),
        pa.schema([lake.field(first)]),
    )
    where = pc.field(first).isin(typed.column(first).combine_chunks())
    read = read_delta(table, where=where)
    rows = table_to_rows(schema, from_lake(read, mirror_schema(schema)))
    found: dict[Key, CanonicalRow] = {}
    for row in rows:
        key = tuple(row[name] for name in key_columns)
        if key in keys:
            found[key] = row
    return found


def merge_on_read(
    mirror: DeltaTable,
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CanonicalRow | None],
    app: tuple[str, int],
    info: Mapping[str, str],
    befores: Mapping[Key, CanonicalRow],
) -> DeltaMetrics:
    """The batch's nets by deletion vectors (``sinks.delta_dv``), columns added online in
    the same commit; ``app`` is the commit's app transaction, ``info`` its commit info. A new
    wall-clock column on a table without the ``timestampNtz`` feature joins in a commit of
    its own first (delta-rs upgrades the protocol; a NULL column in every row the mirror
    holds is true of the source too)."""
    held = {f.name for f in table_schema(mirror)}
    wall_clock = [f for f in lake if f.name not in held and f.type == pa.timestamp("us")]
    if wall_clock and "timestampNtz" not in (mirror.protocol().writer_features or []):
        mirror.alter.add_columns([Field.from_arrow(f) for f in wall_clock])
        mirror.update_incremental()
    attempt = 1
    while True:
        try:
            return merge_by_deletion_vectors(mirror, schema, lake, nets, app, dict(info), befores)
        except CommitConflict:
            # Another writer (an operator's `lake optimize`, say) took the version: the
            # batch's net changes are laid on the table as it now is; the files the failed
            # attempt wrote are referenced by no version, and vacuum removes them.
            if attempt == CONFLICT_ATTEMPTS:
                raise
            attempt += 1
            _log.warning("%s: commit conflict, batch %d tried again", schema.table_id, app[1])
            mirror.update_incremental()
