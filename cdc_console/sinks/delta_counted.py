"""The Delta side of counted mirrors (``sinks.counted``): the counts a range holds, and the MERGE
that applies a batch's net count changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from cdc_console.core.schema import COUNT_COLUMN, TableSchema
from cdc_console.core.untyped import DeltaMetrics
from cdc_console.sinks.base import Key, ReplaceRange
from cdc_console.sinks.counted import CountedNet, MirrorCounts
from cdc_console.sinks.lake_layout import from_lake, to_lake
from cdc_console.sinks.merge_sql import assignments, key_predicate, quote
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.values.arrow import columns_to_table, mirror_schema, table_to_rows

_OP = "__cdc_console_count_op"  # extra MERGE source column: 'S' set the count, 'A' add to it


def counts_in_ranges(
    table: DeltaTable,
    schema: TableSchema,
    replaces: Sequence[ReplaceRange],
    where: pc.Expression | None,
) -> list[MirrorCounts]:
    """Per replace: the mirror's distinct rows in its range, with their counts. One scan, of
    the rows ``where`` lets through (a superset of every range)."""
    read = read_delta(table, where=where)
    data = from_lake(read, mirror_schema(schema))
    result: list[MirrorCounts] = [{} for _ in replaces]
    if data.num_rows == 0:
        return result
    counts = data.column(COUNT_COLUMN).to_pylist()
    key_names = schema.key_columns
    for row, count in zip(table_to_rows(schema, data), counts, strict=True):
        key = tuple(row[name] for name in key_names)
        for index, replace in enumerate(replaces):
            if replace.in_range(row):
                result[index][key] = (row, int(count))
    return result


def merge_counted(
    table: DeltaTable,
    schema: TableSchema,
    lake: pa.Schema,
    nets: Mapping[Key, CountedNet],
    commit_properties: CommitProperties | None,
    *,
    merge_schema: bool = False,
) -> DeltaMetrics | None:
    """One MERGE of the net count changes into a counted mirror; None when nothing changes."""
    live = [net for net in nets.values() if net.absolute or net.count]
    if not live:
        return None
    columns = {name: [net.row.get(name) for net in live] for name in schema.row_names}
    typed = columns_to_table(schema, columns).append_column(
        pa.field(COUNT_COLUMN, pa.int64(), nullable=False),
        pa.array([net.count for net in live], type=pa.int64()),
    )
    source = to_lake(typed, lake).append_column(
        pa.field(_OP, pa.string()), pa.array(["S" if n.absolute else "A" for n in live])
    )
    count, op = quote(COUNT_COLUMN), quote(_OP)
    absolute = f"s.{op} = 'S'"
    result = f"CASE WHEN {absolute} THEN s.{count} ELSE t.{count} + s.{count} END"
    merger = table.merge(
        source,
        predicate=key_predicate(schema, schema.row_names),
        source_alias="s",
        target_alias="t",
        streamed_exec=False,
        merge_schema=merge_schema,
        commit_properties=commit_properties,
    )
    metrics: DeltaMetrics = (
        merger.when_matched_delete(predicate=f"{result} <= 0")
        .when_matched_update(updates={COUNT_COLUMN: result})
        .when_not_matched_insert(
            assignments([n for n in source.column_names if n != _OP]), predicate=f"s.{count} > 0"
        )
        .execute()
    )
    return metrics
