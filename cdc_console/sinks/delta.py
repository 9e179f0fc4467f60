"""Delta Lake sink: one typed mirror per source table, kept by MERGE, plus an optional changelog.

Layout under ``root``::

    <root>/<db>/<table>             mirror: the source table's current rows, typed (types.py)
    <root>/_changelog/<db>/<table>  append-only: every change record, typed, plus _op and position

Exactly-once (architecture invariants 1-2). A micro-batch may be applied again after a crash
(Spark replays the batch whose offsets were not committed). Every commit this sink makes carries
a Delta *app transaction* ``(app_id, version=batch_id)`` in the same atomic log entry as the data,
and ``apply_batch`` skips a table whose mirror (or changelog) already records a version >=
``batch_id``. Batch ids must therefore grow monotonically, which Spark's do. Per table and batch
the changelog is committed *before* the mirror, so a crash between the two leaves a changelog that
is ahead (skipped on retry) and a mirror that is behind (applied on retry); the range deletes of
``ReplaceRange`` are computed from the unchanged mirror either way.

Per-key order. The records of one table are sorted by ``ChangeRecord.sort_key`` (binlog position,
then order in the batch) and collapsed per key, last change wins: ``+I``/``+U`` leave the key
holding that row image, ``-U``/``-D`` leave it absent. So ``-U k, +U k`` nets to an upsert,
``-D k, +I k`` to an upsert of the new row, a primary-key change (``-U old``, ``+U new``) to a
delete of the old key and an upsert of the new one. One MERGE per table applies the result:
matched and delete -> delete; matched and upsert -> update all columns; not matched and upsert ->
insert. The collapse makes the MERGE source unique per key, which MERGE requires.

Keys. The mirror's key is ``TableSchema.key_columns``; it must identify a row. Key columns that
are nullable are joined with ``IS NOT DISTINCT FROM`` so a NULL key still matches itself. Keys
are compared as Delta values, i.e. exactly: a case-insensitive collation's 'a' and 'A' are two
keys here as in the change records.

Not supported: column names containing a backtick (delta-rs cannot quote them in MERGE), and
schema evolution (an existing mirror whose schema differs raises ``SinkSchemaError``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from cdc_console.mysql.schema import TableId, TableSchema
from cdc_console.sinks.types import arrow_schema, codec_for, columns_to_table
from cdc_console.source.records import OP_DELETE, ChangeRecord

CHANGELOG_DIR = "_changelog"
# Appended to the typed row columns in the changelog table, in this order.
CHANGELOG_FIELDS: tuple[pa.Field, ...] = (
    pa.field("_op", pa.string()),
    pa.field("_file_index", pa.int64()),
    pa.field("_pos", pa.int64()),
    pa.field("_event_index", pa.int64()),
    pa.field("_row_index", pa.int64()),
    pa.field("_seq", pa.int64()),
    pa.field("_ts_ms", pa.int64()),
    pa.field("_batch_id", pa.int64()),
)
_MERGE_OP = "__cdc_console_merge_op"  # extra source column of the MERGE: 'U' upsert, 'D' delete
_RESERVED = {_MERGE_OP} | {f.name for f in CHANGELOG_FIELDS}

KeyRow = Mapping[str, Any]
InRange = Callable[[KeyRow], bool]


class SinkError(RuntimeError):
    """The sink cannot apply a batch (bad input, unsupported table); retrying will not help."""


class SinkSchemaError(SinkError):
    """An existing Delta table's schema differs from the source table's typed schema."""


@dataclass(frozen=True)
class ReplaceRange:
    """Replace a key range of a mirror with one snapshot split's rows (REDUMP, chunk repair).

    Within the batch, every mirror key for which ``in_range(key_row)`` is true and that no record
    of split ``split_id`` carries is deleted *before* the batch's records are applied (the split's
    state is as of its high watermark; later binlog changes in the same batch still apply).
    ``key_row`` maps each key column to its canonical value, the representation of
    ``ChangeRecord.key``. ``position`` (file_index, pos, event_index, row_index) and ``ts_ms`` stamp
    the ``-D`` rows this writes to the changelog: use the split's high watermark.
    """

    table_id: TableId
    split_id: str
    in_range: InRange
    position: tuple[int, int, int, int] = (0, 0, 0, 0)
    ts_ms: int = 0


@dataclass
class _Net:
    """One key's net change in a batch: upsert ``row`` (a dict) or delete ``key``."""

    upsert: bool
    key: tuple[Any, ...]
    row: dict[str, Any] | None


