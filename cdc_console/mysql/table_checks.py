"""Preflight of each captured table: readable, keyed, ordered, and its rules applicable.

Each table is its own failure domain: a table that fails here is parked with its reason and
fix (``check`` lists it, the job leaves it out and streams the rest), never the whole job.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import pymysql

from cdc_console.config import PipelineConfig, parse_table_pattern
from cdc_console.core.schema import COUNT_COLUMN, TableId, TableSchema, quote_ident
from cdc_console.core.untyped import Connection
from cdc_console.errors import ConfigError
from cdc_console.mysql.check_result import ACCESS_DENIED_ERRORS, CheckResult, failed, passed
from cdc_console.mysql.key_weights import orderable
from cdc_console.mysql.probe import (
    check_companions,
    chunk_key_for,
    expand_pattern,
    with_columns_left_out,
    with_invalid_dates,
    with_masks,
    with_route,
)
from cdc_console.mysql.schema import load_table_schema


def _order_check(conn: Connection, schema: TableSchema) -> list[CheckResult]:
    """A warning when the chunk key cannot be ordered outside the server, so that the table is
    read as one chunk (``mysql.key_weights``); nothing when it can."""
    column = schema.column(schema.chunk_key)
    if orderable(conn, column):
        return []
    table_id = schema.table_id
    return [
        failed(
            f"order {table_id}",
            f"{table_id}'s chunk key {column.name} is in collation {column.collation}, whose "
            "server weights disagree with its own comparisons: the snapshot reads the table as "
            "one chunk (correct, but one long read)",
            f"chunk on another unique column (snapshot.chunk_key), or ALTER TABLE "
            f"{table_id.quoted()} MODIFY {quote_ident(column.name)} ... COLLATE <another>",
            area="config",
            severity="warning",
        )
    ]


def key_check(schema: TableSchema, configured: str | None) -> CheckResult:
    table_id = schema.table_id
    name = f"key {table_id}"
    setting = f'snapshot.chunk_key = {{ "{table_id}" = "<column>" }}'
    if configured is not None and configured.lower() not in {
        n.lower() for n in schema.column_names
    }:
        return failed(
            name,
            f"snapshot.chunk_key names column {configured!r}, which {table_id} does not have "
            f"(columns: {', '.join(schema.column_names)})",
            f"correct the column name in snapshot.chunk_key for {table_id}",
            area="config",
        )
    if schema.primary_key:
        detail = f"primary key ({', '.join(schema.primary_key)}), chunks on {schema.chunk_key}"
        if configured is not None and schema.column(schema.chunk_key).nullable:
            return failed(
                name,
                f"{detail}: chunk key column {schema.chunk_key} is nullable, and rows whose chunk key is "
                "NULL are all read with the first chunk",
                f"choose a NOT NULL column in snapshot.chunk_key for {table_id}, or remove the entry "
                "to chunk on the primary key",
                area="config",
                severity="warning",
            )
        return passed(name, detail, area="config")
    if not schema.counted:
        how = "configured" if configured is not None else "its own UNIQUE index"
        return passed(
            name, f"no primary key; rows told apart by {schema.chunk_key} ({how})", area="config"
        )
    column = schema.column(schema.chunk_key)
    detail = (
        f"no unique key: rows are told apart by their whole content, duplicates counted "
        f"({COUNT_COLUMN} in the mirror); chunks on {column.name}"
    )
    if column.nullable:
        return failed(
            name,
            f"{detail}, which is nullable: rows where it is NULL are all read with the first chunk",
            f"if many rows have no {column.name}, set {setting} to a NOT NULL column",
            area="config",
            severity="warning",
        )
    return passed(name, detail, area="config")


def select_check(conn: Connection, table_id: TableId, account: str) -> CheckResult:
    name = f"select {table_id}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {table_id.quoted()} LIMIT 0")
            cur.fetchall()
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        fix = (
            f"GRANT SELECT ON {table_id.quoted()} TO {account};"
            if code in ACCESS_DENIED_ERRORS
            else ""
        )
        return failed(name, f"cannot read {table_id}: {text}", fix, area="privilege")
    return passed(name, "readable", area="privilege")


def _unused_chunk_keys(config: PipelineConfig, tables: list[TableSchema]) -> list[CheckResult]:
    """A chunk_key entry that matches no captured table is most likely a typo: say so."""
    results = []
    for entry in config.snapshot.chunk_key:
        try:
            pattern = parse_table_pattern(entry)
        except ConfigError as exc:
            results.append(failed(f"chunk_key {entry}", exc.message, exc.hint, area="config"))
            continue
        if any(pattern.matches(t.table_id.database, t.table_id.table) for t in tables):
            continue
        results.append(
            failed(
                f"chunk_key {entry}",
                f"snapshot.chunk_key names {entry}, which matches none of the captured tables",
                "correct the table name in snapshot.chunk_key or remove the entry",
                area="config",
                severity="warning",
            )
        )
    return results


def table_gone(table_id: TableId) -> CheckResult:
    """A table the pipeline captured that the source no longer has: a state, not a mistake."""
    return failed(
        f"gone {table_id}",
        f"{table_id} was captured but is gone from the source (dropped or renamed); the job "
        "keeps it parked (NEEDS_REDUMP) with its mirror as it was, and captures the others",
        f"re-create it and run 'cdc-console redump --table {table_id}', or leave it out of "
        "source.tables",
        area="config",
        severity="warning",
    )


def checks_of_table(
    conn: Connection, config: PipelineConfig, account: str, known: Collection[TableId] = ()
) -> tuple[list[TableSchema], list[CheckResult]]:
    results: list[CheckResult] = []
    tables: list[TableSchema] = []
    loaded: list[TableSchema] = []
    seen: set[TableId] = set()
    for pattern in config.source.tables:
        try:
            table_ids = expand_pattern(conn, pattern, account)
        except ConfigError as exc:
            matched = [t for t in sorted(known) if pattern.matches(t.database, t.table)]
            if matched:
                results += [table_gone(t) for t in matched]
            else:
                results.append(failed(f"table {pattern}", exc.message, exc.hint, area="config"))
            continue
        results += [
            table_gone(t)
            for t in sorted(known)
            if pattern.matches(t.database, t.table) and t not in table_ids
        ]
        fresh = [t for t in table_ids if t not in seen]
        seen.update(fresh)
        names = ", ".join(t.table for t in table_ids[:8]) + (", ..." if len(table_ids) > 8 else "")
        results.append(
            passed(f"table {pattern}", f"{len(table_ids)} table(s): {names}", area="config")
        )
        for table_id in fresh:
            schema, captured, found = _check_table(conn, config, account, table_id)
            results += found
            if schema is not None:
                loaded.append(schema)
            if captured and schema is not None:
                tables.append(schema)
    results += _unused_chunk_keys(config, loaded)
    tables, routes = route_keys(config, tables)
    return tables, results + routes


def _check_table(
    conn: Connection, config: PipelineConfig, account: str, table_id: TableId
) -> tuple[TableSchema | None, bool, list[CheckResult]]:
    """One table's checks: its schema as the job will capture it (None when it cannot be
    read), whether the job captures it (a refused table is captured to be parked), and the
    checks' results."""
    results: list[CheckResult] = []
    configured = chunk_key_for(table_id, config.snapshot.chunk_key)
    try:
        schema = with_invalid_dates(
            load_table_schema(conn, table_id, configured), config.invalid_dates
        )
        try:
            schema = with_columns_left_out(schema, config.exclude_columns)
            schema = with_masks(schema, config.mask_columns, config.mask_key_env)
            schema = check_companions(schema)
            schema = with_route(schema, config.sink.mirrors)
        except ConfigError as exc:
            # one table's rule that cannot hold (a masked column retyped while the job
            # was down, a key missing) parks that table, never the others, and never
            # lets its values out unshaped: the job reads nothing of it
            results.append(
                failed(
                    f"table {table_id}",
                    f"{exc.message}; the job parks this table (NEEDS_REDUMP) and "
                    "captures the others",
                    exc.hint,
                    area="config",
                    severity="warning",
                )
            )
            refused = replace(schema, refused=f"{exc.message} (fix: {exc.hint})")
            return refused, True, results  # registered, to be parked: not gone
    except LookupError:
        results.append(
            failed(
                f"table {table_id}",
                f"{table_id} vanished or its columns are invisible to {account}",
                f"GRANT SELECT ON {table_id.quoted()} TO {account};",
                area="privilege",
            )
        )
        return None, False, results
    select = select_check(conn, table_id, account)
    key = key_check(schema, configured)
    results += [select, key]
    if not key.blocking and schema.chunk_key in schema.column_names:
        results += _order_check(conn, schema)
    if schema.uncaptured:
        results.append(
            failed(
                f"types {table_id}",
                f"{table_id}: {schema.uncaptured}; the job parks this table "
                "(NEEDS_REDUMP) and captures the others",
                f"change the column's type (ALTER TABLE {table_id.quoted()} MODIFY ...) "
                f"and run 'cdc-console redump --table {table_id}', or leave the table "
                "out of source.tables",
                severity="warning",
            )
        )
    return schema, select.ok and not key.blocking, results


