"""Comparing one side's rows with the other's, in the mirror's own Arrow types.

Both sides arrive as typed Arrow tables in ``values.arrow.arrow_schema`` (the source through the
snapshot path's own conversion, the mirror read back from Delta), so a DECIMAL's last digit, a
DATETIME(6)'s microsecond or a BLOB's byte compare exactly, and representation alone (naive vs
UTC, ``Decimal`` vs text) never counts as a difference. Equal tables, the common case, are found
with one sort and one vectorised ``equals``; only when they differ is a key join made, and only
the differing rows are turned back into canonical values for the report.

Binlog changes folded onto a side (``Fold``) replace whole rows by key: with full row images the
last change of a key in a window is its state at the window's end, whatever it was before.

A counted table (no unique key, ``sinks.counted``) is a multiset: both sides hold each row as
often as the source does (the mirror's rows expanded by their count), a fold adds and takes away
copies, and a difference is a copy one side has more of.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from cdc_console.core.schema import TableSchema
from cdc_console.core.values import CanonicalRow, CanonicalValue
from cdc_console.values.arrow import arrow_schema, codec_for, rows_to_table, table_to_rows

Key = tuple[CanonicalValue, ...]

_SOURCE = "__source"
_MIRROR = "__mirror"
_PRESENT = "__present"


class DifferenceKind(StrEnum):
    MISSING = "missing"  # in the source, not in the mirror
    EXTRA = "extra"  # in the mirror, not in the source
    DIFFERS = "differs"  # in both, some column differs


@dataclass(frozen=True)
class Difference:
    """One key whose row differs; ``columns`` holds (source, mirror) values of the columns that
    differ (empty for a missing or extra row)."""

    kind: DifferenceKind
    key: Key
    columns: dict[str, tuple[CanonicalValue, CanonicalValue]] = field(default_factory=dict)
    #: the row's chunk key value, which places it in a chunk
    chunk_value: CanonicalValue = None


@dataclass
class Fold:
    """The last change of each key from some position on: its row, or None where it was
    deleted. Applied over a side's rows it gives that side's state at the window's end."""

    rows: dict[Key, CanonicalRow | None] = field(default_factory=dict)
    #: a counted table's fold: per distinct row, copies added (or, negative, taken away)
    counts: dict[Key, tuple[CanonicalRow, int]] = field(default_factory=dict)
    #: columns set by changes logged with partial row images (``mysql.partial_images``) of
    #: keys the fold has no whole row for: applied to the side's own row of the key
    patches: dict[Key, CanonicalRow] = field(default_factory=dict)

    def delete(self, key: Key) -> None:
        self.rows[key] = None
        self.patches.pop(key, None)

    def upsert(self, key: Key, row: CanonicalRow) -> None:
        self.rows[key] = row
        self.patches.pop(key, None)

    def patch(self, key: Key, columns: CanonicalRow) -> None:
        """A change of some columns of the row ``key`` names (a partial row image)."""
        if key in self.rows:
            row = self.rows[key]
            if row is not None:  # a deleted row stays deleted: the source cannot update it
                self.rows[key] = {**row, **columns}
            return
        self.patches[key] = {**self.patches.get(key, {}), **columns}

    def count(self, key: Key, row: CanonicalRow, change: int) -> None:
        _, before = self.counts.get(key, (row, 0))
        self.counts[key] = (row, before + change)

    def __len__(self) -> int:
        return len(self.rows) + len(self.counts)


def typed(schema: TableSchema, table: pa.Table) -> pa.Table:
    """``table``'s source columns in source order and types (a mirror also holds retired
    columns, and Delta may hand back wider string types)."""
    return table.select(schema.row_names).cast(arrow_schema(schema))


def keys_table(schema: TableSchema, keys: Iterable[Key]) -> pa.Table:
    """Canonical keys as a typed table of the key columns (to join with)."""
    listed = list(keys)
    arrays = []
    for index, name in enumerate(schema.key_columns):
        arrays.append(codec_for(schema.column(name)).to_arrow([k[index] for k in listed]))
    return pa.Table.from_arrays(arrays, names=list(schema.key_columns))


def overlay(schema: TableSchema, base: pa.Table, fold: Fold) -> pa.Table:
    """``base`` with ``fold``'s keys replaced by their folded rows (or removed)."""
    if fold.counts:
        return _overlay_counts(schema, base, fold)
    folded = dict(fold.rows)
    keys = list(schema.key_columns)
    if fold.patches:
        held = base.join(keys_table(schema, fold.patches), keys=keys, join_type="left semi")
        for row in table_to_rows(schema, held):
            key = key_of_row(schema, row)
            folded[key] = {**row, **fold.patches[key]}
    if not folded:
        return base
    kept = base.join(keys_table(schema, folded), keys=keys, join_type="left anti")
    present = [row for row in folded.values() if row is not None]
    if not present:
        return kept.select(base.column_names)
    return pa.concat_tables([kept.select(base.column_names), rows_to_table(schema, present)])