class DeltaSink:
    """Mirror + changelog Delta tables under ``root``; see the module docstring for semantics."""

    def __init__(self, root: Path, changelog: bool = True, app_id: str = "cdc-console") -> None:
        self.root = Path(root)
        self.changelog = changelog
        self.app_id = app_id

    # --- paths and reads ------------------------------------------------------------------

    def mirror_path(self, table_id: TableId) -> Path:
        return self.root / table_id.database / table_id.table

    def changelog_path(self, table_id: TableId) -> Path:
        return self.root / CHANGELOG_DIR / table_id.database / table_id.table

    def read_mirror(self, table_id: TableId) -> pa.Table:
        """The mirror's current rows (for tests and tools). Raises ``FileNotFoundError``."""
        return _open(self.mirror_path(table_id)).to_pyarrow_table()

    def read_changelog(self, table_id: TableId) -> pa.Table:
        """The changelog rows, sorted in apply order (batch, then position within the batch)."""
        table = _open(self.changelog_path(table_id)).to_pyarrow_table()
        order = [("_batch_id", "ascending")] + [
            (f.name, "ascending") for f in CHANGELOG_FIELDS[1:6]
        ]
        return table.sort_by(order)

    def applied_batch(self, table_id: TableId) -> int | None:
        """The last batch id committed to the mirror, or None (never written)."""
        path = self.mirror_path(table_id)
        if not DeltaTable.is_deltatable(str(path)):
            return None
        return DeltaTable(str(path)).transaction_version(self.app_id)

    # --- writes ---------------------------------------------------------------------------

    def apply_batch(
        self,
        batch_id: int,
        schemas: Mapping[TableId, TableSchema],
        records: Sequence[ChangeRecord],
        replace_ranges: Sequence[ReplaceRange] = (),
    ) -> dict[TableId, dict[str, Any]]:
        """Apply one micro-batch to every table it touches; idempotent per ``batch_id``.

        Returns per table: ``inserted``, ``updated``, ``deleted`` (rows of the mirror, from the
        MERGE metrics; ``upserted`` = inserted + updated), ``range_deleted`` (keys removed by
        ``replace_ranges``, included in ``deleted``), ``changelog_rows``, and
        ``mirror_skipped`` / ``changelog_skipped`` (already applied by an earlier attempt).
        """
        if batch_id < 0:
            raise SinkError(f"batch id must be >= 0, got {batch_id}")
        by_table: dict[TableId, list[ChangeRecord]] = defaultdict(list)
        for record in records:
            by_table[TableId(record.database, record.table)].append(record)
        ranges: dict[TableId, list[ReplaceRange]] = defaultdict(list)
        for replace in replace_ranges:
            ranges[replace.table_id].append(replace)
        stats: dict[TableId, dict[str, Any]] = {}
        for table_id in sorted(set(by_table) | set(ranges)):
            schema = schemas.get(table_id)
            if schema is None:
                raise SinkError(f"batch {batch_id} has changes for {table_id} but no schema")
            stats[table_id] = self._apply_table(
                batch_id, schema, by_table.get(table_id, []), ranges.get(table_id, [])
            )
        return stats

    def delete_absent_in_range(
        self,
        table_id: TableId,
        schema: TableSchema,
        in_range: InRange,
        present_keys: set[tuple[Any, ...]],
    ) -> int:
        """Delete the mirror keys with ``in_range(key_row)`` true that are not in ``present_keys``.

        ``key_row`` and the ``present_keys`` tuples hold canonical values in
        ``schema.key_columns`` order (``ChangeRecord.key_values()``). Returns the number of rows
        deleted. This is a standalone repair tool: its commit carries no app transaction, and
        running it again after new keys entered the range would delete them too. The pipeline
        uses ``apply_batch(..., replace_ranges=...)``, which does the same inside the batch's
        single, idempotent MERGE. The mirror's key columns are read in full (the predicate is
        Python, so Delta cannot prune files for it).
        """
        path = self.mirror_path(table_id)
        if not DeltaTable.is_deltatable(str(path)):
            return 0
        table = DeltaTable(str(path))
        _check_schema(table, arrow_schema(schema), path)
        absent = _absent_rows(table, schema, in_range, present_keys, full_rows=False)
        if not absent:
            return 0
        nets = [_Net(False, key, None) for key, _ in absent]
        metrics = _merge(table, schema, nets, commit_properties=None)
        return int(metrics.get("num_target_rows_deleted", 0))

    # --- internals ------------------------------------------------------------------------

    def _commit(self, batch_id: int, table_id: TableId, what: str) -> CommitProperties:
        return CommitProperties(
            app_transactions=[Transaction(self.app_id, batch_id)],
            custom_metadata={
                "cdc_console": {"batch_id": batch_id, "table": str(table_id), "what": what}
            },
        )

    def _apply_table(
        self,
        batch_id: int,
        schema: TableSchema,
        records: list[ChangeRecord],
        replaces: list[ReplaceRange],
    ) -> dict[str, Any]:
        _check_column_names(schema)
        table_id = schema.table_id
        typed = arrow_schema(schema)
        ordered = sorted(records, key=lambda r: r.sort_key)
        stats: dict[str, Any] = {
            "inserted": 0,
            "updated": 0,
            "deleted": 0,
            "upserted": 0,
            "range_deleted": 0,
            "changelog_rows": 0,
            "mirror_skipped": False,
            "changelog_skipped": not self.changelog,
        }

        mirror = _open_or_create(self.mirror_path(table_id), typed)
        mirror_done = _already(mirror, self.app_id, batch_id)
        absent: list[tuple[tuple[Any, ...], dict[str, Any] | None]] = []
        if replaces and not mirror_done:
            absent = _replace_absent(mirror, schema, replaces, ordered, full_rows=self.changelog)

        if self.changelog:
            changelog_schema = pa.schema([*typed, *CHANGELOG_FIELDS])
            log = _open_or_create(self.changelog_path(table_id), changelog_schema)
            if _already(log, self.app_id, batch_id):
                stats["changelog_skipped"] = True
            else:
                data = _changelog_table(
                    schema, changelog_schema, batch_id, ordered, absent, replaces
                )
                write_deltalake(
                    log,
                    data,
                    mode="append",
                    commit_properties=self._commit(batch_id, table_id, "changelog"),
                )
                stats["changelog_rows"] = data.num_rows

        if mirror_done:
            stats["mirror_skipped"] = True
            return stats
        nets = _collapse(schema, ordered, [key for key, _ in absent])
        if nets:
            version = mirror.version()
            metrics = _merge(mirror, schema, nets, self._commit(batch_id, table_id, "merge"))
            stats["inserted"] = int(metrics.get("num_target_rows_inserted", 0))
            stats["updated"] = int(metrics.get("num_target_rows_updated", 0))
            stats["deleted"] = int(metrics.get("num_target_rows_deleted", 0))
            stats["upserted"] = stats["inserted"] + stats["updated"]
            stats["range_deleted"] = len(absent)
            mirror.update_incremental()
            committed = mirror.version() > version
        else:
            committed = False
        if not committed:
            # A MERGE that changes nothing (say, deletes of absent keys) makes no commit; record
            # the batch anyway with an empty append, so a retry reports it as already applied.
            write_deltalake(
                mirror,
                typed.empty_table(),
                mode="append",
                commit_properties=self._commit(batch_id, table_id, "noop"),
            )
        return stats


