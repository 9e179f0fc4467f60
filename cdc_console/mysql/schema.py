"""Table metadata read from ``information_schema``: the I/O half of ``cdc_console.core.schema``.

Both the snapshot path (pymysql result sets) and the binlog path (decoded row events) normalise
values through the same column metadata, so it is probed once per table and shared.
"""

from __future__ import annotations

import os

import pymysql

from cdc_console.core.schema import (
    ColumnInfo,
    TableId,
    TableSchema,
    enum_values_of,
    mark_json_columns,
)
from cdc_console.core.untyped import Connection, Cursor, DriverRow

# Servers whose information_schema has no CHECK_CONSTRAINTS (MySQL 5.7: unknown table) or no
# TABLE_NAME column in it (MySQL 8.0): neither has a LONGTEXT-based JSON, so nothing to find.
_NO_CHECK_CONSTRAINTS = frozenset({1054, 1109, 1146})


#: a test's way to stand for a type the server has and cdc-console does not know
#: (``CDC_TEST_UNKNOWN_TYPES=inet4``): MariaDB 10.11 has none left to test with
_UNKNOWN_FOR_TESTS = frozenset(
    filter(None, os.environ.get("CDC_TEST_UNKNOWN_TYPES", "").split(","))
)


def _check_clauses(cur: Cursor, table_id: TableId) -> list[str]:
    """The table's CHECK clauses; empty on servers without ``CHECK_CONSTRAINTS.TABLE_NAME``."""
    try:
        cur.execute(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
            (table_id.database, table_id.table),
        )
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _NO_CHECK_CONSTRAINTS:
            return []
        raise
    return [str(r[0]) for r in cur.fetchall() if r[0] is not None]


def list_tables(conn: Connection, database: str) -> list[str]:
    """Base tables of one database (views are not captured: they have no binlog events)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (database,),
        )
        return [str(r[0]) for r in cur.fetchall()]


def load_table_schema(
    conn: Connection, table_id: TableId, chunk_key: str | None = None
) -> TableSchema:
    """Columns and key of one table. Raises ``LookupError`` when the table does not exist.

    ``chunk_key`` overrides the first primary-key column, or chooses among a table's own
    unique columns (``_without_primary_key``). MariaDB ``JSON`` columns, which the
    server reports as ``longtext``, come back as ``json`` (see ``mark_json_columns``).
    """
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, "
            "NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (table_id.database, table_id.table),
        )
        rows = cur.fetchall()
        if not rows:
            raise LookupError(str(table_id))
        columns = []
        for name, data_type, column_type, nullable, prec, scale, dt_prec, charset, coll in rows:
            data_type = str(data_type).lower()
            if data_type in _UNKNOWN_FOR_TESTS:
                data_type = f"unknown {data_type}"
            column_type = str(column_type)
            columns.append(
                ColumnInfo(
                    name=str(name),
                    data_type=data_type,
                    column_type=column_type,
                    nullable=nullable == "YES",
                    numeric_precision=int(prec) if prec is not None else None,
                    numeric_scale=int(scale) if scale is not None else None,
                    datetime_precision=int(dt_prec) if dt_prec is not None else None,
                    character_set=str(charset) if charset else None,
                    collation=str(coll) if coll else None,
                    enum_values=enum_values_of(column_type) if data_type in ("enum", "set") else (),
                )
            )
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' "
            "ORDER BY ORDINAL_POSITION",
            (table_id.database, table_id.table),
        )
        primary_key = tuple(str(r[0]) for r in cur.fetchall())
        if any(c.data_type == "longtext" for c in columns):
            columns = list(mark_json_columns(columns, _check_clauses(cur, table_id)))
        chunk_key = _spelled(chunk_key, columns)
        if primary_key:
            return TableSchema(table_id, tuple(columns), primary_key, chunk_key or primary_key[0])
        unique, leading = _indexed_columns(cur, table_id)
    return _without_primary_key(table_id, tuple(columns), chunk_key, unique, leading)


def _spelled(name: str | None, columns: list[ColumnInfo]) -> str | None:
    """A configured column name as the table spells it: column names are case-insensitive in
    SQL, so ``ID`` names the column ``id``."""
    if name is None or any(c.name == name for c in columns):
        return name
    matches = [c.name for c in columns if c.name.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else name


def _indexed_columns(cur: Cursor, table_id: TableId) -> tuple[list[str], list[str]]:
    """The columns that alone form a full-length UNIQUE index (each row has a distinct value,
    NULL aside), and the columns that lead any index, each in index-name order."""
    cur.execute(
        "SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART "
        "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        (table_id.database, table_id.table),
    )
    parts: dict[str, list[tuple[bool, str, bool]]] = {}
    for index, non_unique, _, column, sub_part in cur.fetchall():
        parts.setdefault(str(index), []).append(
            (str(non_unique) == "0", str(column), sub_part is not None)
        )
    unique = [
        cols[0][1] for cols in parts.values() if len(cols) == 1 and cols[0][0] and not cols[0][2]
    ]
    leading = [cols[0][1] for cols in parts.values()]
    return unique, leading


def _without_primary_key(
    table_id: TableId,
    columns: tuple[ColumnInfo, ...],
    configured: str | None,
    unique: list[str],
    leading: list[str],
) -> TableSchema:
    """The key of a table without a primary key.

    A NOT NULL column with a UNIQUE index of its own identifies rows: the configured one, or
    else the first such column. Without one the table is *counted* (``TableSchema.counted``):
    its rows are told apart by their whole content, duplicates counted, and it chunks on the
    configured column, else a NOT NULL column that leads an index (a range read can use it),
    else its first NOT NULL column, else its first column (NULLs go to the first chunk).
    """
    nullable = {c.name: c.nullable for c in columns}
    keys = [c for c in unique if c in nullable and not nullable[c]]
    if configured is not None and configured in keys:
        return TableSchema(table_id, columns, (), configured)
    if configured is None and keys:
        first = min(keys, key=[c.name for c in columns].index)
        return TableSchema(table_id, columns, (), first)
    if configured is not None:
        return TableSchema(table_id, columns, (), configured, counted=True)
    not_null = [c.name for c in columns if not c.nullable]
    indexed = [c for c in leading if c in not_null]
    chunk = (indexed or not_null or [columns[0].name])[0]
    return TableSchema(table_id, columns, (), chunk, counted=True)


def null_default_columns(conn: Connection, table_id: TableId) -> set[str]:
    """The nullable columns of a table whose default is NULL.

    ``information_schema.COLUMNS.COLUMN_DEFAULT`` says it differently per flavour: MySQL gives
    SQL NULL; MariaDB 10.2.7+ gives the unquoted word ``NULL`` (a string default is quoted
    there), so the word counts only on MariaDB.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT @@version")
        row: DriverRow = cur.fetchone()  # SELECT @@version: always one row
        mariadb = bool(row) and "mariadb" in str(row[0]).lower()
        cur.execute(
            "SELECT COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND IS_NULLABLE = 'YES'",
            (table_id.database, table_id.table),
        )
        return {
            str(name)
            for name, default in cur.fetchall()
            if default is None or (mariadb and str(default) == "NULL")
        }


def estimated_rows(conn: Connection, table_id: TableId) -> int:
    """The server's estimate of a table's rows (``information_schema.TABLES.TABLE_ROWS``): cheap,
    and for InnoDB within tens of percent, which a finish-time estimate can live with."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (table_id.database, table_id.table),
        )
        row = cur.fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0