def _overlay_counts(schema: TableSchema, base: pa.Table, fold: Fold) -> pa.Table:
    """A counted side with ``fold``'s copies added and taken away."""
    change = {key: count for key, (_, count) in fold.counts.items()}
    kept = []
    for row in table_to_rows(schema, base):
        key = key_of_row(schema, row)
        if change.get(key, 0) < 0:
            change[key] += 1
            continue
        kept.append(row)
    for key, count in change.items():
        kept.extend([fold.counts[key][0]] * count)
    return rows_to_table(schema, kept).select(base.column_names)


def key_of_row(schema: TableSchema, row: CanonicalRow) -> Key:
    return tuple(row[name] for name in schema.key_columns)


def compare(schema: TableSchema, source: pa.Table, mirror: pa.Table) -> list[Difference]:
    """Every key whose row differs between ``source`` and ``mirror`` (both ``typed``)."""
    keys = list(schema.key_columns)
    order = [(name, "ascending") for name in keys]
    if source.num_rows == mirror.num_rows and source.sort_by(order).equals(mirror.sort_by(order)):
        return []
    if schema.counted:
        return _count_differences(schema, source, mirror)
    others = [name for name in schema.row_names if name not in keys]
    left = _marked(source, others, _SOURCE)
    right = _marked(mirror, others, _MIRROR)
    joined = left.join(right, keys=keys, join_type="full outer")
    in_source = pc.is_valid(joined.column(_PRESENT + _SOURCE))
    in_mirror = pc.is_valid(joined.column(_PRESENT + _MIRROR))
    both = pc.and_(in_source, in_mirror)
    differs: pa.ChunkedArray | pa.Array = pa.nulls(joined.num_rows, pa.bool_()).fill_null(False)
    for name in others:
        a = joined.column(name + _SOURCE)
        b = joined.column(name + _MIRROR)
        equal = pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_null(a), pc.is_null(b)))
        differs = pc.or_(differs, pc.invert(pc.fill_null(equal, False)))
    wrong = joined.filter(pc.or_(pc.invert(both), pc.and_(both, differs)))
    if wrong.num_rows == 0:
        return []
    return _differences(schema, wrong, others)


def _count_differences(schema: TableSchema, source: pa.Table, mirror: pa.Table) -> list[Difference]:
    """A counted table's differences: one per copy of a row that one side has more of."""
    sides: list[Counter[Key]] = [Counter(), Counter()]
    rows: dict[Key, CanonicalRow] = {}
    for counter, table in zip(sides, (source, mirror), strict=True):
        for row in table_to_rows(schema, table):
            key = key_of_row(schema, row)
            rows[key] = row
            counter[key] += 1
    found: list[Difference] = []
    for key, row in rows.items():
        surplus = sides[0][key] - sides[1][key]
        kind = DifferenceKind.MISSING if surplus > 0 else DifferenceKind.EXTRA
        found.extend(Difference(kind, key, {}, row[schema.chunk_key]) for _ in range(abs(surplus)))
    found.sort(key=lambda d: repr(d.key))
    return found


def _marked(table: pa.Table, others: Sequence[str], side: str) -> pa.Table:
    renamed = table.rename_columns(
        [name + side if name in others else name for name in table.column_names]
    )
    flag = pa.nulls(table.num_rows, pa.bool_()).fill_null(True)
    return renamed.append_column(_PRESENT + side, flag)


def _side(schema: TableSchema, joined: pa.Table, others: Sequence[str], side: str) -> pa.Table:
    columns = {
        name: joined.column(name + side if name in others else name) for name in schema.row_names
    }
    return pa.table(columns)


def _differences(schema: TableSchema, wrong: pa.Table, others: Sequence[str]) -> list[Difference]:
    source_rows = table_to_rows(schema, _side(schema, wrong, others, _SOURCE))
    mirror_rows = table_to_rows(schema, _side(schema, wrong, others, _MIRROR))
    in_source = pc.is_valid(wrong.column(_PRESENT + _SOURCE)).to_pylist()
    in_mirror = pc.is_valid(wrong.column(_PRESENT + _MIRROR)).to_pylist()
    found: list[Difference] = []
    for s_row, m_row, has_s, has_m in zip(
        source_rows, mirror_rows, in_source, in_mirror, strict=True
    ):
        chunk_key = schema.chunk_key
        if not has_m:
            key = key_of_row(schema, s_row)
            found.append(Difference(DifferenceKind.MISSING, key, {}, s_row[chunk_key]))
        elif not has_s:
            key = key_of_row(schema, m_row)
            found.append(Difference(DifferenceKind.EXTRA, key, {}, m_row[chunk_key]))
        else:
            columns = {n: (s_row[n], m_row[n]) for n in others if s_row[n] != m_row[n]}
            key = key_of_row(schema, s_row)
            found.append(Difference(DifferenceKind.DIFFERS, key, columns, s_row[chunk_key]))
    found.sort(key=lambda d: repr(d.key))
    return found