# --- helpers ------------------------------------------------------------------------------


def _open(path: Path) -> DeltaTable:
    if not DeltaTable.is_deltatable(str(path)):
        raise FileNotFoundError(f"no Delta table at {path}")
    return DeltaTable(str(path))


def _open_or_create(path: Path, schema: pa.Schema) -> DeltaTable:
    """Open the Delta table at ``path``, creating it empty with ``schema`` on first use."""
    if DeltaTable.is_deltatable(str(path)):
        table = DeltaTable(str(path))
        _check_schema(table, schema, path)
        return table
    path.mkdir(parents=True, exist_ok=True)
    return DeltaTable.create(str(path), schema, mode="ignore")


def _check_schema(table: DeltaTable, expected: pa.Schema, path: Path) -> None:
    have = [(f.name, str(f.type)) for f in table.schema().fields]
    want = [(f.name, str(f.type)) for f in Schema.from_arrow(expected).fields]
    if have != want:
        raise SinkSchemaError(
            f"Delta table {path} has schema {have}, the source table now maps to {want}; "
            "schema evolution is not supported: re-create the table (REDUMP into a fresh root)"
        )


def _check_column_names(schema: TableSchema) -> None:
    for name in schema.column_names:
        if "`" in name:
            raise SinkError(f"{schema.table_id}: column {name!r} contains a backtick")
        if name in _RESERVED:
            raise SinkError(f"{schema.table_id}: column {name!r} clashes with a sink column")
    if not schema.key_columns or not all(schema.key_columns):
        raise SinkError(f"{schema.table_id} has no key columns to MERGE on")