def route_keys(
    config: PipelineConfig, tables: list[TableSchema]
) -> tuple[list[TableSchema], list[CheckResult]]:
    """The tables one ``[sink] mirrors`` pattern routes into one mirror must tell their rows
    apart by the same key (columns of the same names and types): the mirror's files are
    searched by it. A table whose key differs from the first one's (by name) is parked."""
    first: dict[str, tuple[TableId, tuple[tuple[str, str], ...]]] = {}
    results: list[CheckResult] = []
    kept: list[TableSchema] = []
    for schema in sorted(tables, key=lambda t: t.table_id):
        if not schema.routed or schema.refused:
            kept.append(schema)
            continue
        place = config.sink.mirrors[schema.table_id]
        key = tuple(
            (n, schema.column(n).column_type.lower())
            for n in schema.key_columns
            if n not in schema.origin
        )
        reference = first.setdefault(place, (schema.table_id, key))
        if reference[1] == key:
            kept.append(schema)
            continue
        why = (
            f"{schema.table_id} is routed into {place} with the key "
            f"{', '.join(f'{n} {t}' for n, t in key)}, where {reference[0]} has "
            f"{', '.join(f'{n} {t}' for n, t in reference[1])}"
        )
        fix = "route only tables of one key there (a narrower pattern), or give it its own mirror"
        results.append(
            failed(
                f"route {schema.table_id}",
                f"{why}; the job parks this table (NEEDS_REDUMP) and captures the others",
                fix,
                area="config",
                severity="warning",
            )
        )
        kept.append(replace(schema, refused=f"{why} (fix: {fix})"))
    order = {t.table_id: i for i, t in enumerate(tables)}
    return sorted(kept, key=lambda t: order[t.table_id]), results
