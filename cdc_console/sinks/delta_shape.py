"""A mirror's and its change feed's shape: what a table may bring, the feed's rows, and how
a mirror is carried over to a table's new columns.

Columns added online join the mirror in the batch's own commit (``sinks.delta``); a re-dump
after a retype migrates the mirror or sets it aside (``migrate_mirror``); a routed table's
column keeps the type of the mirror it shares (``check_shared_column``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Schema
from deltalake.transaction import CommitProperties

from cdc_console.core.schema import TableId, TableSchema
from cdc_console.sinks.base import SinkError, SinkSchemaError
from cdc_console.sinks.delta_merge import MERGE_OP
from cdc_console.sinks.delta_tables import same_schema, set_aside
from cdc_console.sinks.lake_layout import CHANGELOG_DIR, CHANGELOG_FIELDS, to_lake
from cdc_console.sinks.mirror_read import read_delta
from cdc_console.sinks.netting import PlannedChange
from cdc_console.values.arrow import columns_to_table

#: column names of the sink's own, which no source column may take
RESERVED = {MERGE_OP} | {f.name for f in CHANGELOG_FIELDS}

_log = logging.getLogger(__name__)


def project(current: pa.Table, typed: pa.Schema, path: Path) -> pa.Table:
    """``current``'s rows on ``typed``'s columns: kept columns cast exactly, new ones null."""
    columns = []
    for field_ in typed:
        if field_.name not in current.column_names:
            if not field_.nullable and current.num_rows:
                raise SinkSchemaError(
                    f"{path} gets a new NOT NULL column {field_.name!r}, which its rows cannot "
                    "hold until the re-dump rewrites them; move the mirror away and re-dump the "
                    "table into a fresh one"
                )
            columns.append(pa.nulls(current.num_rows, field_.type))
            continue
        try:
            columns.append(current[field_.name].cast(field_.type, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SinkSchemaError(
                f"column {field_.name!r} of {path} cannot become {field_.type} exactly ({exc}); "
                "move the mirror away and re-dump the table into a fresh one"
            ) from None
    return pa.Table.from_arrays(columns, schema=typed.with_metadata(None))


def check_shared_column(schema: TableSchema, own: pa.Field, held: pa.Field, path: Path) -> None:
    """A column a routed table shares with its mirror has the mirror's type; a re-dump does
    not migrate a mirror other tables write too, so a retyped shard parks with what to do."""
    if delta_type(own) != delta_type(held):
        raise SinkSchemaError(
            f"{schema.table_id} now maps column {own.name!r} to {own.type}, but the mirror it "
            f"shares with the other tables of its route ({path}) holds it as {held.type}; a "
            "shared mirror is not migrated in place: change the column alike on every table "
            "of the route, then, with the job stopped, set the mirror folder aside and "
            "re-dump each of them (cdc-console redump --table <db.table>) into a fresh one"
        )


def delta_type(field_: pa.Field) -> str:
    return str(Schema.from_arrow(pa.schema([field_])).fields[0].type)


def check_table(schema: TableSchema) -> None:
    if schema.table_id.database == CHANGELOG_DIR:
        raise SinkError(f"{schema.table_id}: database name {CHANGELOG_DIR!r} is the sink's own")
    for name in schema.row_names:
        if name in RESERVED:
            raise SinkError(f"{schema.table_id}: column {name!r} clashes with a sink column")
    if not schema.key_columns or not all(schema.key_columns):
        raise SinkError(f"{schema.table_id} has no key columns to MERGE on")
    for name in schema.key_columns:
        schema.column(name)  # KeyError names a key column the table lacks


def changelog_table(
    schema: TableSchema,
    log_schema: pa.Schema,
    batch_id: int,
    changes: Sequence[PlannedChange],
) -> pa.Table:
    """Typed changelog rows: the row image plus op, position, seq, event time and batch id."""
    names = schema.row_names
    lake = pa.schema(list(log_schema)[: len(log_schema) - len(CHANGELOG_FIELDS)])
    typed = to_lake(
        columns_to_table(schema, {n: [c.row.get(n) for c in changes] for n in names}), lake
    )
    meta = [
        pa.array([c.op for c in changes], type=pa.string()),
        *(pa.array([c.position[i] for c in changes], type=pa.int64()) for i in range(4)),
        pa.array([c.seq for c in changes], type=pa.int64()),
        pa.array([c.ts_ms for c in changes], type=pa.int64()),
        pa.array([batch_id] * len(changes), type=pa.int64()),
    ]
    return pa.Table.from_arrays([*typed.columns, *meta], schema=log_schema)


def set_aside_versioned(path: Path, version: int) -> Path:
    """Move a Delta table's folder to ``<name>.before-v<version>`` and return where (a table
    reshaped again starts at version 0 each time, so ``set_aside`` numbers a name taken)."""
    return set_aside(path, f"before-v{version}")


def migrate_mirror(
    table_id: TableId,
    path: Path,
    log_path: Path,
    typed: pa.Schema,
    log_schema: pa.Schema,
    target_file_size: int | None,
) -> None:
    """Bring a mirror (at ``path``) and its change feed (at ``log_path``) to the table's new
    shape before a re-dump writes into it.

    A re-dump is the fix for a table whose columns changed (a DDL stop). The mirror keeps
    its rows, projected onto the new columns (kept columns cast, new ones null until the
    re-dump's chunks rewrite each row), in one overwrite commit, so it is never empty. When
    its rows cannot take the new shape exactly (a text that is no number, a new NOT NULL
    column), the mirror is set aside whole under a versioned name, readable as it was, and
    the re-dump fills a fresh one. The changelog is history in the old shape: its folder is
    set aside the same way and a new one starts. Every step is a no-op once done, so a
    retried batch skips them.
    """
    if DeltaTable.is_deltatable(str(path)):
        mirror = DeltaTable(str(path))
        if not same_schema(mirror, typed):
            current = read_delta(mirror)
            try:
                projected = project(current, typed, path)
            except SinkSchemaError as exc:
                aside = set_aside_versioned(path, mirror.version())
                _log.warning(
                    "%s: the mirror's rows cannot take the new columns (%s); the old mirror "
                    "is kept, readable, at %s and the re-dump fills a fresh one",
                    table_id,
                    exc,
                    aside,
                )
            else:
                write_deltalake(
                    mirror,
                    projected,
                    mode="overwrite",
                    schema_mode="overwrite",
                    target_file_size=target_file_size,
                    commit_properties=CommitProperties(
                        custom_metadata={"cdc_console.migrate": f"{table_id} new shape"}
                    ),
                )
                _log.warning("%s: mirror migrated to the new columns %s", table_id, typed.names)
    if DeltaTable.is_deltatable(str(log_path)) and not same_schema(
        DeltaTable(str(log_path)), log_schema
    ):
        aside = set_aside_versioned(log_path, DeltaTable(str(log_path)).version())
        _log.warning("%s: changelog in the old shape kept at %s", table_id, aside)