def _already(table: DeltaTable, app_id: str, batch_id: int) -> bool:
    applied = table.transaction_version(app_id)
    return applied is not None and applied >= batch_id


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _key_of(record: ChangeRecord) -> tuple[Any, ...]:
    try:
        return record.key_values()
    except ValueError as exc:
        raise SinkError(f"bad key in change record {record}: {exc}") from exc


def _row_of(record: ChangeRecord, names: list[str]) -> dict[str, Any]:
    try:
        row = record.row_dict()
    except ValueError as exc:
        raise SinkError(f"bad row in change record {record}: {exc}") from exc
    if len(row) != len(names) or any(n not in row for n in names):
        raise SinkError(
            f"row columns {sorted(row)} of change record {record} do not match the table's "
            f"columns {names} (schema changed?)"
        )
    return row


def _collapse(
    schema: TableSchema, ordered: list[ChangeRecord], range_deletes: list[tuple[Any, ...]]
) -> list[_Net]:
    """Net change per key: range deletes first, then the records in apply order, last wins."""
    names = schema.column_names
    nets: dict[tuple[Any, ...], _Net] = {key: _Net(False, key, None) for key in range_deletes}
    for record in ordered:
        key = _key_of(record)
        nets[key] = _Net(True, key, None) if record.is_upsert else _Net(False, key, None)
        if record.is_upsert:
            nets[key].row = _row_of(record, names)
    return list(nets.values())


def _merge(
    table: DeltaTable,
    schema: TableSchema,
    nets: list[_Net],
    commit_properties: CommitProperties | None,
) -> dict[str, Any]:
    """One MERGE of the net changes into the mirror; returns delta-rs' metrics."""
    key_columns = list(schema.key_columns)
    columns: dict[str, list[Any]] = {name: [] for name in schema.column_names}
    ops: list[str] = []
    for net in nets:
        if net.upsert:
            assert net.row is not None
            for name, values in columns.items():
                values.append(net.row[name])
            ops.append("U")
        else:
            if len(net.key) != len(key_columns):
                raise SinkError(
                    f"{schema.table_id}: key {list(net.key)} does not match key columns {key_columns}"
                )
            key_map = dict(zip(key_columns, net.key, strict=True))
            for name, values in columns.items():
                values.append(key_map.get(name))
            ops.append("D")
    source = columns_to_table(schema, columns).append_column(
        pa.field(_MERGE_OP, pa.string()), pa.array(ops, type=pa.string())
    )
    conditions = []
    for name in key_columns:
        column = schema.column(name)
        equal = "IS NOT DISTINCT FROM" if column.nullable else "="
        conditions.append(f"t.{_quote(name)} {equal} s.{_quote(name)}")
    is_delete = f"s.{_quote(_MERGE_OP)} = 'D'"
    is_upsert = f"s.{_quote(_MERGE_OP)} = 'U'"
    merger = table.merge(
        source,
        predicate=" AND ".join(conditions),
        source_alias="s",
        target_alias="t",
        streamed_exec=False,  # materialised source: lets delta-rs prune target files by key range
        commit_properties=commit_properties,
    )
    return (
        merger.when_matched_delete(predicate=is_delete)
        .when_matched_update_all(predicate=is_upsert, except_cols=[_MERGE_OP])
        .when_not_matched_insert_all(predicate=is_upsert, except_cols=[_MERGE_OP])
        .execute()
    )


