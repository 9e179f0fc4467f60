"""MariaDB JSON columns: LONGTEXT guarded by ``json_valid(col)``, reported by the schema as json.

The parsing is pure (``json_valid_column``, ``mark_json_columns``); ``load_table_schema`` is
driven here through a scripted cursor that answers like MariaDB, MySQL 8.0 (no TABLE_NAME in
CHECK_CONSTRAINTS) and MySQL 5.7 (no CHECK_CONSTRAINTS at all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from cdc_console.core.schema import ColumnInfo, TableId, json_valid_column, mark_json_columns
from cdc_console.mysql.schema import load_table_schema
from cdc_console.values.canonical import RowNormalizer


@pytest.mark.parametrize(
    ("clause", "column"),
    [
        ("json_valid(`doc`)", "doc"),
        ("JSON_VALID(`doc`)", "doc"),
        (" json_valid( `doc` ) ", "doc"),
        ("json_valid(`we``ird col`)", "we`ird col"),
        ("json_valid(`données`)", "données"),
    ],
)
def test_json_valid_clause_names_its_column(clause: str, column: str) -> None:
    assert json_valid_column(clause) == column


@pytest.mark.parametrize(
    "clause",
    [
        "`doc` > 0",
        "json_valid(`doc`) and `doc` <> '{}'",
        "json_valid(`a`) or json_valid(`b`)",
        "not json_valid(`doc`)",
        "json_valid(concat(`a`,`b`))",
        "json_valid(doc)",
        "",
    ],
)
def test_other_clauses_name_no_column(clause: str) -> None:
    assert json_valid_column(clause) is None


def col(name: str, data_type: str, nullable: bool = True) -> ColumnInfo:
    return ColumnInfo(name, data_type, data_type, nullable)


def test_only_guarded_longtext_columns_become_json() -> None:
    columns = [
        col("id", "int", False),
        col("doc", "longtext"),
        col("notes", "longtext"),
        col("v", "varchar"),
        col("n", "int"),
    ]
    marked = mark_json_columns(
        columns, ["json_valid(`doc`)", "json_valid(`v`)", "json_valid(`n`)", "`n` > 0"]
    )
    assert [c.data_type for c in marked] == ["int", "json", "longtext", "varchar", "int"]
    assert marked[1] == ColumnInfo("doc", "json", "longtext", True)
    assert mark_json_columns(columns, []) == tuple(columns)


class ScriptedCursor:
    """Answers ``information_schema`` queries by the first word of the table they name."""

    def __init__(self, answers: dict[str, Callable[[], list[tuple[Any, ...]]]]) -> None:
        self.answers = answers
        self.queries: list[str] = []
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> ScriptedCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: Any = None) -> None:
        self.queries.append(sql)
        for table, answer in self.answers.items():
            if f"information_schema.{table} " in sql:
                self.rows = answer()
                return
        raise AssertionError(f"unexpected query {sql}")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class ScriptedConnection:
    def __init__(self, cursor: ScriptedCursor) -> None:
        self._cursor = cursor

    def cursor(self) -> ScriptedCursor:
        return self._cursor


COLUMNS = [
    ("id", "int", "int(11)", "NO", 10, 0, None, None, None),
    ("doc", "longtext", "longtext", "YES", None, None, None, "utf8mb4", "utf8mb4_bin"),
]


def scripted(checks: Callable[[], list[tuple[Any, ...]]]) -> ScriptedCursor:
    return ScriptedCursor(
        {
            "COLUMNS": lambda: list(COLUMNS),
            "KEY_COLUMN_USAGE": lambda: [("id",)],
            "CHECK_CONSTRAINTS": checks,
        }
    )


def test_mariadb_json_column_loads_as_json_and_normalises_canonically() -> None:
    cursor = scripted(lambda: [("json_valid(`doc`)",)])
    schema = load_table_schema(ScriptedConnection(cursor), TableId("db", "t"))
    assert schema.column("doc").data_type == "json"
    assert schema.column("doc").column_type == "longtext"
    row = RowNormalizer(schema).snapshot_row((1, '{ "b": [1, 2], "a": "é" }'))
    assert row["doc"] == '{"a":"é","b":[1,2]}'


def server_error(code: int, message: str) -> Callable[[], list[tuple[Any, ...]]]:
    def fail() -> list[tuple[Any, ...]]:
        raise pymysql.err.OperationalError(code, message)

    return fail


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1109, "Unknown table 'CHECK_CONSTRAINTS' in information_schema"),  # MySQL 5.7
        (1054, "Unknown column 'TABLE_NAME' in 'where clause'"),  # MySQL 8.0
    ],
)
def test_servers_without_the_table_keep_longtext(code: int, message: str) -> None:
    cursor = scripted(server_error(code, message))
    schema = load_table_schema(ScriptedConnection(cursor), TableId("db", "t"))
    assert schema.column("doc").data_type == "longtext"


def test_other_server_errors_are_not_swallowed() -> None:
    cursor = scripted(server_error(2013, "Lost connection to MySQL server during query"))
    with pytest.raises(pymysql.err.OperationalError):
        load_table_schema(ScriptedConnection(cursor), TableId("db", "t"))


def test_tables_without_longtext_do_not_query_check_constraints() -> None:
    cursor = ScriptedCursor(
        {
            "COLUMNS": lambda: [COLUMNS[0]],
            "KEY_COLUMN_USAGE": lambda: [("id",)],
        }
    )
    schema = load_table_schema(ScriptedConnection(cursor), TableId("db", "t"))
    assert schema.column_names == ["id"]
    assert not any("CHECK_CONSTRAINTS" in q for q in cursor.queries)
