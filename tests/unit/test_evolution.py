"""Which schema changes are applied online, and why the others are not.

The rule: a change is applied only when every mirror row still equals its source row after it
and the new shape is known to be the one right after the DDL; everything else parks the table.
"""

from __future__ import annotations

import pytest

from cdc_console.core.schema import ColumnInfo, TableId, TableSchema
from cdc_console.source.evolution import (
    ColumnChange,
    column_change,
    describe_evolution,
    evolution,
)

T = TableId("shop", "orders")
ID = ColumnInfo("id", "int", "int(11)", nullable=False)
NOTE = ColumnInfo("note", "varchar", "varchar(20)")
LABEL = ColumnInfo("label", "varchar", "varchar(10)")
OLD = TableSchema(T, (ID, NOTE), ("id",), "id")


def shape(*columns: ColumnInfo, key: tuple[str, ...] = ("id",)) -> TableSchema:
    return TableSchema(T, columns, key, key[0])


@pytest.mark.parametrize(
    ("statement", "change"),
    [
        ("ALTER TABLE t ADD INDEX by_note (note)", None),
        ("ALTER TABLE t ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE", None),
        ("ALTER TABLE t COMMENT = 'orders, kept'", None),
        ("ALTER TABLE t ALTER COLUMN note SET DEFAULT 'x'", None),
        ("ALTER TABLE t ADD KEY k (a), RENAME INDEX k TO k2", None),
        ("ALTER TABLE t ADD COLUMN label VARCHAR(10) NULL", ColumnChange(("label",))),
        (
            "ALTER TABLE `db`.`t` ADD a INT, ADD COLUMN IF NOT EXISTS b DECIMAL(10,2)",
            ColumnChange(("a", "b")),
        ),
        ("ALTER ONLINE TABLE t ADD COLUMN c ENUM('x,y','z')", ColumnChange(("c",))),
        ("ALTER TABLE t MODIFY note VARCHAR(40)", ColumnChange((), ("note",))),
        ("ALTER TABLE t CHANGE COLUMN note note TEXT, ADD d INT", ColumnChange(("d",), ("note",))),
    ],
)
def test_what_a_statement_does_to_the_columns(statement: str, change: ColumnChange | None) -> None:
    assert column_change(statement) == change


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t DROP COLUMN note",
        "ALTER TABLE t CHANGE note memo VARCHAR(20)",
        "ALTER TABLE t RENAME COLUMN note TO memo",
        "ALTER TABLE t RENAME TO orders_old",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
        "TRUNCATE TABLE t",
        "DROP TABLE t",
        "RENAME TABLE t TO u",
    ],
)
def test_other_statements_are_not_applied_online(statement: str) -> None:
    reason = column_change(statement)
    assert isinstance(reason, str) and "not applied online" in reason


def test_a_nullable_column_added_at_the_end_without_default_is_applied() -> None:
    new = shape(ID, NOTE, LABEL)
    assert (
        evolution(OLD, new, "ALTER TABLE t ADD COLUMN label VARCHAR(10)", {"note", "label"}) == new
    )
    assert describe_evolution(OLD, new) == "added column(s) label"


def test_a_statement_that_changes_no_column_keeps_the_old_shape_whatever_came_later() -> None:
    later = shape(ID, NOTE, LABEL)  # a later DDL already added a column: not this one's doing
    assert evolution(OLD, later, "ALTER TABLE t ADD INDEX i (note)", set()) == OLD
    assert describe_evolution(OLD, OLD) == "no column changed"


@pytest.mark.parametrize(
    ("new", "statement", "null_default", "reason"),
    [
        (
            shape(ID, NOTE, ColumnInfo("extra", "int", "int(11)", nullable=False)),
            "ALTER TABLE t ADD extra INT NOT NULL DEFAULT 7",
            set(),
            "added column extra is NOT NULL",
        ),
        (
            shape(ID, NOTE, LABEL),
            "ALTER TABLE t ADD label VARCHAR(10) DEFAULT 'x'",
            {"note"},
            "added column label has a default",
        ),
        (
            shape(ID, LABEL, NOTE),
            "ALTER TABLE t ADD label VARCHAR(10) AFTER id",
            {"note", "label"},
            "the table's columns are now id, label, note, not id, note, label",
        ),
        (
            shape(ID, NOTE, LABEL, ColumnInfo("b", "int", "int(11)")),
            "ALTER TABLE t ADD label VARCHAR(10)",
            {"note", "label", "b"},
            "the table changed again since",
        ),
        (
            shape(ID, ColumnInfo("note", "varchar", "varchar(40)"), LABEL),
            "ALTER TABLE t ADD label VARCHAR(10)",
            {"note", "label"},
            "existing column note changed, but the statement does not name it",
        ),
        (
            shape(ID, ColumnInfo("note", "varchar", "varchar(10)")),
            "ALTER TABLE t MODIFY note VARCHAR(10)",
            {"note"},
            "column note: varchar(20) -> varchar(10) is narrower",
        ),
        (
            shape(ColumnInfo("id", "bigint", "bigint(20)", nullable=False), NOTE),
            "ALTER TABLE t MODIFY id BIGINT NOT NULL",
            {"note"},
            "changes its Delta type (int32 -> int64), which needs a re-dump",
        ),
        (
            shape(ID, ColumnInfo("note", "varchar", "varchar(20)", nullable=False)),
            "ALTER TABLE t MODIFY note VARCHAR(20) NOT NULL",
            set(),
            "NOT NULL now",
        ),
        (
            shape(ID, NOTE, ColumnInfo("u", "uuid", "uuid")),
            "ALTER TABLE t ADD u UUID",
            {"note", "u"},
            "added column u has type uuid, not captured",
        ),
        (
            shape(ID, NOTE, key=("note",)),
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (note)",
            {"note"},
            "its key changed (id -> note)",
        ),
    ],
)
def test_changes_that_would_leave_the_mirror_inexact_are_refused_with_why(
    new: TableSchema, statement: str, null_default: set[str], reason: str
) -> None:
    result = evolution(OLD, new, statement, null_default)
    assert isinstance(result, str) and reason in result, result


def test_adding_a_primary_key_adds_no_column() -> None:
    assert column_change("ALTER TABLE t ADD PRIMARY KEY (id)") is None


def test_a_widened_column_is_applied_online() -> None:
    wider = shape(ID, ColumnInfo("note", "text", "text"))
    result = evolution(OLD, wider, "ALTER TABLE t MODIFY note TEXT", {"note"})
    assert result == wider
    assert describe_evolution(OLD, wider) == "widened column(s) note"
    more = ColumnInfo("s", "enum", "enum('a','b','c')", enum_values=("a", "b", "c"))
    fewer = ColumnInfo("s", "enum", "enum('a','b')", enum_values=("a", "b"))
    grown = evolution(
        shape(ID, fewer), shape(ID, more), "ALTER TABLE t MODIFY s ENUM('a','b','c')", set()
    )
    assert grown == shape(ID, more)
    shrunk = evolution(
        shape(ID, more), shape(ID, fewer), "ALTER TABLE t MODIFY s ENUM('a','b')", set()
    )
    assert isinstance(shrunk, str) and "members were removed or reordered" in shrunk