def _absent_rows(
    table: DeltaTable,
    schema: TableSchema,
    in_range: InRange,
    present_keys: set[tuple[Any, ...]],
    full_rows: bool,
) -> list[tuple[tuple[Any, ...], dict[str, Any] | None]]:
    """Mirror keys in the range and not present, with their canonical row when ``full_rows``."""
    return _absent_multi(table, schema, [(in_range, present_keys)], full_rows)


def _absent_multi(
    table: DeltaTable,
    schema: TableSchema,
    checks: list[tuple[InRange, set[tuple[Any, ...]]]],
    full_rows: bool,
) -> list[tuple[tuple[Any, ...], dict[str, Any] | None]]:
    key_columns = list(schema.key_columns)
    data = table.to_pyarrow_table(columns=None if full_rows else key_columns)
    if data.num_rows == 0:
        return []
    key_values = [
        codec_for(schema.column(name)).array_to_canonical(data.column(name)) for name in key_columns
    ]
    hits: list[int] = []
    keys: list[tuple[Any, ...]] = []
    for index, values in enumerate(zip(*key_values, strict=True)):
        key_row = dict(zip(key_columns, values, strict=True))
        for in_range, present in checks:
            if values not in present and in_range(key_row):
                hits.append(index)
                keys.append(tuple(values))
                break
    if not full_rows:
        return [(key, None) for key in keys]
    from cdc_console.sinks.types import table_to_rows

    rows = table_to_rows(schema, data.take(pa.array(hits, type=pa.int64())))
    return list(zip(keys, rows, strict=True))


def _replace_absent(
    table: DeltaTable,
    schema: TableSchema,
    replaces: list[ReplaceRange],
    ordered: list[ChangeRecord],
    full_rows: bool,
) -> list[tuple[tuple[Any, ...], dict[str, Any] | None]]:
    present: dict[str, set[tuple[Any, ...]]] = {r.split_id: set() for r in replaces}
    for record in ordered:
        if record.split_id in present:
            present[record.split_id].add(_key_of(record))
    checks = [(r.in_range, present[r.split_id]) for r in replaces]
    return _absent_multi(table, schema, checks, full_rows)


def _changelog_table(
    schema: TableSchema,
    changelog_schema: pa.Schema,
    batch_id: int,
    ordered: list[ChangeRecord],
    absent: list[tuple[tuple[Any, ...], dict[str, Any] | None]],
    replaces: list[ReplaceRange],
) -> pa.Table:
    """Typed changelog rows: the range deletes (as ``-D``), then every record in apply order."""
    names = schema.column_names
    columns: dict[str, list[Any]] = {name: [] for name in names}
    meta: dict[str, list[Any]] = {f.name: [] for f in CHANGELOG_FIELDS}
    stamp = replaces[0] if replaces else None
    for seq, (_, row) in enumerate(absent):
        assert row is not None and stamp is not None
        for name in names:
            columns[name].append(row.get(name))
        position = stamp.position
        for field_name, value in zip(
            ("_op", "_file_index", "_pos", "_event_index", "_row_index", "_seq", "_ts_ms"),
            (OP_DELETE, *position, seq - len(absent), stamp.ts_ms),
            strict=True,
        ):
            meta[field_name].append(value)
        meta["_batch_id"].append(batch_id)
    for record in ordered:
        row = _row_of(record, names)
        for name in names:
            columns[name].append(row[name])
        meta["_op"].append(record.op)
        meta["_file_index"].append(record.file_index)
        meta["_pos"].append(record.pos)
        meta["_event_index"].append(record.event_index)
        meta["_row_index"].append(record.row_index)
        meta["_seq"].append(record.seq)
        meta["_ts_ms"].append(record.ts_ms)
        meta["_batch_id"].append(batch_id)
    typed = columns_to_table(schema, columns)
    arrays = [*typed.columns] + [pa.array(meta[f.name], type=f.type) for f in CHANGELOG_FIELDS]
    return pa.Table.from_arrays(arrays, schema=changelog_schema)


__all__ = [
    "CHANGELOG_DIR",
    "CHANGELOG_FIELDS",
    "DeltaSink",
    "ReplaceRange",
    "SinkError",
    "SinkSchemaError",
    "json",
]
